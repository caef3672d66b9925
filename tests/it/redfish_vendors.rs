//! Issue 27 points 1-5: one test per vendor behaviour, each a whole boot ([`Client::boot_from_cd`])
//! against the fake in the vendor's mode (`support/redfishfake/vendors.rs`, read from sushy,
//! sushy-oem-idrac and ironic), which records what the server *booted*. Each test boots the ISO
//! with one reset or fails with the named cause; a client that took the wrong path would see
//! every call succeed and the fake boot `physical-cd` or `disk`, so no test can pass on that.

use bootstrap::redfish::{
    BootError, BootPath, BootStep, BootSteps, Client, Options, Profile, ProfileSource,
    RedfishError, Vendor,
};
use serde_json::json;
use std::time::{Duration, Instant};

use crate::redfish::{options, run, start, Bmc};
use crate::support::redfishfake::{FakeVendor, Switches, IMPORT, RESET, SYSTEM, SYSTEM_CD};

const ISO: &str = "http://10.30.0.5:8080/agent.x86_64.iso";

/// Records the steps as the boot stage would.
#[derive(Default)]
struct Steps(Vec<String>);

impl BootSteps for Steps {
    fn resetting(&mut self) -> Result<(), String> {
        self.0.push("resetting".to_string());
        Ok(())
    }

    fn reached(&mut self, step: BootStep) -> Result<(), String> {
        self.0.push(step.to_string());
        Ok(())
    }
}

/// A whole boot with the profile the client chooses (`forced`: the inventory's `bmc.vendor`).
fn boot(bmc: &Bmc, forced: Option<Vendor>) -> (Profile, Result<(), BootError>) {
    boot_with(bmc, forced, options())
}

/// [`boot`] with the client's `opts`.
fn boot_with(bmc: &Bmc, forced: Option<Vendor>, opts: Options) -> (Profile, Result<(), BootError>) {
    run(async {
        let c = Client::connect(&bmc.endpoint(), opts).await.unwrap();
        let sys = c.system().await.unwrap();
        let profile = c.profile(&sys, forced).await.unwrap();
        let mut steps = Steps::default();
        let result = c.boot_from_cd(&sys, ISO, &profile, &mut steps).await;
        c.logout().await;
        (profile, result.map(|_| ()))
    })
}

/// Boots and asserts the ISO booted with one reset.
fn boots_the_iso(sw: Switches) -> (Bmc, Profile) {
    let bmc = start(sw);
    let (profile, result) = boot(&bmc, None);
    result.unwrap_or_else(|e| panic!("{} failed: {e}", profile.name));
    let s = bmc.fake.snapshot();
    assert_eq!(s.booted, ["iso"], "{}: {s:?}", profile.name);
    assert_eq!(s.resets.len(), 1, "{s:?}");
    (bmc, profile)
}

fn vendor(v: FakeVendor) -> Switches {
    Switches {
        vendor: v,
        ..Switches::default()
    }
}

/// Point 1: vendor, model and firmware come from the System and its Manager by GETs alone; the
/// profile follows them, and the inventory's `bmc.vendor` overrides the manufacturer.
#[test]
fn vendor_model_and_firmware_are_read_without_changing_anything() {
    let bmc = start(vendor(FakeVendor::Idrac10));
    let (info, forced) = run(async {
        let c = Client::connect(&bmc.endpoint(), options()).await.unwrap();
        let sys = c.system().await.unwrap();
        let info = c.vendor(&sys).await.unwrap();
        let forced = c.profile(&sys, Some(Vendor::Generic)).await.unwrap();
        c.logout().await;
        (info, forced)
    });
    assert_eq!(info.manufacturer.as_deref(), Some("Dell Inc."));
    assert_eq!(info.model.as_deref(), Some("PowerEdge R770"));
    assert_eq!(info.manager_model.as_deref(), Some("17G Monolithic"));
    assert_eq!(info.firmware.as_deref(), Some("1.20.25.00"));
    let detected = Profile::choose(info, None, None);
    assert_eq!(detected.name, "dell-idrac10");
    assert!(
        detected.summary().contains("PowerEdge R770") && detected.summary().contains("1.20.25.00"),
        "{}",
        detected.summary()
    );
    assert_eq!(
        (forced.boot_path, forced.source),
        (BootPath::Standard, ProfileSource::Inventory)
    );
    let changes: Vec<_> = bmc
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH" || (r.method == "POST" && !r.path.contains("Sessions")))
        .collect();
    assert!(changes.is_empty(), "{changes:?}");
}

