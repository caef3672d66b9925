//! The site inventory: one directory (`site.yaml`, `nodes.yaml`) from which a delivery engineer
//! gets the agent installer's files. [`model`] is the format as written.

pub mod model;
