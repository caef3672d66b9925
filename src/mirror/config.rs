//! placeholder, owned by the config helper
