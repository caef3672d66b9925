//! Command-line types: one Args struct per subcommand, a doc comment on every flag (they are the
//! `--help` text).

use crate::concurrency::Concurrency;
use crate::output::OutputFormat;
use clap::{Args, Parser, Subcommand};
use std::num::NonZeroUsize;
use std::path::PathBuf;

/// Take an air-gapped, bare-metal site from empty racks to an OpenShift AI GPU cluster:
/// mirror images across the air gap, and verify what was mirrored.
#[derive(Debug, Parser)]
#[command(
    name = "bootstrap",
    version,
    propagate_version = true,
    max_term_width = 100
)]
pub struct Cli {
    /// How results are printed on stdout: text for people, json for machines.
    #[arg(long, global = true, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,

    /// Log level for stderr (error, warn, info, debug, trace), or a tracing filter.
    #[arg(long, global = true, default_value = "warn", env = "BOOTSTRAP_LOG")]
    pub log: String,

    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Copy images: registry to disk (file://DIR), disk to registry (--from file://DIR
    /// docker://HOST), or registry to registry (docker://HOST), verified and recorded.
    Mirror(Box<MirrorArgs>),
    /// Model images: pack a local model directory as an OCI modelcar image.
    #[command(subcommand)]
    Model(ModelCmd),
    /// Check a disk mirror (file://DIR), an archive (archive://DIR) or a registry (--record R
    /// docker://HOST[/PREFIX]) against its record; exit 0 only when everything matches.
    Verify(VerifyArgs),
    /// Archives for removable media: cut a disk mirror into one (`archive create`).
    #[command(subcommand)]
    Archive(ArchiveCmd),
    /// The auditor's view: what an archive or a mirror record carried, in words
    /// (`audit report archive://DIR|RECORD`).
    #[command(subcommand)]
    Audit(AuditCmd),
    /// Check a hand-written install-config.yaml and/or agent-config.yaml as the agent-based
    /// installer reads them, and further; print every problem as file:line:col: path: message.
    Validate(ValidateArgs),
    /// Serve a file over HTTP for BMC virtual media: `serve iso FILE --bind ADDR`.
    #[command(subcommand)]
    Serve(ServeCmd),
    /// Release payloads in a registry: take a binary out of a mirrored release.
    #[command(subcommand)]
    Release(ReleaseCmd),
    /// Turn a site inventory (site.yaml, nodes.yaml) into the agent installer's
    /// install-config.yaml and agent-config.yaml, after checking every rule at once.
    Render(RenderArgs),
    /// Take a site from its inventory through the install pipeline's stages (validate, render,
    /// tools, iso, boot, wait, prep, handoff) in a run directory that a rerun resumes; once the
    /// cluster is installed, workers added to nodes.yaml are added by the same command (add-image,
    /// add-boot, add-join, add-prep) and nothing that runs is touched; `bootstrap install status
    /// --run DIR` shows where it stands.
    Install(InstallArgs),
    /// Host prep over SSH: connect to every node, check its hardware against the inventory and
    /// run playbooks (a subset of Ansible's format, with its semantics); a verdict per node.
    Prep(PrepArgs),
    /// One support bundle (tar.gz) from a run: its state, records and logs, every node's BMC
    /// inventory and logs (Redfish) and journals (SSH), the rendezvous host's events and the
    /// cluster's state while they answer; secrets redacted, a manifest with every file's
    /// sha256 and what could not be collected. Only reads are sent. Exit 0 when the bundle is
    /// written, even partial (the result says what is missing and why).
    Gather(GatherArgs),
    /// Read-only site preflight: every node's BMC (credentials, verified TLS, vendor, MACs and
    /// UUID, virtual media), the cluster's DNS names on the site's DNS servers, each NTP server,
    /// the site registry with its CA and the pull secret, the ISO server's address. One table,
    /// every problem with its fix; nothing is changed on any BMC or host. Exit 1 when a check
    /// fails.
    Preflight(PreflightArgs),
    /// The site's GitOps repository: scaffold it from the inventory (`gitops init`), check it
    /// (`gitops check`), hand the cluster to Argo CD (`gitops handoff`).
    #[command(subcommand)]
    Gitops(GitopsCmd),
}

/// How to reach registries: credentials and trust.
#[derive(Debug, Args, Clone, Default)]
pub struct RegistryArgs {
    /// Auth file with registry credentials (containers auth.json, docker config.json or an
    /// OpenShift pull secret). Default: $REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR/containers/auth.json,
    /// ~/.config/containers/auth.json, ~/.docker/config.json, the first that exists.
    #[arg(long, value_name = "FILE")]
    pub authfile: Option<PathBuf>,

