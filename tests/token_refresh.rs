//! Tokens that expire during a long transfer are refreshed before they are sent again, so a run
//! that outlives its token keeps going without a 401 (the classic failure of long mirrors).
//! Uses a real Distribution registry with token auth and the harness's JWT token server, with
//! tokens the registry rejects exactly `ttl` after issue.

mod support;

use bootstrap::oci::auth::AuthFile;
use bootstrap::oci::registry::{Registries, RegistryOptions};
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