/// Point 2: iDRAC accepts the standard Boot PATCH to Cd/Once, reads it back, and boots its
/// local physical CD (ironic drac/boot.py); the Dell profile never sends it and boots through
/// sushy-oem-idrac's ImportSystemConfiguration, following the job. The fake is shown to catch
/// the wrong path: forced to the generic profile, every call succeeds and it boots its CD drive.
#[test]
fn dell_boots_virtual_media_through_the_oem_import_never_the_standard_patch() {
    let (bmc, profile) = boots_the_iso(Switches {
        task_polls: 1,
        ..vendor(FakeVendor::Dell)
    });
    assert_eq!(
        (profile.name.as_str(), profile.boot_path),
        ("dell-idrac9", BootPath::DellOem)
    );
    let requests = bmc.fake.requests();
    assert!(
        !requests
            .iter()
            .any(|r| r.method == "PATCH" && r.path == SYSTEM),
        "the standard Boot PATCH was sent to an iDRAC"
    );
    let import: Vec<_> = requests.iter().filter(|r| r.path == IMPORT).collect();
    assert_eq!(import.len(), 1);
    assert_eq!(import[0].body["ImportBuffer"], "<SystemConfiguration><Component FQDD=\"iDRAC.Embedded.1\"><Attribute Name=\"ServerBoot.1#BootOnce\">Enabled</Attribute><Attribute Name=\"ServerBoot.1#FirstBootDevice\">VCD-DVD</Attribute></Component></SystemConfiguration>");
    assert_eq!(import[0].body["ShareParameters"], json!({"Target": "ALL"}));

    let wrong = start(vendor(FakeVendor::Dell));
    let (_, result) = boot(&wrong, Some(Vendor::Generic));
    assert!(result.is_ok());
    assert_eq!(wrong.fake.snapshot().booted, ["physical-cd"]);
}

/// Point 2: `RAC0679` (a job is running) is waited out as sushy-oem-idrac does, and the import
/// sent again; the ISO boots with one reset.
#[test]
fn dell_waits_out_a_running_job_before_the_import() {
    let (bmc, _) = boots_the_iso(Switches {
        import_busy: Some(("RAC0679".to_string(), 2)),
        ..vendor(FakeVendor::Dell)
    });
    let statuses: Vec<u16> = bmc
        .fake
        .requests()
        .iter()
        .filter(|r| r.path == IMPORT)
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses, [400, 400, 202]);
}

/// Point 2: a pending configuration (`LC068`) that does not clear within sushy-oem-idrac's
/// retries fails naming LC068 and the fix, and nothing is reset (bootstrap does not power-cycle
/// the node to clear it, as sushy-oem-idrac would: a node is reset once).
#[test]
fn dell_pending_configuration_that_does_not_clear_fails_naming_it() {
    let bmc = start(Switches {
        import_busy: Some(("LC068".to_string(), 100)),
        ..vendor(FakeVendor::Dell)
    });
    let (_, result) = boot(&bmc, None);
    let err = result.unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(&err, BootError::Redfish(RedfishError::Busy { .. })),
        "{text}"
    );
    assert!(
        text.contains("LC068") && text.contains("Job Queue"),
        "{text}"
    );
    assert!(text.contains(&bmc.fake.host()), "{text}");
    assert_eq!(bmc.fake.count("POST", IMPORT), 4, "1 try + 3 retries");
    assert!(bmc.fake.snapshot().resets.is_empty());
}