    /// PEM file of CA certificates to trust for registries, beside the system's.
    #[arg(long, value_name = "FILE")]
    pub ca_bundle: Option<PathBuf>,

    /// Speak plain HTTP (no TLS) to this registry host[:port]. Repeat for more hosts.
    #[arg(long, value_name = "HOST")]
    pub plain_http: Vec<String>,

    /// Do not verify the TLS certificate of this registry host[:port]. Repeat for more hosts.
    #[arg(long, value_name = "HOST")]
    pub insecure_skip_tls_verify: Vec<String>,
}

/// `bootstrap mirror`.
#[derive(Debug, Args)]
pub struct MirrorArgs {
    /// ImageSetConfiguration (mirror.openshift.io/v2alpha1) naming what to mirror.
    #[arg(
        short = 'c',
        long,
        value_name = "FILE",
        required_unless_present = "from"
    )]
    pub config: Option<PathBuf>,

    /// Push a disk mirror (file://DIR written by a mirror to disk) or an archive
    /// (archive://DIR, read in place) instead of reading registries.
    #[arg(
        long,
        value_name = "file://DIR|archive://DIR",
        conflicts_with = "config"
    )]
    pub from: Option<String>,

    /// With --from: push a layout that has no mirror record, or that differs from it (one
    /// another tool made). Without it such a layout is refused before anything is pushed; with
    /// it the report and the status file say the check was skipped and why.
    #[arg(long, requires = "from")]
    pub accept_unrecorded: bool,

    /// Leave out the images' sigstore signatures, attestations and SBOMs (the
    /// `sha256-<hex>.sig`/`.att`/`.sbom` tags) and OCI referrers. By default they travel with
    /// the images they belong to, byte for byte, so the site can enforce image signatures.
    #[arg(long)]
    pub remove_signatures: bool,

    /// Where to mirror: file://DIR (an OCI layout), archive://DIR (tar chunks for removable
    /// media) or docker://HOST[:PORT][/PREFIX].
    #[arg(value_name = "DESTINATION")]
    pub destination: String,

    /// For archive://: the most one chunk may hold (4GiB, 256MiB; a plain number is GiB).
    /// Default: the configuration's archiveSize, else 4GiB. A blob larger than this goes alone
    /// into its own chunk.
    #[arg(long, value_name = "SIZE")]
    pub archive_size: Option<String>,

    /// For archive://: a delta. Leave out what this earlier archive (its manifest.json) or
    /// mirror record already carried; the new manifest names it by sha256.
    #[arg(long, value_name = "MANIFEST")]
    pub since: Option<PathBuf>,

    /// Update graph (Cincinnati) for mirror.platform.channels: an http(s) URL queried with
    /// `?channel=NAME&arch=ARCH`, or file://PATH to a saved graph (air-gapped use; `{arch}` in
    /// the path is replaced by each architecture, else the one file serves them all).
    #[arg(long, value_name = "URL", default_value = crate::mirror::content::DEFAULT_GRAPH_URL)]
    pub graph_url: String,

    /// OKD's update graph for mirror.platform.channels of `type: okd`, read as --graph-url is
    /// (oc-mirror reads them from origin-release.ci.openshift.org, and its UPDATE_URL_OVERRIDE
    /// changes OCP's graph only): an http(s) URL or file://PATH to a saved graph.
    #[arg(long, value_name = "URL", default_value = crate::mirror::content::DEFAULT_OKD_GRAPH_URL)]
    pub okd_graph_url: String,

    /// The update graph data for mirror.platform.graph: the gzip-compressed tarball of
    /// cincinnati-graph-data oc-mirror downloads (http(s) URL), or file://PATH to a saved one.
    #[arg(long, value_name = "URL",
          default_value = crate::openshift::graph_data::DEFAULT_GRAPH_DATA_URL)]
    pub graph_data_url: String,

    /// The image the update graph data image is built on (mirror.platform.graph), every
    /// platform of it, as oc-mirror builds it on UBI 9.
    #[arg(long, value_name = "IMAGE",
          default_value = crate::openshift::graph_data::DEFAULT_BASE_IMAGE)]
    pub graph_base_image: String,

    /// Follow the kept bundles' olm.package.required: add, transitively, a bundle of each
    /// required package the selection lacks (an entry with skipDependencies: true still opts
    /// out). oc-mirror v2 does not follow them, nor does the default; either way every
    /// requirement nothing in the configuration mirrors is reported as a warning.
    #[arg(long)]
    pub follow_dependencies: bool,

    /// Release signatures to write into cluster-resources/signature-configmap.yaml for the
    /// release images mirrored: a directory laid out as the signature store on
    /// mirror.openshift.com (`sha256=<hex>/signature-1`, ...) or holding `sha256-<hex>-1`, ...
    #[arg(long, value_name = "DIR")]
    pub release_signatures: Option<PathBuf>,

    /// Blobs in flight at once.
    #[arg(long, default_value_t = Concurrency::DEFAULT_BLOBS, value_name = "N")]
    pub max_concurrent_blobs: NonZeroUsize,

    /// Blob connections to one registry at once (source or destination): each blob transfer
    /// holds one, and a split blob (--range-parts) takes more only while they are free.
    #[arg(long, default_value_t = Concurrency::DEFAULT_BLOBS, value_name = "N")]
    pub max_connections_per_registry: NonZeroUsize,

    /// Upload chunk size in MiB: blobs larger than this are pushed in chunks of this size,
    /// each recorded when the registry acknowledged it, so a broken connection or a killed run
    /// costs at most one chunk.
    #[arg(long, default_value_t = crate::mirror::transfer::DEFAULT_CHUNK_MIB, value_name = "MIB",
          value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub chunk_size: u64,

    /// Connections one large blob is pulled over: a blob larger than its share of the run (the
    /// bytes of all blobs over --max-concurrent-blobs) and at least 64 MiB, the one that would
    /// otherwise finish last alone on one connection, is read from the source registry in
    /// 8 MiB `Range` requests, N at once, through a spool of N pieces in the working
    /// directory, and handed on in order. 1 reads every blob as one stream.
    #[arg(long, default_value_t = crate::mirror::transfer::DEFAULT_RANGE_PARTS, value_name = "N",
          value_parser = clap::builder::TypedValueParser::map(clap::value_parser!(u64).range(1..=16), |n| n as usize))]
    pub range_parts: usize,

    /// Bytes per `Range` request of a split blob (tests split small blobs with it).
    #[arg(long, default_value_t = crate::mirror::transfer::RANGE_PIECE, hide = true,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub range_piece: u64,

    /// Fewest bytes a blob's rest must have to be split (tests split small blobs with it).
    #[arg(long, default_value_t = crate::mirror::transfer::SPLIT_FROM, hide = true)]
    pub range_from: u64,

    /// Tries per blob (and per request outside a blob transfer) before giving up on transient
    /// failures (connection errors, HTTP 5xx and 429, cut or corrupted bodies, stalls); a
    /// blob's tries are one budget shared by all its requests. Waits back off exponentially
    /// with jitter, or as the registry's Retry-After says.
    #[arg(long, default_value_t = 6, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=100))]
    pub retries: u32,

    /// A blob stream moving less than --stall-floor bytes per second for this many seconds is
    /// abandoned and retried from where it stopped. There is no timeout per blob or image.
    #[arg(long, default_value_t = 60, value_name = "SECONDS",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub stall_timeout: u64,

    /// The throughput in bytes per second below which a stream counts as stalled.
    #[arg(long, default_value_t = 1024, value_name = "BYTES")]
    pub stall_floor: u64,

    /// Where in-progress state is kept (the upload journal that lets a rerun continue a
    /// push). Default: DIR/.bootstrap for a disk destination, ./.bootstrap-work otherwise.
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,

    /// Resolve everything and report what would be mirrored (every image, its size, the
    /// unique blobs and the bytes still to send) without copying or creating anything; the
    /// plan is also written as JSON to ./mirror-dry-run-<UTC time>.json.
    #[arg(long)]
    pub dry_run: bool,

    /// Start even when the free space at a disk destination looks too small for the bytes
    /// still to write.
    #[arg(long)]
    pub ignore_free_space: bool,

    /// The largest size one blob (layer or config) may declare, e.g. 512GiB or 4TiB; a manifest
    /// declaring more is refused before any download, with --ignore-free-space too. The default
    /// 1TiB is above any real layer (model weights included).
    #[arg(long, value_name = "SIZE", default_value = "1TiB",
          value_parser = crate::output::parse_bytes)]
    pub max_blob_size: u64,

    /// Keep going when an image fails: mirror every image that can be, record only those, and
    /// still exit non-zero. Without it the run stops at the first failure.
    #[arg(long)]
    pub continue_on_error: bool,

    /// Where to write the per-image status (JSON: ok, failed or skipped, with the error).
    /// Default: DIR/mirror-status.json for a disk destination, else
    /// ./mirror-status-<UTC time>.json beside the record.
    #[arg(long, value_name = "FILE")]
    pub status_file: Option<PathBuf>,

    /// Where to write the mirror record for a registry destination. Default:
    /// ./mirror-record-<UTC time>-<pid>.json, never replacing another. An existing FILE must be
    /// a record of the same destination: this run is added to it. (A disk mirror keeps its
    /// record in DIR.)
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,

    /// Sign the mirror record of a registry destination (RECORD.sig beside it), or an
    /// archive's manifest.json (manifest.json.sig), with this OpenSSH private key, as
    /// `ssh-keygen -Y sign -n bootstrap-mirror` does; the report gives the allowed_signers
    /// line an auditor checks it with. Read before anything is copied.
    #[arg(long, value_name = "KEY")]
    pub sign_key: Option<PathBuf>,

    /// When an image's platform filter dropped platforms from an index, push to registries an
    /// index of only the kept platforms (a new digest, recorded beside the source's). Without it
    /// the source index is pushed verbatim (sparse), which registries such as Distribution 2.x
    /// refuse.
    #[arg(long)]
    pub rewrite_filtered_indexes: bool,

    /// Registry access.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// `bootstrap archive`.
