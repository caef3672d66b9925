//! The Redfish client (`bootstrap::redfish`) against the Dell-like fake of
//! `support::redfishfake`, over TLS with the per-run CA: one test per Dell behaviour of issue 13
//! item 6 (virtual media under the manager or the system, 412 on If-Match with an action,
//! ActionParameterMissing until TransferProtocolType, a 202 task monitor, Boot only through
//! `@Redfish.Settings`, the OEM import, the session service), and the client's own promises:
//! Basic without a session service, wrong passwords named without the password, trust by CA,
//! pinned fingerprint or nothing, resets from the allowed values, 5xx retried.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bootstrap::redfish::{
    format_fingerprint, Client, Credentials, Ejected, Endpoint, Options, Profile, RedfishError,
    ResetKind, Trust, VendorWaits,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use serde_json::json;

use crate::support::redfishfake::{
    FakeVendor, MediaUnder, RedfishFake, Switches, MANAGER, MANAGER_CD, RESET, SESSIONS, SETTINGS,
    SYSTEM, SYSTEM_CD,
};
use crate::support::tls::TestPki;

const ISO: &str = "http://10.30.0.5:8080/agent.x86_64.iso";

/// A fake BMC over TLS with its own CA.
pub(crate) struct Bmc {
    pub(crate) fake: RedfishFake,
    pki: TestPki,
    _dir: tempfile::TempDir,
}

pub(crate) fn start(sw: Switches) -> Bmc {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::generate(dir.path()).unwrap();
    let fake = RedfishFake::start(sw, Some(&pki)).unwrap();
    Bmc {
        fake,
        pki,
        _dir: dir,
    }
}

impl Bmc {
    pub(crate) fn endpoint(&self) -> Endpoint {
        self.endpoint_with("calvin", Trust::Ca(self.pki.ca_pem.clone().into_bytes()))
    }

    /// The PEM of the CA that signed the fake's certificate.
    pub(crate) fn ca_pem(&self) -> &str {
        &self.pki.ca_pem
    }

    fn endpoint_with(&self, password: &str, trust: Trust) -> Endpoint {
        Endpoint {
            address: self.fake.address(),
            credentials: Some(Credentials {
                user: "root".to_string(),
                password: password.to_string(),
            }),
            trust,
        }
    }

    /// SHA-256 of the server's certificate (the first of its chain file).
    fn leaf_fingerprint(&self) -> [u8; 32] {
        let leaf = CertificateDer::pem_file_iter(&self.pki.server_cert_path)
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        use sha2::Digest as _;
        sha2::Sha256::digest(leaf.as_ref()).into()
    }
}

pub(crate) fn options() -> Options {
    Options {
        attempts: 3,
        timeout: Duration::from_secs(10),
        power_timeout: Duration::from_secs(5),
        poll: Duration::from_millis(20),
        backoff: Duration::from_millis(10),
        task_timeout: Duration::from_secs(20),
        waits: VendorWaits {
            dell_job_retries: 3,
            dell_job_interval: Duration::from_millis(10),
            post_attempts: 6,
            post_delay: Duration::from_millis(5),
            on_conflict_retries: 6,
            on_conflict_interval: Duration::from_millis(10),
        },
    }
}

/// Runs `fut` on a runtime of this thread (so a thread-local tracing subscriber sees it).
pub(crate) fn run<F: Future>(fut: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(fut)
}

