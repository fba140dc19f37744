//! The stat cache (`.snapgraph/index`) and its invalidation rules: whatever the
//! cache holds, a commit records the working directory as it is (see the docs of
//! `snapgraph_cli::index`).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use proptest::prelude::*;
use snapgraph_cli::index::{FileStat, Index, IndexEntry};
use snapgraph_cli::scan::{self, ScanOptions};

mod common;
use common::*;

/// A repository with a few aged files, committed, then committed again with nothing
/// changed (so the index is complete for the tip and the fast path is armed).
fn armed() -> tempfile::TempDir {
    let t = repo();
    write(t.path(), "a.txt", b"alpha");
    write(t.path(), "d/b.txt", b"bravo");
    write(t.path(), "d/e/c.txt", b"charlie");
    std::fs::create_dir_all(t.path().join("empty")).unwrap();
    std::os::unix::fs::symlink("a.txt", t.path().join("link")).unwrap();
    age(t.path());
    ok(t.path(), &["commit", "-m", "one"]);
    let none = json(t.path(), &["commit", "-m", "same"]);
    assert_eq!(none["nothing_to_commit"], true, "{none}");
    assert_eq!(none["files_read"], 0, "{none}");
    assert_eq!(none["files_skipped"], 3, "{none}");
    t
}

/// A no-change turn leaves its SQLite store to the process's exit (the empty WAL
/// and the shared-memory file stay): the next commands read and write it as after a
/// close, and the next write's close removes them.
#[test]
fn a_no_change_turn_leaves_a_store_the_next_commands_use() {
    let t = armed();
    let dot = t.path().join(".snapgraph");
    // `armed` ended with a no-change turn.
    assert!(
        dot.join("store.db-wal").exists(),
        "the no-change turn closed the store"
    );
    for _ in 0..3 {
        settled(t.path());
    }
    write(t.path(), "d/b.txt", b"bravo, edited");
    let after = json(t.path(), &["commit", "-m", "two"]);
    assert_eq!(after["files_read"], 1, "{after}");
    assert!(
        !dot.join("store.db-wal").exists(),
        "the writing command's close"
    );
    assert!(ok(t.path(), &["log"]).contains("two"));
    ok(t.path(), &["verify"]);
    // The edited file is racy for one turn (written within the probe's tick).
    let none = json(t.path(), &["commit", "-m", "same"]);
    assert_eq!(none["nothing_to_commit"], true, "{none}");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    ok(
        t.path(),
        &["checkout", "main", "--to", out.to_str().unwrap()],
    );
    assert_eq!(
        std::fs::read(out.join("d/b.txt")).unwrap(),
        b"bravo, edited"
    );
}

/// A switch (a clean working directory's `checkout REV`, which writes what differs)
/// records what it wrote under a clock probe taken after writing it, as a full
/// checkout does, so the next command trusts those files; every entry it kept that
/// was racy under the old probe stays racy under the new one (a file's record
/// smudged, its digest kept; a directory's listing forgotten). The working
/// directory's records otherwise stand: the next commands find it as committed.
#[test]
fn a_switch_vouches_for_what_it_wrote_and_keeps_racy_entries_racy() {
    let t = armed();
    write(t.path(), "d/b.txt", b"bravo two");
    write(t.path(), "n/new.txt", b"new");
    age(t.path());
    ok(t.path(), &["commit", "-m", "two"]);
    // Every file was aged to one instant: a probe of that instant makes all of
    // them (and every directory's listing, younger) racy.
    let at = t.path().join(".snapgraph/index");
    let mut before = Index::load(&at, t.path()).expect("an index");
    let Some(IndexEntry::File { stat, .. }) = before.entries.get("/a.txt") else {
        panic!("a.txt is recorded")
    };
    before.probe_ns = stat.mtime_ns;
    before.save(&at).unwrap();
    let racy = |ix: &Index, p: &str| match ix.entries.get(p) {
        Some(IndexEntry::File { stat, .. } | IndexEntry::Symlink { stat }) => {
            !ix.trusted(stat, &FileStat::lstat(&t.path().join(&p[1..])).unwrap())
        }
        other => panic!("{p} recorded as {other:?}"),
    };
    let kept = ["/a.txt", "/d/e/c.txt", "/link"];
    assert!(kept.iter().all(|p| racy(&before, p)));

    let (out, _) = checkout_switched(t.path(), "main~1");
    assert_eq!(out["files"], 3, "{out}");
    let after = Index::load(&at, t.path()).expect("an index");
    assert!(after.probe_ns > before.probe_ns, "the probe moved on");
    assert!(after.tip.is_some(), "complete for the commit checked out");
    // What was written is recorded with its stat now, older than (or as old as)
    // the probe: trusted unless written in the probe's own tick.
    let written = FileStat::lstat(&t.path().join("d/b.txt")).unwrap();
    match after.entries.get("/d/b.txt") {
        Some(IndexEntry::File { stat, .. }) => assert_eq!(stat, &written),
        other => panic!("d/b.txt recorded as {other:?}"),
    }
    assert!(written.mtime_ns <= after.probe_ns);
    assert!(after.entries.get("/n/new.txt").is_none());
    // What was kept and racy is read again, and what it recorded still serves.
    for p in kept {
        assert!(racy(&after, p), "{p} trusted after the switch");
    }
    let digest = |ix: &Index| match ix.entries.get("/a.txt") {
        Some(IndexEntry::File { digest, .. }) => digest.clone(),
        other => panic!("a.txt recorded as {other:?}"),
    };
    assert_eq!(digest(&after), digest(&before));
    for (p, e) in after.entries.iter() {
        if let IndexEntry::Dir { listing: Some(l) } = e {
            assert!(
                l.stat.mtime_ns < before.probe_ns,
                "{p}: a racy listing kept"
            );
        }
    }
    // The records hold: nothing differs, whichever entries are read again.
    let status = json(t.path(), &["status"]);
    assert_eq!(status["changes"], serde_json::json!([]), "{status}");
    assert_status_is_the_full_scans(t.path());
}

/// `restore` from the commit the stat cache is complete for (HEAD's) records what it
/// wrote as a switch does: the next `status` and commit read none of it (before,
/// every file restored was read by every `status` until a commit). The records
/// never hide a change: a same-size edit just after, with the old mtime put back,
/// is committed. A restore from another commit leaves the cache as it was.
#[test]
fn a_restore_from_the_tip_vouches_for_what_it_wrote() {
    let t = armed();
    let root = t.path();
    let at = root.join(".snapgraph/index");
    std::fs::remove_dir_all(root.join("d")).unwrap();
    write(root, "a.txt", b"uncommitted");
    let before = Index::load(&at, root).expect("an index");
    let tip = before.tip.expect("complete for the tip");
    ok(root, &["restore", "--force", "d", "a.txt"]);
    let after = Index::load(&at, root).expect("an index");
    assert_eq!(after.tip, Some(tip), "still complete for the tip");
    assert!(after.probe_ns >= before.probe_ns);
    for p in ["/a.txt", "/d/b.txt", "/d/e/c.txt"] {
        let now = FileStat::lstat(&root.join(&p[1..])).unwrap();
        match after.entries.get(p) {
            Some(IndexEntry::File { stat, .. }) => assert_eq!(stat, &now, "{p}"),
            other => panic!("{p} recorded as {other:?}"),
        }
        assert!(now.mtime_ns <= after.probe_ns, "{p}");
    }
    assert_eq!(after.entries.len(), before.entries.len());
    let status = json(root, &["status"]);
    assert_eq!(status["changes"], serde_json::json!([]), "{status}");
    assert_status_is_the_full_scans(root);
    rewrite_keeping_mtime(root, "d/b.txt", b"BRAVO");
    let out = commit_records_the_directory(root);
    assert_eq!(out["files_changed"], 1, "{out}");

    // From another commit: what was written differs from the tip, and the cache
    // is left alone (the next commit reads it as any change).
    let saved = std::fs::read(&at).unwrap();
    ok(root, &["restore", "-s", "main~1", "d"]);
    assert_eq!(std::fs::read(&at).unwrap(), saved);
    assert_eq!(run_in(root, &["status"]).status.code(), Some(0));
    let out = commit_records_the_directory(root);
    assert_eq!(out["files_changed"], 1, "{out}");
}

