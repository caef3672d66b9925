//! `bootstrap install`: a site taken from its inventory through fixed stages (`validate ->
//! render -> tools -> iso -> boot -> wait -> prep -> handoff`, [`stage`]) in a run directory
//! ([`rundir`]) that survives a killed laptop and a rerun the next morning: [`state`] records
//! each stage's inputs and outputs by hash, [`runner`] skips what is unchanged and resumes what
//! was interrupted, under a [`lock`], logging each stage to its own [`log`]; [`status`] reads
//! the state back. Domain code (render, Redfish, SSH, the assisted-service watch, Kubernetes)
//! never sees the run directory: the stage adapters in [`stage`] do, with every name in it
//! from [`rundir`].

pub mod daytwo;
pub mod gather;
pub mod hashes;
pub mod lock;
pub mod log;
pub mod rundir;
pub mod runner;
pub mod stage;
pub mod state;
pub mod status;

pub use runner::{run, Ending, InstallReport, InstallSettings, Signal, StageReport};
pub use stage::{Stage, WaitLimits};
pub use status::{status, StatusReport};