/// Runs `fut` with every tracing event of every level written to a buffer; the output and it.
fn traced<F: Future>(fut: F) -> (F::Output, String) {
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buffer {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let out = tracing::subscriber::with_default(subscriber, || run(fut));
    let text = String::from_utf8_lossy(&buffer.0.lock().unwrap()).into_owned();
    (out, text)
}

/// Older iDRAC firmware (before 6.00.02) keeps the virtual CD under the manager: found through
/// System -> Links.ManagedBy -> Manager -> VirtualMedia, never by a guessed path.
#[test]
fn virtual_media_under_the_manager_is_found_by_links_on_older_idrac() {
    let bmc = start(Switches {
        media_under: MediaUnder::Manager,
        ..Switches::default()
    });
    run(async {
        let c = Client::connect(&bmc.endpoint(), options()).await.unwrap();
        let sys = c.system().await.unwrap();
        let vm = c.virtual_cd(&sys, &Profile::generic()).await.unwrap();
        assert_eq!(vm.path, MANAGER_CD);
        assert_eq!(vm.media_types, ["CD", "DVD"]);
        c.insert_media(&vm, ISO).await.unwrap();
        c.logout().await;
    });
    let s = bmc.fake.snapshot();
    assert!(s.inserted);
    assert_eq!(s.image.as_deref(), Some(ISO));
    assert_eq!(bmc.fake.count("GET", MANAGER), 1);
    assert_eq!(bmc.fake.count("GET", &format!("{SYSTEM}/VirtualMedia")), 0);
}

/// Newer iDRAC firmware (6.00.02 and later, iDRAC10) has it under the system, where a USB stick
/// device is listed too: the CD/DVD member is picked, and the manager is not searched.
#[test]
fn virtual_media_under_the_system_is_found_by_links_on_newer_idrac() {
    let bmc = start(Switches::default());
    run(async {
        let c = Client::connect(&bmc.endpoint(), options()).await.unwrap();
        let sys = c.system().await.unwrap();
        assert_eq!(sys.path, SYSTEM);
        assert_eq!(
            sys.uuid.as_deref(),
            Some("4c4c4544-0042-3010-8036-c4c04f333233")
        );
        assert_eq!(
            c.ethernet_macs(&sys).await.unwrap(),
            ["b0:7b:25:00:00:01", "b0:7b:25:00:00:02"]
        );
        let vm = c.virtual_cd(&sys, &Profile::generic()).await.unwrap();
        assert_eq!(vm.path, SYSTEM_CD);
        c.insert_media(&vm, ISO).await.unwrap();
        c.logout().await;
    });
    assert_eq!(bmc.fake.snapshot().image.as_deref(), Some(ISO));
    assert_eq!(bmc.fake.count("GET", MANAGER), 0);
}

/// iDRAC answers 412 to an action POST that carries If-Match: the client sends the ETag on its
/// PATCH and on no POST, so a whole boot (insert, boot override, reset) meets no 412.
#[test]
fn if_match_goes_on_patch_and_never_on_action_posts() {
    let bmc = start(Switches {
        vendor: FakeVendor::Generic,
        ..Switches::default()
    });
    run(async {
        let c = Client::connect(&bmc.endpoint(), options()).await.unwrap();
        let sys = c.system().await.unwrap();
        let vm = c.virtual_cd(&sys, &Profile::generic()).await.unwrap();
        c.insert_media(&vm, ISO).await.unwrap();
        c.set_boot_once_cd(&sys, &c.profile(&sys, None).await.unwrap())
            .await
            .unwrap();
        assert_eq!(c.reset_for_boot(&sys).await.unwrap(), ResetKind::On);
        c.wait_power_on(&sys).await.unwrap();
        let sys = c.refresh(&sys).await.unwrap();
        assert_eq!(sys.boot_target.as_deref(), Some("Cd"));
        assert_eq!(sys.boot_enabled.as_deref(), Some("Once"));
        c.logout().await;
    });
    let requests = bmc.fake.requests();
    let posts: Vec<_> = requests.iter().filter(|r| r.method == "POST").collect();
    assert!(posts.len() >= 2, "{posts:?}");
    assert!(posts.iter().all(|r| r.if_match.is_none()), "{posts:?}");
    let patch = requests
        .iter()
        .find(|r| r.method == "PATCH" && r.path == SYSTEM)
        .expect("a PATCH of the system");
    assert!(
        patch
            .if_match
            .as_deref()
            .is_some_and(|t| t.starts_with("W/\"")),
        "{patch:?}"
    );
    assert_eq!(patch.status, 204);
    assert!(requests.iter().all(|r| r.status != 412), "{requests:?}");
    let s = bmc.fake.snapshot();
    assert_eq!(
        (s.power.as_str(), s.resets.as_slice(), s.booted.as_slice()),
        ("On", &["On".to_string()][..], &["iso".to_string()][..])
    );
}

/// Some iDRAC firmware answers InsertMedia with ActionParameterMissing until
/// TransferProtocolType is given: the client retries with it (HTTP for an http:// image).
#[test]
fn insert_media_adds_transfer_protocol_type_when_the_bmc_answers_action_parameter_missing() {
    let bmc = start(Switches {
        insert_needs_protocol: true,
        ..Switches::default()
    });
    run(async {
        let c = Client::connect(&bmc.endpoint(), options()).await.unwrap();
        let sys = c.system().await.unwrap();
        let vm = c.virtual_cd(&sys, &Profile::generic()).await.unwrap();
        c.insert_media(&vm, ISO).await.unwrap();
        c.logout().await;
    });
    let action = format!("{SYSTEM_CD}/Actions/VirtualMedia.InsertMedia");
    let inserts: Vec<_> = bmc
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.path == action)
        .collect();
    assert_eq!(inserts.len(), 2, "{inserts:?}");
    assert_eq!(inserts[0].status, 400);
    assert_eq!(inserts[0].body, json!({"Image": ISO}));
    assert_eq!(inserts[1].status, 204);
    assert_eq!(inserts[1].body["TransferProtocolType"], "HTTP");
    assert!(bmc.fake.snapshot().inserted);
}

