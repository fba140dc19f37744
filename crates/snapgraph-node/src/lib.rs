//! Node.js bindings for snapgraph.

use napi_derive::napi;

/// The engine's format version.
#[napi]
pub fn format_version() -> u32 {
    u32::from(snapgraph::FORMAT_VERSION)
}