/// Issue 28 point 8: an import job that stays Running is followed no longer than
/// `Options.task_timeout` (900 s by default, 1 s here); the boot then fails naming the task's
/// URL, its last state and message, and the fix, and nothing is reset. Without the bound the
/// boot would poll for ever: the whole boot has a deadline, so that fails instead of hanging.
#[test]
fn dell_import_job_running_for_ever_fails_after_the_task_bound_naming_it() {
    let bmc = start(Switches {
        task_polls: u32::MAX,
        ..vendor(FakeVendor::Dell)
    });
    let bound = Duration::from_secs(1);
    let opts = Options {
        task_timeout: bound,
        ..options()
    };
    let host = bmc.fake.host();
    let started = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (_, result) = boot_with(&bmc, None, opts);
        let _ = tx.send((bmc, result));
    });
    let (bmc, result) = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the boot still follows the task after 30 s");
    let elapsed = started.elapsed();
    let err = result.unwrap_err();
    let text = err.to_string();
    let BootError::Redfish(RedfishError::TaskTimeout { task, state, .. }) = &err else {
        panic!("not a task timeout: {text}");
    };
    assert!(
        task.starts_with("/redfish/v1/TaskService/Tasks/JID_"),
        "{task}"
    );
    assert_eq!(state, "Running (202)");
    for part in [
        format!("BMC {host}: the task {task} (for POST {IMPORT})"),
        "is still Running (202) after 1s".to_string(),
        format!(
            "The task with Id '{}' has started.",
            task.rsplit('/').next().unwrap()
        ),
        "Job Queue".to_string(),
    ] {
        assert!(text.contains(&part), "{part:?} not in: {text}");
    }
    assert!(
        elapsed >= bound && elapsed < Duration::from_secs(10),
        "{elapsed:?}"
    );
    assert!(bmc.fake.snapshot().resets.is_empty());
}

/// Point 2: on iDRAC 10 (a 17G manager) only virtual media member 1 boots, though member 2 also
/// lists CD and is listed first; the profile picks 1.
#[test]
fn idrac10_inserts_only_into_virtual_media_member_1() {
    let (bmc, profile) = boots_the_iso(vendor(FakeVendor::Idrac10));
    assert_eq!(profile.media_member.as_deref(), Some("1"));
    let requests = bmc.fake.requests();
    assert!(requests
        .iter()
        .any(|r| r.path == format!("{SYSTEM_CD}/Actions/VirtualMedia.InsertMedia")));
    assert!(!requests
        .iter()
        .any(|r| r.path.contains("/VirtualMedia/2/Actions")));
}

/// Point 3: SuperMicro refuses `Inserted`/`WriteProtected` in InsertMedia (sushy leaves both
/// out) and boots virtual media as `UsbCd`; `Cd` would boot its disk.
#[test]
fn supermicro_gets_image_alone_and_usb_cd() {
    let (bmc, profile) = boots_the_iso(vendor(FakeVendor::Supermicro));
    assert_eq!(profile.boot_target, "UsbCd");
    let requests = bmc.fake.requests();
    let insert = requests
        .iter()
        .find(|r| r.path.ends_with("VirtualMedia.InsertMedia"))
        .unwrap();
    assert_eq!(
        (insert.body.clone(), insert.status),
        (json!({"Image": ISO}), 204)
    );
    let patch = requests.iter().find(|r| r.method == "PATCH").unwrap();
    assert_eq!(patch.body["Boot"]["BootSourceOverrideTarget"], "UsbCd");

    let wrong = start(vendor(FakeVendor::Supermicro));
    let (_, result) = boot(&wrong, Some(Vendor::Generic));
    assert!(result.is_ok());
    assert_eq!(wrong.fake.snapshot().booted, ["disk"]);
}

/// Point 3: the SuperMicro model sushy exempts (ARS-111GL-NHR) boots its virtual media as `Cd`.
#[test]
fn supermicro_ars_111gl_nhr_keeps_cd() {
    let (_, profile) = boots_the_iso(vendor(FakeVendor::SupermicroArs));
    assert_eq!(
        (profile.name.as_str(), profile.boot_target.as_str()),
        ("supermicro-cd", "Cd")
    );
}

