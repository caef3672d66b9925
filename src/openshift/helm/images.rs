//! The search for images across a chart and its subcharts: values, then each template once
//! evaluated, then each CRD, with the image paths applied to every document; what it finds and
//! what it could not resolve (see the module documentation of `helm`).

use super::chart::{parse_yaml, Chart};
use super::jsonpath::JsonPath;
use super::template::{render_lite, Context_, Rendered, HOLE};
use super::values::values_images;
use crate::oci::reference::ImageRef;
use anyhow::Result;
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// oc-mirror's default image paths (internal/pkg/helm, `getImagesPath`).
pub const DEFAULT_IMAGE_PATHS: [&str; 4] = [
    "{.spec.template.spec.initContainers[*].image}",
    "{.spec.template.spec.containers[*].image}",
    "{.spec.initContainers[*].image}",
    "{.spec.containers[*].image}",
];

/// Something found in a chart that reads like an image but could not be resolved.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Unresolved {
    /// Where: `CHART/templates/x.yaml` or `CHART/values.yaml: a.image`.
    pub place: String,
    /// What was written there.
    pub text: String,
    /// Why it was not resolved.
    pub reason: String,
}

/// The images a chart references, as found (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FoundImages {
    /// Image references, normalised, sorted, once each.
    pub images: BTreeSet<String>,
    /// What could not be resolved.
    pub unresolved: Vec<Unresolved>,
}

/// Finds the images `chart` references (its subcharts' too); `image_paths` are the entry's
/// `imagePaths`, applied beside oc-mirror's defaults.
pub fn find_images(chart: &Chart, image_paths: &[String]) -> Result<FoundImages> {
    let mut found = FoundImages::default();
    let mut paths = Vec::new();
    for p in DEFAULT_IMAGE_PATHS
        .iter()
        .map(|s| s.to_string())
        .chain(image_paths.iter().cloned())
    {
        match JsonPath::parse(&p) {
            Some(jp) => paths.push(jp),
            None => found.unresolved.push(Unresolved {
                place: format!("imagePaths: {p}"),
                text: p.clone(),
                reason: "bootstrap evaluates the JSONPath subset {.field[*].field[N]} only".into(),
            }),
        }
    }
    find_in(chart, None, &paths, &mut found)?;
    found.unresolved.sort();
    found.unresolved.dedup();
    Ok(found)
}