/// Sets the mtime of `rel` to `when`.
fn set_mtime(root: &Path, rel: &str, when: SystemTime) {
    let f = std::fs::File::options()
        .write(true)
        .open(root.join(rel))
        .unwrap();
    f.set_modified(when).unwrap();
}

fn mtime(root: &Path, rel: &str) -> SystemTime {
    std::fs::metadata(root.join(rel))
        .unwrap()
        .modified()
        .unwrap()
}

/// Commits and requires that the branch tip then holds exactly the directory.
fn commit_records_the_directory(root: &Path) -> serde_json::Value {
    let out = json(root, &["commit", "-m", "next"]);
    assert_tip_is_the_directory(root, &out);
    out
}

/// The oracle: a commit without the stat cache (every file read and hashed) finds
/// nothing to commit. The index is put back afterwards, so the cache's own history
/// goes on.
fn assert_tip_is_the_directory(root: &Path, after: &serde_json::Value) {
    let index = root.join(".snapgraph/index");
    let saved = std::fs::read(&index).ok();
    let _ = std::fs::remove_file(&index);
    let check = json(root, &["commit", "-m", "oracle"]);
    assert_eq!(
        check["nothing_to_commit"], true,
        "the tip misses a change after {after}: {check}"
    );
    match saved {
        Some(b) => std::fs::write(&index, b).unwrap(),
        None => {
            let _ = std::fs::remove_file(&index);
        }
    }
}

/// The oracle for `status`: with the index (its survey, a scan narrowed to what
/// differs) it reports exactly what it reports without one (every file read). The
/// index is put back afterwards.
fn assert_status_is_the_full_scans(root: &Path) {
    let narrowed = json(root, &["status"]);
    let index = root.join(".snapgraph/index");
    let saved = std::fs::read(&index).ok();
    let _ = std::fs::remove_file(&index);
    let full = json(root, &["status"]);
    if let Some(b) = saved {
        std::fs::write(&index, b).unwrap();
    }
    assert_eq!(narrowed, full, "status with the index, then without");
}

#[test]
fn a_same_size_edit_with_the_old_mtime_is_seen() {
    let t = armed();
    let old = mtime(t.path(), "d/b.txt");
    write(t.path(), "d/b.txt", b"BRAVO");
    set_mtime(t.path(), "d/b.txt", old);
    let out = commit_records_the_directory(t.path());
    assert_eq!(out["files_changed"], 1, "{out}");
    assert_eq!(run_in(t.path(), &["cat", "main:d/b.txt"]).stdout, b"BRAVO");
}

/// Writes `data` (as long as what `rel` holds) over `rel` and puts its mtime back:
/// only its ctime tells.
fn rewrite_keeping_mtime(root: &Path, rel: &str, data: &[u8]) {
    let old = mtime(root, rel);
    write(root, rel, data);
    set_mtime(root, rel, old);
}

/// A commit with nothing changed finds nothing to commit without reading a file.
fn settled(root: &Path) {
    let none = json(root, &["commit", "-m", "same"]);
    assert_eq!(none["nothing_to_commit"], true, "{none}");
    assert_eq!(none["files_read"], 0, "{none}");
}

/// A tree large enough for stats taken ahead on a second thread
/// (`snapgraph_cli::ahead`), which starts from the index's far end: edits there (a
/// same-size edit with the old mtime put back, a file retyped as a symlink, one
/// removed, one added) and at the near end are all committed, and the turn after
/// trusts every stat again; so is an edit of the walk's last file alone.
#[test]
fn stats_taken_ahead_miss_nothing_at_either_end_of_a_large_tree() {
    let t = repo();
    pad(t.path());
    for rel in ["zz/a.txt", "zz/b.txt", "zz/c.txt", "zz/deep/d.txt"] {
        write(t.path(), rel, rel.as_bytes());
    }
    write(t.path(), "first.txt", b"first");
    age(t.path());
    ok(t.path(), &["commit", "-m", "one"]);
    settled(t.path());
    rewrite_keeping_mtime(t.path(), "zz/deep/d.txt", b"ZZ/DEEP/D.TXT");
    std::fs::remove_file(t.path().join("zz/c.txt")).unwrap();
    std::os::unix::fs::symlink("a.txt", t.path().join("zz/c.txt")).unwrap();
    std::fs::remove_file(t.path().join("zz/b.txt")).unwrap();
    write(t.path(), "zz/new.txt", b"new");
    rewrite_keeping_mtime(t.path(), "first.txt", b"FIRST");
    let out = commit_records_the_directory(t.path());
    // The retyped file counts as modified.
    assert_eq!(added_and_removed(&out), (1, 1), "{out}");
    assert_eq!(out["files_modified"], 3, "{out}");
    assert_eq!(
        run_in(t.path(), &["cat", "main:zz/deep/d.txt"]).stdout,
        b"ZZ/DEEP/D.TXT"
    );
    age(t.path());
    ok(t.path(), &["commit", "-m", "aged"]);
    settled(t.path());
    // Only the last file in the walk's order changed: the first walk reaches it
    // last, and the scan after it takes every other stat from that walk.
    // (A directory's files come before its subdirectories: `zz/deep/d.txt`.)
    rewrite_keeping_mtime(t.path(), "zz/deep/d.txt", b"zz/deep/d.txt");
    // `status` walks the same two ways (its working commit is made in memory).
    assert_eq!(
        json(t.path(), &["status"])["modified"],
        serde_json::json!(["/zz/deep/d.txt"])
    );
    let out = commit_records_the_directory(t.path());
    assert_eq!(out["files_modified"], 1, "{out}");
    assert_eq!(out["files_read"], 1, "{out}");
    assert_eq!(
        run_in(t.path(), &["cat", "main:zz/deep/d.txt"]).stdout,
        b"zz/deep/d.txt"
    );
}

