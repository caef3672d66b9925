//! The lab BMCs' vendor layer (`bootstrap-lab up --vendor NODE=VENDOR`, lab/src/site/vendor.rs)
//! against the real sushy-tools emulator behind it: a Dell iDRAC 9 and a SuperMicro X12 answer
//! and boot as sushy, sushy-oem-idrac and ironic document, including what the machine then
//! boots (the BMC watcher reads the emulator, the machine's truth). Driven here with plain HTTP
//! requests, not the product's client: the layer must stand on upstream's documentation, not on
//! what our client happens to send.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::labsite::{lab_inventory, SiteLab as Lab};

/// The user and password of inventory/lab/secrets/bmc.example.
const ADMIN: (&str, &str) = ("admin", "lab-bmc-pass");

fn client(ca: &std::path::Path) -> reqwest::Client {
    let pem = fs_err::read(ca).unwrap();
    reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(&pem).unwrap()])
        .no_proxy()
        .build()
        .unwrap()
}

/// A request with Basic auth: its status and JSON body (`Null` when none) and `Location`.
async fn call(
    c: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    body: Option<Value>,
) -> (u16, Value, Option<String>) {
    let mut r = c.request(method, url).basic_auth(ADMIN.0, Some(ADMIN.1));
    if let Some(b) = body {
        r = r.json(&b);
    }
    let resp = r.send().await.unwrap_or_else(|e| panic!("{url}: {e:#}"));
    let status = resp.status().as_u16();
    let location = resp
        .headers()
        .get("location")
        .map(|v| v.to_str().unwrap().to_string());
    let text = resp.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::Null),
        location,
    )
}

/// `PATCH` of the system's one-time boot override to `target`: the status, when it was
/// answered, and the system read back afterwards.
async fn set_boot_once(c: &reqwest::Client, system: &str, target: &str) -> (u16, Instant, Value) {
    let (st, _, _) = call(
        c,
        reqwest::Method::PATCH,
        system,
        Some(json!({"Boot": {"BootSourceOverrideTarget": target, "BootSourceOverrideEnabled": "Once"}})),
    )
    .await;
    let patched = Instant::now();
    let (_, sys, _) = call(c, reqwest::Method::GET, system, None).await;
    (st, patched, sys)
}

