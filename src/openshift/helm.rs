//! Helm charts as the mirror carries them: a chart archive (`.tgz`) read safely in memory, the
//! images it references found without Helm's template engine, and the chart as the OCI
//! artifact `helm push` makes (so `helm pull oci://MIRROR/PATH/NAME --version V` takes it).
//!
//! oc-mirror v2 renders each chart with Helm's engine (default values, no overrides) and reads
//! `image` fields at four JSON paths plus the entry's `imagePaths`. bootstrap cannot run Go
//! templates, so it finds images three ways, each a subset of what rendering would give, and
//! names what it could not resolve instead of guessing:
//! 1. values (the chart's `values.yaml`, and each subchart's): a map under a key `image` or
//!    `*Image` with `repository` (+ `registry`, `tag`, `digest`), or with `name` and a
//!    registry from the map or `global.registry`/`global.imageRegistry` (KAI-Scheduler's
//!    form); an empty tag falls back to `global.tag`, then the chart's `appVersion` (the
//!    default of `helm create`'s template). A string under `image`/`*Image` that reads as a
//!    full reference (`registry/path:tag`) counts too.
//! 2. templates (`templates/*.yaml`, `crds/*.yaml`): every `{{ ... }}` that is a value
//!    expression is evaluated against the default values (`.Values.x.y`, `$.Values`,
//!    `.Chart.AppVersion`/`Version`/`Name`, string literals, pipelines through `default`,
//!    `quote`, `squote`, `toString`, `trim`, `lower`, `upper`); lines holding only actions
//!    (`if`, `range`, `include`, `toYaml`...) are dropped, so both branches of a conditional
//!    are read. Each document is then read as YAML and the paths below applied.
//! 3. paths: oc-mirror's four defaults (`{.spec.template.spec.initContainers[*].image}`,
//!    `{.spec.template.spec.containers[*].image}`, `{.spec.initContainers[*].image}`,
//!    `{.spec.containers[*].image}`) plus the entry's `imagePaths`, in the JSONPath subset
//!    `{.field.field[*].field[N]}`. A value at one of them that still holds an expression bootstrap
//!    could not evaluate (`include`, `tpl`, `printf`, a `range` variable) is reported as
//!    unresolved with its file and text; a path outside the subset is reported too.

use crate::oci::digest::Digest;
use crate::oci::manifest::RawManifest;
use crate::oci::reference::ImageRef;
use anyhow::{bail, Context, Result};
use bytes::Bytes;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;

/// The media type of a Helm chart's OCI config (Chart.yaml as JSON).
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.cncf.helm.config.v1+json";
/// The media type of a Helm chart's OCI layer (the chart `.tgz`).
pub const CHART_MEDIA_TYPE: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";
/// An OCI image manifest, as `helm push` writes it.
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// The largest chart archive read (compressed), as Helm's own loader bounds charts.
pub const MAX_CHART_BYTES: usize = 20 * 1024 * 1024;
/// The most a chart may expand to, and one file of it (Helm's `MaxDecompressedChartSize`
/// and `MaxDecompressedFileSize`).
const MAX_EXPANDED_BYTES: u64 = 100 * 1024 * 1024;
const MAX_FILE_BYTES: u64 = 5 * 1024 * 1024;
/// oc-mirror's default image paths (internal/pkg/helm, `getImagesPath`).
pub const DEFAULT_IMAGE_PATHS: [&str; 4] = [
    "{.spec.template.spec.initContainers[*].image}",
    "{.spec.template.spec.containers[*].image}",
    "{.spec.initContainers[*].image}",
    "{.spec.containers[*].image}",
];

/// A chart read out of its archive.
#[derive(Clone, Debug)]
pub struct Chart {
    /// Chart.yaml as JSON (the OCI config's content).
    pub metadata: Value,
    /// Its files, by path below the chart's directory (`values.yaml`, `templates/x.yaml`).
    pub files: BTreeMap<String, Vec<u8>>,
    /// Subcharts, from `charts/*.tgz` and `charts/NAME/` directories.
    pub subcharts: Vec<Chart>,
}