/// A release unpacked over the tree: every file rewritten (new mtimes), a few with
/// same-size edits. The files whose bytes are still the tip's are proven so by the
/// tip's own ids (inline bytes, one chunk, a one-leaf manifest of at most one chunk's
/// size, a larger one, one of several levels) without being cut; the edited ones are
/// committed; nothing is missed, and the next commit trusts the new stats.
#[test]
fn rewritten_files_with_the_tips_bytes_are_compared_not_cut() {
    let t = repo();
    let small = pseudo_random(60_000, 2);
    assert!(
        snapgraph::chunk::cut_points(&small).len() > 1,
        "several chunks in at most CHUNK_MAX bytes"
    );
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("tiny.txt", b"tiny".to_vec()),
        ("one/chunk.bin", pseudo_random(3000, 1)),
        ("one/small.bin", small),
        ("two/large.bin", pseudo_random(300_000, 3)),
        ("two/deep/huge.bin", pseudo_random(4 << 20, 4)),
    ];
    let edited: Vec<(&str, Vec<u8>)> = vec![
        ("e/tiny.txt", b"tiny".to_vec()),
        ("e/chunk.bin", pseudo_random(3000, 5)),
        ("e/small.bin", pseudo_random(60_000, 2)),
        ("e/large.bin", pseudo_random(300_000, 6)),
    ];
    for (rel, data) in files.iter().chain(&edited) {
        write(t.path(), rel, data);
    }
    write(t.path(), "kept.txt", b"not rewritten");
    age(t.path());
    ok(t.path(), &["commit", "-m", "one"]);
    let none = json(t.path(), &["commit", "-m", "same"]);
    assert_eq!(none["nothing_to_commit"], true, "{none}");
    // The release: the same bytes written again, and same-size edits (the first
    // byte, a middle one, the last one).
    for (rel, data) in &files {
        write(t.path(), rel, data);
    }
    for (i, (rel, data)) in edited.iter().enumerate() {
        let mut data = data.clone();
        let at = [0, data.len() / 2, 30_000, data.len() - 1][i];
        data[at] ^= 0x20;
        write(t.path(), rel, &data);
    }
    // Every stat changes (the untouched file's ctime too): nothing is trusted.
    age(t.path());
    let out = commit_records_the_directory(t.path());
    assert_eq!(out["files_compared"], files.len() + 1, "{out}");
    assert_eq!(out["files_read"], files.len() + 1 + edited.len(), "{out}");
    assert_eq!(out["files_modified"], edited.len(), "{out}");
    assert_eq!(out["files_skipped"], 0, "{out}");
    let none = json(t.path(), &["commit", "-m", "same"]);
    assert_eq!(none["nothing_to_commit"], true, "{none}");
    assert_eq!(none["files_read"], 0, "{none}");
    // Rewritten again with nothing edited: nothing to commit, every file compared.
    for (rel, data) in &files {
        write(t.path(), rel, data);
    }
    let none = json(t.path(), &["commit", "-m", "same"]);
    assert_eq!(none["nothing_to_commit"], true, "{none}");
    assert_eq!(none["files_read"], files.len(), "{none}");
}

#[test]
fn added_removed_and_retyped_entries_are_seen() {
    type Edit = fn(&Path);
    let edits: [(&str, Edit); 9] = [
        ("an empty file added", |r| write(r, "d/new.txt", b"")),
        ("a file removed", |r| {
            std::fs::remove_file(r.join("d/e/c.txt")).unwrap()
        }),
        ("an empty directory added", |r| {
            std::fs::create_dir(r.join("d/fresh")).unwrap()
        }),
        ("an empty directory removed", |r| {
            std::fs::remove_dir(r.join("empty")).unwrap()
        }),
        ("an execute bit set", |r| {
            std::fs::set_permissions(r.join("a.txt"), std::fs::Permissions::from_mode(0o755))
                .unwrap()
        }),
        ("a symlink retargeted (same length)", |r| {
            std::fs::remove_file(r.join("link")).unwrap();
            std::os::unix::fs::symlink("b.txt", r.join("link")).unwrap();
        }),
        ("a file replaced by a directory", |r| {
            std::fs::remove_file(r.join("a.txt")).unwrap();
            std::fs::create_dir(r.join("a.txt")).unwrap();
        }),
        ("a directory replaced by a file", |r| {
            std::fs::remove_dir(r.join("empty")).unwrap();
            write(r, "empty", b"now a file");
        }),
        // Not recorded (skipped with a warning): the file it replaced is removed.
        ("a file replaced by a FIFO", |r| {
            std::fs::remove_file(r.join("d/b.txt")).unwrap();
            mkfifo(&r.join("d/b.txt"));
        }),
    ];
    for (what, edit) in edits {
        let t = armed();
        let before = ok(t.path(), &["log", "--limit", "1"]);
        edit(t.path());
        let out = commit_records_the_directory(t.path());
        assert_ne!(out["nothing_to_commit"], true, "{what}: {out}");
        assert_ne!(ok(t.path(), &["log", "--limit", "1"]), before, "{what}");
    }
}

#[test]
fn ignore_file_edits_are_seen() {
    let t = armed();
    // Ignoring a recorded file removes it from the next commit...
    write(t.path(), ".snapgraphignore", b"c.txt\n");
    let out = commit_records_the_directory(t.path());
    let listed = ok(t.path(), &["ls", "-r", "main"]);
    assert!(!listed.contains("c.txt"), "{out} {listed}");
    // ... and un-ignoring it brings it back, even with the ignore file's old mtime.
    let old = mtime(t.path(), ".snapgraphignore");
    write(t.path(), ".snapgraphignore", b"x.txt\n");
    set_mtime(t.path(), ".snapgraphignore", old);
    commit_records_the_directory(t.path());
    assert_eq!(
        run_in(t.path(), &["cat", "main:d/e/c.txt"]).stdout,
        b"charlie"
    );
}

#[test]
fn a_tip_moved_by_another_process_is_not_taken_for_the_working_directory() {
    let t = armed();
    // Another working directory on the same store commits to main.
    let db = t.path().join(".snapgraph/store.db");
    assert!(
        db.exists(),
        "the default store is a SQLite file in .snapgraph"
    );
    let other = tempfile::tempdir().unwrap();
    ok(
        other.path(),
        &["init", "--store", &format!("sqlite:{}", db.display())],
    );
    write(other.path(), "a.txt", b"other");
    ok(other.path(), &["commit", "-m", "elsewhere"]);
    // Here nothing changed, but the tip is no longer what the index describes: the
    // directory is behind its branch, and a commit, which would undo the other
    // one, is refused; with --force it records this directory again (on top of
    // the other commit).
    let err = fails(t.path(), &["commit", "-m", "next"]);
    assert!(err.contains("moved") && err.contains("--force"), "{err}");
    assert_eq!(run_in(t.path(), &["cat", "main:a.txt"]).stdout, b"other");
    let out = json(t.path(), &["commit", "-m", "next", "--force"]);
    assert_tip_is_the_directory(t.path(), &out);
    assert_ne!(out["nothing_to_commit"], true, "{out}");
    assert_eq!(run_in(t.path(), &["cat", "main:a.txt"]).stdout, b"alpha");
}

/// A stat cache left stale by a crash (the commit moved the branch, the index's
/// save was lost): the directory holds the tip, so it is not behind its branch.
#[test]
fn a_stale_stat_cache_is_not_taken_for_a_moved_branch() {
    let t = armed();
    let index = t.path().join(".snapgraph/index");
    let before = std::fs::read(&index).unwrap();
    write(t.path(), "a.txt", b"alpha two");
    ok(t.path(), &["commit", "-m", "two"]);
    std::fs::write(&index, &before).unwrap();
    let status = json(t.path(), &["status"]);
    assert!(status["behind"].is_null(), "{status}");
    assert_eq!(status["modified"], serde_json::json!([]), "{status}");
    let none = json(t.path(), &["commit", "-m", "same"]);
    assert_eq!(none["nothing_to_commit"], true, "{none}");
    // Stale again, with an edit since: the edit is committed, and the checkout of
    // the branch finds the directory holding it.
    std::fs::write(&index, &before).unwrap();
    ok(t.path(), &["checkout", "main"]);
    write(t.path(), "d/b.txt", b"bravo two");
    let out = json(t.path(), &["commit", "-m", "three"]);
    assert_eq!(out["files_modified"], 1, "{out}");
}

