//! The CLI's stat cache (`.snapgraph/index`) and its skeleton file: any bytes. Never
//! a panic; what parses writes back to bytes that parse to the same index, and
//! `clean` answers for any path. An index that parses, read from a file and saved
//! with a change derived from it (paths removed, entries restatted, paths added),
//! by a journal record or a new base as the journal's bounds decide, reads back as
//! that change applied, and read in part through its block table agrees with the
//! whole; any bytes as the block table are never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use snapgraph_cli::index::{parse_skeleton, skeleton_bytes, Delta, FileStat, Index, IndexEntry};

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
    journal(data, &index, root);
});

/// Saves a change of `index` (parsed from `data`) after `data` in a file and reads it
/// back: the change applied, whether it was appended as a record (a file whose
/// journal is whole and small) or written as a new base (a torn tail, a long
/// journal, too many changes, no block table: the first save, unless the table
/// left by an earlier input names the same base), then a second change after it.
fn journal(data: &[u8], index: &Index, root: &std::path::Path) {
    let dir =
        std::env::temp_dir().join(format!("snapgraph-fuzz-stat-cache-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let path = dir.join("index");
    std::fs::write(&path, data).expect("the index file written");
    let loaded = Index::load(&path, root).expect("bytes that parse load from a file");
    assert_eq!(&loaded, index);
    let delta = change_of(index);
    let mut expected = loaded.clone();
    expected.apply(delta.clone());
    loaded.save_delta(&path, delta).expect("the change saved");
    let read = Index::load(&path, root).expect("a saved index reads back");
    assert_eq!(read, expected);
    // Saved with its block table now: a second change is appended to it (or makes
    // a new base, as the bounds decide).
    let again = change_of(&read);
    let mut expected = read.clone();
    expected.apply(again.clone());
    read.save_delta(&path, again)
        .expect("the second change saved");
    let read = Index::load(&path, root).expect("a saved index reads back");
    assert_eq!(read, expected);
    part(data, &path, &read, root);
}

/// A change of `index`: paths removed, entries restatted, paths added.
fn change_of(index: &Index) -> Delta {
    let mut delta = Delta {
        probe_ns: index.probe_ns.wrapping_add(1),
        tip: index.tip,
        removed: Vec::new(),
        upserts: Vec::new(),
    };
    for (i, (path, entry)) in index.entries.iter().enumerate().take(256) {
        match i % 5 {
            0 => delta.removed.push(path.to_string()),
            1 => {
                if let IndexEntry::File { stat, digest } = entry {
                    let stat = FileStat {
                        size: stat.size ^ 1,
                        ..*stat
                    };
                    let digest = digest.clone();
                    delta
                        .upserts
                        .push((path.to_string(), IndexEntry::File { stat, digest }));
                }
            }
            2 => delta.upserts.push((format!("{path}~"), entry.clone())),
            _ => {}
        }
    }
    delta
}

/// The saved index read in part (through the block table its save wrote) for a few
/// of its paths: what it holds is what the whole index holds, with the whole's
/// counts. Then the fuzz bytes as the table: never a panic.
fn part(data: &[u8], path: &std::path::Path, whole: &Index, root: &std::path::Path) {
    let watched: Vec<String> = whole
        .entries
        .keys()
        .step_by(7)
        .take(8)
        .filter(|p| p.starts_with('/') && *p != "/")
        .map(str::to_string)
        .collect();
    let watched = snapgraph_cli::scan::minimal(watched);
    if let Some(part) = Index::open_part(path, root).and_then(|o| o.read(&watched)) {
        assert!(part.is_part());
        assert_eq!(part.tip, whole.tip);
        assert_eq!(part.entry_count(), whole.entries.len());
        assert_eq!(part.file_count(), whole.file_count());
        for (p, e) in part.entries.iter() {
            assert_eq!(whole.entries.get(p), Some(e), "{p}");
        }
        for w in &watched {
            assert_eq!(whole.entries.get(w), part.entries.get(w), "{w}");
        }
    }
    let table = path.with_extension("table");
    std::fs::write(&table, data).expect("the table written");
    if let Some(part) = Index::open_part(path, root).and_then(|o| o.read(&watched)) {
        assert!(part.is_part());
    }
}
