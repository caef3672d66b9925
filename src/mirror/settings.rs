//! What a `bootstrap mirror` run was asked to do, resolved and checked: the second phase of
//! uv's two-phase settings. `commands::mirror` builds it from the command line; the library
//! never sees clap types, and a test or another command can build one directly.

use super::resolve::select::Dependencies;
use super::transfer::TransferSettings;
use super::Location;
use crate::oci::registry::RegistryOptions;
use std::path::PathBuf;

/// Where the images to mirror are named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MirrorInput {
    /// An ImageSetConfiguration (`-c FILE`): its registries are the source.
    Config(PathBuf),
    /// A disk mirror (`--from file://DIR`): the images it holds, placed as recorded.
    Disk(PathBuf),
    /// An archive (`--from archive://DIR`): read in place, chunk by chunk.
    Archive(PathBuf),
}

/// A mirror run, resolved.
#[derive(Clone, Debug)]
pub struct MirrorSettings {
    /// What to mirror.
    pub input: MirrorInput,
    /// Where to mirror it.
    pub destination: Location,
    /// The destination as the user wrote it (for reports and the record).
    pub destination_label: String,
    /// The update graph for `mirror.platform.channels` (http(s) URL or `file://PATH`).
    pub graph_url: String,
    /// OKD's update graph for `type: okd` channels (http(s) URL or `file://PATH`).
    pub okd_graph_url: String,
    /// The update graph data tarball for `mirror.platform.graph` (http(s) URL or `file://PATH`).
    pub graph_data_url: String,
    /// The image the graph data image is layered on (`mirror.platform.graph`).
    pub graph_base_image: String,
    /// Whether catalog selections follow `olm.package.required` (`--follow-dependencies`);
    /// oc-mirror v2 does not, and neither does the default.
    pub dependencies: Dependencies,
    /// Release signatures to write into the signature ConfigMap.
    pub release_signatures: Option<PathBuf>,
    /// Limits, chunking, retries, stalls and failure handling.
    pub transfer: TransferSettings,
    /// Credentials and trust.
    pub registry: RegistryOptions,
    /// Where in-progress state is kept (default: chosen by destination).
    pub workdir: Option<PathBuf>,
    /// Plan only: resolve and report, copy and create nothing.
    pub dry_run: bool,
    /// Start even when a disk destination looks too small.
    pub ignore_free_space: bool,
    /// The largest size one blob may declare; larger is refused before download.
    pub max_blob_size: u64,
    /// Where to write the per-image status (default: chosen by destination).
    pub status_file: Option<PathBuf>,
    /// Where to write the record of a registry destination (default: a stamped name).
    pub record: Option<PathBuf>,
    /// The OpenSSH key that signs the record of a registry destination (`RECORD.sig`).
    pub sign_key: Option<PathBuf>,
    /// The most bytes one archive chunk may hold (`archive://` destinations).
    pub archive_size: u64,
    /// For an archive: the earlier archive's manifest (or a mirror record) whose content this
    /// one leaves out.
    pub since: Option<PathBuf>,
    /// Push an index of only the kept platforms when the filter dropped some.
    pub rewrite_filtered_indexes: bool,
    /// Push a disk mirror that has no mirror record, or differs from it (a layout another tool
    /// made); the report and the status file say so.
    pub accept_unrecorded: bool,
    /// Leave out the images' signatures, attestations and referrers (`--remove-signatures`),
    /// as oc-mirror's flag of that name does; by default they travel with their images.
    pub remove_signatures: bool,
}