#[test]
fn a_checkout_of_another_branch_is_seen() {
    let t = armed();
    ok(t.path(), &["branch", "side"]);
    write(t.path(), "a.txt", b"ALPHA");
    ok(t.path(), &["commit", "-m", "main moves"]);
    ok(t.path(), &["checkout", "side"]);
    assert_eq!(std::fs::read(t.path().join("a.txt")).unwrap(), b"alpha");
    // The index was written by the checkout for side's tip: the fast path holds.
    let none = json(t.path(), &["commit", "-m", "same"]);
    assert_eq!(none["nothing_to_commit"], true, "{none}");
    // Back on main with the working directory of side, forced: main's tip is in
    // the directory again, and an edit is seen.
    ok(t.path(), &["checkout", "main", "--force"]);
    assert_eq!(std::fs::read(t.path().join("a.txt")).unwrap(), b"ALPHA");
    let none = json(t.path(), &["commit", "-m", "same"]);
    assert_eq!(none["nothing_to_commit"], true, "{none}");
    let old = mtime(t.path(), "a.txt");
    write(t.path(), "a.txt", b"Alpha");
    set_mtime(t.path(), "a.txt", old);
    let out = commit_records_the_directory(t.path());
    assert_eq!(out["files_changed"], 1, "{out}");
}

/// A checkout writes an index complete for what it checked out: every file with the
/// digest of its content as stored (inline bytes, one chunk's id, a manifest's root),
/// so the next commit vouches for the files without reading them.
#[test]
fn a_checkout_records_every_kind_of_content() {
    use snapgraph_cli::index::Digest;
    let t = repo();
    write(t.path(), "inline.txt", b"tiny");
    write(t.path(), "d/one.bin", &pseudo_random(20_000, 1));
    write(t.path(), "d/many.bin", &pseudo_random(400_000, 2));
    write(t.path(), "d/empty", b"");
    let first = json(t.path(), &["commit", "-m", "one"]);
    ok(t.path(), &["branch", "side"]);
    write(t.path(), "d/one.bin", &pseudo_random(20_000, 3));
    ok(t.path(), &["commit", "-m", "two"]);
    ok(t.path(), &["checkout", "side"]);
    let ix = Index::load(&t.path().join(".snapgraph/index"), t.path()).expect("an index");
    assert_eq!(
        ix.tip.map(|id| id.to_string()),
        first["id"].as_str().map(String::from),
        "complete for the commit checked out"
    );
    let digest = |p: &str| match ix.entries.get(p) {
        Some(IndexEntry::File { digest, .. }) => digest.clone(),
        other => panic!("{p}: {other:?}"),
    };
    assert_eq!(digest("/inline.txt"), Digest::Inline(b"tiny".to_vec()));
    assert_eq!(digest("/d/empty"), Digest::Inline(Vec::new()));
    assert!(matches!(digest("/d/one.bin"), Digest::Chunk(_)));
    assert!(matches!(digest("/d/many.bin"), Digest::Manifest(_)));
    assert_eq!(
        std::fs::read(t.path().join("d/one.bin")).unwrap(),
        pseudo_random(20_000, 1)
    );
    assert_eq!(
        std::fs::read(t.path().join("d/many.bin")).unwrap(),
        pseudo_random(400_000, 2)
    );
}

#[test]
fn a_corrupted_or_old_index_means_reading_everything() {
    let t = armed();
    let index = t.path().join(".snapgraph/index");
    let mut bytes = std::fs::read(&index).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&index, &bytes).unwrap();
    let out = json(t.path(), &["commit", "-m", "same"]);
    assert_eq!(out["nothing_to_commit"], true, "{out}");
    assert_eq!(out["files_read"], 3, "{out}");
    // Version 1 was JSON.
    std::fs::write(
        &index,
        br#"{"version":1,"root":"/","probe_ns":0,"entries":{}}"#,
    )
    .unwrap();
    let out = json(t.path(), &["commit", "-m", "same"]);
    assert_eq!(out["files_read"], 3, "{out}");
    // And the index written then arms the fast path again.
    let out = json(t.path(), &["commit", "-m", "same"]);
    assert_eq!(out["files_read"], 0, "{out}");
}

#[test]
fn journal_records_are_appended_and_a_torn_one_costs_only_speed() {
    let t = armed();
    let index = t.path().join(".snapgraph/index");
    let before = std::fs::read(&index).unwrap();
    write(t.path(), "d/b.txt", b"bravo two");
    // Older than the commit's clock probe, whatever the file system's tick: the
    // fast path below then trusts it (a file written in the probe's tick is racy,
    // and read again by the next commit).
    set_mtime(
        t.path(),
        "d/b.txt",
        SystemTime::now() - Duration::from_secs(100),
    );
    let out = commit_records_the_directory(t.path());
    assert_eq!(out["files_read"], 1, "{out}");
    let after = std::fs::read(&index).unwrap();
    assert!(
        after.len() > before.len() && after.starts_with(&before),
        "one record appended to the index read ({} -> {} bytes)",
        before.len(),
        after.len()
    );
    // The fast path holds on a journaled index.
    let none = json(t.path(), &["commit", "-m", "same"]);
    assert_eq!(none["files_read"], 0, "{none}");
    // A torn record (a crash during the append): the index reads as it was before
    // the record, whose tip is no longer the branch's. Nothing is missed, the file
    // is rewritten whole, and the next commit trusts it again.
    std::fs::write(&index, &after[..after.len() - 3]).unwrap();
    write(t.path(), "a.txt", b"alpha two");
    set_mtime(
        t.path(),
        "a.txt",
        SystemTime::now() - Duration::from_secs(100),
    );
    let out = commit_records_the_directory(t.path());
    assert_eq!(out["files_changed"], 1, "{out}");
    let rewritten = std::fs::read(&index).unwrap();
    assert!(
        !rewritten.starts_with(&after[..after.len() - 3]),
        "rewritten"
    );
    let none = json(t.path(), &["commit", "-m", "same"]);
    assert_eq!(none["files_read"], 0, "{none}");
}

#[test]
fn the_fast_path_trusts_only_complete_non_racy_records() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "a.txt", b"alpha");
    write(t.path(), "d/b.txt", b"bravo");
    std::os::unix::fs::symlink("a.txt", t.path().join("link")).unwrap();
    age(t.path());
    let dot = t.path().join(".snapgraph");
    std::fs::create_dir(&dot).unwrap();
    let mut ws = snapgraph::Workspace::new();
    let report = scan::scan(
        t.path(),
        &mut ws,
        ScanOptions {
            ..ScanOptions::new(&dot)
        },
        &indicatif::ProgressBar::hidden(),
    )
    .unwrap();
    let _ = ws.commit(snapgraph::CommitOptions::new()).unwrap();
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    let mut index = Index::new(t.path(), now);
    for (path, seen) in &report.stats {
        let e = scan::index_entry(&ws, path, seen).unwrap();
        index.entries.insert(path.clone(), e);
    }
    assert_eq!(index.entries.len(), 4, "{:?}", index.entries);
    // What the survey finds when nothing differs: the files the index vouches for.
    let unchanged = |ix: &Index| {
        let survey = scan::survey(t.path(), ix, &dot, 16).unwrap();
        (survey.changed.as_deref() == Some(&[][..])).then_some(survey.files)
    };
    assert_eq!(unchanged(&index), Some(2));
    // A record as new as the clock probe is racy.
    let mut racy = index.clone();
    let Some(IndexEntry::File { stat, .. }) = index.entries.get("/a.txt") else {
        panic!("a file")
    };
    racy.probe_ns = stat.mtime_ns;
    assert_eq!(unchanged(&racy), None);
    // A record missing, one extra, one of another kind.
    let mut missing = index.clone();
    missing.entries.remove("/d");
    assert_eq!(unchanged(&missing), None);
    let mut extra = index.clone();
    extra
        .entries
        .insert("/gone", IndexEntry::Dir { listing: None });
    assert_eq!(unchanged(&extra), None);
    let mut kind = index.clone();
    kind.entries
        .insert("/link", IndexEntry::Dir { listing: None });
    assert_eq!(unchanged(&kind), None);
    // A nested repository is neither recorded nor a difference; it is reported.
    std::fs::create_dir_all(t.path().join("sub/.snapgraph")).unwrap();
    assert_eq!(unchanged(&index), Some(2));
    let survey = scan::survey(t.path(), &index, &dot, 16).unwrap();
    assert_eq!(survey.nested, vec![t.path().join("sub")]);
    // A symlink's new target is a new symlink: a new stat.
    std::fs::remove_file(t.path().join("link")).unwrap();
    std::os::unix::fs::symlink("d/b.txt", t.path().join("link")).unwrap();
    assert_eq!(unchanged(&index), None);
}