/// Point 4: AMI/ASRockRack get mode, enabled and target in one PATCH (ironic); without the mode
/// the override reads back and the disk boots.
#[test]
fn ami_gets_mode_enabled_and_target_in_one_patch() {
    let (bmc, _) = boots_the_iso(vendor(FakeVendor::Ami));
    let patches: Vec<_> = bmc
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH")
        .collect();
    assert_eq!(patches.len(), 1);
    assert_eq!(
        patches[0].body,
        json!({"Boot": {"BootSourceOverrideMode": "UEFI", "BootSourceOverrideEnabled": "Once", "BootSourceOverrideTarget": "Cd"}})
    );
    let wrong = start(vendor(FakeVendor::Ami));
    let (_, result) = boot(&wrong, Some(Vendor::Generic));
    assert!(result.is_ok());
    assert_eq!(wrong.fake.snapshot().booted, ["disk"]);
}

/// Point 4: HPE iLO refuses a PATCH during POST with `UnableToModifyDuringSystemPOST`: sent
/// again as ironic does; past its attempts the error quotes the MessageId (iLO gives no
/// `Message`) and nothing is reset.
#[test]
fn hpe_patch_during_post_is_sent_again() {
    let (bmc, profile) = boots_the_iso(vendor(FakeVendor::Hpe { post_refusals: 2 }));
    assert_eq!(profile.name, "hpe-ilo");
    let statuses: Vec<u16> = bmc
        .fake
        .requests()
        .iter()
        .filter(|r| r.method == "PATCH")
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses, [400, 400, 204]);

    let stuck = start(vendor(FakeVendor::Hpe { post_refusals: 99 }));
    let (_, result) = boot(&stuck, None);
    let text = result.unwrap_err().to_string();
    assert!(
        text.contains("MessageId iLO.2.15.UnableToModifyDuringSystemPOST"),
        "{text}"
    );
    assert_eq!(stuck.fake.count("PATCH", SYSTEM), 6);
    assert!(stuck.fake.snapshot().resets.is_empty());
}

/// Point 4: NVIDIA DGX wants `UserName`/`Password` in InsertMedia; sushy retries with "none".
#[test]
fn nvidia_insert_media_gets_user_name_and_password_none() {
    let (bmc, profile) = boots_the_iso(vendor(FakeVendor::Nvidia));
    assert_eq!(profile.name, "nvidia-dgx");
    let inserts: Vec<_> = bmc
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("VirtualMedia.InsertMedia"))
        .collect();
    assert_eq!(inserts.len(), 2);
    assert_eq!(inserts[0].status, 400);
    assert_eq!(
        (
            inserts[1].body["UserName"].clone(),
            inserts[1].body["Password"].clone()
        ),
        (json!("none"), json!("none"))
    );
}

/// Point 5: a 412 to a weak ETag is sent again with its strong form (sushy connector.py); a
/// BMC that refuses that too gets the PATCH without If-Match.
#[test]
fn a_412_to_a_weak_etag_is_retried_strong_then_without_if_match() {
    let (bmc, _) = boots_the_iso(Switches {
        weak_etag_refused: true,
        ..vendor(FakeVendor::Generic)
    });
    let tags: Vec<_> = bmc
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH")
        .map(|r| (r.if_match.unwrap_or_default(), r.status))
        .collect();
    assert_eq!(tags.len(), 2, "{tags:?}");
    assert!(
        tags[0].0.starts_with("W/\"") && tags[0].1 == 412,
        "{tags:?}"
    );
    assert_eq!((tags[1].0.as_str(), tags[1].1), (&tags[0].0[2..], 204));

    let (bmc, _) = boots_the_iso(Switches {
        if_match_refused: true,
        ..vendor(FakeVendor::Generic)
    });
    let tags: Vec<_> = bmc
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH")
        .map(|r| (r.if_match.is_some(), r.status))
        .collect();
    assert_eq!(tags, [(true, 412), (true, 412), (false, 204)]);
}