#[derive(Debug, Subcommand)]
pub enum ArchiveCmd {
    /// Cut a disk mirror into an archive: `archive create --from file://LAYOUT archive://DIR`.
    Create(ArchiveCreateArgs),
}

/// `bootstrap archive create`.
#[derive(Debug, Args)]
pub struct ArchiveCreateArgs {
    /// The disk mirror to cut (file://DIR, written by a mirror to disk).
    #[arg(long, value_name = "file://DIR")]
    pub from: String,

    /// The archive to write (archive://DIR, a new or empty directory, or an unfinished archive
    /// to continue).
    #[arg(value_name = "archive://DIR")]
    pub destination: String,

    /// The most one chunk may hold (4GiB, 256MiB; a plain number is GiB). Default 4GiB.
    #[arg(long, value_name = "SIZE")]
    pub archive_size: Option<String>,

    /// Sign manifest.json with this OpenSSH private key (manifest.json.sig beside it).
    #[arg(long, value_name = "KEY")]
    pub sign_key: Option<PathBuf>,
}

/// `bootstrap audit`.
#[derive(Debug, Subcommand)]
pub enum AuditCmd {
    /// Print what an archive or a mirror record carried, in words an auditor reads.
    ///
    /// Releases and their versions, operators with their channels and bundle versions, models,
    /// other images, counts and sizes, the tool, when, the configuration's sha256, an archive's
    /// chunks and base, and who signed it; what the source cannot tell is said. Reads only what
    /// it describes (each piece checked against its digest); `bootstrap verify` checks every
    /// byte. Exit 1 when the signature is bad.
    Report(AuditReportArgs),
}

