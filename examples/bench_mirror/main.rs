//! Side-by-side mirror benchmark (issue 17, point 9): bootstrap against skopeo and against this
//! machine's own ceiling, on the same synthetic data, every run into its own fresh destination so
//! none profits from blobs another pushed. Run through `bench/mirror.sh`.
//!
//! One run prints, side by side:
//! - loopback mirror to mirror: bootstrap and `skopeo sync` over alternating rounds (issue 31,
//!   point 6: see `rounds.rs`), and once the ceiling: the same blobs moved
//!   source to destination by plain parallel `curl` (each distinct blob GET from the source and
//!   piped into one monolithic upload at the destination, then mounted into the other
//!   repositories that use it, then the manifests PUT), no client work at all;
//! - WAN mirror to mirror: the source behind the fault proxy shaped as a pull across an ocean
//!   (a round trip per request, handshake round trips per connection, a per-connection
//!   bandwidth cap), bootstrap against `skopeo sync`;
//! - mirror to disk and to an archive: bootstrap against `skopeo copy` of each image into one OCI
//!   layout, over alternating rounds;
//! - a wide set (many small images) and its rerun with nothing to do;
//! - then a Markdown table of every comparison with the issue's goals, met or not.
//!
//! Registries are Distribution 2.8 over TLS with Basic auth (real sites are TLS; the issue's
//! HTTP/2 finding is over TLS), every tool verifying them against the per-run CA; `BENCH_TLS=0`
//! makes them plain HTTP. The WAN source is plain HTTP behind the proxy (a hand-written HTTP/1.1
//! relay; its link stands in for the TLS handshake with a round trip per connection), so both
//! tools speak HTTP/1.1 to it.
//!
//! Environment (sizes in MiB): BENCH_SCALE=quick for a small shape while developing (seconds);
//! otherwise the issue's "real" shape. Each number can be set on its own: BENCH_IMAGES,
//! BENCH_BASE_MIB, BENCH_LAYER_MIB, BENCH_BIG_MIB (the loopback and disk set: images sharing a
//! base, a unique layer each, one big layer on the first image); BENCH_WAN_IMAGES,
//! BENCH_WAN_BASE_MIB, BENCH_WAN_LAYER_MIB, BENCH_WAN_BIG_MIB (the WAN set); BENCH_WAN_RTT_MS,
//! BENCH_WAN_HANDSHAKE_RTTS, BENCH_WAN_MIBPS (the link); BENCH_WIDE (wide set size, 0 skips it);
//! BENCH_CEILING_PARALLEL (curl transfers at once, default 8 as bootstrap's
//! `--max-concurrent-blobs`); BENCH_ROUNDS (alternating rounds of the loopback, disk and
//! archive comparisons, default 5); BENCH_PARTS (a comma-separated subset of
//! loopback,wan,disk,archive,wide);
//! BENCH_CHUNKS (MiB list, e.g. `16,64,256`) also times bootstrap's loopback mirror to mirror
//! once per upload chunk size, each into a fresh registry; BENCH_BOOTSTRAP_ARGS adds arguments
//! to every bootstrap mirror run (e.g. `--range-parts 1`).

#[path = "../../tests/it/support/mod.rs"]
#[allow(dead_code, unused_imports)]
mod support;

mod rounds;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use support::faultproxy::{FaultProxy, Link};
use support::images::{Artifact, Format, ImageSpec, Platform, PushedImage, SetEntry, SyntheticSet};
use support::layers::{derive_seed, LayerSpec};
use support::Registry;

/// The Basic-auth user of the TLS registries.
const USER: &str = "bench";
/// Its password.
const PASSWORD: &str = "bench-password";
/// Where every tool puts the images in its destination (`docker://HOST/m`).
const PREFIX: &str = "m";
/// Issue 17's goals.
const GOAL_CEILING: f64 = 1.15;
const GOAL_SYNC: f64 = 0.8;
const GOAL_WAN: f64 = 0.35;
const GOAL_DISK: f64 = 0.5;
const GOAL_RSS_MIB: u64 = 64;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// An image set: `images` images sharing a `base_mib` layer, each with a `layer_mib` layer of
/// its own, the first also with a `big_mib` layer (0: none).
#[derive(Clone, Copy, Debug)]
struct Shape {
    images: u64,
    base_mib: u64,
    layer_mib: u64,
    big_mib: u64,
}

