//! The CLI's stat cache (`.snapgraph/index`) and its skeleton file: any bytes. Never
//! a panic; what parses writes back to bytes that parse to the same index, and
//! `clean` answers for any path.
#![no_main]

use libfuzzer_sys::fuzz_target;
use snapgraph_cli::index::{parse_skeleton, skeleton_bytes, FileStat, Index, IndexEntry};

fuzz_target!(|data: &[u8]| {
    if let Some(objects) = parse_skeleton(data) {
        assert_eq!(parse_skeleton(&skeleton_bytes(&objects)), Some(objects));
    }
    // The seeds' root; other roots are refused like a foreign index.
    let root = std::path::Path::new("/fuzz/root");
    let Some(index) = Index::parse(data, root) else {
        return;
    };
    assert_eq!(Index::parse(&index.to_bytes(), root).as_ref(), Some(&index));
    for (path, entry) in index.entries.iter().take(64) {
        let IndexEntry::File { stat, .. } = entry else {
            continue;
        };
        let clean = index.clean(path, stat).is_some();
        assert_eq!(clean, stat.mtime_ns < index.probe_ns);
        let other = FileStat {
            size: stat.size.wrapping_add(1),
            ..*stat
        };
        assert!(index.clean(path, &other).is_none());
    }
});