/// After the install every virtual CD holding an image is ejected (ironic `redfish/boot.py`
/// `_eject_vmedia`), under the manager (iDRAC before 6.00.02) as under the system: each device
/// reported with its image, no refusal, reading not inserted after; a second pass finds
/// nothing inserted and sends no eject, so a rerun of the wait stage is harmless.
#[test]
fn eject_cds_ejects_the_manager_cd_and_reports_it_and_a_second_pass_sends_nothing() {
    let bmc = start(Switches {
        media_under: MediaUnder::Manager,
        inserted: Some(ISO.to_string()),
        ..Switches::default()
    });
    let (first, second) = run(async {
        let c = Client::connect(&bmc.endpoint(), options()).await.unwrap();
        let sys = c.system().await.unwrap();
        let first = c.eject_cds(&sys).await.unwrap();
        let second = c.eject_cds(&sys).await.unwrap();
        c.logout().await;
        (first, second)
    });
    assert_eq!(
        first,
        vec![Ejected {
            path: MANAGER_CD.to_string(),
            image: Some(ISO.to_string()),
            refused: None,
            reads_inserted: false,
        }]
    );
    assert_eq!(second, Vec::new());
    let s = bmc.fake.snapshot();
    assert!(!s.inserted && s.image.is_none(), "{s:?}");
    let eject = format!("{MANAGER_CD}/Actions/VirtualMedia.EjectMedia");
    assert_eq!(bmc.fake.count("POST", &eject), 1);
}

/// An iDRAC 10 with images in both system members (1, the one it boots, and 2, which accepts
/// an image and never boots it): both are ejected and reported, in the collection's order.
#[test]
fn eject_cds_ejects_every_system_member_holding_an_image() {
    let bmc = start(Switches {
        vendor: FakeVendor::Idrac10,
        inserted: Some(ISO.to_string()),
        ..Switches::default()
    });
    let other = "http://10.30.0.9/other.iso";
    let (ejected, member2) = run(async {
        let c = Client::connect(&bmc.endpoint(), options()).await.unwrap();
        let sys = c.system().await.unwrap();
        // The generic profile takes the first member with a CD: member 2 on iDRAC 10.
        let vm2 = c.virtual_cd(&sys, &Profile::generic()).await.unwrap();
        c.insert_media(&vm2, other).await.unwrap();
        let ejected = c.eject_cds(&sys).await.unwrap();
        let member2 = c.virtual_cd(&sys, &Profile::generic()).await.unwrap();
        c.logout().await;
        (ejected, member2)
    });
    let paths: Vec<(&str, Option<&str>, bool)> = ejected
        .iter()
        .map(|e| (e.path.as_str(), e.image.as_deref(), e.reads_inserted))
        .collect();
    let slot2 = format!("{SYSTEM}/VirtualMedia/2");
    assert_eq!(
        paths,
        vec![
            (slot2.as_str(), Some(other), false),
            (SYSTEM_CD, Some(ISO), false)
        ]
    );
    assert!(ejected.iter().all(|e| e.refused.is_none()), "{ejected:?}");
    assert!(!bmc.fake.snapshot().inserted);
    assert!(!member2.inserted && member2.image.is_none(), "{member2:?}");
}