/// How `audit report` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AuditFormat {
    /// Plain text.
    Text,
    /// Markdown, for a ticket or a change record.
    Markdown,
    /// JSON (the same as --output json).
    Json,
}

/// `bootstrap audit report`.
#[derive(Debug, Args)]
pub struct AuditReportArgs {
    /// What to report on: archive://DIR (an archive's manifest.json, its chunks and
    /// manifest.json.sig), or a mirror record file (a registry mirror's --record, with
    /// RECORD.sig beside it; or DIR/mirror-record.json of a disk mirror).
    #[arg(value_name = "archive://DIR|RECORD")]
    pub source: String,

    /// The report's form. Default: text, or json with --output json.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<AuditFormat>,

    /// Check the signature against this allowed_signers file, as `ssh-keygen -Y verify -n
    /// bootstrap-mirror` does, and name the signer it lists; a missing or wrong signature
    /// fails. Without it the signing key's fingerprint is shown, unvouched for.
    #[arg(long, value_name = "FILE")]
    pub allowed_signers: Option<PathBuf>,
}

/// `bootstrap verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// What to check: file://DIR, archive://DIR, or docker://HOST[:PORT][/PREFIX] with --record.
    #[arg(value_name = "TARGET")]
    pub target: String,

    /// The mirror record to check a registry against (a disk mirror carries its own).
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,

    /// Check the signature (RECORD.sig of --record, or an archive's manifest.json.sig) against
    /// this allowed_signers file, as `ssh-keygen -Y verify -n bootstrap-mirror` does; a missing
    /// or wrong signature fails.
    #[arg(long, value_name = "FILE")]
    pub allowed_signers: Option<PathBuf>,

    /// Registry access.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// `bootstrap validate`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("files").required(true).multiple(true).args(["install_config", "agent_config"])))]