fn find_in(
    chart: &Chart,
    parent_global: Option<&Value>,
    paths: &[JsonPath],
    found: &mut FoundImages,
) -> Result<()> {
    let mut values = chart.values()?;
    // A parent's `global` reaches its subcharts (Helm merges it in).
    if let (Some(g), Some(obj)) = (parent_global, values.as_object_mut()) {
        let own = obj.entry("global").or_insert_with(|| json!({}));
        if let (Some(own), Some(parent)) = (own.as_object_mut(), g.as_object()) {
            for (k, v) in parent {
                own.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
    }
    let ctx = Context_ {
        values: &values,
        chart,
    };
    let name = chart.name().to_string();
    values_images(&ctx, &values, "", found, &name);
    for (path, data) in &chart.files {
        let template = path.starts_with("templates/")
            && !path.rsplit('/').next().unwrap_or_default().starts_with('_')
            && (path.ends_with(".yaml") || path.ends_with(".yml") || path.ends_with(".tpl"));
        let crd = path.starts_with("crds/") && (path.ends_with(".yaml") || path.ends_with(".yml"));
        if !(template || crd) {
            continue;
        }
        let Ok(text) = std::str::from_utf8(data) else {
            continue;
        };
        let place = format!("{name}/{path}");
        let rendered = if template {
            render_lite(text, &ctx)
        } else {
            Rendered {
                text: text.to_string(),
                holes: Vec::new(),
            }
        };
        template_images(&rendered, paths, &place, found);
    }
    let global = values.get("global");
    for sub in &chart.subcharts {
        find_in(sub, global, paths, found)?;
    }
    Ok(())
}

/// Adds an image reference if it parses; otherwise reports it.
pub(super) fn add_image(text: &str, place: &str, found: &mut FoundImages) {
    let t = text.trim().trim_matches(|c| c == '"' || c == '\'');
    if t.is_empty() {
        return;
    }
    match ImageRef::parse(t) {
        Ok(r) => {
            found.images.insert(r.to_string());
        }
        Err(e) => found.unresolved.push(Unresolved {
            place: place.to_string(),
            text: t.to_string(),
            reason: format!("not an image reference: {}", e.reason),
        }),
    }
}

/// Applies the image paths to each document of a rendered template.
fn template_images(r: &Rendered, paths: &[JsonPath], place: &str, found: &mut FoundImages) {
    let mut docs = vec![String::new()];
    for line in r.text.lines() {
        if line.trim_end() == "---" || line.starts_with("--- ") {
            docs.push(String::new());
        } else {
            let d = docs.last_mut().expect("one document");
            d.push_str(line);
            d.push('\n');
        }
    }
    for doc in docs {
        let parsed = match parse_yaml(doc.as_bytes()) {
            Ok(Some(v)) => v,
            Ok(None) => continue,
            Err(_) => {
                line_images(&doc, r, place, found);
                continue;
            }
        };
        for p in paths {
            for s in p.strings(&parsed) {
                classify(&s, r, place, found);
            }
        }
        // An `image:` anywhere that holds an expression not evaluated is reported, even where
        // no path reaches it (dropped control lines can move a block).
        for line in doc.lines() {
            let t = line.trim_start().trim_start_matches("- ");
            if let Some(v) = t.strip_prefix("image:").filter(|v| v.contains(HOLE)) {
                classify(v.trim(), r, place, found);
            }
        }
    }
}

/// A document that is not YAML once evaluated: its `image:` lines, read one by one.
fn line_images(doc: &str, r: &Rendered, place: &str, found: &mut FoundImages) {
    for line in doc.lines() {
        let t = line.trim_start().trim_start_matches("- ");
        if let Some(v) = t.strip_prefix("image:") {
            classify(v.trim(), r, place, found);
        }
    }
}

/// An image value: resolved, or reported with the expressions it still holds.
fn classify(value: &str, r: &Rendered, place: &str, found: &mut FoundImages) {
    let value = value.trim().trim_matches(|c| c == '"' || c == '\'');
    if !value.contains(HOLE) {
        add_image(value, place, found);
        return;
    }
    let hole = regex::Regex::new(r"__BOOTSTRAP_HOLE_(\d+)__").expect("valid regex");
    let text = hole.replace_all(value, |c: &regex::Captures| {
        c[1].parse::<usize>()
            .ok()
            .and_then(|i| r.holes.get(i).cloned())
            .unwrap_or_default()
    });
    found.unresolved.push(Unresolved {
        place: place.to_string(),
        text: text.to_string(),
        reason: "a template expression bootstrap does not evaluate (only .Values, .Chart and default/quote pipelines are): list the image in mirror.additionalImages".into(),
    });
}

#[cfg(test)]
mod tests {
    use super::super::chart::{read_chart, tests::tgz};
    use super::*;
    use std::io::Write;

    const KAI_LIKE_VALUES: &str = "global:\n  registry: ghcr.io/nvidia/kai-scheduler\n  tag: \"\"\noperator:\n  image:\n    name: operator\n    pullPolicy: IfNotPresent\nbinder:\n  resourceReservationImage:\n    name: resourcereservation\n";
    const KAI_LIKE_TEMPLATE: &str = "apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n      - name: operator\n        image: {{ .Values.global.registry }}/{{ .Values.operator.image.name }}:{{ .Values.operator.image.tag | default .Values.global.tag | default .Chart.AppVersion }}\n        resources:\n          {{- toYaml .Values.operator.resources | nindent 12 }}\n      {{- if .Values.global.affinity }}\n      affinity:\n        {{- toYaml .Values.global.affinity | nindent 8 }}\n      {{- end }}\n      - name: helper\n        image: {{ include \"helper.image\" . }}\n";

    #[test]
    fn values_maps_and_templates_give_the_images_and_the_rest_is_reported() {
        let archive = tgz(
            "kai",
            &[
                (
                    "Chart.yaml",
                    "apiVersion: v2\nname: kai\nversion: 0.12.0\nappVersion: v0.12.0\n",
                ),
                ("values.yaml", KAI_LIKE_VALUES),
                ("templates/operator.yaml", KAI_LIKE_TEMPLATE),
                (
                    "templates/_helpers.tpl",
                    "{{- define \"helper.image\" -}}x{{- end }}",
                ),
            ],
        );
        let chart = read_chart(&archive).unwrap();
        assert_eq!((chart.name(), chart.version()), ("kai", "0.12.0"));
        let found = find_images(&chart, &[]).unwrap();
        let images: Vec<&str> = found.images.iter().map(String::as_str).collect();
        assert_eq!(
            images,
            [
                "ghcr.io/nvidia/kai-scheduler/operator:v0.12.0",
                "ghcr.io/nvidia/kai-scheduler/resourcereservation:v0.12.0"
            ]
        );
        assert_eq!(found.unresolved.len(), 1, "{found:?}");
        assert_eq!(found.unresolved[0].text, "{{ include \"helper.image\" . }}");
        assert_eq!(found.unresolved[0].place, "kai/templates/operator.yaml");
    }

    #[test]
    fn repository_maps_literals_subcharts_and_image_paths() {
        let sub = tgz(
            "db",
            &[
                ("Chart.yaml", "name: db\nversion: 1.0.0\n"),
                (
                    "values.yaml",
                    "image:\n  registry: quay.io\n  repository: sub/db\n  tag: \"15\"\n",
                ),
            ],
        );
        let mut tar = tar::Builder::new(Vec::new());
        let files: Vec<(String, Vec<u8>)> = vec![
            ("app/Chart.yaml".into(), b"name: app\nversion: 2.0.0\nappVersion: \"1.2\"\n".to_vec()),
            ("app/values.yaml".into(), b"image:\n  repository: example.com/app\n  tag: \"\"\n".to_vec()),
            ("app/templates/job.yaml".into(), b"kind: Job\nspec:\n  template:\n    spec:\n      containers:\n      - image: \"registry.example.com/tools/kubectl:1.30\"\n        env:\n        - name: SIDECAR\n          value: {{ .Values.sidecar | default \"example.com/side:3\" | quote }}\n".to_vec()),
            ("app/charts/db-1.0.0.tgz".into(), sub),
        ];
        for (p, d) in &files {
            let mut h = tar::Header::new_ustar();
            h.set_size(d.len() as u64);
            h.set_mode(0o644);
            tar.append_data(&mut h, p, d.as_slice()).unwrap();
        }
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&tar.into_inner().unwrap()).unwrap();
        let chart = read_chart(&gz.finish().unwrap()).unwrap();
        let paths = vec!["{.spec.template.spec.containers[*].env[*].value}".to_string()];
        let found = find_images(&chart, &paths).unwrap();
        let images: Vec<&str> = found.images.iter().map(String::as_str).collect();
        assert_eq!(
            images,
            [
                "example.com/app:1.2",
                "example.com/side:3",
                "quay.io/sub/db:15",
                "registry.example.com/tools/kubectl:1.30"
            ]
        );
        assert!(found.unresolved.is_empty(), "{found:?}");
    }
}
