//! (being written: see hostprep/mod.rs)