impl Chart {
    /// `name` from Chart.yaml.
    pub fn name(&self) -> &str {
        self.metadata["name"].as_str().unwrap_or_default()
    }

    /// `version` from Chart.yaml.
    pub fn version(&self) -> &str {
        self.metadata["version"].as_str().unwrap_or_default()
    }

    /// `appVersion` from Chart.yaml, as a string (it may be written as a number).
    pub fn app_version(&self) -> Option<String> {
        scalar(&self.metadata["appVersion"])
    }

    /// The chart's default values (`values.yaml`), `{}` when it has none.
    fn values(&self) -> Result<Value> {
        match self.files.get("values.yaml") {
            Some(b) => Ok(parse_yaml(b)
                .with_context(|| format!("chart {}: reading values.yaml", self.name()))?
                .unwrap_or(Value::Object(Map::new()))),
            None => Ok(Value::Object(Map::new())),
        }
    }
}

/// Reads a chart archive: gzip-compressed tar with one top directory holding `Chart.yaml`.
/// Entries with absolute paths or `..`, links and devices are refused; sizes are bounded as
/// Helm bounds them.
pub fn read_chart(tgz: &[u8]) -> Result<Chart> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(tgz));
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut total = 0u64;
    for entry in archive.entries().context("reading the chart archive")? {
        let mut entry = entry.context("reading the chart archive")?;
        let path = entry.path().context("reading an entry name")?.into_owned();
        let name = path.to_string_lossy().to_string();
        let parts = match crate::oci::layers::normalise(&entry.path_bytes()) {
            Ok(parts) => parts,
            Err(_) => bail!("chart archive entry {name:?} leaves the chart directory"),
        };
        match entry.header().entry_type() {
            tar::EntryType::Regular | tar::EntryType::Continuous => {}
            tar::EntryType::Directory | tar::EntryType::XGlobalHeader | tar::EntryType::XHeader => {
                continue
            }
            other => bail!("chart archive entry {name:?} is a {other:?}, not a file"),
        }
        let size = entry.header().size().unwrap_or(u64::MAX);
        total = total.saturating_add(size);
        if size > MAX_FILE_BYTES || total > MAX_EXPANDED_BYTES {
            bail!("chart archive entry {name:?} makes the chart larger than Helm accepts");
        }
        let mut data = Vec::with_capacity(size as usize);
        entry
            .read_to_end(&mut data)
            .with_context(|| format!("reading {name}"))?;
        files.insert(parts.join("/"), data);
    }
    let top: BTreeSet<&str> = files
        .keys()
        .filter_map(|k| k.split_once('/').map(|(t, _)| t))
        .collect();
    let [top] = top.into_iter().collect::<Vec<_>>()[..] else {
        bail!("a chart archive holds one top directory (the chart's name)");
    };
    let prefix = format!("{top}/");
    let inner = files
        .iter()
        .filter_map(|(k, v)| k.strip_prefix(&prefix).map(|r| (r.to_string(), v.clone())))
        .collect();
    chart_from_files(inner)
}

/// A chart from its files (paths below its directory), subcharts included.
fn chart_from_files(files: BTreeMap<String, Vec<u8>>) -> Result<Chart> {
    let chart_yaml = files
        .get("Chart.yaml")
        .context("the chart has no Chart.yaml")?;
    let metadata = parse_yaml(chart_yaml)
        .context("reading Chart.yaml")?
        .filter(Value::is_object)
        .context("Chart.yaml is not a map")?;
    let mut subcharts = Vec::new();
    let mut sub_dirs: BTreeMap<String, BTreeMap<String, Vec<u8>>> = BTreeMap::new();
    let mut own = BTreeMap::new();
    for (path, data) in files {
        match path.strip_prefix("charts/") {
            Some(rest) if rest.ends_with(".tgz") && !rest.contains('/') => {
                subcharts.push(read_chart(&data).with_context(|| format!("subchart {path}"))?)
            }
            Some(rest) if rest.contains('/') => {
                let (dir, inner) = rest.split_once('/').expect("checked");
                sub_dirs
                    .entry(dir.to_string())
                    .or_default()
                    .insert(inner.to_string(), data);
            }
            _ => {
                own.insert(path, data);
            }
        }
    }
    for (dir, files) in sub_dirs {
        if files.contains_key("Chart.yaml") {
            subcharts
                .push(chart_from_files(files).with_context(|| format!("subchart charts/{dir}"))?);
        }
    }
    Ok(Chart {
        metadata,
        files: own,
        subcharts,
    })
}

