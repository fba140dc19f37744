//! Every object decoder on arbitrary bodies, and `object::verify` on arbitrary stored
//! bytes. A decoded value must be canonical: it re-encodes to exactly the body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use snapgraph::object::capability::CapabilityFingerprint;
use snapgraph::object::commit::CommitObject;
use snapgraph::object::manifest::Manifest;
use snapgraph::object::reads::ReadsObject;
use snapgraph::object::tree::TreeNode;
use snapgraph::object::{verify, ObjectError};
use snapgraph::ObjectId;

fn canonical<T: serde::Serialize>(value: &T, body: &[u8]) {
    let again = postcard::to_allocvec(value).expect("a decoded value encodes");
    assert_eq!(again, body, "decoded value is not canonical");
}

fn named<T>(r: &Result<T, ObjectError>, id: &ObjectId) {
    if let Err(e) = r {
        assert_eq!(e.id(), *id, "error names another object: {e}");
        assert!(!e.to_string().is_empty());
    }
}

fuzz_target!(|data: &[u8]| {
    let id = ObjectId::hash_stored(data);
    // Every decoder sees the same body: each must refuse or accept it cleanly.
    let r = TreeNode::decode(&id, data);
    named(&r, &id);
    if let Ok(v) = &r {
        canonical(v, data);
        let _ = v.totals();
    }
    let r = Manifest::decode(&id, data);
    named(&r, &id);
    if let Ok(v) = &r {
        canonical(v, data);
        let _ = v.size();
    }
    let r = CommitObject::decode(&id, data);
    named(&r, &id);
    if let Ok(v) = &r {
        canonical(v, data);
        let _ = v.snapshot_refs();
    }
    let r = CapabilityFingerprint::decode(&id, data);
    named(&r, &id);
    if let Ok(v) = &r {
        canonical(v, data);
    }
    let r = ReadsObject::decode(&id, data);
    named(&r, &id);
    if let Ok(v) = &r {
        canonical(v, data);
    }
    // As stored bytes: under their own id, the header decides; under another, corrupt.
    let r = verify(&id, data);
    named(&r, &id);
    let other = ObjectId::hash_stored(&[data, b"x"].concat());
    assert!(verify(&other, data).is_err());
});
