//! A chart archive read safely in memory: one top directory, no entry leaving it, no links or
//! devices, sizes bounded as Helm bounds them; subcharts (`charts/*.tgz`, `charts/NAME/`)
//! read the same way.

use anyhow::{bail, Context, Result};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;

/// The largest chart archive read (compressed), as Helm's own loader bounds charts.
pub const MAX_CHART_BYTES: usize = 20 * 1024 * 1024;
/// The most a chart may expand to, and one file of it (Helm's `MaxDecompressedChartSize`
/// and `MaxDecompressedFileSize`).
const MAX_EXPANDED_BYTES: u64 = 100 * 1024 * 1024;
const MAX_FILE_BYTES: u64 = 5 * 1024 * 1024;

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
    pub(super) fn values(&self) -> Result<Value> {
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
pub(super) fn parse_yaml(bytes: &[u8]) -> Result<Option<Value>> {
    let text = std::str::from_utf8(bytes).context("not UTF-8")?;
    if text.trim().is_empty() {
        return Ok(None);
    }
    let v: Value = serde_saphyr::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok((!v.is_null()).then_some(v))
}

/// A scalar as a string (numbers and booleans as written); `None` for null, maps and lists.
pub(super) fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
pub(super) mod tests {
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
}