/// YAML text as JSON; `None` for an empty document.
fn parse_yaml(bytes: &[u8]) -> Result<Option<Value>> {
    let text = std::str::from_utf8(bytes).context("not UTF-8")?;
    if text.trim().is_empty() {
        return Ok(None);
    }
    let v: Value = serde_saphyr::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok((!v.is_null()).then_some(v))
}

/// A scalar as a string (numbers and booleans as written); `None` for null, maps and lists.
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

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

/// What template expressions are evaluated against.
struct Context_<'a> {
    values: &'a Value,
    chart: &'a Chart,
}

/// Adds an image reference if it parses; otherwise reports it.
fn add_image(text: &str, place: &str, found: &mut FoundImages) {
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

/// A key under which values hold an image (`image`, `scalingPodImage`).
fn image_key(key: &str) -> bool {
    key == "image" || key.ends_with("Image")
}

/// Image maps and full image strings in the values (see the module documentation).
fn values_images(ctx: &Context_, v: &Value, at: &str, found: &mut FoundImages, chart: &str) {
    let Some(obj) = v.as_object() else {
        if let Some(items) = v.as_array() {
            for (i, item) in items.iter().enumerate() {
                values_images(ctx, item, &format!("{at}[{i}]"), found, chart);
            }
        }
        return;
    };
    for (key, child) in obj {
        let path = if at.is_empty() {
            key.clone()
        } else {
            format!("{at}.{key}")
        };
        if image_key(key) {
            if let Some(m) = child.as_object() {
                if let Some(r) = image_from_map(ctx, m, &path, chart, found) {
                    add_image(&r, &format!("{chart}/values.yaml: {path}"), found);
                }
            } else if let Some(s) = child.as_str() {
                // A full reference only: a bare `nginx` is as likely a name fragment.
                if s.contains('/') && !s.contains(char::is_whitespace) && !s.contains("{{") {
                    add_image(s, &format!("{chart}/values.yaml: {path}"), found);
                }
            }
        }
        values_images(ctx, child, &path, found, chart);
    }
}

/// `[registry/]repository[:tag][@digest]` from an image map, or `None` when it is not one.
fn image_from_map(
    ctx: &Context_,
    m: &Map<String, Value>,
    path: &str,
    chart: &str,
    found: &mut FoundImages,
) -> Option<String> {
    let s = |k: &str| m.get(k).and_then(scalar).filter(|s| !s.is_empty());
    let global = |k: &str| {
        ctx.values
            .get("global")
            .and_then(|g| g.get(k))
            .and_then(scalar)
            .filter(|s| !s.is_empty())
    };
    let registry = s("registry")
        .or_else(|| global("imageRegistry"))
        .or_else(|| global("registry"));
    let repo = match (s("repository"), s("name")) {
        (Some(r), _) => r,
        (None, Some(n)) if !n.contains('/') && registry.is_none() => {
            found.unresolved.push(Unresolved {
                place: format!("{chart}/values.yaml: {path}"),
                text: n,
                reason: "an image name without a registry (set global.registry in the chart, or list the image in mirror.additionalImages)".into(),
            });
            return None;
        }
        (None, Some(n)) => n,
        (None, None) => return None,
    };
    let mut out = match registry {
        Some(r) if !repo.starts_with(&format!("{r}/")) => {
            format!("{}/{repo}", r.trim_end_matches('/'))
        }
        _ => repo,
    };
    let tag = s("tag")
        .or_else(|| global("tag"))
        .or_else(|| ctx.chart.app_version());
    let digest = s("digest");
    if let Some(t) = tag.filter(|_| digest.is_none() || s("tag").is_some()) {
        out.push(':');
        out.push_str(&t);
    }
    if let Some(d) = digest {
        out.push('@');
        out.push_str(&d);
    }
    Some(out)
}

/// A template with its value expressions evaluated; `holes` are the expressions that were
/// not, left in the text as `__BOOTSTRAP_HOLE_<n>__`.
struct Rendered {
    text: String,
    holes: Vec<String>,
}

const HOLE: &str = "__BOOTSTRAP_HOLE_";

/// Evaluates what it can of a template (see the module documentation).
fn render_lite(text: &str, ctx: &Context_) -> Rendered {
    let comments = regex::Regex::new(r"(?s)\{\{-?\s*/\*.*?\*/\s*-?\}\}").expect("valid regex");
    let text = comments.replace_all(text, "");
    let mut holes = Vec::new();
    let mut out = String::new();
    for line in text.lines() {
        let mut rest = line;
        let mut rendered = String::new();
        let mut literal = false;
        while let Some(start) = rest.find("{{") {
            let before = &rest[..start];
            literal |= !before.trim().is_empty();
            rendered.push_str(before);
            let Some(len) = rest[start..].find("}}") else {
                // An action spanning lines: keep the rest as a hole.
                holes.push(rest[start..].to_string());
                rendered.push_str(&format!("{HOLE}{}__", holes.len() - 1));
                rest = "";
                break;
            };
            let action = &rest[start + 2..start + len];
            rest = &rest[start + len + 2..];
            let inner = action.trim_start_matches('-').trim_end_matches('-').trim();
            match evaluate(inner, ctx) {
                Some(v) => rendered.push_str(&v),
                None => {
                    holes.push(format!("{{{{{action}}}}}"));
                    rendered.push_str(&format!("{HOLE}{}__", holes.len() - 1));
                }
            }
        }
        literal |= !rest.trim().is_empty();
        rendered.push_str(rest);
        // A line of actions alone is control flow or a whole block (toYaml): leave it out.
        if literal {
            out.push_str(&rendered);
            out.push('\n');
        }
    }
    Rendered { text: out, holes }
}

/// A value expression's result, or `None` for anything else.
fn evaluate(expr: &str, ctx: &Context_) -> Option<String> {
    let mut value: Option<Value> = None;
    for (i, stage) in split_pipeline(expr)?.into_iter().enumerate() {
        let words = split_words(&stage)?;
        let (head, args) = words.split_first()?;
        let mut args: Vec<Value> = args.iter().map(|a| term(a, ctx)).collect::<Option<_>>()?;
        if i > 0 {
            args.push(value.take()?);
        }
        value = Some(match head.as_str() {
            "default" if args.len() == 2 => {
                if truthy(&args[1]) {
                    args[1].clone()
                } else {
                    args[0].clone()
                }
            }
            "quote" | "squote" | "toString" | "trim" | "lower" | "upper" if args.len() == 1 => {
                let s = scalar(&args[0]).unwrap_or_default();
                Value::String(match head.as_str() {
                    "trim" => s.trim().to_string(),
                    "lower" => s.to_lowercase(),
                    "upper" => s.to_uppercase(),
                    _ => s,
                })
            }
            _ if args.is_empty() && i == 0 => term(head, ctx)?,
            _ => return None,
        });
    }
    match value? {
        Value::Null => Some(String::new()),
        v => scalar(&v),
    }
}

/// Whether Go templates count a value as set (`default` replaces the rest).
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::String(s) => !s.is_empty(),
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// One operand: `.Values.a.b`, `$.Values.a`, `.Chart.X`, a string literal, a number or a
/// boolean.
fn term(word: &str, ctx: &Context_) -> Option<Value> {
    if let Some(s) = word.strip_prefix('"').and_then(|w| w.strip_suffix('"')) {
        return Some(Value::String(s.replace("\\\"", "\"")));
    }
    if let Some(s) = word.strip_prefix('`').and_then(|w| w.strip_suffix('`')) {
        return Some(Value::String(s.to_string()));
    }
    if let Ok(n) = word.parse::<i64>() {
        return Some(Value::from(n));
    }
    if word == "true" || word == "false" {
        return Some(Value::Bool(word == "true"));
    }
    let path = word.strip_prefix('$').unwrap_or(word);
    if let Some(rest) = path.strip_prefix(".Values") {
        let mut v = ctx.values;
        for key in rest.split('.').filter(|k| !k.is_empty()) {
            match v.get(key) {
                Some(next) => v = next,
                None => return Some(Value::Null),
            }
        }
        return Some(v.clone());
    }
    match path {
        ".Chart.AppVersion" => Some(
            ctx.chart
                .app_version()
                .map(Value::String)
                .unwrap_or(Value::Null),
        ),
        ".Chart.Version" => Some(Value::String(ctx.chart.version().to_string())),
        ".Chart.Name" => Some(Value::String(ctx.chart.name().to_string())),
        _ => None,
    }
}

/// Pipeline stages, split at `|` outside quotes; `None` for parentheses (not evaluated).
fn split_pipeline(expr: &str) -> Option<Vec<String>> {
    let mut stages = vec![String::new()];
    let mut quote: Option<char> = None;
    for c in expr.chars() {
        match (quote, c) {
            (None, '"' | '`') => {
                quote = Some(c);
                stages.last_mut()?.push(c);
            }
            (Some(q), _) if c == q => {
                quote = None;
                stages.last_mut()?.push(c);
            }
            (None, '|') => stages.push(String::new()),
            (None, '(' | ')') => return None,
            _ => stages.last_mut()?.push(c),
        }
    }
    Some(stages.into_iter().map(|s| s.trim().to_string()).collect())
}

/// Words of one stage, string literals kept whole.
fn split_words(stage: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    for c in stage.chars() {
        match (quote, c) {
            (None, '"' | '`') => {
                quote = Some(c);
                cur.push(c);
            }
            (Some(q), _) if c == q => {
                quote = None;
                cur.push(c);
            }
            (None, c) if c.is_whitespace() => {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
            }
            _ => cur.push(c),
        }
    }
    if quote.is_some() {
        return None;
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    (!words.is_empty()).then_some(words)
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

/// A JSONPath in the subset `{.a.b[*].c[0]}`.
#[derive(Clone, Debug)]
struct JsonPath(Vec<Step>);

#[derive(Clone, Debug)]
enum Step {
    Field(String),
    All,
    Index(usize),
}

impl JsonPath {
    fn parse(text: &str) -> Option<JsonPath> {
        let inner = text.trim().strip_prefix('{')?.strip_suffix('}')?.trim();
        let mut steps = Vec::new();
        let mut rest = inner;
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix('.') {
                let end = r.find(['.', '[']).unwrap_or(r.len());
                let name = &r[..end];
                if name.is_empty()
                    || !name
                        .chars()
                        .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
                {
                    return None;
                }
                steps.push(Step::Field(name.to_string()));
                rest = &r[end..];
            } else if let Some(r) = rest.strip_prefix('[') {
                let end = r.find(']')?;
                let idx = &r[..end];
                steps.push(if idx == "*" {
                    Step::All
                } else {
                    Step::Index(idx.parse().ok()?)
                });
                rest = &r[end + 1..];
            } else {
                return None;
            }
        }
        Some(JsonPath(steps))
    }

    /// The string values the path reaches (missing keys reach nothing).
    fn strings(&self, root: &Value) -> Vec<String> {
        let mut cur = vec![root];
        for step in &self.0 {
            cur = cur
                .into_iter()
                .flat_map(|v| -> Vec<&Value> {
                    match step {
                        Step::Field(f) => v.get(f.as_str()).into_iter().collect(),
                        Step::All => v.as_array().map(|a| a.iter().collect()).unwrap_or_default(),
                        Step::Index(i) => v.get(*i).into_iter().collect(),
                    }
                })
                .collect();
        }
        cur.into_iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    }
}

/// A chart as the OCI artifact `helm push` writes: config (Chart.yaml as JSON), one layer
/// (the archive, byte for byte), and an OCI image manifest naming both, annotated as Helm
/// annotates it (title, version, description, url, source; no creation time, so the same
/// chart always gives the same digest).
#[derive(Clone, Debug)]
pub struct ChartArtifact {
    /// The manifest.
    pub manifest: RawManifest,
    /// The config blob and its digest.
    pub config: (Digest, Bytes),
    /// The chart archive and its digest.
    pub chart: (Digest, Bytes),
}

/// Packs `chart` (read from `tgz`) as [`ChartArtifact`].
pub fn chart_artifact(chart: &Chart, tgz: Bytes) -> Result<ChartArtifact> {
    let config = Bytes::from(serde_json::to_vec(&chart.metadata)?);
    let config_digest = Digest::of(&config);
    let chart_digest = Digest::of(&tgz);
    let mut annotations = BTreeMap::new();
    let meta = &chart.metadata;
    for (key, field) in [
        ("org.opencontainers.image.title", "name"),
        ("org.opencontainers.image.version", "version"),
        ("org.opencontainers.image.description", "description"),
        ("org.opencontainers.image.url", "home"),
    ] {
        if let Some(v) = meta
            .get(field)
            .and_then(scalar)
            .filter(|s| !s.trim().is_empty())
        {
            annotations.insert(key.to_string(), v);
        }
    }
    if let Some(src) = meta["sources"].get(0).and_then(Value::as_str) {
        annotations.insert("org.opencontainers.image.source".into(), src.to_string());
    }
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {
            "mediaType": CONFIG_MEDIA_TYPE,
            "digest": config_digest.to_string(),
            "size": config.len(),
        },
        "layers": [{
            "mediaType": CHART_MEDIA_TYPE,
            "digest": chart_digest.to_string(),
            "size": tgz.len(),
        }],
        "annotations": annotations,
    });
    let bytes = Bytes::from(serde_json::to_vec(&manifest)?);
    Ok(ChartArtifact {
        manifest: RawManifest::new(bytes, Some(OCI_MANIFEST)),
        config: (config_digest, config),
        chart: (chart_digest, tgz),
    })
}

