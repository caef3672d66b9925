//! Images in a chart's values (1. of the module documentation of `helm`): maps under `image`
//! or `*Image` keys, completed from `global` and the chart's `appVersion`, and full image
//! references written as strings.

use super::chart::scalar;
use super::images::{add_image, FoundImages, Unresolved};
use super::template::Context_;
use serde_json::{Map, Value};

/// A key under which values hold an image (`image`, `scalingPodImage`).
fn image_key(key: &str) -> bool {
    key == "image" || key.ends_with("Image")
}

/// Image maps and full image strings in the values (see the module documentation).
pub(super) fn values_images(
    ctx: &Context_,
    v: &Value,
    at: &str,
    found: &mut FoundImages,
    chart: &str,
) {
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
