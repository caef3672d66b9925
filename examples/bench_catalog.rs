//! Operator catalog benchmark (issue 31, points 2 and 3): a generated catalog of a real index's
//! shape (`bootstrap_lab::bigcatalog`: 200 packages, 8,000 bundles, 16,000 channel entries,
//! 1.6 M skips, about 130 MiB of JSON) in a local Distribution registry with every image its
//! bundles name, then `bootstrap mirror --dry-run` for 5 listed packages, for every package's
//! channel heads and for `full: true`, the same 5 packages from a catalog 4x larger, and a real
//! mirror of the 5 packages. Prints wall time, peak RSS (`/usr/bin/time -v`) and the requests
//! each run made of the source registry (its access log), per image, and a Markdown table with
//! the goals. Run through `bench/catalog.sh`.
//!
//! Environment: BENCH_CATALOG_PACKAGES (default 200), BENCH_CATALOG_OBJECT_BYTES (bytes of
//! `olm.bundle.object` per bundle, default 0: as current catalogs; older ones carry tens of
//! KiB), BENCH_CATALOG_FACTOR (the larger catalog's factor, default 4), BENCH_CATALOG_PARTS (a
//! comma-separated subset of five,heads,full,large,mirror).

#[path = "../tests/it/support/mod.rs"]
#[allow(dead_code, unused_imports)]
mod support;

use bootstrap::oci::registry::{Registries, RegistryOptions};
use bootstrap_lab::bigcatalog::{self, Shape};
use bootstrap_lab::push::Pusher;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Instant;
use support::Registry;

const GOAL_HEADS_S: f64 = 20.0;
const GOAL_MIB: f64 = 256.0;
const GOAL_FIVE_S: f64 = 5.0;
const GOAL_LARGE: f64 = 1.2;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// One timed run of the tool.
struct Run {
    wall: f64,
    rss_mib: f64,
    requests: usize,
    images: usize,
}

/// Seeds `registry` with the catalog of `shape` (as `bench/catalog:v1`) and the images of
/// the bundles of `only` (package indexes; every package when `None`). Bundles of other
/// packages name their images by tag, not pushed.
fn seed(registry: &Registry, shape: &Shape, only: Option<&[usize]>) {
    let host = registry.host();
    let started = Instant::now();
    let (images, digests) = bigcatalog::related_images(shape, &host, only).unwrap();
    let catalog = bigcatalog::catalog_image(shape, &host, "bench/catalog", "v1", &digests).unwrap();
    let registries = Registries::new(RegistryOptions {
        plain_http: vec![host.clone()],
        ..Default::default()
    })
    .unwrap();
    let client = registries.client(&host).unwrap();
    let pusher = Pusher::new(&client);
    // A repository's images share their layer and config: push one per repository first, so
    // the others find the blobs there rather than uploading them at the same time.
    let mut seen = std::collections::BTreeSet::new();
    let (first, rest): (Vec<_>, Vec<_>) = images
        .iter()
        .partition(|i| seen.insert(i.repository.clone()));
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(async {
            pusher.push_all(&first).await?;
            pusher.push_all(&rest).await?;
            pusher.push(&catalog).await
        })
        .unwrap();
    let json: usize = bigcatalog::config_files(shape, &host, &digests)
        .values()
        .map(Vec::len)
        .sum();
    eprintln!(
        "seeded {} images and a catalog of {} MiB of JSON ({} MiB compressed) in {:.0} s",
        images.len(),
        json / (1024 * 1024),
        catalog.size() / (1024 * 1024),
        started.elapsed().as_secs_f64()
    );
}

fn config(dir: &Path, name: &str, source: &str, packages: &[String], full: bool) -> String {
    let mut yaml = format!(
        "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  operators:\n  - catalog: {source}/bench/catalog:v1\n"
    );
    if full {
        yaml.push_str("    full: true\n");
    }
    if !packages.is_empty() {
        yaml.push_str("    packages:\n");
        for p in packages {
            let _ = writeln!(yaml, "    - name: {p}");
        }
    }
    let path = dir.join(format!("{name}.yaml"));
    fs_err::write(&path, yaml).unwrap();
    path.display().to_string()
}

/// Runs `bootstrap mirror -c CFG` from `source` (plain HTTP) to `to`, a path on the plain-HTTP
/// registry `dest` (a dry run when `dry_run`), in `dir`, measured; counts the source's requests
/// during it.
fn run(
    bin: &str,
    dir: &Path,
    source: &Registry,
    cfg: &str,
    dest: &Registry,
    to: &str,
    dry_run: bool,
) -> Run {
    let (src, dst) = (source.host(), dest.host());
    let to = format!("docker://{dst}/{to}");
    let mut args = vec!["mirror", "-c", cfg];
    if dry_run {
        args.push("--dry-run");
    }
    args.extend(["--plain-http", &src, "--plain-http", &dst, &to]);
    let before = source.requests().len();
    let started = Instant::now();
    let out = Command::new("/usr/bin/time")
        .arg("-v")
        .arg(bin)
        .args(&args)
        .args(["--output", "json"])
        .current_dir(dir)
        .output()
        .unwrap();
    let wall = started.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "bootstrap {args:?} failed:\n{}",
        stderr
    );
    let rss_kib: f64 = stderr
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Maximum resident set size (kbytes): ")
        })
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let count = |v: &serde_json::Value| {
        v.as_array()
            .map(Vec::len)
            .or_else(|| v.as_u64().map(|n| n as usize))
    };
    let images = count(&report["images"])
        .or_else(|| count(&report["summary"]["images"]))
        .unwrap_or(0);
    Run {
        wall,
        rss_mib: rss_kib / 1024.0,
        requests: source.requests().len() - before,
        images,
    }
}

