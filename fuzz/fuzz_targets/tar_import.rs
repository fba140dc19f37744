//! `snapgraph import`'s reader: any bytes as a tar archive. Never a panic or an
//! allocation of a declared size; what is accepted holds only valid names (nothing
//! that could become `.snapgraph`) and commits.
#![no_main]

use libfuzzer_sys::fuzz_target;
use snapgraph::{CommitOptions, EntryKind};
use snapgraph_cli::materialize::check_component;

fuzz_target!(|data: &[u8]| {
    let pb = indicatif::ProgressBar::hidden();
    // No batches (every file read whole): the checks below read every imported
    // file's bytes back.
    let Ok(mut ws) = snapgraph_cli::tarball::import(
        data,
        std::path::Path::new("fuzz.tar"),
        &pb,
        &mut snapgraph_cli::batches::Whole,
    ) else {
        return;
    };
    let mut bytes = 0u64;
    for (path, meta) in ws.walk() {
        for c in path.trim_start_matches('/').split('/') {
            assert!(check_component(c).is_ok(), "{path:?} was accepted");
        }
        if meta.kind == EntryKind::File {
            bytes += meta.size;
        }
    }
    assert!(
        bytes <= data.len() as u64 * 64,
        "more bytes than the archive could hold"
    );
    let commit = ws
        .commit(CommitOptions::new())
        .expect("an accepted archive commits");
    assert!(commit.is_complete());
});