/// A BMC that also names TransferMethod gets `Stream` on the next try; a device without the
/// InsertMedia action is PATCHed (with If-Match); another image inserted is ejected first,
/// with the `{}` body iDRAC wants.
#[test]
fn insert_media_falls_back_to_transfer_method_patch_and_ejects_another_image() {
    let bmc = start(Switches {
        insert_needs_protocol: true,
        insert_needs_method: true,
        inserted: Some("http://old/previous.iso".to_string()),
        ..Switches::default()
    });
    let patched = start(Switches {
        media_actions: false,
        ..Switches::default()
    });
    run(async {
        let c = Client::connect(&bmc.endpoint(), options()).await.unwrap();
        let sys = c.system().await.unwrap();
        let vm = c.virtual_cd(&sys, &Profile::generic()).await.unwrap();
        assert_eq!(vm.image.as_deref(), Some("http://old/previous.iso"));
        c.insert_media(&vm, "https://10.30.0.5/a.iso")
            .await
            .unwrap();
        c.logout().await;

        let c = Client::connect(&patched.endpoint(), options())
            .await
            .unwrap();
        let sys = c.system().await.unwrap();
        let vm = c.virtual_cd(&sys, &Profile::generic()).await.unwrap();
        c.insert_media(&vm, ISO).await.unwrap();
        c.logout().await;
    });
    let requests = bmc.fake.requests();
    let eject = format!("{SYSTEM_CD}/Actions/VirtualMedia.EjectMedia");
    let ejects: Vec<_> = requests.iter().filter(|r| r.path == eject).collect();
    assert_eq!(ejects.len(), 1);
    assert_eq!((ejects[0].body.clone(), ejects[0].status), (json!({}), 204));
    let action = format!("{SYSTEM_CD}/Actions/VirtualMedia.InsertMedia");
    let last = requests.iter().rfind(|r| r.path == action).unwrap();
    assert_eq!(last.status, 204);
    assert_eq!(last.body["TransferProtocolType"], "HTTPS");
    assert_eq!(last.body["TransferMethod"], "Stream");
    assert_eq!(
        bmc.fake.snapshot().image.as_deref(),
        Some("https://10.30.0.5/a.iso")
    );

    let patch = patched
        .fake
        .requests()
        .into_iter()
        .find(|r| r.method == "PATCH" && r.path == SYSTEM_CD)
        .expect("a PATCH of the device");
    assert!(patch.if_match.is_some());
    assert_eq!(patch.body["Image"], ISO);
    assert_eq!(patched.fake.snapshot().image.as_deref(), Some(ISO));
}

