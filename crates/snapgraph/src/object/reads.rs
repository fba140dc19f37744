//! Recorded external reads: what a run read from outside its workspace.

use serde::{Deserialize, Serialize};

use super::{ObjectError, ObjectKind};
use crate::id::ObjectId;

/// One read of an external source (an S3 object, a Drive file, a blob at a commit).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ExternalRead {
    /// The source, as a URI.
    pub source: String,
    /// The backend's fingerprint of what was read (an ETag or similar).
    pub fingerprint: String,
    /// A stable revision (S3 VersionId, Drive revisionId, git commit), when the backend
    /// has one. A read with a revision is a pin: restoring serves that revision.
    pub revision: Option<String>,
    /// How many bytes were read.
    pub size: u64,
    /// The workspace path where the bytes were cached, if they were.
    pub cached_at: Option<String>,
}

/// The stored list of a commit's reads: sorted by source, one record per source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadsObject(pub Vec<ExternalRead>);

impl ReadsObject {
    /// Decodes and checks a reads body.
    pub fn decode(id: &ObjectId, body: &[u8]) -> Result<Self, ObjectError> {
        let r: ReadsObject = super::decode_body(id, ObjectKind::Reads, body)?;
        for read in &r.0 {
            // Recording normalizes the path, so a stored one is always normalized: a
            // caller may use it as a workspace path without checking it again.
            if let Some(p) = &read.cached_at {
                let normal = crate::path::parse(p).is_ok_and(|c| crate::path::join(&c) == *p);
                if !normal {
                    return Err(ObjectError::malformed(
                        *id,
                        ObjectKind::Reads,
                        format!("cached_at {p:?} is not a normalized workspace path"),
                    ));
                }
            }
        }
        for w in r.0.windows(2) {
            if w[0].source >= w[1].source {
                return Err(ObjectError::malformed(
                    *id,
                    ObjectKind::Reads,
                    format!("sources not strictly sorted at {:?}", w[1].source),
                ));
            }
        }
        Ok(r)
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        super::encode(ObjectKind::Reads, self)
    }
}
