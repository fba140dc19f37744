//! The CLI's stat cache (`.snapgraph/index`): any bytes. Never a panic; what parses
//! writes back to JSON that parses to the same index, and `clean` answers for any
//! path.
#![no_main]

use libfuzzer_sys::fuzz_target;
use snapgraph_cli::index::{FileStat, Index};

fuzz_target!(|data: &[u8]| {
    // The seeds' root; other roots are refused like a foreign index.
    let root = std::path::Path::new("/fuzz/root");
    let Some(index) = Index::parse(data, root) else {
        return;
    };
    let again = serde_json::to_vec(&index).expect("an index serializes");
    assert_eq!(Index::parse(&again, root).as_ref(), Some(&index));
    for (path, entry) in index.entries.iter().take(64) {
        let clean = index.clean(path, &entry.stat).is_some();
        assert_eq!(clean, entry.stat.mtime_ns < index.probe_ns);
        let other = FileStat {
            size: entry.stat.size.wrapping_add(1),
            ..entry.stat
        };
        assert!(index.clean(path, &other).is_none());
    }
});