/// Point 5: every request asks for `Accept-Encoding: identity` (sushy connector.py: offered
/// compression, some BMCs answer weak ETags).
#[test]
fn every_request_asks_for_identity_encoding() {
    let (bmc, _) = boots_the_iso(vendor(FakeVendor::Generic));
    let requests = bmc.fake.requests();
    assert!(requests.len() > 10);
    assert!(
        requests
            .iter()
            .all(|r| r.accept_encoding.as_deref() == Some("identity")),
        "{requests:?}"
    );
}

/// Point 5: `On` refused with 409 ActionParameterValueConflict while the power state settles
/// is sent again as ironic's redfish/power.py does; the node is reset once.
#[test]
fn power_on_refused_while_settling_is_sent_again() {
    let (bmc, _) = boots_the_iso(Switches {
        on_conflicts: 2,
        ..vendor(FakeVendor::Generic)
    });
    let statuses: Vec<u16> = bmc
        .fake
        .requests()
        .iter()
        .filter(|r| r.path == RESET)
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses, [409, 409, 204]);
}

/// Point 2: `bmc.vendor: dell` on a BMC without Dell's OEM import fails naming the cause and
/// the fix, and neither the standard PATCH nor a reset is sent.
#[test]
fn a_dell_profile_without_the_oem_import_fails_before_any_reset() {
    let bmc = start(vendor(FakeVendor::Generic));
    let (profile, result) = boot(&bmc, Some(Vendor::Dell));
    assert_eq!(profile.boot_path, BootPath::DellOem);
    let text = result.unwrap_err().to_string();
    assert!(
        text.contains("ImportSystemConfiguration") && text.contains("nodes[].bmc.vendor"),
        "{text}"
    );
    assert_eq!(bmc.fake.count("PATCH", SYSTEM), 0);
    assert!(bmc.fake.snapshot().resets.is_empty());
}

/// A whole boot with the detected profile, returning the steps the boot stage would be told.
fn boot_with_steps(bmc: &Bmc) -> (Result<(), BootError>, Vec<String>) {
    run(async {
        let c = Client::connect(&bmc.endpoint(), options()).await.unwrap();
        let sys = c.system().await.unwrap();
        let profile = c.profile(&sys, None).await.unwrap();
        let mut steps = Steps::default();
        let result = c.boot_from_cd(&sys, ISO, &profile, &mut steps).await;
        c.logout().await;
        (result.map(|_| ()), steps.0)
    })
}

/// Point 6: iDRAC keeps a stale `Inserted`/`Image` after an eject, here our very URL while
/// nothing is attached. A client that trusted it would skip the insertion and the server would
/// boot without the ISO; the boot ejects (refused: nothing is connected), inserts again, and
/// the ISO boots (ironic redfish/boot.py: eject_vmedia, then _insert_vmedia, every time).
#[test]
fn a_stale_inserted_image_of_our_url_is_ejected_and_inserted_again() {
    let (bmc, _) = boots_the_iso(Switches {
        stale_media: Some(ISO.to_string()),
        task_polls: 1,
        ..vendor(FakeVendor::Dell)
    });
    let posts: Vec<String> = bmc
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .map(|r| r.path)
        .collect();
    let eject = posts
        .iter()
        .position(|p| p.ends_with("VirtualMedia.EjectMedia"));
    let insert = posts
        .iter()
        .position(|p| p.ends_with("VirtualMedia.InsertMedia"));
    assert!(
        matches!((eject, insert), (Some(e), Some(i)) if e < i),
        "{posts:?}"
    );
}

