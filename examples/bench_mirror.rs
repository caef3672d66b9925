//! Side-by-side mirror benchmark: bootstrap against skopeo on the same synthetic data, each tool
//! with its own fresh destination so neither profits from blobs the other pushed. Prints wall
//! time and peak RSS of each run and their ratios. Run through `bench/mirror.sh`.
//!
//! Set shape (environment): BENCH_IMAGES (default 9), BENCH_LAYER_MIB (per-image unique layer,
//! default 64), BENCH_BIG_MIB (one large layer, default 1024), BENCH_WIDE (wide set size, default
//! 150). The defaults follow the "big" and "wide" sets. BENCH_CHUNKS (a comma-separated
//! list of MiB, e.g. `16,64,256`) also times bootstrap's mirror to mirror of the big set once
//! per upload chunk size, each into a fresh registry: the data behind `--chunk-size`'s default.

#[path = "../tests/it/support/mod.rs"]
#[allow(dead_code, unused_imports)]
mod support;

use std::process::Command;
use std::time::Instant;
use support::images::{Artifact, Format, ImageSpec, Platform, SetEntry, SyntheticSet};
use support::layers::{derive_seed, LayerSpec};
use support::Registry;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs a command under GNU time; returns (seconds, peak RSS KiB) and prints both with the
/// CPU seconds it used (user + system), which tell whose work a wall time is.
fn measure(label: &str, program: &str, args: &[String]) -> (f64, u64) {
    let rss_file = tempfile::NamedTempFile::new().unwrap();
    let start = Instant::now();
    let out = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%U %S %M")
        .arg("-o")
        .arg(rss_file.path())
        .arg(program)
        .args(args)
        .output()
        .expect("running /usr/bin/time");
    let secs = start.elapsed().as_secs_f64();
    if !out.status.success() {
        eprintln!("{label} failed:\n{}", String::from_utf8_lossy(&out.stderr));
        std::process::exit(1);
    }
    let report = fs_err::read_to_string(rss_file.path()).unwrap_or_default();
    let fields: Vec<f64> = report
        .lines()
        .last()
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    let (cpu, rss) = match fields[..] {
        [user, system, rss] => (user + system, rss as u64),
        _ => (0.0, 0),
    };
    eprintln!(
        "{label}: {secs:.2} s, CPU {cpu:.2} s, peak RSS {} MiB",
        rss / 1024
    );
    (secs, rss)
}

/// Times bootstrap's mirror to mirror once per chunk size in BENCH_CHUNKS, each into a fresh
/// registry, and prints the time relative to the default chunk size's run.
fn chunk_sweep(bin: &str, cfg: &std::path::Path, src: &Registry, work: &std::path::Path) {
    let Ok(list) = std::env::var("BENCH_CHUNKS") else {
        return;
    };
    for mib in list.split(',').filter_map(|v| v.trim().parse::<u64>().ok()) {
        let dst = Registry::plain();
        let args: Vec<String> = [
            "mirror",
            "-c",
            &cfg.display().to_string(),
            &format!("docker://{}/m", dst.host()),
            "--plain-http",
            &src.host(),
            "--plain-http",
            &dst.host(),
            "--chunk-size",
            &mib.to_string(),
            "--record",
            &work.join(format!("chunk-{mib}.json")).display().to_string(),
            "--status-file",
            &work
                .join(format!("chunk-{mib}.status"))
                .display()
                .to_string(),
            "--workdir",
            &work
                .join(format!("chunk-{mib}-state"))
                .display()
                .to_string(),
        ]
        .iter()
        .map(|v| v.to_string())
        .collect();
        measure(
            &format!("big mirror-to-mirror bootstrap --chunk-size {mib}"),
            bin,
            &args,
        );
    }
}

fn big_set(seed: u64) -> SyntheticSet {
    let images = env_u64("BENCH_IMAGES", 9);
    let layer_mib = env_u64("BENCH_LAYER_MIB", 64);
    let big_mib = env_u64("BENCH_BIG_MIB", 1024);
    let base = LayerSpec::new(derive_seed(seed, 1), 32 << 20);
    let mut entries = Vec::new();
    for i in 0..images {
        let mut layers = vec![
            base,
            LayerSpec::new(derive_seed(seed, 100 + i), layer_mib << 20),
        ];
        if i == 0 {
            layers.push(LayerSpec::new(derive_seed(seed, 2), big_mib << 20));
        }
        entries.push(SetEntry {
            repo: format!("big/app-{i}"),
            tag: "1.0".into(),
            artifact: Artifact::Image(ImageSpec::new(Format::Oci, Platform::linux_amd64(), layers)),
        });
    }
    SyntheticSet { seed, entries }
}

