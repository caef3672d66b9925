//! The lab mirror rehearsal: the air-gap journey in miniature, on one machine. It starts a local
//! source registry, seeds it with `bootstrap lab seed` (4.18 release payloads and their update
//! graph, an operator catalog of six real packages, a modelcar; see docs/lab.md), mirrors
//! `mirrorsets/lab.yaml` to disk with `bootstrap mirror` (releases from the graph, the catalog
//! filtered and rebuilt), verifies the disk mirror, pushes it on to a second local registry (as
//! on the far side of the air gap) with its cluster resources, verifies that registry against
//! the record, and prints the summary. Everything listens on 127.0.0.1 and stops at exit.
//!
//! Run it with `scripts/lab-rehearsal.sh` (which installs the registry and builds the tool).

#[path = "../tests/it/support/mod.rs"]
#[allow(dead_code, unused_imports)]
mod support;

use std::path::PathBuf;
use std::process::Command;
use support::Registry;

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
    let _ = fs_err::remove_dir_all(&work);
    fs_err::create_dir_all(&work).expect("creating the lab directory");

    eprintln!("starting the connected-side registry and the site registry on 127.0.0.1");
    let upstream = Registry::plain();
    let site = Registry::plain();
    let s = |v: &str| v.to_string();
    let seed_dir = work.join("seed");
    run(
        &bin,
        &[
            s("lab"),
            s("seed"),
            format!("docker://{}", upstream.host()),
            s("--plain-http"),
            upstream.host(),
            s("--out"),
            seed_dir.display().to_string(),
        ],
    );
    // mirrorsets/lab.yaml names the upstream 127.0.0.1:5000; this run's registry has its own
    // port.
    let lab_yaml =
        fs_err::read_to_string("mirrorsets/lab.yaml").expect("reading mirrorsets/lab.yaml");
    let cfg = work.join("lab.yaml");
    fs_err::write(&cfg, lab_yaml.replace("127.0.0.1:5000", &upstream.host()))
        .expect("writing lab.yaml");
    let graph_url = format!("file://{}", seed_dir.join("graph.json").display());
    let disk = format!("file://{}", work.join("archive").display());
    let record = work.join("site-record.json");

    run(
        &bin,
        &[
            s("mirror"),
            s("-c"),
            cfg.display().to_string(),
            s("--graph-url"),
            graph_url,
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
        "\nlab rehearsal OK: the lab set (releases, filtered catalog, modelcar) mirrored to disk ({}) and on to {}; records and cluster-resources/ in {}",
        disk,
        site.host(),
        work.display()
    );
}
