//! What a repository holds beside one image: its tags (`GET /v2/<name>/tags/list`, every page
//! the `Link` header names) and the OCI 1.1 referrers list of a manifest
//! (`GET /v2/<name>/referrers/<digest>`), which registries without the API do not answer.

use super::{header_str, Access, RegistryClient, Result};
use crate::oci::digest::Digest;
use crate::oci::manifest::{RawManifest, MAX_MANIFEST_BYTES};
use reqwest::header::ACCEPT;
use reqwest::StatusCode;

/// The most one `tags/list` page may be.
const TAG_PAGE_MAX: usize = 16 * 1024 * 1024;
/// Tags asked for per page (Distribution 3 refuses more than 1000).
const TAG_PAGE_ENTRIES: usize = 1000;
/// The most pages one listing may take (a registry whose `Link` never ends is refused).
const TAG_PAGES_MAX: usize = 10_000;
/// The OCI image index media type a referrers answer is.
const INDEX_TYPE: &str = "application/vnd.oci.image.index.v1+json";

impl RegistryClient {
    /// Every tag of `repo`, following the `Link: <...>; rel="next"` pages. An unknown
    /// repository lists no tags.
    pub async fn list_tags(&self, repo: &str) -> Result<Vec<String>> {
        #[derive(serde::Deserialize)]
        struct Page {
            #[serde(default)]
            tags: Option<Vec<String>>,
        }
        let mut tags = Vec::new();
        // Large pages: an upstream repository may hold tens of thousands of tags (a registry
        // that allows fewer pages on with its `Link`).
        let mut next = Some(self.url(&format!("/v2/{repo}/tags/list?n={TAG_PAGE_ENTRIES}")));
        let mut pages = 0;
        while let Some(url) = next.take() {
            pages += 1;
            if pages > TAG_PAGES_MAX {
                return Err(self.protocol(format!(
                    "the tag list of {repo} runs past {TAG_PAGES_MAX} pages"
                )));
            }
            let resp = self.send(&[(repo, Access::Pull)], |c| c.get(&url)).await?;
            if resp.status() == StatusCode::NOT_FOUND {
                return Ok(tags);
            }
            if !resp.status().is_success() {
                return Err(self.api_error(format!("GET tags of {repo}"), resp).await);
            }
            next = header_str(resp.headers(), "link")
                .and_then(|l| next_link(&l))
                .map(|l| self.absolute(&l));
            let body = self
                .small_body(resp, TAG_PAGE_MAX, &format!("the tag list of {repo}"))
                .await?;
            let page: Page = serde_json::from_slice(&body).map_err(|e| {
                self.protocol(format!("the tag list of {repo} is not valid JSON: {e}"))
            })?;
            tags.extend(page.tags.unwrap_or_default());
        }
        Ok(tags)
    }

    /// The referrers index of `digest` in `repo` when the registry has the OCI 1.1 referrers
    /// API; `None` when it does not (Distribution 2.8 answers 404 to the route).
    pub async fn referrers(&self, repo: &str, digest: &Digest) -> Result<Option<RawManifest>> {
        let url = self.url(&format!("/v2/{repo}/referrers/{digest}"));
        let resp = self
            .send(&[(repo, Access::Pull)], |c| {
                c.get(&url).header(ACCEPT, INDEX_TYPE)
            })
            .await?;
        let status = resp.status();
        if status.is_client_error() {
            crate::oci::stream::discard_body(resp).await;
            return Ok(None);
        }
        if !status.is_success() {
            return Err(self
                .api_error(format!("GET referrers of {repo}@{digest}"), resp)
                .await);
        }
        let is_index =
            header_str(resp.headers(), "content-type").is_some_and(|t| t.starts_with(INDEX_TYPE));
        if !is_index {
            // A registry's UI or a proxy answering the path, not the API.
            crate::oci::stream::discard_body(resp).await;
            return Ok(None);
        }
        let what = format!("the referrers of {repo}@{digest}");
        let bytes = self.small_body(resp, MAX_MANIFEST_BYTES, &what).await?;
        Ok(Some(RawManifest::new(bytes, Some(INDEX_TYPE))))
    }
}

/// The target of a `Link` header's `rel="next"` entry.
fn next_link(header: &str) -> Option<String> {
    header.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        params
            .split(';')
            .any(|p| p.trim().replace(' ', "") == "rel=\"next\"" || p.trim() == "rel=next")
            .then(|| {
                target
                    .trim()
                    .trim_start_matches('<')
                    .trim_end_matches('>')
                    .to_string()
            })
    })
}

#[cfg(test)]
mod tests {
    use super::next_link;

    #[test]
    fn the_next_page_is_read_from_the_link_header() {
        assert_eq!(
            next_link(r#"</v2/a/b/tags/list?n=2&last=v2>; rel="next""#).as_deref(),
            Some("/v2/a/b/tags/list?n=2&last=v2")
        );
        assert_eq!(next_link(r#"</x>; rel="prev""#), None);
    }
}