impl Shape {
    /// `default` with each number overridden by `BENCH_<prefix>IMAGES` and friends.
    fn from_env(prefix: &str, default: Shape) -> Shape {
        let var = |name: &str, value: u64| env_u64(&format!("BENCH_{prefix}{name}"), value);
        Shape {
            images: var("IMAGES", default.images).max(1),
            base_mib: var("BASE_MIB", default.base_mib),
            layer_mib: var("LAYER_MIB", default.layer_mib),
            big_mib: var("BIG_MIB", default.big_mib),
        }
    }

    fn distinct_mib(&self) -> u64 {
        self.base_mib + self.images * self.layer_mib + self.big_mib
    }

    fn describe(&self) -> String {
        format!(
            "{} images sharing a {} MiB base, {} MiB unique each, one {} MiB layer ({} MiB distinct)",
            self.images,
            self.base_mib,
            self.layer_mib,
            self.big_mib,
            self.distinct_mib()
        )
    }

    /// The synthetic set, repositories under `group/`.
    fn set(&self, seed: u64, group: &str) -> SyntheticSet {
        let mib = |n: u64| n << 20;
        let base = LayerSpec::new(derive_seed(seed, 1), mib(self.base_mib));
        let entries = (0..self.images)
            .map(|i| {
                let mut layers = Vec::new();
                if self.base_mib > 0 {
                    layers.push(base);
                }
                if self.layer_mib > 0 {
                    layers.push(LayerSpec::new(
                        derive_seed(seed, 100 + i),
                        mib(self.layer_mib),
                    ));
                }
                if i == 0 && self.big_mib > 0 {
                    layers.push(LayerSpec::new(derive_seed(seed, 2), mib(self.big_mib)));
                }
                SetEntry {
                    repo: format!("{group}/app-{i}"),
                    tag: "1.0".into(),
                    artifact: Artifact::Image(ImageSpec::new(
                        Format::Oci,
                        Platform::linux_amd64(),
                        layers,
                    )),
                }
            })
            .collect();
        SyntheticSet { seed, entries }
    }
}