/// The watcher's latest `bootCd` for `node`, once it has observed anything after `since`.
fn boot_cd_after(lab: &Lab, node: &str, since: Instant) -> bool {
    // Three watcher periods: the observation then reflects what the emulator holds now.
    let wait = Duration::from_millis(1600).saturating_sub(since.elapsed());
    std::thread::sleep(wait);
    let status = lab.status();
    let n = status["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == node)
        .unwrap()
        .clone();
    n["observation"]["bootCd"] == true
}

/// A Dell iDRAC 9: it names itself, offers the OEM import; the standard Boot PATCH to Cd is
/// accepted and read back but the machine is not set to its virtual CD (it boots its physical
/// CD); sushy-oem-idrac's one-time virtual CD import is a job (Running, then Completed) after
/// which the machine boots the virtual CD; another import buffer is refused. A SuperMicro X12:
/// it names itself and lists UsbCd; InsertMedia with Inserted is refused naming it, without is
/// taken; Cd is shown but the machine boots its disk, UsbCd is the virtual CD. The generic
/// node is sushy-tools as it is. Nothing here resets a node; lab status names each vendor.
#[test]
fn dell_and_supermicro_bmcs_answer_and_boot_as_upstream_documents() {
    let dir = tempfile::tempdir().unwrap();
    let (inv, ports) = lab_inventory(dir.path(), true);
    let (lab, status) = Lab::up(
        &inv,
        &dir.path().join("state"),
        &[
            "--vendor",
            "master-0=dell-idrac9",
            "--vendor",
            "master-1=supermicro-x12",
        ],
    );
    let vendors: Vec<&str> = status["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["vendor"].as_str().unwrap())
        .collect();
    assert_eq!(vendors, ["dell-idrac9", "supermicro-x12", "generic"]);
    let c = client(&lab.record().ca);
    let base = |i: usize| format!("https://127.0.0.1:{}", ports[i]);
    crate::support::block_on(async {
        use reqwest::Method;
        // Dell.
        let dell = base(0);
        let (_, systems, _) =
            call(&c, Method::GET, &format!("{dell}/redfish/v1/Systems"), None).await;
        let system = format!(
            "{dell}{}",
            systems["Members"][0]["@odata.id"].as_str().unwrap()
        );
        let (_, sys, _) = call(&c, Method::GET, &system, None).await;
        assert_eq!(sys["Manufacturer"], "Dell Inc.");
        let manager_path = sys["Links"]["ManagedBy"][0]["@odata.id"]
            .as_str()
            .unwrap()
            .to_string();
        let manager_id = manager_path.rsplit('/').next().unwrap().to_string();
        let (_, mgr, _) = call(&c, Method::GET, &format!("{dell}{manager_path}"), None).await;
        assert_eq!(mgr["FirmwareVersion"], "7.10.50.00");
        let import = mgr["Actions"]["Oem"]
            .as_object()
            .unwrap()
            .iter()
            .find(|(k, _)| k.ends_with("#OemManager.ImportSystemConfiguration"))
            .map(|(_, v)| v["target"].as_str().unwrap().to_string())
            .expect("the OEM import action");

        let (st, patched, sys) = set_boot_once(&c, &system, "Cd").await;
        assert_eq!(st, 200);
        assert_eq!(
            sys["Boot"]["BootSourceOverrideTarget"], "Cd",
            "read back as iDRAC does"
        );
        assert!(
            !boot_cd_after(&lab, "master-0", patched),
            "a Dell given the standard PATCH must not boot its virtual CD"
        );

        let (st, err, _) = call(
            &c,
            Method::POST,
            &format!("{dell}{import}"),
            Some(json!({"ShareParameters": {"Target": "ALL"}, "ImportBuffer": "<SystemConfiguration/>"})),
        )
        .await;
        assert_eq!(st, 400);
        assert_eq!(
            err["error"]["@Message.ExtendedInfo"][0]["MessageId"],
            "IDRAC.2.8.SYS041"
        );

        let buffer = format!("<SystemConfiguration><Component FQDD=\"{manager_id}\"><Attribute Name=\"ServerBoot.1#BootOnce\">Enabled</Attribute><Attribute Name=\"ServerBoot.1#FirstBootDevice\">VCD-DVD</Attribute></Component></SystemConfiguration>");
        let (st, _, location) = call(
            &c,
            Method::POST,
            &format!("{dell}{import}"),
            Some(json!({"ShareParameters": {"Target": "ALL"}, "ImportBuffer": buffer})),
        )
        .await;
        let imported = Instant::now();
        assert_eq!(st, 202);
        let job = format!("{dell}{}", location.expect("the job's Location"));
        let (st, first, _) = call(&c, Method::GET, &job, None).await;
        assert_eq!((st, first["TaskState"].as_str()), (202, Some("Running")));
        let (st, done, _) = call(&c, Method::GET, &job, None).await;
        assert_eq!((st, done["TaskState"].as_str()), (200, Some("Completed")));
        assert!(
            boot_cd_after(&lab, "master-0", imported),
            "after the import the machine boots its virtual CD"
        );

        // SuperMicro.
        let smc = base(1);
        let (_, systems, _) =
            call(&c, Method::GET, &format!("{smc}/redfish/v1/Systems"), None).await;
        let system = format!(
            "{smc}{}",
            systems["Members"][0]["@odata.id"].as_str().unwrap()
        );
        let (_, sys, _) = call(&c, Method::GET, &system, None).await;
        assert_eq!(sys["Manufacturer"], "Supermicro");
        assert!(
            sys["Boot"]["BootSourceOverrideTarget@Redfish.AllowableValues"]
                .as_array()
                .unwrap()
                .contains(&json!("UsbCd"))
        );
        let (_, media, _) = call(
            &c,
            Method::GET,
            &format!(
                "{smc}{}",
                sys["VirtualMedia"]["@odata.id"].as_str().unwrap()
            ),
            None,
        )
        .await;
        let cd = format!(
            "{smc}{}/Actions/VirtualMedia.InsertMedia",
            media["Members"][0]["@odata.id"].as_str().unwrap()
        );
        let image = "http://192.168.111.1:9/agent.x86_64.iso";
        let (st, err, _) = call(
            &c,
            Method::POST,
            &cd,
            Some(json!({"Image": image, "Inserted": true, "WriteProtected": true})),
        )
        .await;
        assert_eq!(st, 400);
        let info = &err["error"]["@Message.ExtendedInfo"][0];
        assert_eq!(info["MessageId"], "Base.1.8.ActionParameterUnknown");
        assert!(
            info["Message"].as_str().unwrap().contains("Inserted"),
            "{info}"
        );

        let (st, patched, sys) = set_boot_once(&c, &system, "Cd").await;
        assert!((200..300).contains(&st), "{st}");
        assert_eq!(sys["Boot"]["BootSourceOverrideTarget"], "Cd");
        assert!(
            !boot_cd_after(&lab, "master-1", patched),
            "a SuperMicro told Cd boots its disk"
        );
        let (st, patched, sys) = set_boot_once(&c, &system, "UsbCd").await;
        assert!((200..300).contains(&st), "{st}");
        assert_eq!(sys["Boot"]["BootSourceOverrideTarget"], "UsbCd");
        assert!(
            boot_cd_after(&lab, "master-1", patched),
            "UsbCd is the SuperMicro's virtual CD"
        );

        // Generic: sushy-tools' own answer.
        let (_, systems, _) = call(
            &c,
            Method::GET,
            &format!("{}/redfish/v1/Systems", base(2)),
            None,
        )
        .await;
        let (_, sys, _) = call(
            &c,
            Method::GET,
            &format!(
                "{}{}",
                base(2),
                systems["Members"][0]["@odata.id"].as_str().unwrap()
            ),
            None,
        )
        .await;
        assert_ne!(sys["Manufacturer"], "Dell Inc.");
        assert_ne!(sys["Manufacturer"], "Supermicro");
    });
    let resets = bootstrap_lab::site::reset_counts(&lab.state).unwrap();
    assert!(resets.values().all(|n| *n == 0), "{resets:?}");
    let text = String::from_utf8_lossy(
        &crate::support::labsite::run_lab(&["status", "--state", lab.state.to_str().unwrap()])
            .stdout,
    )
    .into_owned();
    assert!(text.contains("tls+basic as dell-idrac9"), "{text}");
    lab.down();
}

/// An unknown vendor, or a vendor for a node the inventory does not have, is refused before
/// anything starts.
#[test]
fn an_unknown_vendor_or_node_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (inv, _) = lab_inventory(dir.path(), true);
    let state = dir.path().join("state");
    let o = crate::support::labsite::run_lab(&[
        "up",
        "--inventory",
        inv.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
        "--vendor",
        "master-0=hal9000",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains(
            "unknown lab BMC vendor 'hal9000': one of generic, dell-idrac9, supermicro-x12"
        ),
        "{err}"
    );
    let o = crate::support::labsite::run_lab(&[
        "up",
        "--inventory",
        inv.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
        "--vendor",
        "worker-9=dell-idrac9",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("--vendor worker-9=...: worker-9 is not a node of"),
        "{err}"
    );
}
