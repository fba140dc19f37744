//! Capability fingerprints: what an environment offers, recorded with every commit.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::{ObjectError, ObjectKind};
use crate::id::ObjectId;

/// What an environment offers: named builtins or tools, semantic features (such as
/// `"sqlite"`), the file-system backend's name, and the engine version (informational,
/// never compared).
///
/// The embedder sets one on the workspace; every commit records it; checkout compares
/// the snapshot's fingerprint with the live one under a
/// [`CheckoutPolicy`](crate::CheckoutPolicy).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CapabilityFingerprint {
    /// Builtins, commands or tools the environment provides.
    pub builtins: BTreeSet<String>,
    /// Semantic features (`"sqlite"`, `"network"`, ...).
    pub features: BTreeSet<String>,
    /// The file-system backend's name, if the embedder names one.
    pub fs_backend: Option<String>,
    /// The embedder's engine version; informational, not compared.
    pub engine_version: Option<String>,
}

impl CapabilityFingerprint {
    /// An empty fingerprint.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a builtin.
    pub fn builtin(mut self, name: impl Into<String>) -> Self {
        self.builtins.insert(name.into());
        self
    }

    /// Adds a feature.
    pub fn feature(mut self, name: impl Into<String>) -> Self {
        self.features.insert(name.into());
        self
    }

    /// Names the file-system backend.
    pub fn fs_backend(mut self, name: impl Into<String>) -> Self {
        self.fs_backend = Some(name.into());
        self
    }

    /// Records the engine version.
    pub fn engine_version(mut self, version: impl Into<String>) -> Self {
        self.engine_version = Some(version.into());
        self
    }

    /// What `self` (a snapshot's fingerprint) has that `live` lacks: builtins,
    /// features, and the backend when they differ. Empty when `live` is a superset.
    pub fn missing_from(&self, live: &CapabilityFingerprint) -> Vec<String> {
        let mut out: Vec<String> = self
            .builtins
            .difference(&live.builtins)
            .map(|b| format!("builtin:{b}"))
            .collect();
        out.extend(
            self.features
                .difference(&live.features)
                .map(|f| format!("feature:{f}")),
        );
        if let Some(b) = &self.fs_backend {
            if live.fs_backend.as_ref() != Some(b) {
                out.push(format!("fs_backend:{b}"));
            }
        }
        out
    }

    /// Decodes a capabilities body.
    pub fn decode(id: &ObjectId, body: &[u8]) -> Result<Self, ObjectError> {
        super::decode_body(id, ObjectKind::Capabilities, body)
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        super::encode(ObjectKind::Capabilities, self)
    }
}