/// Counts the tree nodes read through it.
struct TreeReads<'a> {
    inner: &'a std::collections::HashMap<snapgraph::ObjectId, Vec<u8>>,
    trees: std::cell::Cell<usize>,
}

impl snapgraph::ObjectSource for TreeReads<'_> {
    fn get(
        &self,
        id: &snapgraph::ObjectId,
    ) -> Result<Option<std::borrow::Cow<'_, [u8]>>, snapgraph::BoxError> {
        let got = self.inner.get(id);
        if got.and_then(|b| b.first()) == Some(&snapgraph::ObjectKind::Tree.byte()) {
            self.trees.set(self.trees.get() + 1);
        }
        Ok(got.map(|b| std::borrow::Cow::Borrowed(&b[..])))
    }
}

/// A per-turn scan of a lazily checked-out tip reads the trees on the changed
/// paths only, and records what a scan without any cache records.
#[test]
fn a_lazy_scan_reads_only_the_changed_directories() {
    let t = tempfile::tempdir().unwrap();
    for d in ["a/x", "b/y", "c/z"] {
        write(t.path(), &format!("{d}/f.txt"), b"first");
        write(t.path(), &format!("{d}/g.txt"), b"second");
    }
    write(t.path(), "top.txt", b"top");
    age(t.path());
    let dot = t.path().join(".snapgraph");
    std::fs::create_dir(&dot).unwrap();
    let pb = indicatif::ProgressBar::hidden();
    let scan_into = |ws: &mut snapgraph::Workspace,
                     index: Option<&Index>,
                     lazy: Option<&dyn snapgraph::ObjectSource>| {
        scan::scan(
            t.path(),
            ws,
            ScanOptions {
                index,
                lazy,
                ..ScanOptions::new(&dot)
            },
            &pb,
        )
        .unwrap()
    };
    let mut ws = snapgraph::Workspace::new();
    let report = scan_into(&mut ws, None, None);
    let commit = ws.commit(snapgraph::CommitOptions::new()).unwrap();
    let base = commit.id();
    let store: std::collections::HashMap<_, _> = commit.into_objects().into_iter().collect();
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    let mut index = Index::new(t.path(), now);
    index.tip = Some(base);
    for (path, seen) in &report.stats {
        index
            .entries
            .insert(path.clone(), scan::index_entry(&ws, path, seen).unwrap());
    }
    // One file edited, one added in a new directory, one directory removed.
    write(t.path(), "b/y/f.txt", b"FIRST, longer");
    write(t.path(), "new/h.txt", b"new");
    std::fs::remove_dir_all(t.path().join("c")).unwrap();
    let source = TreeReads {
        inner: &store,
        trees: std::cell::Cell::new(0),
    };
    let mut lazy = snapgraph::Workspace::new();
    let _ = lazy
        .checkout_with(base, &source, snapgraph::CheckoutOptions::new().lazy(true))
        .unwrap();
    assert_eq!(source.trees.get(), 1, "the root's node");
    source.trees.set(0);
    let report = scan_into(&mut lazy, Some(&index), Some(&source));
    assert_eq!(source.trees.get(), 2, "b and b/y: nothing else");
    assert_eq!(report.files_read, 2, "{report:?}");
    assert!(report.changed);
    let turn = lazy
        .commit(snapgraph::CommitOptions::new().have_in(&store))
        .unwrap();
    let mut fresh = snapgraph::Workspace::new();
    let _ = scan_into(&mut fresh, None, None);
    assert_eq!(
        turn.id(),
        fresh.commit(snapgraph::CommitOptions::new()).unwrap().id()
    );
    // The racy rule holds on the lazy path: a record whose stat equals the file's
    // but whose mtime is not older than the clock probe is not trusted, whatever
    // digest it claims (here a wrong one, as if the file changed within the tick).
    let Some(IndexEntry::File { stat, .. }) = index.entries.get("/b/y/g.txt").cloned() else {
        panic!("a file")
    };
    index.entries.insert(
        "/b/y/g.txt",
        IndexEntry::File {
            stat,
            digest: snapgraph_cli::index::Digest::Inline(b"other".to_vec()),
        },
    );
    index.probe_ns = stat.mtime_ns;
    let mut lazy = snapgraph::Workspace::new();
    let _ = lazy
        .checkout_with(base, &store, snapgraph::CheckoutOptions::new().lazy(true))
        .unwrap();
    let report = scan_into(&mut lazy, Some(&index), Some(&store));
    assert!(report.files_read >= 3, "{report:?}");
    let racy = lazy
        .commit(snapgraph::CommitOptions::new().have_in(&store))
        .unwrap();
    assert_eq!(racy.id(), turn.id());
    // A lazy scan without an index complete for the workspace's head is refused.
    let mut lazy = snapgraph::Workspace::new();
    let _ = lazy
        .checkout_with(base, &store, snapgraph::CheckoutOptions::new().lazy(true))
        .unwrap();
    let err = scan::scan(
        t.path(),
        &mut lazy,
        ScanOptions {
            lazy: Some(&store),
            ..ScanOptions::new(&dot)
        },
        &pb,
    )
    .unwrap_err();
    assert!(err.to_string().contains("complete"), "{err}");
}

/// One random edit of a small tree.
#[derive(Debug, Clone)]
enum Edit {
    /// Rewrite a file (same size when `same_size`), creating it if absent.
    Write {
        file: usize,
        same_size: bool,
        seed: u8,
    },
    Remove {
        file: usize,
    },
    Chmod {
        file: usize,
        exec: bool,
    },
    Mkdir {
        dir: usize,
    },
    Rmdir {
        dir: usize,
    },
    Link {
        file: usize,
        target: usize,
    },
    Ignore {
        file: usize,
    },
    /// Write an ignore file in a directory below the root, ignoring one name and,
    /// when `itself`, the ignore file too (so the index has no entry for it); or
    /// remove it (`file` past the list).
    IgnoreIn {
        dir: usize,
        file: usize,
        itself: bool,
    },
    /// Replace a file (or create one) by a FIFO, which is not recorded: the file
    /// leaves the snapshot.
    Fifo {
        file: usize,
    },
    /// Cut the stat cache's last `cut` bytes (a crash during a journal append, or
    /// a damaged file): an earlier state, or none.
    TearIndex {
        cut: u8,
    },
}

const FILES: [&str; 6] = ["a", "b", "d/c", "d/e", "d/x/f", "g/h"];
const DIRS: [&str; 3] = ["d/x", "g", "empty"];

