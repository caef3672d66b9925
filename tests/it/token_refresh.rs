//! Tokens that expire during a long transfer are refreshed before they are sent again, so a run
//! that outlives its token keeps going without a 401 (the classic failure of long mirrors), and
//! a chunked upload keeps its session across token lifetimes.
//! Uses a real Distribution registry with token auth and the harness's JWT token server, with
//! tokens the registry rejects exactly `ttl` after issue.

use crate::support;

use bootstrap::oci::auth::AuthFile;
use bootstrap::oci::digest::Digest;
use bootstrap::oci::registry::{Registries, RegistryOptions};
use bytes::Bytes;
use std::time::Duration;
use support::{Registry, SyntheticSet};

#[test]
fn a_token_is_refreshed_before_it_expires() {
    let reg = Registry::tls_token_with_ttl("tester", "token-pass", Duration::from_secs(3));
    let pushed = SyntheticSet::standard(11)
        .without_large()
        .push_to(&reg, "t");
    let work = tempfile::tempdir().unwrap();
    let authfile = work.path().join("auth.json");
    reg.write_authfile(&authfile).unwrap();
    let regs = Registries::new(RegistryOptions {
        authfile: AuthFile::read(&authfile).unwrap(),
        ca_bundle: reg.ca_pem(),
        ..Default::default()
    })
    .unwrap();
    let img = &pushed[0];
    support::block_on(async {
        let client = regs.client(&reg.host()).unwrap();
        let first = client.get_manifest(&img.repo, &img.tag).await.unwrap();
        assert_eq!(first.digest.to_string(), img.digest);
        let issued = reg.tokens_issued();
        let failures = reg.auth_failures();
        // Past 80% of the lifetime, before expiry: the cached token must not be used again.
        tokio::time::sleep(Duration::from_millis(2600)).await;
        let second = client.get_manifest(&img.repo, &img.tag).await.unwrap();
        assert_eq!(second.digest, first.digest);
        assert_eq!(
            reg.tokens_issued(),
            issued + 1,
            "the token was not refreshed"
        );
        assert_eq!(
            reg.auth_failures(),
            failures,
            "a request was sent with an expired token"
        );
        // Within the lifetime the cached token is reused.
        client.get_manifest(&img.repo, &img.tag).await.unwrap();
        assert_eq!(
            reg.tokens_issued(),
            issued + 1,
            "a fresh token was not reused"
        );
    });
}

/// A token that expires between two chunks of one upload is replaced before the next chunk is
/// sent: the upload continues in the same session (one POST), no request is refused, and the
/// blob lands whole. This is what keeps a 40 GB layer going over hours of token lifetimes.
#[test]
fn a_token_expiring_between_chunks_keeps_the_same_upload() {
    let reg = Registry::tls_token_with_ttl("tester", "token-pass", Duration::from_secs(3));
    let work = tempfile::tempdir().unwrap();
    let authfile = work.path().join("auth.json");
    reg.write_authfile(&authfile).unwrap();
    let regs = Registries::new(RegistryOptions {
        authfile: AuthFile::read(&authfile).unwrap(),
        ca_bundle: reg.ca_pem(),
        ..Default::default()
    })
    .unwrap();
    let blob: Vec<u8> = (0..3 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    let digest = Digest::of(&blob);
    let chunk = |i: usize| Bytes::copy_from_slice(&blob[i * 1024 * 1024..(i + 1) * 1024 * 1024]);
    let body = |b: Bytes| futures_util::stream::once(async move { Ok::<_, std::io::Error>(b) });
    support::block_on(async {
        let client = regs.client(&reg.host()).unwrap();
        let mut location = client.start_upload("t/chunks").await.unwrap();
        let issued = reg.tokens_issued();
        let failures = reg.auth_failures();
        for i in 0..3 {
            if i == 1 {
                // Past the token's whole lifetime: the registry would refuse it now.
                tokio::time::sleep(Duration::from_millis(3300)).await;
            }
            let offset = (i * 1024 * 1024) as u64;
            let status = client
                .patch_chunk("t/chunks", &location, offset, 1024 * 1024, body(chunk(i)))
                .await
                .unwrap();
            assert_eq!(status.offset, offset + 1024 * 1024);
            location = status.location;
        }
        client
            .finish_upload("t/chunks", &location, &digest)
            .await
            .unwrap();
        assert_eq!(
            client.head_blob("t/chunks", &digest).await.unwrap(),
            Some(blob.len() as u64)
        );
        assert!(reg.tokens_issued() > issued, "the token was not refreshed");
        assert_eq!(
            reg.auth_failures(),
            failures,
            "a chunk was sent with an expired token"
        );
    });
    assert_eq!(
        reg.requests_matching("POST", "/blobs/uploads/"),
        1,
        "the upload was restarted"
    );
}