pub struct ValidateArgs {
    /// install-config.yaml to check.
    #[arg(long, value_name = "FILE")]
    pub install_config: Option<PathBuf>,

    /// agent-config.yaml to check. With --install-config, the rules across both files run too.
    #[arg(long, value_name = "FILE")]
    pub agent_config: Option<PathBuf>,
}

/// `bootstrap model`.
#[derive(Debug, Subcommand)]
pub enum ModelCmd {
    /// Pack a model directory as an OCI "modelcar" image (files under /models, one layer per
    /// large file, each file's sha256 recorded) into an OCI layout that `bootstrap mirror
    /// --from` pushes like any image.
    Pack(ModelPackArgs),
}

/// `bootstrap model pack`.
#[derive(Debug, Args)]
pub struct ModelPackArgs {
    /// The model's directory (its files land under /models in the image).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// The image's name and tag, e.g. registry.example:5000/models/granite:3.1; `bootstrap
    /// mirror --from` pushes it there.
    #[arg(value_name = "REFERENCE")]
    pub reference: String,

    /// The OCI layout to write (created when missing; other images in it are kept).
    #[arg(
        long,
        value_name = "file://DIR",
        default_value = "file://models-layout"
    )]
    pub layout: String,

    /// Files of at least this many MiB get a layer of their own, so a changed shard is sent
    /// again alone; smaller files share one layer.
    #[arg(long, default_value_t = 64, value_name = "MIB")]
    pub layer_threshold_mib: u64,
}

/// `bootstrap serve`.
#[derive(Debug, Subcommand)]
pub enum ServeCmd {
    /// Serve one file (the agent ISO) at http://ADDR/<file name> until Ctrl-C: HEAD, single
    /// byte ranges, a strong ETag (its sha256) and Last-Modified, as BMC virtual media need.
    Iso(ServeIsoArgs),
    /// Serve a disk mirror (file://DIR) or an archive (archive://DIR) as a read-only OCI registry until Ctrl-C: pulls by tag
    /// and digest, blobs with ranges, tags/list and _catalog; every byte verified before it is
    /// sent. A repository is an image's source path without its registry host.
    Registry(ServeRegistryArgs),
}

/// `bootstrap serve registry`.
#[derive(Debug, Args)]
pub struct ServeRegistryArgs {
    /// What to serve: a disk mirror (file://DIR) or an archive read in place (archive://DIR).
    #[arg(value_name = "SOURCE")]
    pub source: String,

    /// Where an archive's small files (index.json, the record) are copied out to
    /// (default: ./.bootstrap-work).
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,

    /// The address to listen on (HOST:PORT; port 0 picks a free one).
    #[arg(long, value_name = "ADDR")]
    pub bind: std::net::SocketAddr,

    /// Serve over TLS with this certificate chain (PEM); needs --tls-key.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// The certificate's private key (PEM); needs --tls-cert.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

/// `bootstrap serve iso`.
#[derive(Debug, Args)]
pub struct ServeIsoArgs {
    /// The file to serve.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,

    /// The address to listen on, on the BMC network (HOST:PORT; port 0 picks a free one).
    #[arg(long, value_name = "ADDR")]
    pub bind: std::net::SocketAddr,

