//! The lab mirror rehearsal: the air-gap journey in miniature, on one machine. It starts a local
//! source registry, fills it with generated images (shared base layers, a multi-arch index, a
//! large layer), mirrors them to disk with `bootstrap mirror`, verifies the disk mirror, pushes it
//! on to a second local registry (as on the far side of the air gap), verifies that registry
//! against the record, and prints the summary. Everything listens on 127.0.0.1 and stops at exit.
//!
//! Run it with `scripts/lab-rehearsal.sh` (which installs the registry and builds the tool).

#[path = "../tests/support/mod.rs"]
#[allow(dead_code, unused_imports)]
mod support;

use std::path::PathBuf;
use std::process::Command;
use support::{Registry, SyntheticSet};

fn run(bin: &str, args: &[String]) {
    eprintln!("\n$ bootstrap {}", args.join(" "));
    let status = Command::new(bin)
        .args(args)
        .status()
        .expect("running bootstrap");
    if !status.success() {
        eprintln!("lab rehearsal FAILED at: bootstrap {}", args.join(" "));
        std::process::exit(1);
    }
}

fn main() {
    let bin = std::env::var("BOOTSTRAP_BIN").unwrap_or_else(|_| "target/release/bootstrap".into());
    let work = std::env::var("LAB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(".lab"));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).expect("creating the lab directory");

    eprintln!("starting the connected-side registry and the site registry on 127.0.0.1");
    let upstream = Registry::plain();
    let site = Registry::plain();
    let pushed = SyntheticSet::standard(2026).push_to(&upstream, "lab");
    eprintln!("seeded {} images into {}", pushed.len(), upstream.host());

    let mut isc = String::from(
        "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  platform:\n    architectures: [amd64, arm64]\n  additionalImages:\n",
    );
    for p in &pushed {
        isc.push_str(&format!(
            "  - name: {}/{}:{}\n",
            upstream.host(),
            p.repo,
            p.tag
        ));
    }
    let cfg = work.join("isc.yaml");
    std::fs::write(&cfg, isc).expect("writing isc.yaml");
    let disk = format!("file://{}", work.join("archive").display());
    let record = work.join("site-record.json");
    let s = |v: &str| v.to_string();

    run(
        &bin,
        &[
            s("mirror"),
            s("-c"),
            cfg.display().to_string(),
            disk.clone(),
            s("--plain-http"),
            upstream.host(),
        ],
    );
    run(&bin, &[s("verify"), disk.clone()]);
    run(
        &bin,
        &[
            s("mirror"),
            s("--from"),
            disk.clone(),
            format!("docker://{}/mirror", site.host()),
            s("--plain-http"),
            site.host(),
            s("--record"),
            record.display().to_string(),
            s("--status-file"),
            work.join("site-status.json").display().to_string(),
            s("--workdir"),
            work.join("site-state").display().to_string(),
        ],
    );
    run(
        &bin,
        &[
            s("verify"),
            s("--record"),
            record.display().to_string(),
            format!("docker://{}/mirror", site.host()),
            s("--plain-http"),
            site.host(),
        ],
    );
    eprintln!(
        "\nlab rehearsal OK: {} images mirrored to disk ({}) and on to {}; records in {}",
        pushed.len(),
        disk,
        site.host(),
        work.display()
    );
}