/// The tag `helm push` gives a chart version: OCI tags cannot hold `+`, so Helm writes `_`.
pub fn version_tag(version: &str) -> String {
    version.replace('+', "_")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A chart archive of `files` under `name/`.
    pub(crate) fn tgz(name: &str, files: &[(&str, &str)]) -> Vec<u8> {
        let mut tar = tar::Builder::new(Vec::new());
        for (path, text) in files {
            let mut h = tar::Header::new_ustar();
            h.set_size(text.len() as u64);
            h.set_mode(0o644);
            h.set_entry_type(tar::EntryType::Regular);
            tar.append_data(&mut h, format!("{name}/{path}"), text.as_bytes())
                .unwrap();
        }
        let raw = tar.into_inner().unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&raw).unwrap();
        gz.finish().unwrap()
    }

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

    #[test]
    fn an_entry_leaving_the_chart_is_refused() {
        let mut tar = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_size(1);
        h.set_mode(0o644);
        h.as_gnu_mut().unwrap().name[..12].copy_from_slice(b"../evil.yaml");
        h.set_cksum();
        tar.append(&h, &b"x"[..]).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&tar.into_inner().unwrap()).unwrap();
        let err = read_chart(&gz.finish().unwrap()).unwrap_err();
        assert!(
            format!("{err:#}").contains("leaves the chart directory"),
            "{err:#}"
        );
    }

    #[test]
    fn the_artifact_is_helms_and_deterministic() {
        let archive = Bytes::from(tgz(
            "kai",
            &[("Chart.yaml", "name: kai\nversion: 1.0.0+build.1\n")],
        ));
        let chart = read_chart(&archive).unwrap();
        let a = chart_artifact(&chart, archive.clone()).unwrap();
        let b = chart_artifact(&chart, archive.clone()).unwrap();
        assert_eq!(a.manifest.digest, b.manifest.digest);
        let m: Value = serde_json::from_slice(&a.manifest.bytes).unwrap();
        assert_eq!(m["config"]["mediaType"], CONFIG_MEDIA_TYPE);
        assert_eq!(m["layers"][0]["mediaType"], CHART_MEDIA_TYPE);
        assert_eq!(m["layers"][0]["digest"], Digest::of(&archive).to_string());
        assert_eq!(m["annotations"]["org.opencontainers.image.title"], "kai");
        assert_eq!(version_tag(chart.version()), "1.0.0_build.1");
    }
}