fn edit() -> impl Strategy<Value = Edit> {
    let f = 0..FILES.len();
    prop_oneof![
        4 => (f.clone(), any::<bool>(), any::<u8>())
            .prop_map(|(file, same_size, seed)| Edit::Write { file, same_size, seed }),
        1 => f.clone().prop_map(|file| Edit::Remove { file }),
        1 => (f.clone(), any::<bool>()).prop_map(|(file, exec)| Edit::Chmod { file, exec }),
        1 => (0..DIRS.len()).prop_map(|dir| Edit::Mkdir { dir }),
        1 => (0..DIRS.len()).prop_map(|dir| Edit::Rmdir { dir }),
        1 => (f.clone(), f.clone()).prop_map(|(file, target)| Edit::Link { file, target }),
        1 => f.clone().prop_map(|file| Edit::Ignore { file }),
        1 => (0..DIRS.len(), 0..FILES.len() + 1, any::<bool>())
            .prop_map(|(dir, file, itself)| Edit::IgnoreIn { dir, file, itself }),
        1 => any::<u8>().prop_map(|cut| Edit::TearIndex { cut }),
        1 => (0..FILES.len()).prop_map(|file| Edit::Fifo { file }),
    ]
}

fn apply(root: &Path, e: &Edit) {
    let p = |rel: &str| root.join(rel);
    let is_file = |rel: &str| std::fs::symlink_metadata(p(rel)).is_ok_and(|m| m.is_file());
    match e {
        Edit::Write {
            file,
            same_size,
            seed,
        } => {
            let rel = FILES[*file];
            if std::fs::symlink_metadata(p(rel)).is_ok_and(|m| !m.is_file()) {
                return;
            }
            let len = if *same_size {
                8
            } else {
                8 + usize::from(*seed % 5)
            };
            if let Some(parent) = p(rel).parent() {
                if std::fs::create_dir_all(parent).is_err() {
                    return; // a file where a directory would be
                }
            }
            std::fs::write(p(rel), pseudo_random(len, u64::from(*seed) + 1)).unwrap();
        }
        Edit::Remove { file } => {
            let _ = std::fs::remove_file(p(FILES[*file]));
        }
        Edit::Chmod { file, exec } => {
            if is_file(FILES[*file]) {
                let mode = if *exec { 0o755 } else { 0o644 };
                std::fs::set_permissions(p(FILES[*file]), std::fs::Permissions::from_mode(mode))
                    .unwrap();
            }
        }
        Edit::Mkdir { dir } => {
            let _ = std::fs::create_dir_all(p(DIRS[*dir]));
        }
        Edit::Rmdir { dir } => {
            let _ = std::fs::remove_dir(p(DIRS[*dir]));
        }
        Edit::Link { file, target } => {
            let rel = FILES[*file];
            if std::fs::symlink_metadata(p(rel)).is_ok_and(|m| m.is_dir()) {
                return;
            }
            let _ = std::fs::remove_file(p(rel));
            let _ = std::os::unix::fs::symlink(FILES[*target], p(rel));
        }
        Edit::Ignore { file } => {
            let name = FILES[*file].rsplit('/').next().unwrap_or_default();
            std::fs::write(p(".snapgraphignore"), format!("{name}\n")).unwrap();
        }
        Edit::IgnoreIn { dir, file, itself } => {
            let dir = ["d", DIRS[0], DIRS[1]][*dir % 3];
            if !p(dir).is_dir() {
                return;
            }
            let at = p(dir).join(".snapgraphignore");
            match FILES.get(*file) {
                Some(rel) => {
                    let name = rel.rsplit('/').next().unwrap_or_default();
                    let own = if *itself { ".snapgraphignore\n" } else { "" };
                    std::fs::write(at, format!("{own}{name}\n")).unwrap();
                }
                None => {
                    let _ = std::fs::remove_file(at);
                }
            }
        }
        Edit::Fifo { file } => {
            let rel = FILES[*file];
            if std::fs::symlink_metadata(p(rel)).is_ok_and(|m| m.is_dir())
                || p(rel).parent().is_some_and(|d| !d.is_dir())
            {
                return;
            }
            let _ = std::fs::remove_file(p(rel));
            mkfifo(&p(rel));
        }
        Edit::TearIndex { cut } => {
            for name in ["index", "index.skeleton"] {
                let path = p(".snapgraph").join(name);
                if let Ok(bytes) = std::fs::read(&path) {
                    let keep = bytes.len().saturating_sub(usize::from(*cut) + 1);
                    std::fs::write(&path, &bytes[..keep]).unwrap();
                }
            }
        }
    }
}

/// Makes a FIFO at `path` (never opened: an open would wait for a writer).
fn mkfifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
}