fn wide_set(seed: u64) -> SyntheticSet {
    let n = env_u64("BENCH_WIDE", 150);
    let base = LayerSpec::new(derive_seed(seed, 1), 64 << 10);
    let entries = (0..n)
        .map(|i| SetEntry {
            repo: format!("wide/app-{i}"),
            tag: "1.0".into(),
            artifact: Artifact::Image(ImageSpec::new(
                Format::Oci,
                Platform::linux_amd64(),
                vec![base, LayerSpec::new(derive_seed(seed, 1000 + i), 16 << 10)],
            )),
        })
        .collect();
    SyntheticSet { seed, entries }
}

fn isc(host: &str, pushed: &[support::images::PushedImage], path: &std::path::Path) {
    let mut text = String::from("apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  additionalImages:\n");
    for p in pushed {
        text.push_str(&format!("  - name: {host}/{}:{}\n", p.repo, p.tag));
    }
    fs_err::write(path, text).unwrap();
}

fn sync_yaml(host: &str, pushed: &[support::images::PushedImage], path: &std::path::Path) {
    let mut text = format!("{host}:\n  tls-verify: false\n  images:\n");
    for p in pushed {
        text.push_str(&format!("    {}: [\"{}\"]\n", p.repo, p.tag));
    }
    fs_err::write(path, text).unwrap();
}

fn ratio(label: &str, ours: (f64, u64), theirs: (f64, u64)) {
    println!(
        "{label}: bootstrap {:.2} s / skopeo {:.2} s = {:.2}x time; RSS {} MiB / {} MiB",
        ours.0,
        theirs.0,
        ours.0 / theirs.0.max(1e-9),
        ours.1 / 1024,
        theirs.1 / 1024
    );
}

fn main() {
    let bin = std::env::var("BOOTSTRAP_BIN").unwrap_or_else(|_| "target/release/bootstrap".into());
    let work = tempfile::tempdir().unwrap();
    let s = |v: &str| v.to_string();
    for (name, set) in [("big", big_set(7)), ("wide", wide_set(8))] {
        let src = Registry::plain();
        eprintln!("seeding the {name} set into {}", src.host());
        let pushed = set.push_to(&src, "");
        let cfg = work.path().join(format!("{name}.yaml"));
        isc(&src.host(), &pushed, &cfg);
        let yaml = work.path().join(format!("{name}-sync.yaml"));
        sync_yaml(&src.host(), &pushed, &yaml);

        let ours_dst = Registry::plain();
        let theirs_dst = Registry::plain();
        // The same two commands serve the first run and, on the wide set, the rerun.
        let ours_args = |record: &str| {
            vec![
                s("mirror"),
                s("-c"),
                cfg.display().to_string(),
                format!("docker://{}/m", ours_dst.host()),
                s("--plain-http"),
                src.host(),
                s("--plain-http"),
                ours_dst.host(),
                s("--record"),
                work.path().join(record).display().to_string(),
                s("--status-file"),
                work.path()
                    .join(format!("{record}.status"))
                    .display()
                    .to_string(),
                s("--workdir"),
                work.path()
                    .join(format!("{name}-state"))
                    .display()
                    .to_string(),
            ]
        };
        let theirs_args = vec![
            s("sync"),
            s("--src"),
            s("yaml"),
            s("--dest"),
            s("docker"),
            s("--dest-tls-verify=false"),
            yaml.display().to_string(),
            format!("{}/m", theirs_dst.host()),
        ];
        let ours = measure(
            &format!("{name} mirror-to-mirror bootstrap"),
            &bin,
            &ours_args(&format!("{name}-rec.json")),
        );
        let theirs = measure(
            &format!("{name} mirror-to-mirror skopeo sync"),
            "skopeo",
            &theirs_args,
        );
        ratio(&format!("{name} mirror-to-mirror"), ours, theirs);
        if name == "big" {
            chunk_sweep(&bin, &cfg, &src, work.path());
        }
        if name == "wide" {
            let ours = measure("wide rerun bootstrap", &bin, &ours_args("wide-rec2.json"));
            let theirs = measure("wide rerun skopeo sync", "skopeo", &theirs_args);
            ratio("wide rerun (nothing to do)", ours, theirs);
        } else {
            let dir = work.path().join("disk-ours");
            let ours = measure(
                "big mirror-to-disk bootstrap",
                &bin,
                &[
                    s("mirror"),
                    s("-c"),
                    cfg.display().to_string(),
                    format!("file://{}", dir.display()),
                    s("--plain-http"),
                    src.host(),
                ],
            );
            let layout = work.path().join("disk-skopeo");
            let start = Instant::now();
            let mut peak = 0;
            for p in &pushed {
                let (_, rss) = measure(
                    &format!("skopeo copy {}", p.repo),
                    "skopeo",
                    &[
                        s("copy"),
                        s("--src-tls-verify=false"),
                        format!("docker://{}/{}:{}", src.host(), p.repo, p.tag),
                        format!("oci:{}:{}", layout.display(), p.repo),
                    ],
                );
                peak = peak.max(rss);
            }
            ratio(
                "big mirror-to-disk",
                ours,
                (start.elapsed().as_secs_f64(), peak),
            );
        }
    }
}