    /// Serve over TLS with this certificate chain (PEM); needs --tls-key.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// The certificate's private key (PEM); needs --tls-cert.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

/// `bootstrap release`.
#[derive(Debug, Subcommand)]
pub enum ReleaseCmd {
    /// Take openshift-install, openshift-baremetal-install or oc out of a mirrored release
    /// (by digest), each layer verified as it streams, and pin it to that release as
    /// `oc adm release extract --command` does; a binary without the release placeholder is
    /// refused.
    Extract(ReleaseExtractArgs),
}

/// `bootstrap release extract`.
#[derive(Debug, Args)]
pub struct ReleaseExtractArgs {
    /// The release image as the mirror placed it, by digest:
    /// docker://HOST[:PORT]/PREFIX/openshift/release-images@sha256:...
    #[arg(value_name = "RELEASE")]
    pub release: String,

    /// The mirror record: its release components are looked for where it says they were
    /// mirrored (its image digest mirror set).
    #[arg(long, value_name = "FILE", conflicts_with = "idms_file")]
    pub record: Option<PathBuf>,

    /// An ImageDigestMirrorSet file (idms-oc-mirror.yaml, or one another mirroring tool
    /// wrote), as `oc adm release extract --idms-file`: the components are looked for at its
    /// mirrors. Without it or --record they are read where image-references names them.
    #[arg(long, value_name = "FILE")]
    pub idms_file: Option<PathBuf>,

    /// The binary: openshift-install, openshift-baremetal-install or oc.
    #[arg(long, value_name = "NAME")]
    pub command: String,

    /// The directory to write it to (created when missing).
    #[arg(long, value_name = "DIR")]
    pub to: PathBuf,

    /// The architecture of a multi-architecture release to take the binary for.
    #[arg(long, value_name = "ARCH", default_value = "amd64")]
    pub arch: String,

    /// Registry access.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// `bootstrap render`.
#[derive(Debug, Args)]
pub struct RenderArgs {
    /// The inventory directory (site.yaml, nodes.yaml and the files they reference).
    #[arg(long, value_name = "DIR")]
    pub inventory: PathBuf,

    /// Where to write install-config.yaml and agent-config.yaml (created when missing; the two
    /// files are replaced). Nothing is written when the inventory has a problem.
    #[arg(long, value_name = "RUNDIR")]
    pub out: PathBuf,
}

/// `bootstrap preflight`.
#[derive(Debug, Args)]
pub struct PreflightArgs {
    /// The site inventory directory (site.yaml, nodes.yaml).
    #[arg(long, value_name = "DIR")]
    pub inventory: PathBuf,

    /// Each BMC request's time limit.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = parse_duration)]
    pub bmc_timeout: std::time::Duration,

    /// Each DNS and NTP try's time limit (two tries each).
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    pub udp_timeout: std::time::Duration,
}

/// `bootstrap install`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct InstallArgs {
    /// `status`, or nothing to run the pipeline.
    #[command(subcommand)]
    pub command: Option<InstallCmd>,

    /// The inventory directory (site.yaml, nodes.yaml and the files they reference).
    #[arg(long, value_name = "DIR", required = true)]
    pub inventory: Option<PathBuf>,

    /// The run directory: every stage's outputs, state.json, logs/ (created when missing).
    #[arg(long, value_name = "RUN", required = true)]
    pub run: Option<PathBuf>,

    /// Run this stage again even if nothing changed, and go on from it; the stages before it
    /// must be done.
    #[arg(long, value_name = "STAGE",
          value_parser = clap::builder::PossibleValuesParser::new(crate::install::Stage::NAMES))]
    pub from: Option<String>,