/// A reset answered 202 with a task monitor is followed until the task completes, waiting as
/// the monitor's Retry-After says.
#[test]
fn a_202_task_monitor_is_followed_until_completed() {
    let bmc = start(Switches {
        reset_task: true,
        task_polls: 2,
        task_retry_after: Some(1),
        ..Switches::default()
    });
    let started = Instant::now();
    let kind = run(async {
        let c = Client::connect(&bmc.endpoint(), options()).await.unwrap();
        let sys = c.system().await.unwrap();
        c.reset_for_boot(&sys).await.unwrap()
    });
    assert_eq!(kind, ResetKind::On);
    let polls: Vec<_> = bmc
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/redfish/v1/TaskService/Tasks/"))
        .map(|r| r.status)
        .collect();
    assert_eq!(polls, [202, 202, 200]);
    // Two Retry-After: 1 waits between the three polls.
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

/// A task that ends in Exception is an error quoting the task's own message.
#[test]
fn a_task_ending_in_exception_fails_with_its_message() {
    let bmc = start(Switches {
        reset_task: true,
        task_polls: 1,
        task_fails: Some("Unable to power on: PSU redundancy lost".to_string()),
        ..Switches::default()
    });
    let err = run(async {
        let c = Client::connect(&bmc.endpoint(), options()).await.unwrap();
        let sys = c.system().await.unwrap();
        c.reset_for_boot(&sys).await.unwrap_err()
    });
    let text = err.to_string();
    assert!(matches!(err, RedfishError::TaskFailed { .. }), "{text}");
    assert!(text.contains("Exception"), "{text}");
    assert!(text.contains("PSU redundancy lost"), "{text}");
    assert!(text.contains(&bmc.fake.host()), "{text}");
}

/// A system whose Boot is read-only is changed through its `@Redfish.Settings` object (with
/// that object's ETag), applied at the next reset (sushy `set_system_boot_options`).
#[test]
fn boot_override_goes_through_redfish_settings_when_the_system_refuses_it() {
    let bmc = start(Switches {
        boot_via_settings: true,
        vendor: FakeVendor::Generic,
        ..Switches::default()
    });
    run(async {
        let c = Client::connect(&bmc.endpoint(), options()).await.unwrap();
        let sys = c.system().await.unwrap();
        c.set_boot_once_cd(&sys, &c.profile(&sys, None).await.unwrap())
            .await
            .unwrap();
        assert_eq!(bmc.fake.snapshot().boot_target, "None");
        c.reset_for_boot(&sys).await.unwrap();
        c.logout().await;
    });
    let patches: Vec<_> = bmc
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH")
        .collect();
    assert_eq!(patches.len(), 1, "{patches:?}");
    assert_eq!(patches[0].path, SETTINGS);
    assert!(patches[0].if_match.is_some());
    assert_eq!(
        patches[0].body,
        json!({"Boot": {"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}})
    );
    let s = bmc.fake.snapshot();
    assert_eq!(
        (s.boot_target.as_str(), s.boot_enabled.as_str()),
        ("Cd", "Once")
    );
}

/// A BMC that accepts the boot PATCH but does not apply it is caught by the read-back, whose
/// error shows what the BMC reads back.
#[test]
fn a_boot_override_that_does_not_read_back_is_an_error() {
    let bmc = start(Switches {
        boot_ignored: true,
        vendor: FakeVendor::Generic,
        ..Switches::default()
    });
    let err = run(async {
        let c = Client::connect(&bmc.endpoint(), options()).await.unwrap();
        let sys = c.system().await.unwrap();
        c.set_boot_once_cd(&sys, &c.profile(&sys, None).await.unwrap())
            .await
            .unwrap_err()
    });
    let text = err.to_string();
    assert!(matches!(err, RedfishError::ReadBack { .. }), "{text}");
    assert!(text.contains("BootSourceOverrideTarget None"), "{text}");
    assert!(text.contains(&bmc.fake.host()), "{text}");
}

/// With a session service: one session is created, every later request carries X-Auth-Token
/// and no Basic credentials, and logout DELETEs the session; its token never reaches a log.
#[test]
fn a_session_is_created_used_and_deleted() {
    let bmc = start(Switches::default());
    let (calls, log) = traced(async {
        let c = Client::connect(&bmc.endpoint(), options()).await.unwrap();
        assert_eq!(c.auth_kind(), "session");
        let sys = c.system().await.unwrap();
        c.virtual_cd(&sys, &Profile::generic()).await.unwrap();
        let calls = c.calls();
        c.logout().await;
        calls
    });
    let s = bmc.fake.snapshot();
    assert_eq!((s.sessions_created, s.sessions_open), (1, 0));
    let requests = bmc.fake.requests();
    assert!(requests.iter().all(|r| !r.basic), "{requests:?}");
    let login = requests
        .iter()
        .position(|r| r.method == "POST" && r.path == SESSIONS)
        .unwrap();
    assert_eq!(requests[login].status, 201);
    assert!(
        requests[login + 1..].iter().all(|r| r.token),
        "{requests:?}"
    );
    let delete = requests.last().unwrap();
    assert_eq!(
        (delete.method.as_str(), delete.path.as_str(), delete.status),
        ("DELETE", "/redfish/v1/SessionService/Sessions/1", 204)
    );
    assert!(calls
        .iter()
        .any(|c| c.path == SYSTEM && c.status == Some(200)));
    assert!(log.contains("redfish call"), "{log}");
    assert!(!log.contains("token-"), "{log}");
    assert!(!log.contains("calvin"), "{log}");
}

/// Without a session service the client authenticates with Basic on every request (checked at
/// connect), and logout has nothing to delete.
#[test]
fn basic_authentication_when_the_bmc_has_no_session_service() {
    let bmc = start(Switches {
        session_service: false,
        ..Switches::default()
    });
    run(async {
        let c = Client::connect(&bmc.endpoint(), options()).await.unwrap();
        assert_eq!(c.auth_kind(), "basic");
        c.system().await.unwrap();
        c.logout().await;
    });
    let requests = bmc.fake.requests();
    assert_eq!(bmc.fake.count("POST", SESSIONS), 0);
    assert!(
        requests[1..].iter().all(|r| r.basic && !r.token),
        "{requests:?}"
    );
    assert!(requests.iter().all(|r| r.method != "DELETE"));
}

/// A wrong password: the error names the BMC and says the inventory's credentials are wrong,
/// without the password in the error, its Debug or the log; the session service is asked once
/// (no Basic retry that would count toward iDRAC's lockout). Same through Basic.
#[test]
fn a_wrong_password_names_the_bmc_and_never_shows_the_password() {
    let password = "Wr0ng-Pa55word";
    for session_service in [true, false] {
        let bmc = start(Switches {
            session_service,
            ..Switches::default()
        });
        let trust = Trust::Ca(bmc.pki.ca_pem.clone().into_bytes());
        let (err, log) = traced(async {
            Client::connect(&bmc.endpoint_with(password, trust), options())
                .await
                .err()
                .unwrap()
        });
        let text = err.to_string();
        assert!(err.is_unauthorized(), "{text}");
        let expected = format!(
            "wrong user or password for BMC {} (credentials from the inventory)",
            bmc.fake.host()
        );
        assert!(text.contains(&expected), "{text}");
        for shown in [&text, &format!("{err:?}"), &log] {
            assert!(!shown.contains(password), "{shown}");
        }
        assert!(log.contains("redfish call"), "{log}");
        let attempts = bmc
            .fake
            .requests()
            .iter()
            .filter(|r| r.status == 401)
            .count();
        assert_eq!(attempts, 1, "session service: {session_service}");
    }
}

/// A pinned SHA-256 of the BMC's certificate is trusted without any CA; a wrong pin is refused
/// before any request, and the error shows both fingerprints.
#[test]
fn a_pinned_fingerprint_is_accepted_and_a_wrong_one_refused_showing_both() {
    let bmc = start(Switches::default());
    let pin = bmc.leaf_fingerprint();
    let wrong = [0x5Au8; 32];
    let err = run(async {
        let c = Client::connect(
            &bmc.endpoint_with("calvin", Trust::Fingerprint(pin)),
            options(),
        )
        .await
        .unwrap();
        c.system().await.unwrap();
        c.logout().await;
        Client::connect(
            &bmc.endpoint_with("calvin", Trust::Fingerprint(wrong)),
            options(),
        )
        .await
        .err()
        .unwrap()
    });
    let text = err.to_string();
    assert!(
        matches!(err, RedfishError::FingerprintMismatch { .. }),
        "{text}"
    );
    assert!(text.contains(&format_fingerprint(&pin)), "{text}");
    assert!(text.contains(&format_fingerprint(&wrong)), "{text}");
    assert!(text.contains(&bmc.fake.host()), "{text}");
    // The refused connection made no request (the session of the first one was deleted).
    let after_logout = bmc
        .fake
        .requests()
        .iter()
        .skip_while(|r| r.method != "DELETE")
        .count();
    assert_eq!(after_logout, 1);
}

/// A BMC certificate from a private CA, with no ca or fingerprint in the inventory, is refused
/// (the system roots do not know it), naming the fix; the explicit opt-out connects.
#[test]
fn a_private_ca_without_configured_trust_is_refused_naming_the_fix() {
    let bmc = start(Switches::default());
    let err = run(async {
        Client::connect(&bmc.endpoint_with("calvin", Trust::System), options())
            .await
            .err()
            .unwrap()
    });
    let text = err.to_string();
    assert!(matches!(err, RedfishError::Tls { .. }), "{text}");
    assert!(text.contains(&bmc.fake.host()), "{text}");
    assert!(text.contains("system's CA certificates"), "{text}");
    assert!(text.contains("nodes[].bmc.ca"), "{text}");
    assert!(text.contains("nodes[].bmc.fingerprint"), "{text}");
    assert!(
        text.contains(&format_fingerprint(&bmc.leaf_fingerprint())),
        "{text}"
    );
    assert!(bmc.fake.requests().is_empty());
    run(async {
        let c = Client::connect(&bmc.endpoint_with("calvin", Trust::Insecure), options())
            .await
            .unwrap();
        c.system().await.unwrap();
        c.logout().await;
    });
}

/// The reset is On for a system that is off and ForceRestart for one that is on, each only
/// when allowed: with only ForceOn and PowerCycle advertised (through an ActionInfo) those are
/// used, and with none of ours allowed nothing is sent.
#[test]
fn reset_picks_on_when_off_and_force_restart_when_on_from_the_allowed_values() {
    let bmc = start(Switches::default());
    run(async {
        let c = Client::connect(&bmc.endpoint(), options()).await.unwrap();
        let sys = c.system().await.unwrap();
        assert_eq!(c.reset_for_boot(&sys).await.unwrap(), ResetKind::On);
        assert_eq!(
            c.reset_for_boot(&sys).await.unwrap(),
            ResetKind::ForceRestart
        );
        c.logout().await;
    });
    assert_eq!(bmc.fake.snapshot().resets, ["On", "ForceRestart"]);

    let narrow = |powered_on| {
        start(Switches {
            powered_on,
            reset_action_info: true,
            reset_allowed: Some(vec![
                "ForceOn".into(),
                "ForceOff".into(),
                "PowerCycle".into(),
            ]),
            ..Switches::default()
        })
    };
    for (powered_on, expected) in [(false, ResetKind::ForceOn), (true, ResetKind::PowerCycle)] {
        let bmc = narrow(powered_on);
        let kind = run(async {
            let c = Client::connect(&bmc.endpoint(), options()).await.unwrap();
            let sys = c.system().await.unwrap();
            c.reset_for_boot(&sys).await.unwrap()
        });
        assert_eq!(kind, expected);
        assert_eq!(bmc.fake.snapshot().resets, [expected.to_string()]);
    }

    let bmc = start(Switches {
        powered_on: true,
        reset_allowed: Some(vec!["GracefulShutdown".into(), "On".into()]),
        ..Switches::default()
    });
    let err = run(async {
        let c = Client::connect(&bmc.endpoint(), options()).await.unwrap();
        let sys = c.system().await.unwrap();
        c.reset_for_boot(&sys).await.unwrap_err()
    });
    let text = err.to_string();
    assert!(matches!(err, RedfishError::NotAllowed { .. }), "{text}");
    assert!(text.contains("GracefulShutdown"), "{text}");
    assert_eq!(bmc.fake.count("POST", RESET), 0);
}

/// 5xx answers are retried with backoff and the call then succeeds (every attempt recorded);
/// a reset answered 500 is not sent again (it may have acted), and its error quotes the BMC.
#[test]
fn server_errors_are_retried_then_succeed_but_a_reset_is_never_repeated() {
    let bmc = start(Switches {
        server_errors: vec![
            ("GET".into(), SYSTEM.into(), 2),
            ("POST".into(), RESET.into(), 1),
        ],
        ..Switches::default()
    });
    let (calls, err) = run(async {
        let c = Client::connect(&bmc.endpoint(), options()).await.unwrap();
        let sys = c.system().await.unwrap();
        let err = c.reset_for_boot(&sys).await.unwrap_err();
        (c.calls(), err)
    });
    let system_statuses: Vec<_> = calls
        .iter()
        .filter(|c| c.method == "GET" && c.path == SYSTEM)
        .map(|c| c.status)
        .collect();
    assert_eq!(system_statuses[..3], [Some(500), Some(500), Some(200)]);
    assert_eq!(bmc.fake.count("POST", RESET), 1);
    let text = err.to_string();
    assert_eq!(err.status(), Some(500), "{text}");
    assert!(text.contains("internal service error"), "{text}");
    assert!(bmc.fake.snapshot().resets.is_empty());
}

/// Several systems behind one address: an error listing them and asking for the full system
/// URL, which then works.
#[test]
fn several_systems_need_the_full_system_url() {
    let bmc = start(Switches {
        systems: 2,
        ..Switches::default()
    });
    let err = run(async {
        let c = Client::connect(&bmc.endpoint(), options()).await.unwrap();
        c.system().await.unwrap_err()
    });
    let text = err.to_string();
    assert!(text.contains("System.Embedded.2"), "{text}");
    assert!(text.contains("write the full system URL"), "{text}");
    let mut ep = bmc.endpoint();
    ep.address = format!("{}{SYSTEM}", bmc.fake.address());
    let sys = run(async {
        let c = Client::connect(&ep, options()).await.unwrap();
        c.system().await.unwrap()
    });
    assert_eq!(sys.id, "System.Embedded.1");
}

/// Credentials for a plain http:// address are refused before anything is sent; without
/// credentials (a lab emulator) plain HTTP connects, and a BMC that wants credentials then says
/// so.
#[test]
fn credentials_over_plain_http_are_refused_before_sending() {
    let fake = RedfishFake::start(Switches::default(), None).unwrap();
    let ep = Endpoint {
        address: fake.address(),
        credentials: Some(Credentials {
            user: "root".into(),
            password: "calvin".into(),
        }),
        trust: Trust::System,
    };
    let err = run(async { Client::connect(&ep, options()).await.err().unwrap() });
    assert!(
        matches!(err, RedfishError::CleartextCredentials { .. }),
        "{err}"
    );
    assert!(fake.requests().is_empty());
    let ep = Endpoint {
        credentials: None,
        ..ep
    };
    let (kind, err) = run(async {
        let c = Client::connect(&ep, options()).await.unwrap();
        (c.auth_kind(), c.system().await.unwrap_err())
    });
    assert_eq!(kind, "none");
    // This fake wants credentials: the error says to give them, not that they are wrong.
    let text = err.to_string();
    assert!(
        matches!(err, RedfishError::CredentialsNeeded { .. }),
        "{text}"
    );
    assert!(text.contains("set nodes[].bmc.credentials"), "{text}");
}

/// After `On` the system reports PoweringOn for a while; the wait polls until On.
#[test]
fn power_on_is_awaited_by_polling_the_power_state() {
    let bmc = start(Switches {
        powering_on_reads: 3,
        ..Switches::default()
    });
    run(async {
        let c = Client::connect(&bmc.endpoint(), options()).await.unwrap();
        let sys = c.system().await.unwrap();
        c.reset_for_boot(&sys).await.unwrap();
        c.wait_power_on(&sys).await.unwrap();
        c.logout().await;
    });
    assert!(bmc.fake.count("GET", SYSTEM) >= 5);
    assert_eq!(bmc.fake.snapshot().power, "On");
}

/// A BMC address that answers the TLS handshake with something else (a BMC whose TLS this
/// client cannot speak, or plain HTTP on the port) is a TLS error naming the BMC, and is not
/// retried.
#[test]
fn a_failed_handshake_is_a_tls_error_and_not_retried() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut hello = [0u8; 512];
        let _ = s.read(&mut hello);
        let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        drop(s);
        listener.set_nonblocking(true).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        // A retry would connect again.
        listener.accept().is_ok()
    });
    let ep = Endpoint {
        address: format!("https://{addr}"),
        credentials: None,
        trust: Trust::System,
    };
    let err = run(async { Client::connect(&ep, options()).await.err().unwrap() });
    let text = err.to_string();
    assert!(matches!(err, RedfishError::Tls { .. }), "{text}");
    assert!(text.contains(&addr.to_string()), "{text}");
    assert!(text.contains("did not complete a TLS handshake"), "{text}");
    assert!(!accepted.join().unwrap(), "the handshake was retried");
}

/// A BMC's own self-signed certificate (`openssl req -x509`, so CA:TRUE) given as its
/// `bmc.ca` is trusted, as the registry client trusts one from `--ca-bundle`.
#[test]
fn a_self_signed_bmc_certificate_given_as_its_ca_is_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::openssl_self_signed(dir.path()).unwrap();
    let fake = RedfishFake::start(Switches::default(), Some(&pki)).unwrap();
    let ep = Endpoint {
        address: fake.address(),
        credentials: Some(Credentials {
            user: "root".into(),
            password: "calvin".into(),
        }),
        trust: Trust::Ca(pki.ca_pem.clone().into_bytes()),
    };
    let id = run(async {
        let c = Client::connect(&ep, options()).await.unwrap();
        let sys = c.system().await.unwrap();
        c.logout().await;
        sys.id
    });
    assert_eq!(id, "System.Embedded.1");
}
