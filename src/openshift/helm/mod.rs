//! Helm charts as the mirror carries them: a chart archive (`.tgz`) read safely in memory, the
//! images it references found without Helm's template engine, and the chart as the OCI
//! artifact `helm push` makes (so `helm pull oci://MIRROR/PATH/NAME --version V` takes it).
//!
//! oc-mirror v2 renders each chart with Helm's engine (default values, no overrides) and reads
//! `image` fields at four JSON paths plus the entry's `imagePaths`. bootstrap cannot run Go
//! templates, so it finds images three ways, each a subset of what rendering would give, and
//! names what it could not resolve instead of guessing:
//! 1. values (the chart's `values.yaml`, and each subchart's): a map under a key `image` or
//!    `*Image` with `repository` (+ `registry`, `tag`, `digest`), or with `name` and a
//!    registry from the map or `global.registry`/`global.imageRegistry` (KAI-Scheduler's
//!    form); an empty tag falls back to `global.tag`, then the chart's `appVersion` (the
//!    default of `helm create`'s template). A string under `image`/`*Image` that reads as a
//!    full reference (`registry/path:tag`) counts too.
//! 2. templates (`templates/*.yaml`, `crds/*.yaml`): every `{{ ... }}` that is a value
//!    expression is evaluated against the default values (`.Values.x.y`, `$.Values`,
//!    `.Chart.AppVersion`/`Version`/`Name`, string literals, pipelines through `default`,
//!    `quote`, `squote`, `toString`, `trim`, `lower`, `upper`); lines holding only actions
//!    (`if`, `range`, `include`, `toYaml`...) are dropped, so both branches of a conditional
//!    are read. Each document is then read as YAML and the paths below applied.
//! 3. paths: oc-mirror's four defaults (`{.spec.template.spec.initContainers[*].image}`,
//!    `{.spec.template.spec.containers[*].image}`, `{.spec.initContainers[*].image}`,
//!    `{.spec.containers[*].image}`) plus the entry's `imagePaths`, in the JSONPath subset
//!    `{.field.field[*].field[N]}`. A value at one of them that still holds an expression bootstrap
//!    could not evaluate (`include`, `tpl`, `printf`, a `range` variable) is reported as
//!    unresolved with its file and text; a path outside the subset is reported too.
//!
//! The parts: `chart.rs` (reading the archive), `images.rs` (the search across a chart and its
//! subcharts, and what it found), `values.rs` (1.), `template.rs` (2., the evaluation),
//! `jsonpath.rs` (3.) and `artifact.rs` (the chart as an OCI artifact).

mod artifact;
mod chart;
mod images;
mod jsonpath;
mod template;
mod values;

pub use artifact::{
    chart_artifact, version_tag, ChartArtifact, CHART_MEDIA_TYPE, CONFIG_MEDIA_TYPE,
};
pub use chart::{read_chart, Chart, MAX_CHART_BYTES};
pub use images::{find_images, FoundImages, Unresolved, DEFAULT_IMAGE_PATHS};