/// Every regular file's mtime set to `when` (and every directory's below the root
/// with `dirs`): the timestamps say nothing.
fn force_mtimes(root: &Path, when: SystemTime, dirs: bool) {
    for (path, kind) in walk(root) {
        if kind == Kind::File && std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
            let f = std::fs::File::options().write(true).open(&path).unwrap();
            f.set_modified(when).unwrap();
        }
    }
    if dirs {
        let mut below: Vec<_> = walk(root)
            .into_iter()
            .filter(|(p, k)| {
                *k == Kind::Dir && p != root && !p.starts_with(root.join(".snapgraph"))
            })
            .collect();
        // Deepest first, so that touching one does not move its parent's times.
        below.sort_by_key(|(p, _)| std::cmp::Reverse(p.components().count()));
        for (path, _) in below {
            touch_back(
                root,
                path.strip_prefix(root).unwrap().to_str().unwrap(),
                when,
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random edits in rounds, every file's mtime forced to one instant after each
    /// round (before and after the commits, so records and files agree on mtime),
    /// in some rounds every directory's too (so only their ctimes tell an entry
    /// added, removed or renamed): after every commit the branch tip holds exactly
    /// the directory. In padded cases a directory of files that sorts first makes
    /// the index large enough for the walk's helper thread (`snapgraph_cli::ahead`),
    /// which stats from the index's far end: the edited files are then its.
    #[test]
    fn a_commit_never_misses_a_change(
        rounds in prop::collection::vec((prop::collection::vec(edit(), 1..5), any::<bool>()), 1..4),
        padded in any::<bool>(),
    ) {
        let t = repo();
        for rel in FILES {
            write(t.path(), rel, &pseudo_random(8, 0));
        }
        if padded {
            pad(t.path());
        }
        let when = SystemTime::now() - Duration::from_secs(1000);
        force_mtimes(t.path(), when, true);
        ok(t.path(), &["commit", "-m", "base"]);
        for (round, dirs) in &rounds {
            for e in round {
                apply(t.path(), e);
            }
            force_mtimes(t.path(), when, *dirs);
            assert_status_is_the_full_scans(t.path());
            commit_records_the_directory(t.path());
            // Nothing changed now: whichever path the commit takes, nothing is missed.
            let again = json(t.path(), &["commit", "-m", "again"]);
            prop_assert_eq!(&again["nothing_to_commit"], &serde_json::json!(true), "{}", again);
        }
    }
}

/// Files enough for a walk to take stats ahead on a second thread
/// ([`snapgraph_cli::ahead::MIN_ENTRIES`]), in a directory that sorts before every
/// other name of these tests.
fn pad(root: &Path) {
    for i in 0..snapgraph_cli::ahead::MIN_ENTRIES + 8 {
        write(root, &format!("0pad/{i:04}"), &pseudo_random(4, i as u64));
    }
}

/// Sets the mtime of the directory (or anything) at `rel` to `when`, leaving its
/// atime alone (a `touch -d`: its ctime moves to now, as no caller can prevent).
fn touch_back(root: &Path, rel: &str, when: SystemTime) {
    let since = when.duration_since(SystemTime::UNIX_EPOCH).unwrap();
    let stamps = rustix::fs::Timestamps {
        last_access: rustix::fs::Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_OMIT,
        },
        last_modification: rustix::fs::Timespec {
            tv_sec: since.as_secs() as i64,
            tv_nsec: i64::from(since.subsec_nanos()),
        },
    };
    rustix::fs::utimensat(
        rustix::fs::CWD,
        root.join(rel),
        &stamps,
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    )
    .unwrap();
}

/// The files a commit's summary counts as added and removed.
fn added_and_removed(out: &serde_json::Value) -> (u64, u64) {
    let n = |k: &str| out[k].as_u64().unwrap_or_else(|| panic!("no {k} in {out}"));
    (n("files_added"), n("files_removed"))
}

/// A walk of the whole tree against the index the last command saved, as a
/// commit's fast path walks: how many directories it listed and how many it took
/// from the index.
fn listed_and_reused(root: &Path) -> (u64, u64) {
    let ix = Index::load(&root.join(".snapgraph/index"), root).expect("an index");
    let report = scan::walk(root, &root.join(".snapgraph"), None, Some(&ix), &mut |_| {
        Ok(true)
    })
    .unwrap();
    (report.listed, report.reused)
}

/// [`armed`], with every directory's mtime 100 s back too and the index saved
/// again after it, so that every listing is recorded and trusted: only the root
/// is listed.
fn armed_listings() -> tempfile::TempDir {
    let t = armed();
    let past = SystemTime::now() - Duration::from_secs(100);
    for rel in ["d/e", "d", "empty"] {
        touch_back(t.path(), rel, past);
    }
    // The touched directories' stats moved: a scan records them again.
    json(t.path(), &["commit", "-m", "same"]);
    let none = json(t.path(), &["commit", "-m", "same"]);
    assert_eq!(none["nothing_to_commit"], true, "{none}");
    assert_eq!(listed_and_reused(t.path()), (1, 3));
    t
}

/// Entries added, removed or renamed in a directory whose listing the index
/// recorded are seen, even with the directory's mtime put back (its ctime moves),
/// and only that directory is listed again.
#[test]
fn a_directorys_listing_is_reused_only_while_its_names_stand() {
    let t = armed_listings();
    let d_mtime = mtime(t.path(), "d");
    let e_mtime = mtime(t.path(), "d/e");
    // Added, mtime put back.
    write(t.path(), "d/e/new.txt", b"new");
    touch_back(t.path(), "d/e", e_mtime);
    assert_eq!(listed_and_reused(t.path()), (2, 2));
    let out = commit_records_the_directory(t.path());
    assert_eq!(out["files_added"], 1, "{out}");
    // Removed.
    std::fs::remove_file(t.path().join("d/b.txt")).unwrap();
    touch_back(t.path(), "d", d_mtime);
    let out = commit_records_the_directory(t.path());
    assert_eq!(out["files_removed"], 1, "{out}");
    // Renamed within the directory.
    std::fs::rename(t.path().join("d/e/c.txt"), t.path().join("d/e/z.txt")).unwrap();
    touch_back(t.path(), "d/e", e_mtime);
    let out = commit_records_the_directory(t.path());
    assert_eq!(added_and_removed(&out), (1, 1), "{out}");
    // A file replaced by a directory of the same name.
    std::fs::remove_file(t.path().join("d/e/z.txt")).unwrap();
    write(t.path(), "d/e/z.txt/inside.txt", b"inside");
    touch_back(t.path(), "d/e", e_mtime);
    commit_records_the_directory(t.path());
    // Each of those commits recorded the listings again: all reused now, once the
    // new stats are older than a probe.
    std::thread::sleep(Duration::from_millis(20));
    json(t.path(), &["commit", "-m", "same"]);
    let (listed, reused) = listed_and_reused(t.path());
    assert_eq!(listed, 1, "{reused}");
}

/// A listing is not trusted while the directory's stat is racy (not older than the
/// index's clock probe), as for files.
#[test]
fn a_racy_directory_is_listed() {
    let t = armed_listings();
    let path = t.path().join(".snapgraph/index");
    let mut ix = Index::load(&path, t.path()).unwrap();
    let Some(IndexEntry::Dir {
        listing: Some(listing),
    }) = ix.entries.get("/d").cloned()
    else {
        panic!("a listing for /d: {:?}", ix.entries);
    };
    // Every directory was put back to one instant: all racy at a probe of it, none
    // a nanosecond later.
    let walk = |ix: &Index| {
        let r = scan::walk(
            t.path(),
            &t.path().join(".snapgraph"),
            None,
            Some(ix),
            &mut |_| Ok(true),
        )
        .unwrap();
        (r.listed, r.reused)
    };
    ix.probe_ns = listing.stat.mtime_ns;
    assert_eq!(walk(&ix), (4, 0));
    ix.probe_ns = listing.stat.mtime_ns + 1;
    assert_eq!(walk(&ix), (1, 3));
}

/// The ignore rules in force are part of a listing: an ignore file edited in place
/// (which does not touch its directory) or one that ignores itself (so the index
/// has no entry for it) still changes what is recorded.
#[test]
fn ignore_files_below_the_root_decide_a_listing() {
    let t = armed_listings();
    let old = mtime(t.path(), "d/b.txt");
    // An ignore file in d that ignores itself and b.txt.
    write(t.path(), "d/.snapgraphignore", b".snapgraphignore\nb.txt\n");
    let out = commit_records_the_directory(t.path());
    assert_eq!(out["files_removed"], 1, "{out}");
    let listed = ok(t.path(), &["ls", "-r", "main"]);
    assert!(
        !listed.contains("b.txt") && !listed.contains(".snapgraphignore"),
        "{listed}"
    );
    // Settled: d's listing (with its rules) recorded and trusted.
    std::thread::sleep(Duration::from_millis(20));
    json(t.path(), &["commit", "-m", "same"]);
    let (_, reused) = listed_and_reused(t.path());
    assert_eq!(reused, 3);
    // Edited in place, same length, its old mtime put back: d's stat is unchanged,
    // its rules are not, and e below it inherits them.
    let d_mtime = mtime(t.path(), "d");
    std::fs::write(
        t.path().join("d/.snapgraphignore"),
        b".snapgraphignore\nc.txt\n",
    )
    .unwrap();
    set_mtime(t.path(), "d/.snapgraphignore", old);
    touch_back(t.path(), "d", d_mtime);
    assert_eq!(listed_and_reused(t.path()), (3, 1));
    let out = commit_records_the_directory(t.path());
    assert_eq!(added_and_removed(&out), (1, 1), "{out}");
    // Removed: everything in d is recorded again.
    std::fs::remove_file(t.path().join("d/.snapgraphignore")).unwrap();
    touch_back(t.path(), "d", d_mtime);
    let out = commit_records_the_directory(t.path());
    assert_eq!(out["files_added"], 1, "{out}");
    // The root's ignore file reaches every directory.
    write(t.path(), ".snapgraphignore", b"c.txt\n");
    std::thread::sleep(Duration::from_millis(20));
    let out = commit_records_the_directory(t.path());
    assert_eq!(out["files_removed"], 1, "{out}");
}

/// What the index never records (a FIFO, a nested repository) keeps its directory
/// listed, so it is reported by every command as before.
#[test]
fn unrecorded_entries_keep_their_directory_listed() {
    let t = armed_listings();
    mkfifo(&t.path().join("d/fifo"));
    let out = run_in(t.path(), &["commit", "-m", "x"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("fifo"));
    std::thread::sleep(Duration::from_millis(20));
    let out = run_in(t.path(), &["commit", "-m", "x"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("fifo"));
    let (listed, _) = listed_and_reused(t.path());
    assert_eq!(listed, 2);
    ok(&t.path().join("d/e"), &["init", "inner", "--force"]);
    for _ in 0..2 {
        let out = run_in(t.path(), &["commit", "-m", "x"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("another repository"), "{stderr}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = json(t.path(), &["status"]);
    assert!(
        status["nested"][0].as_str().unwrap().ends_with("d/e/inner"),
        "{status}"
    );
}

/// A checkout that writes the whole tree records no listings (it did not list the
/// directories it wrote); one that moves a clean working directory by what differs
/// keeps the listings of the directories it did not touch. The next commit records
/// them and the one after reuses them.
#[test]
fn listings_after_a_checkout_are_taken_by_the_next_commit() {
    let t = armed_listings();
    let tip = json(t.path(), &["log", "-n", "1"]);
    let id = tip[0]["id"].as_str().unwrap().to_string();
    write(t.path(), "d/e/more.txt", b"more");
    ok(t.path(), &["commit", "-m", "more"]);
    ok(t.path(), &["branch", "old", "--at", &id]);
    ok(t.path(), &["checkout", "old"]);
    // The root and d/e (which lost more.txt) are listed; d and empty reused.
    assert_eq!(listed_and_reused(t.path()), (2, 2));
    ok(t.path(), &["checkout", "main"]);
    ok(t.path(), &["checkout", "old", "--force"]);
    let (listed, reused) = listed_and_reused(t.path());
    assert_eq!((listed, reused), (4, 0));
    std::thread::sleep(Duration::from_millis(20));
    let out = commit_records_the_directory(t.path());
    assert_eq!(out["nothing_to_commit"], true, "{out}");
    let (listed, _) = listed_and_reused(t.path());
    assert!(listed < 4, "{listed}");
}

/// A commit's first walk surveys the whole tree ([`scan::survey`]): it names each
/// change once (a new directory for all below it, a removal, a retyped entry, an
/// edit), takes the listings that no longer hold, and stops past its limit. The
/// commit it narrows records the tree exactly and every listing again, so the
/// next walk lists only the root.
#[test]
fn a_survey_names_each_change_once_and_its_commit_keeps_every_listing() {
    let t = armed_listings();
    let dot = t.path().join(".snapgraph");
    write(t.path(), "d/b.txt", b"bravo, longer");
    write(t.path(), "d/e/new/x.txt", b"x");
    write(t.path(), "d/e/new/deeper/y.txt", b"y");
    std::fs::remove_dir(t.path().join("empty")).unwrap();
    std::fs::remove_file(t.path().join("link")).unwrap();
    write(t.path(), "link", b"a file now");
    // Past the racy window of every stat taken above.
    std::thread::sleep(Duration::from_millis(20));
    let ix = Index::load(&dot.join("index"), t.path()).unwrap();
    let survey = scan::survey(t.path(), &ix, &dot, 16).unwrap();
    assert_eq!(
        survey.changed.as_deref(),
        Some(&["/d/b.txt", "/d/e/new", "/empty", "/link"].map(String::from)[..])
    );
    let mut listed: Vec<&str> = survey.listings.keys().map(String::as_str).collect();
    listed.sort_unstable();
    assert_eq!(listed, ["/d/e", "/d/e/new", "/d/e/new/deeper"]);
    assert_eq!(survey.files, 2, "a.txt and d/e/c.txt");
    assert!(scan::survey(t.path(), &ix, &dot, 3)
        .unwrap()
        .changed
        .is_none());
    // `status` takes the same survey.
    let status = json(t.path(), &["status"]);
    assert_eq!(
        status["added"],
        serde_json::json!(["/d/e/new/deeper/y.txt", "/d/e/new/x.txt"]),
        "{status}"
    );
    assert_eq!(
        status["modified"],
        serde_json::json!(["/d/b.txt", "/link"]),
        "{status}"
    );
    assert_status_is_the_full_scans(t.path());
    let out = commit_records_the_directory(t.path());
    assert_eq!(out["files_skipped"], 2, "{out}");
    assert_eq!(added_and_removed(&out), (2, 0), "{out}");
    assert_eq!(listed_and_reused(t.path()), (1, 4));
    settled(t.path());
    // A directory's entries renamed (its mtime put back): its listing, taken by the
    // survey, is recorded by a commit that has nothing else to do below it.
    let e_mtime = mtime(t.path(), "d/e");
    std::fs::rename(t.path().join("d/e/c.txt"), t.path().join("d/e/c2.txt")).unwrap();
    touch_back(t.path(), "d/e", e_mtime);
    write(t.path(), "a.txt", b"alpha, edited");
    std::thread::sleep(Duration::from_millis(20));
    let out = commit_records_the_directory(t.path());
    assert_eq!(added_and_removed(&out), (1, 1), "{out}");
    assert_eq!(listed_and_reused(t.path()), (1, 4));
    // A directory touched, nothing in it changed: nothing to commit, and the
    // listing is recorded all the same.
    touch_back(t.path(), "d", SystemTime::now() - Duration::from_secs(50));
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(listed_and_reused(t.path()), (2, 3));
    settled(t.path());
    assert_eq!(listed_and_reused(t.path()), (1, 4));
    // A directory touched beside a change elsewhere: the narrowed scan does not
    // pass it, and records its new listing all the same.
    touch_back(t.path(), "d/e", SystemTime::now() - Duration::from_secs(40));
    write(t.path(), "a.txt", b"alpha, edited again");
    std::thread::sleep(Duration::from_millis(20));
    let out = commit_records_the_directory(t.path());
    assert_eq!(out["files_modified"], 1, "{out}");
    assert_eq!(listed_and_reused(t.path()), (1, 4));
}

/// More changes than a survey may name: the commit scans the whole tree, and
/// misses nothing. A directory removed whole counts as one change.
#[test]
fn a_survey_past_its_limit_falls_back_to_the_whole_tree() {
    let t = repo();
    pad(t.path());
    write(t.path(), "z/last.txt", b"last");
    age(t.path());
    ok(t.path(), &["commit", "-m", "base"]);
    settled(t.path());
    let edited = 300;
    for i in 0..edited {
        write(t.path(), &format!("0pad/{i:04}"), b"edited, longer");
    }
    std::thread::sleep(Duration::from_millis(20));
    let dot = t.path().join(".snapgraph");
    let ix = Index::load(&dot.join("index"), t.path()).unwrap();
    let survey = scan::survey(t.path(), &ix, &dot, 256).unwrap();
    assert!(survey.changed.is_none());
    let out = commit_records_the_directory(t.path());
    assert_eq!(out["files_modified"], edited, "{out}");
    settled(t.path());
    std::fs::remove_dir_all(t.path().join("0pad")).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let ix = Index::load(&dot.join("index"), t.path()).unwrap();
    let survey = scan::survey(t.path(), &ix, &dot, 256).unwrap();
    assert_eq!(survey.changed, Some(vec!["/0pad".to_string()]));
    let out = commit_records_the_directory(t.path());
    assert_eq!(
        out["files_removed"],
        snapgraph_cli::ahead::MIN_ENTRIES + 8,
        "{out}"
    );
    settled(t.path());
}