    /// Stop after this stage (exit 0 when every stage up to it is done).
    #[arg(long, value_name = "STAGE",
          value_parser = clap::builder::PossibleValuesParser::new(crate::install::Stage::NAMES))]
    pub until: Option<String>,

    /// Use this openshift-install instead of the one in the mirrored release (its sha256 is
    /// recorded; bootstrap does not pin it, and refuses one that was never pinned).
    #[arg(long, value_name = "PATH")]
    pub installer: Option<PathBuf>,

    /// Reset this node again in the boot stage (add-boot for a node being added on day two)
    /// although an earlier run already reset it (repeatable). Without it a node that was reset
    /// is never reset again; a node of an installed cluster is never reset.
    #[arg(long, value_name = "NODE")]
    pub reboot: Vec<String>,

    /// Allow this cluster API host (`HOST` or `HOST:PORT`, as the kubeconfig's server names
    /// it) a plain `http://` server or `insecure-skip-tls-verify: true` in the kubeconfig;
    /// without it both are refused, since the kubeconfig's credentials would cross unprotected.
    /// Said in every status line and recorded in the result. Repeat for more hosts.
    #[arg(long, value_name = "HOST")]
    pub insecure_api: Vec<String>,

    /// How long the boot stage gives each node, after its reset, to show that it booted the ISO
    /// (its agent registered with the rendezvous host, or its BMC read the ISO from bootstrap's
    /// server); a node without that sign is reported as having booted something else, e.g. `30m`.
    #[arg(long, value_name = "DURATION", default_value = "30m", value_parser = crate::cli::parse_duration)]
    pub boot_timeout: std::time::Duration,

    /// How long the wait stage waits for bootstrap to complete (as `openshift-install agent
    /// wait-for bootstrap-complete`), e.g. `60m`, `2h`.
    #[arg(long, value_name = "DURATION", default_value = "60m", value_parser = crate::cli::parse_duration)]
    pub bootstrap_timeout: std::time::Duration,

    /// How long the wait stage then waits for the install to complete, e.g. `90m`; on day two,
    /// how long add-join waits for the new nodes to join.
    #[arg(long, value_name = "DURATION", default_value = "90m", value_parser = crate::cli::parse_duration)]
    pub install_timeout: std::time::Duration,
}

/// `bootstrap install` subcommands.
#[derive(Debug, Subcommand)]
pub enum InstallCmd {
    /// Print where a run stands: each stage's status, duration and a one-line detail.
    Status(InstallStatusArgs),
}

/// `bootstrap install status`.
#[derive(Debug, Args)]
pub struct InstallStatusArgs {
    /// The run directory.
    #[arg(long, value_name = "RUN")]
    pub run: PathBuf,
}

/// `bootstrap gather`.
#[derive(Debug, Args)]
pub struct GatherArgs {
    /// The inventory directory the run was installed from (its nodes, BMCs and secrets).
    #[arg(long, value_name = "DIR")]
    pub inventory: PathBuf,

    /// The run directory.
    #[arg(long, value_name = "RUN")]
    pub run: PathBuf,

    /// Where to write the bundle (default: RUN/gather/gather-<UTC time>.tar.gz).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,

    /// How long each node (and the rendezvous host with the cluster API) may take; what is not
    /// read by then is listed as not collected, e.g. `2m`, `30s`.
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = crate::cli::parse_duration)]
    pub node_timeout: std::time::Duration,

    /// Allow this cluster API host a plain or unverified connection, as `bootstrap install
    /// --insecure-api` (repeatable).
    #[arg(long, value_name = "HOST")]
    pub insecure_api: Vec<String>,
}

/// `bootstrap prep`.
#[derive(Debug, Args)]
pub struct PrepArgs {
    /// Playbooks to run, in order (default: the inventory's prep.playbooks).
    #[arg(value_name = "PLAYBOOK")]
    pub playbooks: Vec<PathBuf>,

    /// The site inventory directory: its nodes are the hosts, their hardware is checked.
    #[arg(
        long,
        value_name = "DIR",
        required_unless_present = "ansible_inventory"
    )]
    pub inventory: Option<PathBuf>,

    /// An Ansible inventory file (INI or YAML) naming the hosts instead; no hardware checks.
    #[arg(
        short = 'i',
        long = "ansible-inventory",
        value_name = "FILE",
        conflicts_with = "inventory"
    )]
    pub ansible_inventory: Option<PathBuf>,

    /// The run directory (the install's): ledger/known_hosts, prep/ (facts, verdicts, the Ansible
    /// inventory for ansible-playbook).
    #[arg(long, value_name = "RUN")]
    pub run: PathBuf,

    /// Hosts worked on at once (default: prep.forks, else 10).
    #[arg(short = 'f', long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub forks: Option<u32>,

    /// Report what would change; change nothing.
    #[arg(short = 'C', long)]
    pub check: bool,

    /// Show the changes of copy, template and lineinfile as unified diffs.
    #[arg(short = 'D', long)]
    pub diff: bool,

    /// Only these hosts (an Ansible host pattern: names, groups, `a:b`, `!x`).
    #[arg(short = 'l', long, value_name = "PATTERN")]
    pub limit: Option<String>,

    /// An extra variable, over every other: KEY=VALUE (a string) or a JSON object (repeatable).
    #[arg(short = 'e', long = "extra-vars", value_name = "KEY=VALUE")]
    pub extra_vars: Vec<String>,

    /// Skip the hardware facts and checks; run the playbooks only.
    #[arg(long)]
    pub skip_checks: bool,

    /// How long to keep trying a node that does not answer (it may be rebooting), e.g. `10m`.
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = crate::cli::parse_duration)]
    pub reachable_within: std::time::Duration,
}

