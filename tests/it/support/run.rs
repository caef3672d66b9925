//! Running the `bootstrap` binary under test the way a delivery engineer does, with a clean
//! environment (no ambient auth file, a private HOME), and reading what it wrote.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::images::PushedImage;

/// The `bootstrap` binary under test. Test binaries know it at compile time; examples sharing
/// this module (the bench, the rehearsal) are told with BOOTSTRAP_BIN.
pub fn bootstrap_bin() -> PathBuf {
    option_env!("CARGO_BIN_EXE_bootstrap")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("BOOTSTRAP_BIN").map(PathBuf::from))
        .expect("the bootstrap binary: set BOOTSTRAP_BIN")
}

/// The `bootstrap-lab` binary: BOOTSTRAP_LAB_BIN, else beside `bootstrap` in the same target
/// folder (the lab crate is a member of the workspace, so `cargo build` and `cargo nextest run`
/// at the root build both; cargo tells a package's tests only its own binaries).
pub fn lab_bin() -> PathBuf {
    let bin = std::env::var_os("BOOTSTRAP_LAB_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| bootstrap_bin().with_file_name("bootstrap-lab"));
    assert!(
        bin.is_file(),
        "{} is missing: build the lab too (`cargo build --workspace`, or set BOOTSTRAP_LAB_BIN)",
        bin.display()
    );
    bin
}

/// The command for the binary under test, environment cleaned; add args and run it.
pub fn command(args: &[&str]) -> Command {
    clean(Command::new(bootstrap_bin()), args)
}

/// The command for `bootstrap-lab`, environment cleaned as [`command`]'s.
pub fn lab_command(args: &[&str]) -> Command {
    clean(Command::new(lab_bin()), args)
}

/// Runs `bootstrap-lab` with `args` to completion.
pub fn lab(args: &[&str]) -> Output {
    lab_command(args).output().expect("running bootstrap-lab")
}

fn clean(mut cmd: Command, args: &[&str]) -> Command {
    // Files a run writes by default (status, record, working directory) land in the
    // temporary directory, never in the source tree the tests run from.
    cmd.args(args)
        .current_dir(std::env::temp_dir())
        .env_remove("REGISTRY_AUTH_FILE")
        .env("HOME", std::env::temp_dir().join("bootstrap-test-home"));
    cmd
}

/// Runs `bootstrap` with `args` to completion.
pub fn bootstrap(args: &[&str]) -> Output {
    command(args).output().expect("running bootstrap")
}

/// Stdout of a run that must have succeeded (panics with both streams otherwise).
pub fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "bootstrap failed ({:?}):\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Stderr of a run that must have failed.
pub fn failed(o: &Output) -> String {
    assert!(
        !o.status.success(),
        "bootstrap should have failed:\n{}",
        String::from_utf8_lossy(&o.stdout)
    );
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// An ImageSetConfiguration naming every pushed image by tag, as `host/repo:tag`.
pub fn write_config(dir: &Path, images: &[PushedImage], host: &str, arches: &[&str]) -> PathBuf {
    let mut text = String::from(
        "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  platform:\n    architectures: [",
    );
    text.push_str(&arches.join(", "));
    text.push_str("]\n  additionalImages:\n");
    for img in images {
        text.push_str(&format!("  - name: {host}/{}:{}\n", img.repo, img.tag));
    }
    let path = dir.join("isc.yaml");
    fs_err::write(&path, text).unwrap();
    path
}

/// An ImageSetConfiguration naming one additional image that no test registry holds, written
/// to `dir/isc.yaml`: for runs that must fail at the destination before anything is resolved.
pub fn one_image_config(dir: &Path) -> PathBuf {
    let isc = dir.join("isc.yaml");
    fs_err::write(
        &isc,
        "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  additionalImages:\n  - name: registry.example/a/b:1\n",
    )
    .unwrap();
    isc
}

/// The largest blob (a layer) of the disk mirror at `dir`, by its mirror record.
pub fn largest_layout_blob(dir: &Path) -> PathBuf {
    let rec = json(&dir.join("mirror-record.json"));
    let hex = rec["blobs"]
        .as_array()
        .unwrap()
        .iter()
        .max_by_key(|b| b["size"].as_u64())
        .unwrap()["digest"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:")
        .to_string();
    dir.join("blobs/sha256").join(hex)
}

/// A JSON file (record, status) parsed.
pub fn json(path: &Path) -> serde_json::Value {
    let text =
        fs_err::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// The disk mirror at `dir` holds blobs, and every file under `dir/blobs/sha256` hashes to its
/// name: nothing corrupt was committed. A missing or empty blob directory fails (a mirror that
/// wrote nothing is not intact).
pub fn assert_blobs_intact(dir: &Path) {
    let blobs = dir.join("blobs/sha256");
    let entries = fs_err::read_dir(&blobs)
        .unwrap_or_else(|e| panic!("reading the blob directory {}: {e}", blobs.display()));
    let mut checked = 0;
    for entry in entries {
        let path = entry.unwrap().path();
        let bytes =
            fs_err::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let actual = bootstrap::oci::digest::Digest::of(&bytes);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(actual.hex(), name, "{} is corrupt", path.display());
        checked += 1;
    }
    assert!(
        checked > 0,
        "the blob directory {} is empty",
        blobs.display()
    );
}

/// `bootstrap validate` of an install-config.yaml and agent-config.yaml pair.
pub fn validate_pair(install_config: &Path, agent_config: &Path) -> Output {
    bootstrap(&[
        "validate",
        "--install-config",
        install_config.to_str().unwrap(),
        "--agent-config",
        agent_config.to_str().unwrap(),
    ])
}

/// A path in the source tree (`inventory/lab`).
pub fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// The shipped inventory `inventory/NAME` (`lab`, `example-site`) in the source tree, its
/// secret files made their owner's alone first. Git records no mode but the executable bit, so a
/// checkout leaves them readable by all, and validation refuses the lab's private key then, as
/// OpenSSH refuses it (and warns for the other secrets); a user runs the `chmod 600` it names,
/// once, as tests do here. `copy_dir` keeps the modes.
pub fn shipped_inventory(name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = repo("inventory").join(name);
    for e in fs_err::read_dir(dir.join("secrets")).unwrap() {
        let path = e.unwrap().path();
        let public = path.extension().is_some_and(|x| x == "pub" || x == "pem");
        if !public && path.is_file() {
            fs_err::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
    }
    dir
}

/// Copies the directory tree `from` to `to` (created).
pub fn copy_dir(from: &Path, to: &Path) {
    fs_err::create_dir_all(to).unwrap();
    for e in fs_err::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            fs_err::copy(e.path(), &dest).unwrap();
        }
    }
}

/// Every file and folder under the run directory `run` that `bootstrap::install::rundir` does
/// not name, relative to it: what some stage wrote where nothing should.
pub fn unnamed_in_run(run: &Path) -> Vec<String> {
    use bootstrap::install::rundir::{names, names_dir};
    let mut unnamed = Vec::new();
    let mut pending = vec![run.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in fs_err::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(run).unwrap().to_path_buf();
            if fs_err::symlink_metadata(&path).unwrap().is_dir() {
                if names_dir(&rel) {
                    pending.push(path);
                } else {
                    unnamed.push(format!("{}/", rel.display()));
                }
            } else if !names(&rel) {
                unnamed.push(rel.display().to_string());
            }
        }
    }
    unnamed.sort();
    unnamed
}