fn wide_set(seed: u64, n: u64) -> SyntheticSet {
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

/// What one measured run cost.
#[derive(Clone, Copy, Debug, Default)]
struct Measured {
    wall: f64,
    cpu: f64,
    rss_kib: u64,
}

impl Measured {
    fn cell(&self) -> String {
        format!(
            "{:.2} s / {:.2} s / {} MiB",
            self.wall,
            self.cpu,
            self.rss_kib / 1024
        )
    }

    /// Runs one after another: walls and CPU add up, the peak is the highest.
    fn then(self, next: Measured) -> Measured {
        Measured {
            wall: self.wall + next.wall,
            cpu: self.cpu + next.cpu,
            rss_kib: self.rss_kib.max(next.rss_kib),
        }
    }
}

/// Runs a command under GNU time and prints its wall time, the CPU seconds it used (user +
/// system, children included: which tells whose work a wall time is) and its peak RSS. Exits
/// the bench with the command's stderr if it fails.
fn measure(label: &str, program: &str, args: &[String]) -> Measured {
    let report = tempfile::NamedTempFile::new().expect("creating a temporary file");
    let machine = rounds::Machine::now();
    let start = Instant::now();
    let out = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%U %S %M")
        .arg("-o")
        .arg(report.path())
        .arg(program)
        .args(args)
        .output()
        .expect("running /usr/bin/time (install the time package)");
    let wall = start.elapsed().as_secs_f64();
    if !out.status.success() {
        eprintln!(
            "{label} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        std::process::exit(1);
    }
    let text = fs_err::read_to_string(report.path()).unwrap_or_default();
    let fields: Vec<f64> = text
        .lines()
        .last()
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    let (cpu, rss_kib) = match fields[..] {
        [user, system, rss] => (user + system, rss as u64),
        _ => (0.0, 0),
    };
    let m = Measured { wall, cpu, rss_kib };
    eprintln!("  {label}: {}", m.cell());
    eprintln!("    {}", machine.since(&rounds::Machine::now()));
    m
}

/// A registry as the bench runs them: TLS with Basic auth, or plain HTTP.
fn registry(tls: bool) -> Registry {
    if tls {
        Registry::tls_basic(USER, PASSWORD)
    } else {
        Registry::plain()
    }
}

/// What reached a destination, from its own log: completed blob uploads and cross-repository
/// mounts, so the runs can be seen to move the same blobs.
fn moved(dst: &Registry) -> String {
    format!(
        "{} blob uploads, {} mounts",
        dst.blob_upload_puts_total(),
        dst.mounts_total()
    )
}

/// The bench's scratch directory and settings.
struct Bench {
    bin: String,
    work: PathBuf,
    tls: bool,
}

impl Bench {
    fn path(&self, name: &str) -> PathBuf {
        self.work.join(name)
    }

    fn path_arg(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }

    /// bootstrap's flags to reach `registries` (an authfile and the CA bundle for the TLS
    /// ones, `--plain-http` for the others) and `plain_hosts`.
    fn access(&self, name: &str, registries: &[&Registry], plain_hosts: &[String]) -> Vec<String> {
        let mut args = Vec::new();
        if registries.iter().any(|r| r.ca_pem().is_some()) {
            let (auth, ca) = (
                self.path(&format!("{name}-auth.json")),
                self.path(&format!("{name}-ca.pem")),
            );
            support::write_merged_authfile(&auth, registries);
            support::write_ca_bundle(&ca, registries);
            args.extend([
                "--authfile".into(),
                auth.display().to_string(),
                "--ca-bundle".into(),
                ca.display().to_string(),
            ]);
        }
        let plain = registries
            .iter()
            .filter(|r| r.ca_pem().is_none())
            .map(|r| r.host());
        for host in plain.chain(plain_hosts.iter().cloned()) {
            args.extend(["--plain-http".into(), host]);
        }
        args
    }

    /// `bootstrap mirror` of `cfg` to `destination` with its own record and status file named
    /// after `name`, and the working directory named after `state` (a rerun shares it).
    fn mirror_args(
        &self,
        name: &str,
        state: &str,
        cfg: &Path,
        destination: String,
        access: &[String],
    ) -> Vec<String> {
        let mut args = vec![
            "mirror".into(),
            "-c".into(),
            cfg.display().to_string(),
            destination,
        ];
        args.extend_from_slice(access);
        args.extend(bootstrap_extra_args());
        args.extend([
            "--record".into(),
            self.path_arg(&format!("{name}.json")),
            "--status-file".into(),
            self.path_arg(&format!("{name}.status")),
            "--workdir".into(),
            self.path_arg(&format!("{state}-state")),
        ]);
        args
    }
}

/// BENCH_BOOTSTRAP_ARGS: extra arguments for every `bootstrap mirror` run (whitespace-separated),
/// e.g. `--range-parts 1` to time it without split blobs.
fn bootstrap_extra_args() -> Vec<String> {
    std::env::var("BENCH_BOOTSTRAP_ARGS")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// The ImageSetConfiguration naming every pushed image at `host`.
fn write_isc(host: &str, pushed: &[PushedImage], path: &Path) {
    let mut text = String::from("apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  additionalImages:\n");
    for p in pushed {
        let _ = writeln!(text, "  - name: {host}/{}:{}", p.repo, p.tag);
    }
    fs_err::write(path, text).expect("writing the ImageSetConfiguration");
}

/// `skopeo sync --src yaml` naming every pushed image at `host`; `tls` is the registry when it
/// is TLS (its CA directory and credentials), `None` for plain HTTP.
fn write_sync_yaml(host: &str, tls: Option<&Registry>, pushed: &[PushedImage], path: &Path) {
    let mut text = format!("{host}:\n");
    match tls.and_then(|r| Some((r.cert_dir()?, r.credentials()?))) {
        Some((dir, (user, password))) => {
            let _ = writeln!(text, "  cert-dir: {}", dir.display());
            let _ = writeln!(
                text,
                "  credentials:\n    username: {user}\n    password: {password}"
            );
        }
        None => text.push_str("  tls-verify: false\n"),
    }
    text.push_str("  images:\n");
    for p in pushed {
        let _ = writeln!(text, "    {}: [\"{}\"]", p.repo, p.tag);
    }
    fs_err::write(path, text).expect("writing the skopeo sync YAML");
}

/// `skopeo sync` of `yaml` into a fresh `dst`.
fn sync_args(yaml: &Path, dst: &Registry) -> Vec<String> {
    let mut args: Vec<String> = ["sync", "--src", "yaml", "--dest", "docker"]
        .map(String::from)
        .into();
    args.extend(dst.skopeo_dest_args());
    args.push(yaml.display().to_string());
    args.push(format!("{}/{PREFIX}", dst.host()));
    args
}

/// The curl flags (a `-K` config) to reach `reg`: fail on HTTP errors, HTTP/1.1 (one stream per
/// connection, the shape the issue asks the tools to reach), its CA and credentials.
fn write_curlrc(reg: &Registry, path: &Path) {
    let mut text = String::from("silent\nshow-error\nfail\nhttp1.1\n");
    if let Some(ca) = reg.ca_pem() {
        let _ = writeln!(text, "cacert = \"{}\"", ca.display());
    }
    if let Some((user, password)) = reg.credentials() {
        let _ = writeln!(text, "user = \"{user}:{password}\"");
    }
    fs_err::write(path, text).expect("writing a curl config");
}

/// The transfer script of the ceiling: three phases, each `$PARALLEL` curl jobs at once.
const CEILING_SCRIPT: &str = r#"#!/usr/bin/env bash
# The machine's ceiling: the tools' blobs moved by plain curl, no client work.
set -euo pipefail
cd "$(dirname "$0")"
export SRC DST PREFIX SRC_RC="$PWD/src.curlrc" DST_RC="$PWD/dst.curlrc"
blob() { # repo digest: GET from the source, piped into one monolithic upload
  set -o pipefail
  local loc
  loc=$(curl -K "$DST_RC" -X POST -D - -o /dev/null "$DST/v2/$PREFIX/$1/blobs/uploads/" |
    tr -d '\r' | sed -n 's/^[Ll]ocation: *//p')
  case $loc in /*) loc="$DST$loc" ;; esac
  case $loc in *\?*) loc="$loc&" ;; *) loc="$loc?" ;; esac
  curl -K "$SRC_RC" "$SRC/v2/$1/blobs/$2" |
    curl -K "$DST_RC" -T - -H 'Expect:' -H 'Content-Type: application/octet-stream' \
      -o /dev/null "${loc}digest=$2"
}
mount() { # repo digest from-repo
  curl -K "$DST_RC" -X POST -o /dev/null \
    "$DST/v2/$PREFIX/$1/blobs/uploads/?mount=$2&from=$PREFIX/$3"
}
manifest() { # repo tag media-type file
  curl -K "$DST_RC" -X PUT -H "Content-Type: $3" --data-binary "@$4" -o /dev/null \
    "$DST/v2/$PREFIX/$1/manifests/$2"
}
export -f blob mount manifest
xargs -r -P "$PARALLEL" -n 2 bash -c 'blob "$@"' _ <blobs.txt
xargs -r -P "$PARALLEL" -n 3 bash -c 'mount "$@"' _ <mounts.txt
xargs -r -P "$PARALLEL" -n 4 bash -c 'manifest "$@"' _ <manifests.txt
"#;

/// Moves `pushed` from `src` into the fresh `dst` with the ceiling script: every distinct blob
/// uploaded once (into the first repository that uses it), mounted into the others, then every
/// manifest PUT: the same blobs, uploads and mounts as bootstrap and skopeo.
fn ceiling(bench: &Bench, src: &Registry, dst: &Registry, pushed: &[PushedImage]) -> Measured {
    let dir = bench.path("ceiling");
    fs_err::create_dir_all(dir.join("manifests")).expect("creating the ceiling directory");
    write_curlrc(src, &dir.join("src.curlrc"));
    write_curlrc(dst, &dir.join("dst.curlrc"));
    let (mut blobs, mut mounts, mut manifests) = (String::new(), String::new(), String::new());
    let mut first_repo = std::collections::HashMap::new();
    for (i, p) in pushed.iter().enumerate() {
        for (digest, _) in &p.blobs {
            match first_repo.get(digest) {
                None => {
                    first_repo.insert(digest.clone(), p.repo.clone());
                    let _ = writeln!(blobs, "{} {digest}", p.repo);
                }
                Some(from) => {
                    let _ = writeln!(mounts, "{} {digest} {from}", p.repo);
                }
            }
        }
        let file = dir.join("manifests").join(format!("{i}.json"));
        fs_err::write(&file, &p.manifest).expect("writing a manifest");
        let _ = writeln!(
            manifests,
            "{} {} {} {}",
            p.repo,
            p.tag,
            p.media_type,
            file.display()
        );
    }
    for (name, text) in [
        ("blobs.txt", blobs),
        ("mounts.txt", mounts),
        ("manifests.txt", manifests),
        ("ceiling.sh", CEILING_SCRIPT.into()),
    ] {
        fs_err::write(dir.join(name), text).expect("writing the ceiling's job lists");
    }
    let parallel = env_u64("BENCH_CEILING_PARALLEL", 8).max(1);
    let env = [
        format!("SRC={}", src.url()),
        format!("DST={}", dst.url()),
        format!("PREFIX={PREFIX}"),
        format!("PARALLEL={parallel}"),
        "bash".into(),
        dir.join("ceiling.sh").display().to_string(),
    ];
    measure(&format!("ceiling (curl, {parallel} at once)"), "env", &env)
}

/// One line of the summary table: `ours` against `theirs`.
struct Row {
    what: String,
    ours_label: String,
    ours: Measured,
    theirs_label: String,
    theirs: Measured,
    goal: Option<f64>,
}

impl Row {
    fn ratio(&self) -> f64 {
        self.ours.wall / self.theirs.wall.max(1e-9)
    }
}

/// Loopback mirror to mirror (bootstrap, skopeo sync, the ceiling), the chunk sweep, and mirror
/// to disk when `disk` is set; all from one seeded source.
fn loopback(
    bench: &Bench,
    shape: Shape,
    parts: &[String],
    rows: &mut Vec<Row>,
    notes: &mut String,
) {
    let src = registry(bench.tls);
    eprintln!("seeding {} into {}", shape.describe(), src.url());
    let pushed = shape.set(7, "big").push_to(&src, "");
    let cfg = bench.path("big.yaml");
    write_isc(&src.host(), &pushed, &cfg);
    if parts.iter().any(|p| p == "loopback") {
        let n = rounds::count();
        eprintln!("loopback mirror to mirror, {n} alternating rounds");
        let yaml = bench.path("big-sync.yaml");
        write_sync_yaml(&src.host(), bench.tls.then_some(&src), &pushed, &yaml);
        let r = rounds::alternate(
            n,
            |i| {
                let dst = registry(bench.tls);
                let name = format!("big-{i}");
                let access = bench.access(&name, &[&src, &dst], &[]);
                let dest = format!("docker://{}/{PREFIX}", dst.host());
                let args = bench.mirror_args(&name, &name, &cfg, dest, &access);
                let m = measure("bootstrap", &bench.bin, &args);
                eprintln!("    {}", moved(&dst));
                m
            },
            |_| {
                let dst = registry(bench.tls);
                let m = measure("skopeo sync", "skopeo", &sync_args(&yaml, &dst));
                eprintln!("    {}", moved(&dst));
                m
            },
        );
        notes.push_str(&r.report(
            "Loopback mirror to mirror",
            "bootstrap",
            "skopeo sync",
            GOAL_SYNC,
        ));
        let (ours, sync) = r.medians();
        let dst = registry(bench.tls);
        let ceiling = ceiling(bench, &src, &dst, &pushed);
        eprintln!("    {}", moved(&dst));
        let what = format!("loopback mirror to mirror (median of {n})");
        let row = |theirs_label: &str, theirs, goal| Row {
            what: what.clone(),
            ours_label: "bootstrap".into(),
            ours,
            theirs_label: theirs_label.into(),
            theirs,
            goal,
        };
        rows.push(row(
            "ceiling (parallel curl, one run)",
            ceiling,
            Some(GOAL_CEILING),
        ));
        rows.push(row("skopeo sync", sync, None));
        rows.push(Row {
            what: what.clone(),
            ours_label: "skopeo sync".into(),
            ours: sync,
            theirs_label: "ceiling (parallel curl, one run)".into(),
            theirs: ceiling,
            goal: None,
        });
        chunk_sweep(bench, &cfg, &src);
    }
    for (part, scheme, what) in [
        ("disk", "file", "mirror to disk"),
        ("archive", "archive", "mirror to an archive"),
    ] {
        if !parts.iter().any(|p| p == part) {
            continue;
        }
        let n = rounds::count();
        eprintln!("{what}, {n} alternating rounds");
        let r = to_disk(bench, &src, &cfg, &pushed, scheme, n);
        let theirs_label = format!("skopeo copy ({} runs into one OCI layout)", pushed.len());
        notes.push_str(&r.report(what, "bootstrap", &theirs_label, GOAL_DISK));
        let (ours, theirs) = r.medians();
        rows.push(Row {
            what: format!("{what} (median of {n})"),
            ours_label: "bootstrap".into(),
            ours,
            theirs_label,
            theirs,
            goal: Some(GOAL_DISK),
        });
    }
}

/// `n` alternating rounds of bootstrap mirroring `cfg` to `scheme://DIR` (file or archive)
/// against `skopeo copy` of each image in turn into one OCI layout, each run into a fresh
/// directory removed after it.
fn to_disk(
    bench: &Bench,
    src: &Registry,
    cfg: &Path,
    pushed: &[PushedImage],
    scheme: &str,
    n: usize,
) -> rounds::Rounds {
    let access = bench.access("disk", &[src], &[]);
    rounds::alternate(
        n,
        |i| {
            let dir = bench.path(&format!("{scheme}-ours-{i}"));
            let mut args = vec![
                "mirror".into(),
                "-c".into(),
                cfg.display().to_string(),
                format!("{scheme}://{}", dir.display()),
            ];
            args.extend(access.iter().cloned());
            args.extend(bootstrap_extra_args());
            args.extend(["--workdir".into(), format!("{}-state", dir.display())]);
            let m = measure("bootstrap", &bench.bin, &args);
            let _ = fs_err::remove_dir_all(&dir);
            m
        },
        |i| {
            let layout = bench.path(&format!("{scheme}-skopeo-{i}"));
            let mut theirs = Measured::default();
            for p in pushed {
                let mut args = vec!["copy".to_string()];
                args.extend(src.skopeo_src_args());
                args.push(format!("docker://{}/{}:{}", src.host(), p.repo, p.tag));
                args.push(format!("oci:{}:{}", layout.display(), p.repo));
                theirs = theirs.then(measure(&format!("skopeo copy {}", p.repo), "skopeo", &args));
            }
            let _ = fs_err::remove_dir_all(&layout);
            theirs
        },
    )
}

/// Times bootstrap's loopback mirror to mirror once per chunk size in BENCH_CHUNKS, each into a
/// fresh registry.
fn chunk_sweep(bench: &Bench, cfg: &Path, src: &Registry) {
    let Ok(list) = std::env::var("BENCH_CHUNKS") else {
        return;
    };
    for mib in list.split(',').filter_map(|v| v.trim().parse::<u64>().ok()) {
        let dst = registry(bench.tls);
        let mut access = bench.access(&format!("chunk-{mib}"), &[src, &dst], &[]);
        access.extend(["--chunk-size".into(), mib.to_string()]);
        let dest = format!("docker://{}/{PREFIX}", dst.host());
        let args = bench.mirror_args(
            &format!("chunk-{mib}"),
            &format!("chunk-{mib}"),
            cfg,
            dest,
            &access,
        );
        measure(&format!("bootstrap --chunk-size {mib}"), &bench.bin, &args);
    }
}

/// The WAN link from the environment: by default 160 ms round trip (80 ms each way, as Europe
/// to the US east coast), two handshake round trips per connection (TCP and TLS 1.3), 16 MiB/s
/// per connection.
fn wan_link() -> Link {
    Link {
        rtt: Duration::from_millis(env_u64("BENCH_WAN_RTT_MS", 160)),
        handshake_rtts: env_u64("BENCH_WAN_HANDSHAKE_RTTS", 2) as u32,
        bytes_per_sec: env_u64("BENCH_WAN_MIBPS", 16) << 20,
    }
}

fn describe_link(link: &Link) -> String {
    format!(
        "{} ms round trip per request and {} more per new connection, {} MiB/s per connection",
        link.rtt.as_millis(),
        link.handshake_rtts,
        link.bytes_per_sec >> 20
    )
}

/// WAN mirror to mirror: a plain source behind the shaped proxy, bootstrap and skopeo sync each
/// into a fresh destination of the bench's flavour.
fn wan(bench: &Bench, shape: Shape, link: Link, rows: &mut Vec<Row>) {
    let src = Registry::plain();
    eprintln!(
        "seeding {} into {} (WAN source)",
        shape.describe(),
        src.url()
    );
    let pushed = shape.set(11, "wan").push_to(&src, "");
    let proxy = FaultProxy::start_with_link(&src.host(), link).expect("starting the WAN proxy");
    eprintln!(
        "WAN mirror to mirror through {} ({})",
        proxy.host(),
        describe_link(&link)
    );
    let cfg = bench.path("wan.yaml");
    write_isc(&proxy.host(), &pushed, &cfg);
    let yaml = bench.path("wan-sync.yaml");
    write_sync_yaml(&proxy.host(), None, &pushed, &yaml);
    let dst = registry(bench.tls);
    let access = bench.access("wan", &[&dst], &[proxy.host()]);
    let dest = format!("docker://{}/{PREFIX}", dst.host());
    let ours = measure(
        "bootstrap",
        &bench.bin,
        &bench.mirror_args("wan", "wan", &cfg, dest, &access),
    );
    eprintln!(
        "    {}; {} connections to the source",
        moved(&dst),
        proxy.connections()
    );
    proxy.reset_counters();
    let dst = registry(bench.tls);
    let theirs = measure("skopeo sync", "skopeo", &sync_args(&yaml, &dst));
    eprintln!(
        "    {}; {} connections to the source",
        moved(&dst),
        proxy.connections()
    );
    rows.push(Row {
        what: "WAN mirror to mirror".into(),
        ours_label: "bootstrap".into(),
        ours,
        theirs_label: "skopeo sync".into(),
        theirs,
        goal: Some(GOAL_WAN),
    });
}

/// The wide set: many small images, then a rerun with nothing to do.
fn wide(bench: &Bench, n: u64, rows: &mut Vec<Row>) {
    let src = registry(bench.tls);
    eprintln!("seeding {n} small images into {} (wide set)", src.url());
    let pushed = wide_set(8, n).push_to(&src, "");
    let cfg = bench.path("wide.yaml");
    write_isc(&src.host(), &pushed, &cfg);
    let yaml = bench.path("wide-sync.yaml");
    write_sync_yaml(&src.host(), bench.tls.then_some(&src), &pushed, &yaml);
    let (ours_dst, theirs_dst) = (registry(bench.tls), registry(bench.tls));
    let access = bench.access("wide", &[&src, &ours_dst], &[]);
    let dest = format!("docker://{}/{PREFIX}", ours_dst.host());
    let ours_args = |name: &str| bench.mirror_args(name, "wide", &cfg, dest.clone(), &access);
    eprintln!("wide mirror to mirror, then a rerun");
    for (what, name) in [
        ("wide mirror to mirror", "wide"),
        ("wide rerun (nothing to do)", "wide-rerun"),
    ] {
        let ours = measure(&format!("bootstrap ({name})"), &bench.bin, &ours_args(name));
        let theirs = measure(
            &format!("skopeo sync ({name})"),
            "skopeo",
            &sync_args(&yaml, &theirs_dst),
        );
        rows.push(Row {
            what: what.into(),
            ours_label: "bootstrap".into(),
            ours,
            theirs_label: "skopeo sync".into(),
            theirs,
            goal: None,
        });
    }
}

/// The Markdown summary: every comparison, its goal, and whether it is met.
fn summary(rows: &[Row], method: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n{method}\n");
    out.push_str("| run | tool | wall / CPU / peak RSS | against | wall / CPU / peak RSS | time ratio | goal |\n");
    out.push_str("|---|---|---|---|---|---|---|\n");
    for row in rows {
        let ratio = row.ratio();
        let mut ratio_cell = format!("{ratio:.2}x");
        if row.theirs_label.starts_with("ceiling") {
            let _ = write!(
                ratio_cell,
                " ({:.0}% of the ceiling)",
                100.0 / ratio.max(1e-9)
            );
        }
        let goal = match row.goal {
            Some(goal) if ratio <= goal => format!("≤ {goal}x: met"),
            Some(goal) => format!("≤ {goal}x: **not met**"),
            None => "—".into(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {ratio_cell} | {goal} |",
            row.what,
            row.ours_label,
            row.ours.cell(),
            row.theirs_label,
            row.theirs.cell(),
        );
    }
    let bootstrap_rows = rows.iter().filter(|r| r.ours_label == "bootstrap");
    if let Some(peak) = bootstrap_rows.map(|r| r.ours.rss_kib / 1024).max() {
        let verdict = if peak < GOAL_RSS_MIB {
            "met"
        } else {
            "**not met**"
        };
        let _ = writeln!(out, "\nbootstrap's peak RSS over these runs: {peak} MiB (goal < {GOAL_RSS_MIB} MiB: {verdict}).");
    }
    out
}

fn main() {
    let quick = std::env::var("BENCH_SCALE").is_ok_and(|v| v == "quick");
    let (big, wan_shape, wide_n) = match quick {
        true => (
            Shape {
                images: 4,
                base_mib: 8,
                layer_mib: 4,
                big_mib: 32,
            },
            Shape {
                images: 4,
                base_mib: 4,
                layer_mib: 2,
                big_mib: 8,
            },
            10,
        ),
        false => (
            Shape {
                images: 8,
                base_mib: 256,
                layer_mib: 128,
                big_mib: 1024,
            },
            Shape {
                images: 8,
                base_mib: 32,
                layer_mib: 16,
                big_mib: 128,
            },
            150,
        ),
    };
    let big = Shape::from_env("", big);
    let wan_shape = Shape::from_env("WAN_", wan_shape);
    let wide_n = env_u64("BENCH_WIDE", wide_n);
    let link = wan_link();
    let parts: Vec<String> = std::env::var("BENCH_PARTS")
        .unwrap_or_else(|_| "loopback,wan,disk,archive,wide".into())
        .split(',')
        .map(|p| p.trim().to_string())
        .collect();
    let work = tempfile::tempdir().expect("creating the bench's directory");
    let bench = Bench {
        bin: std::env::var("BOOTSTRAP_BIN").unwrap_or_else(|_| "target/release/bootstrap".into()),
        work: work.path().to_path_buf(),
        tls: env_u64("BENCH_TLS", 1) != 0,
    };
    let started = Instant::now();
    let mut rows = Vec::new();
    let mut notes = String::new();
    if parts
        .iter()
        .any(|p| ["loopback", "disk", "archive"].contains(&p.as_str()))
    {
        loopback(&bench, big, &parts, &mut rows, &mut notes);
    }
    if parts.iter().any(|p| p == "wan") {
        wan(&bench, wan_shape, link, &mut rows);
    }
    if parts.iter().any(|p| p == "wide") && wide_n > 0 {
        wide(&bench, wide_n, &mut rows);
    }
    let flavour = match bench.tls {
        true => "TLS (per-run CA, every tool verifying it) with Basic auth",
        false => "plain HTTP",
    };
    let method = format!(
        "Registries: Distribution 2.8, {flavour}. Loopback and disk set: {}. Ceiling: curl over \
         HTTP/1.1, {} transfers at once, each distinct blob uploaded once and mounted into the \
         other repositories. WAN set: {}; source plain HTTP behind the fault proxy: {}. Wide \
         set: {wide_n} images. Bench wall time {:.0} s.",
        big.describe(),
        env_u64("BENCH_CEILING_PARALLEL", 8).max(1),
        wan_shape.describe(),
        describe_link(&link),
        started.elapsed().as_secs_f64()
    );
    println!("{}{notes}", summary(&rows, &method));
}