pub use crate::output::{parse_duration, parse_duration_ms};

/// `bootstrap gitops`.
#[derive(Debug, Subcommand)]
pub enum GitopsCmd {
    /// Write the site's GitOps repository into DIR from the inventory: the root Application,
    /// one child Application per component in sync waves, the operators from the mirrored
    /// catalogs, the standard tenant and one overlay per tenant, a README.
    Init(GitopsInitArgs),
    /// Check a GitOps repository as Argo CD and the cluster will read it: every Application and
    /// AppProject against the Argo CD CRDs (and Argo CD's own rules), built-in kinds against
    /// their Kubernetes types, every Kustomize folder built with `kubectl kustomize`. Prints
    /// file:line:col: path: message; exit 0 clean, 1 problems found, 2 the check cannot run.
    Check(GitopsCheckArgs),
    /// Hand the cluster over to Argo CD, as the install's handoff stage does: the mirror's
    /// cluster resources, OpenShift GitOps from the mirrored catalog, the repository's
    /// credentials, the tenants' RBAC and health check, the root Application; each wait
    /// observed until the root and every child are Synced and Healthy.
    Handoff(GitopsHandoffArgs),
}

/// `bootstrap gitops handoff`.
#[derive(Debug, Args)]
pub struct GitopsHandoffArgs {
    /// The inventory directory (site.yaml with its gitops section and mirror record).
    #[arg(long, value_name = "DIR")]
    pub inventory: PathBuf,

    /// The cluster's admin kubeconfig (the install's RUN/iso/work/auth/kubeconfig).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: PathBuf,

    /// Allow this cluster API host (`HOST` or `HOST:PORT`, as the kubeconfig's server names
    /// it) a plain `http://` server or `insecure-skip-tls-verify: true` in the kubeconfig;
    /// without it both are refused, since the kubeconfig's credentials would cross unprotected.
    /// Said in every status line and recorded in the result. Repeat for more hosts.
    #[arg(long, value_name = "HOST")]
    pub insecure_api: Vec<String>,

    /// Where applied.json and handoff.json are written.
    #[arg(long, value_name = "DIR", default_value = "handoff")]
    pub out: PathBuf,

    /// The limit on all waits together (default: gitops.waitTimeout, else 30m).
    #[arg(long, value_name = "DURATION", value_parser = crate::cli::parse_duration)]
    pub timeout: Option<std::time::Duration>,

    /// How often a wait asks the cluster again, in milliseconds (default 2000).
    #[arg(long, value_name = "MS", hide = true)]
    pub poll_ms: Option<u64>,
}

/// `bootstrap gitops check`.
#[derive(Debug, Args)]
pub struct GitopsCheckArgs {
    /// The repository's checkout.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// The repository's own URL: an Application whose repoURL is this one must name a path
    /// that exists in DIR.
    #[arg(long, value_name = "URL", conflicts_with = "inventory")]
    pub repo_url: Option<String>,

    /// The site inventory whose gitops.repository.url is the repository's own URL (as
    /// --repo-url).
    #[arg(long, value_name = "DIR")]
    pub inventory: Option<PathBuf>,

    /// The kubectl that builds Kustomize folders.
    #[arg(long, value_name = "PATH", default_value = "kubectl")]
    pub kubectl: PathBuf,
}

/// `bootstrap gitops init`.
#[derive(Debug, Args)]
pub struct GitopsInitArgs {
    /// Where to write the repository (created when missing; refused when not empty, unless
    /// --force).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// The inventory directory (site.yaml with its gitops section, nodes.yaml).
    #[arg(long, value_name = "DIR")]
    pub inventory: PathBuf,

    /// Write into a DIR that holds files: only the files gitops init owns are rewritten (those
    /// whose content differs), others are left alone; the summary lists what changed.
    #[arg(long)]
    pub force: bool,
}