fn main() {
    let bin = std::env::var("BOOTSTRAP_BIN").expect("BOOTSTRAP_BIN names the bootstrap binary");
    let parts = std::env::var("BENCH_CATALOG_PARTS")
        .unwrap_or_else(|_| "five,heads,full,large,mirror".into());
    let want = |p: &str| parts.split(',').any(|x| x.trim() == p);
    let shape = Shape {
        packages: env_usize("BENCH_CATALOG_PACKAGES", 200),
        object_bytes: env_usize("BENCH_CATALOG_OBJECT_BYTES", 0),
        ..Shape::default()
    };
    let factor = env_usize("BENCH_CATALOG_FACTOR", 4);
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let source = Registry::plain();
    let dest = Registry::plain();
    seed(&source, &shape, None);
    let src = source.host();
    let five_ix: Vec<usize> = (1..=5).map(|i| i * 37 % shape.packages).collect();
    let five: Vec<String> = five_ix.iter().map(|&i| shape.package(i)).collect();
    let dry = |name: &str, cfg: &str| {
        let slug: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .collect();
        let to = format!("dry-{}", slug.trim_matches('-'));
        let r = run(&bin, dir, &source, cfg, &dest, &to, true);
        eprintln!(
            "{name}: {:.2} s, {:.0} MiB peak RSS, {} requests of the source for {} images",
            r.wall, r.rss_mib, r.requests, r.images
        );
        r
    };
    let mut rows = Vec::new();
    let mut five_run = None;
    if want("five") {
        let cfg = config(dir, "five", &src, &five, false);
        let r = dry("5 packages", &cfg);
        rows.push((
            "dry run, 5 packages",
            format!("under {GOAL_FIVE_S} s"),
            r.wall < GOAL_FIVE_S,
            r,
        ));
        five_run = Some(dry("5 packages, again", &cfg));
    }
    if want("heads") {
        let cfg = config(dir, "heads", &src, &[], false);
        let r = dry("every package's heads", &cfg);
        let ok = r.wall < GOAL_HEADS_S && r.rss_mib < GOAL_MIB;
        rows.push((
            "dry run, every package's heads",
            format!("under {GOAL_HEADS_S} s and {GOAL_MIB} MiB"),
            ok,
            r,
        ));
    }
    if want("full") {
        let cfg = config(dir, "full", &src, &[], true);
        let r = dry("full: true", &cfg);
        let ok = r.rss_mib < GOAL_MIB;
        rows.push((
            "dry run, full: true",
            format!("under {GOAL_MIB} MiB"),
            ok,
            r,
        ));
    }
    if want("large") {
        let large = Registry::plain();
        let big = shape.scaled(factor);
        seed(&large, &big, Some(&five_ix));
        let cfg = config(dir, "large", &large.host(), &five, false);
        let r = run(&bin, dir, &large, &cfg, &dest, "dry-large", true);
        let base = five_run.as_ref().map_or(f64::NAN, |f| f.rss_mib);
        let ratio = r.rss_mib / base;
        eprintln!(
            "5 packages of the {factor}x catalog: {:.2} s, {:.0} MiB ({ratio:.2}x the memory)",
            r.wall, r.rss_mib
        );
        rows.push((
            "dry run, 5 packages, catalog 4x larger",
            format!("memory under {GOAL_LARGE}x of the 1x run ({ratio:.2}x)"),
            ratio < GOAL_LARGE,
            r,
        ));
    }
    if want("mirror") {
        let cfg = config(dir, "mirror", &src, &five, false);
        let r = run(&bin, dir, &source, &cfg, &dest, "real", false);
        eprintln!(
            "mirror of 5 packages: {:.2} s, {:.0} MiB",
            r.wall, r.rss_mib
        );
        rows.push(("mirror, 5 packages", "—".into(), true, r));
    }
    let mut table = String::from(
        "| run | wall | peak RSS | source requests | images | per image | goal |\n|---|---|---|---|---|---|---|\n",
    );
    for (name, goal, ok, r) in &rows {
        let per = if r.images > 0 {
            format!("{:.1}", r.requests as f64 / r.images as f64)
        } else {
            "—".into()
        };
        let verdict = if goal == "—" {
            "—".to_string()
        } else {
            format!("{goal}: {}", if *ok { "met" } else { "not met" })
        };
        let _ = writeln!(
            table,
            "| {name} | {:.2} s | {:.0} MiB | {} | {} | {per} | {verdict} |",
            r.wall, r.rss_mib, r.requests, r.images
        );
    }
    println!("{table}");
}
