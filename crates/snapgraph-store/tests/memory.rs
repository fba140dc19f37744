//! The memory adapter passes the conformance suite.

use snapgraph_store::{conformance, MemoryStore};

#[test]
fn memory_store_conforms() {
    conformance::run(&MemoryStore::new());
}