/// Point 6: a running node's restart is seen, not assumed (PowerState stays On across a
/// ForceRestart): ForceOff, PowerState read Off, then On and read On, as ironic
/// redfish/power.py `reboot` does; the reset is recorded before the power-off, and it is one
/// boot.
#[test]
fn a_running_node_is_powered_off_seen_off_then_powered_on() {
    let bmc = start(Switches {
        powered_on: true,
        ..Switches::default()
    });
    let (result, steps) = boot_with_steps(&bmc);
    result.unwrap();
    let s = bmc.fake.snapshot();
    assert_eq!(s.resets, ["ForceOff", "On"]);
    assert_eq!(s.booted, ["iso"]);
    let at = |step: &str| steps.iter().position(|s| s == step).unwrap_or(usize::MAX);
    assert!(
        at("resetting") < at("powered off")
            && at("powered off") < at("reset (On)")
            && at("reset (On)") < at("powered on"),
        "{steps:?}"
    );
    // Off was read between the two resets.
    let requests = bmc.fake.requests();
    let resets: Vec<usize> = requests
        .iter()
        .enumerate()
        .filter(|(_, r)| r.method == "POST" && r.path == RESET)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(resets.len(), 2, "{requests:?}");
    assert!(
        requests[resets[0]..resets[1]]
            .iter()
            .any(|r| r.method == "GET" && r.path == SYSTEM),
        "PowerState was not read between ForceOff and On: {requests:?}"
    );
}

/// Point 6: a BMC that allows no ForceOff gets ForceRestart (ironic's path for
/// `disable_power_off`), and no power-off step is claimed.
#[test]
fn a_bmc_without_force_off_is_restarted_with_force_restart() {
    let bmc = start(Switches {
        powered_on: true,
        reset_allowed: Some(vec!["On".into(), "ForceRestart".into()]),
        ..Switches::default()
    });
    let (result, steps) = boot_with_steps(&bmc);
    result.unwrap();
    let s = bmc.fake.snapshot();
    assert_eq!(s.resets, ["ForceRestart"]);
    assert_eq!(s.booted, ["iso"]);
    assert!(!steps.iter().any(|s| s == "powered off"), "{steps:?}");
}

/// For `bootstrap gather`: iDRAC's `Lclog` and `Sel` are found under the manager and read page
/// by page (`Members@odata.nextLink`): 120 entries in pages of 50 read whole; with a cap of 70
/// the reader stops after two pages and says it cut the log. A BMC without log services (the
/// fake's default, like sushy-tools) lists none. Only GETs, besides the session's login and
/// logout.
#[test]
fn idrac_lifecycle_and_sel_logs_are_read_across_pages_up_to_the_cap() {
    let bmc = start(Switches {
        log_entries: Some(120),
        ..Switches::default()
    });
    run(async {
        let c = Client::connect(&bmc.endpoint(), options()).await.unwrap();
        let sys = c.system().await.unwrap();
        let docs = c.inventory(&sys).await.unwrap();
        let paths: Vec<&str> = docs.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, [SYSTEM, crate::support::redfishfake::MANAGER]);
        let services = c.log_services(&sys).await.unwrap();
        let ids: Vec<(&str, &str)> = services
            .iter()
            .map(|s| (s.owner.as_str(), s.id.as_str()))
            .collect();
        assert_eq!(
            ids,
            [("iDRAC.Embedded.1", "Lclog"), ("iDRAC.Embedded.1", "Sel")]
        );
        let all = c.log_entries(&services[0], 2000).await.unwrap();
        assert_eq!(all.entries.len(), 120);
        assert!(!all.truncated);
        assert_eq!(all.entries[119]["Message"], "Lclog entry 119");
        let some = c.log_entries(&services[1], 70).await.unwrap();
        assert_eq!(some.entries.len(), 70);
        assert!(some.truncated);
        c.logout().await;
    });
    let sel_pages = bmc
        .fake
        .requests()
        .iter()
        .filter(|r| r.path.contains("/Sel/Entries"))
        .count();
    assert_eq!(sel_pages, 2, "the cap stops the paging");
    for r in bmc.fake.requests() {
        assert!(
            r.method == "GET" || r.path.starts_with(crate::support::redfishfake::SESSIONS),
            "{} {}",
            r.method,
            r.path
        );
    }
    let plain = start(Switches::default());
    run(async {
        let c = Client::connect(&plain.endpoint(), options()).await.unwrap();
        let sys = c.system().await.unwrap();
        assert_eq!(c.log_services(&sys).await.unwrap(), Vec::new());
    });
}
