//! `snapgraph watch`: with a watcher running, every kind of change is seen by the
//! next commit, and a watcher that cannot vouch for the whole history since the
//! index was saved (killed, restarted, overflowed, stopped) makes the commit scan
//! the whole tree. Every commit is checked against a twin directory committed
//! without a watcher (same edits, its own repository): the two tips' trees agree.
//! On a machine without inotify the tests print why and skip.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime};

use proptest::prelude::*;
use serde_json::Value;

mod common;
use common::*;

/// A running `snapgraph watch`, killed when dropped.
struct Watcher {
    child: Child,
}

impl Watcher {
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether this kernel gives us inotify; prints why not.
fn inotify_available() -> bool {
    match rustix::fs::inotify::init(rustix::fs::inotify::CreateFlags::CLOEXEC) {
        Ok(_) => true,
        Err(e) => {
            eprintln!("skipping: inotify is not available here ({e})");
            false
        }
    }
}

/// Starts a watcher in `root` and waits until it answers.
fn start(root: &Path) -> Watcher {
    let mut child = Command::new(&*BIN)
        .arg("watch")
        .current_dir(root)
        .env("SNAPGRAPH_WATCH_TEST_HOOKS", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the binary runs");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("watching "), "watch said {line:?}");
    Watcher { child }
}

/// One request to the watcher's socket (the protocol of `snapgraph_cli::watch`).
fn request(root: &Path, line: &str) -> String {
    let mut s = UnixStream::connect(root.join(".snapgraph/watch.sock")).unwrap();
    writeln!(s, "{line}").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// A copy of `from`'s tree (not its `.snapgraph`) into `to`, replacing what `to`
/// holds besides its own `.snapgraph`.
fn mirror(from: &Path, to: &Path) {
    for e in std::fs::read_dir(to).unwrap() {
        let p = e.unwrap().path();
        if p.file_name().unwrap() == ".snapgraph" {
            continue;
        }
        if std::fs::symlink_metadata(&p).unwrap().is_dir() {
            std::fs::remove_dir_all(&p).unwrap();
        } else {
            std::fs::remove_file(&p).unwrap();
        }
    }
    fn copy(from: &Path, to: &Path, top: bool) {
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let (src, dst) = (e.path(), to.join(e.file_name()));
            if top && e.file_name() == ".snapgraph" {
                continue;
            }
            let m = std::fs::symlink_metadata(&src).unwrap();
            if m.file_type().is_symlink() {
                std::os::unix::fs::symlink(std::fs::read_link(&src).unwrap(), &dst).unwrap();
            } else if m.is_dir() {
                std::fs::create_dir(&dst).unwrap();
                copy(&src, &dst, false);
            } else {
                std::fs::copy(&src, &dst).unwrap();
                std::fs::set_permissions(&dst, m.permissions()).unwrap();
            }
        }
    }
    copy(from, to, true);
}

fn tree_of(root: &Path) -> Option<String> {
    let out = run_in(root, &["show", "main", "--json"]);
    if !out.status.success() {
        return None;
    }
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    Some(v["tree"].as_str().unwrap().to_string())
}

/// The oracle: `twin` made a copy of `root`'s tree and committed without a watcher
/// or a stat cache (every file read); its tip's tree must be `root`'s tip's.
fn assert_same_as_without_watcher(root: &Path, twin: &Path, after: &Value) {
    mirror(root, twin);
    let _ = std::fs::remove_file(twin.join(".snapgraph/index"));
    ok(twin, &["commit", "-m", "twin"]);
    assert_eq!(
        tree_of(root),
        tree_of(twin),
        "the watched commit misses a change: {after}"
    );
}

/// A repository with a few files committed, its twin, and a watcher whose token the
/// index holds (the first commit with a watcher scans everything and stores it).
fn armed() -> Option<(tempfile::TempDir, tempfile::TempDir, Watcher)> {
    if !inotify_available() {
        return None;
    }
    let t = repo();
    write(t.path(), "a.txt", b"alpha");
    write(t.path(), "d/b.txt", b"bravo");
    write(t.path(), "d/e/c.txt", b"charlie");
    std::fs::create_dir_all(t.path().join("empty")).unwrap();
    std::os::unix::fs::symlink("a.txt", t.path().join("link")).unwrap();
    ok(t.path(), &["commit", "-m", "one"]);
    let w = start(t.path());
    let first = json(t.path(), &["commit", "-m", "same"]);
    assert_eq!(first["nothing_to_commit"], true, "{first}");
    assert_eq!(first["watched_paths"], Value::Null, "{first}");
    let twin = repo();
    Some((t, twin, w))
}

/// Commits `root`; requires that the watcher's report was used (and how many paths
/// it named, if `paths` says) and that the twin agrees.
fn commit_watched(root: &Path, twin: &Path, paths: Option<u64>) -> Value {
    let out = json(root, &["commit", "-m", "watched"]);
    assert!(
        out["watched_paths"].is_u64(),
        "the watcher's report was not used: {out}"
    );
    if let Some(n) = paths {
        assert_eq!(out["watched_paths"], n, "{out}");
    }
    assert_same_as_without_watcher(root, twin, &out);
    out
}

/// `status` (which takes the watcher's report as the commit does), then
/// [`commit_watched`]: the files `status` names as added, modified and removed are
/// as many as the commit then records.
fn status_then_commit_watched(root: &Path, twin: &Path) -> Value {
    let status = json(root, &["status"]);
    // `diff` takes the report too, and reads only the changed files' directories:
    // it lists what `status` lists, and its patches and counts are those of a diff
    // of the same tree made without a watcher or a stat cache.
    let diff = json(root, &["diff", "-p", "--stat"]);
    for k in ["added", "modified", "removed", "changes"] {
        assert_eq!(diff[k], status[k], "{k}: diff {diff} status {status}");
    }
    mirror(root, twin);
    let _ = std::fs::remove_file(twin.join(".snapgraph/index"));
    let unwatched = json(twin, &["diff", "-p", "--stat"]);
    for k in ["changes", "stat", "patches"] {
        assert_eq!(
            diff[k], unwatched[k],
            "{k}: watched {diff} unwatched {unwatched}"
        );
    }
    let out = commit_watched(root, twin, None);
    let listed = |k: &str| status[k].as_array().map_or(0, |a| a.len() as u64);
    let counted = |k: &str| out[k].as_u64().unwrap_or(0);
    assert_eq!(
        (listed("added"), listed("modified"), listed("removed")),
        (
            counted("files_added"),
            counted("files_modified"),
            counted("files_removed")
        ),
        "status {status} then commit {out}"
    );
    out
}

/// Commits `root`; requires a whole-tree scan (no usable report) and that the twin
/// agrees.
fn commit_scanned(root: &Path, twin: &Path) -> Value {
    let out = json(root, &["commit", "-m", "scanned"]);
    assert_eq!(out["watched_paths"], Value::Null, "{out}");
    assert_same_as_without_watcher(root, twin, &out);
    out
}

#[test]
fn nothing_changed_is_answered_without_a_walk() {
    let Some((t, twin, _w)) = armed() else { return };
    let out = commit_watched(t.path(), twin.path(), Some(0));
    assert_eq!(out["nothing_to_commit"], true, "{out}");
    assert_eq!(out["files_skipped"], 3, "{out}");
    let status = json(t.path(), &["status"]);
    assert!(status["watcher"]["pid"].is_u64(), "{status}");
    assert!(ok(t.path(), &["status"]).contains("watcher: running"));
}

#[test]
fn every_kind_of_change_is_seen() {
    let Some((t, twin, _w)) = armed() else { return };
    let root = t.path();
    let p = |rel: &str| root.join(rel);
    // An edit, which `status` names from the watcher's report.
    write(root, "a.txt", b"ALPHA, longer");
    let status = json(root, &["status"]);
    assert_eq!(
        status["modified"],
        serde_json::json!(["/a.txt"]),
        "{status}"
    );
    let out = commit_watched(root, twin.path(), Some(1));
    assert_eq!(out["files_changed"], 1, "{out}");
    // A same-size edit within the same second (the mtime may not move).
    let before = std::fs::metadata(p("d/b.txt")).unwrap().modified().unwrap();
    write(root, "d/b.txt", b"BRAVO");
    std::fs::File::options()
        .write(true)
        .open(p("d/b.txt"))
        .unwrap()
        .set_modified(before)
        .unwrap();
    let out = commit_watched(root, twin.path(), Some(1));
    assert_eq!(out["files_changed"], 1, "{out}");
    // Create and delete.
    write(root, "new.txt", b"new");
    std::fs::remove_file(p("d/e/c.txt")).unwrap();
    let out = commit_watched(root, twin.path(), Some(2));
    assert_eq!(out["files_added"], 1, "{out}");
    assert_eq!(out["files_removed"], 1, "{out}");
    // Renames into and out of a directory.
    std::fs::rename(p("new.txt"), p("d/e/new.txt")).unwrap();
    commit_watched(root, twin.path(), None);
    std::fs::rename(p("d/b.txt"), p("b-out.txt")).unwrap();
    commit_watched(root, twin.path(), None);
    // A directory renamed with its contents, then its old name made again.
    std::fs::rename(p("d"), p("moved")).unwrap();
    std::fs::create_dir(p("d")).unwrap();
    write(root, "d/again.txt", b"again");
    commit_watched(root, twin.path(), None);
    write(root, "moved/e/inside-moved.txt", b"after the move");
    commit_watched(root, twin.path(), Some(1));
    // New nested directories with files made at once (before a watch can be added).
    std::fs::create_dir_all(p("n1/n2/n3")).unwrap();
    write(root, "n1/n2/n3/deep.txt", b"deep");
    write(root, "n1/top.txt", b"top");
    commit_watched(root, twin.path(), Some(1));
    // ... and edits inside them later (their watches exist).
    write(root, "n1/n2/n3/deep.txt", b"deeper");
    let out = commit_watched(root, twin.path(), Some(1));
    assert_eq!(out["files_modified"], 1, "{out}");
    // chmod.
    std::fs::set_permissions(p("a.txt"), std::fs::Permissions::from_mode(0o755)).unwrap();
    commit_watched(root, twin.path(), Some(1));
    // A symlink retargeted (by rename over it, as `ln -sfn` does).
    std::os::unix::fs::symlink("b-out.txt", p("link.tmp")).unwrap();
    std::fs::rename(p("link.tmp"), p("link")).unwrap();
    commit_watched(root, twin.path(), None);
    // Ignore-file changes: newly ignored and un-ignored entries, a whole
    // directory ignored then brought back (its watches added again).
    write(root, ".snapgraphignore", b"*.txt\n");
    let out = commit_watched(root, twin.path(), None);
    assert!(out["files_removed"].as_u64().unwrap() > 3, "{out}");
    write(root, ".snapgraphignore", b"n1/\n");
    commit_watched(root, twin.path(), None);
    write(root, "n1/n2/hidden.txt", b"ignored for now");
    commit_watched(root, twin.path(), None);
    std::fs::remove_file(p(".snapgraphignore")).unwrap();
    let out = commit_watched(root, twin.path(), None);
    assert!(out["files_added"].as_u64().unwrap() >= 3, "{out}");
    write(root, "n1/n2/hidden.txt", b"seen again");
    commit_watched(root, twin.path(), Some(1));
    // An ignore file in a subdirectory.
    write(root, "moved/.snapgraphignore", b"e/\n");
    commit_watched(root, twin.path(), None);
    // A file replaced by a directory and back.
    std::fs::remove_file(p("a.txt")).unwrap();
    write(root, "a.txt/inner", b"inner");
    commit_watched(root, twin.path(), None);
    std::fs::remove_dir_all(p("a.txt")).unwrap();
    write(root, "a.txt", b"a file again");
    commit_watched(root, twin.path(), None);
    // A nested repository appearing in a directory.
    std::fs::create_dir_all(p("moved/sub/.snapgraph")).unwrap();
    write(
        root,
        "moved/sub/.snapgraph/config",
        b"store = sqlite:store.db\n",
    );
    write(root, "moved/sub/x.txt", b"x");
    commit_watched(root, twin.path(), None);
    // Nothing changed after all of it.
    let out = commit_watched(root, twin.path(), Some(0));
    assert_eq!(out["nothing_to_commit"], true, "{out}");
}

#[test]
fn a_killed_or_restarted_watcher_means_a_full_scan() {
    let Some((t, twin, mut w)) = armed() else {
        return;
    };
    let root = t.path();
    write(root, "a.txt", b"one");
    commit_watched(root, twin.path(), Some(1));
    w.kill();
    // Changes while no watcher runs: the socket is left, nobody answers.
    write(root, "a.txt", b"two");
    write(root, "d/new.txt", b"new");
    commit_scanned(root, twin.path());
    assert_eq!(json(root, &["status"])["watcher"], Value::Null);
    // A new watcher: its first answer cannot vouch for what happened before it.
    write(root, "d/b.txt", b"changed before the restart");
    let _w2 = start(root);
    commit_scanned(root, twin.path());
    write(root, "d/e/c.txt", b"after the restart");
    commit_watched(root, twin.path(), Some(1));
}

#[test]
fn an_index_written_by_another_command_is_not_vouched_for() {
    let Some((t, twin, _w)) = armed() else { return };
    let root = t.path();
    write(root, "a.txt", b"one");
    commit_watched(root, twin.path(), Some(1));
    // `commit PATH` saves an index (incomplete) and stores no token.
    write(root, "d/b.txt", b"two");
    ok(root, &["commit", "d/b.txt", "-m", "path"]);
    assert!(!root.join(".snapgraph/watch.token").exists());
    write(root, "a.txt", b"three");
    commit_scanned(root, twin.path());
    // An index put back by hand (same bytes, another file): not the token's.
    write(root, "a.txt", b"four");
    commit_watched(root, twin.path(), Some(1));
    let index = root.join(".snapgraph/index");
    let bytes = std::fs::read(&index).unwrap();
    std::fs::remove_file(&index).unwrap();
    std::fs::write(&index, bytes).unwrap();
    write(root, "d/e/c.txt", b"five");
    commit_scanned(root, twin.path());
}

#[test]
fn an_overflow_means_a_full_scan() {
    let Some((t, twin, _w)) = armed() else { return };
    let root = t.path();
    write(root, "a.txt", b"one");
    commit_watched(root, twin.path(), Some(1));
    write(root, "d/b.txt", b"lost with the queue");
    assert_eq!(request(root, "test-overflow"), "ok\n");
    commit_scanned(root, twin.path());
    // A new directory made after the reset is watched again.
    std::fs::create_dir_all(p_join(root, "late/deeper")).unwrap();
    write(root, "late/deeper/f.txt", b"f");
    commit_watched(root, twin.path(), Some(1));
    write(root, "late/deeper/f.txt", b"g");
    commit_watched(root, twin.path(), Some(1));
}

/// A watched commit of `root` that read the index in part (`SNAPGRAPH_TIMINGS`
/// names how many of its entries it read), checked against the twin; returns how
/// many entries it read and how many the index holds.
fn commit_watched_in_part(root: &Path, twin: &Path) -> (u64, u64) {
    let out = Command::new(&*BIN)
        .args(["commit", "-m", "watched", "--json", "--quiet"])
        .env("SNAPGRAPH_TIMINGS", "1")
        .current_dir(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["watched_paths"].is_u64(), "the report was not used: {v}");
    assert_same_as_without_watcher(root, twin, &v);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.contains("index loaded ("))
        .unwrap_or_else(|| panic!("no index line: {stderr}"));
    let counts = line.split('(').nth(1).unwrap().trim_end_matches(')');
    let (read, all) = counts
        .split_once(" of ")
        .unwrap_or_else(|| panic!("the index was read whole: {line}"));
    let all = all.trim_end_matches(" entries");
    (read.parse().unwrap(), all.parse().unwrap())
}

#[test]
fn a_watched_commit_reads_the_index_where_the_changes_are() {
    if !inotify_available() {
        return;
    }
    // 40 directories of 20 files: about 840 entries, four blocks of the index.
    let t = repo();
    let root = t.path();
    grid(root, 40);
    ok(root, &["commit", "-m", "one"]);
    let _w = start(root);
    json(root, &["commit", "-m", "token"]);
    let twin = repo();
    // The first save after the token rewrote the base with its block table.
    assert!(root.join(".snapgraph/index.table").exists());
    write(root, "d05/f03.txt", b"edited");
    let (read, all) = commit_watched_in_part(root, twin.path());
    assert_eq!(all, 840);
    assert!(read <= 4, "{read} entries read for one file");
    // Changes in other blocks: a file added, one removed, a directory removed and
    // one added with files, each committed (the journal grows: its paths are read
    // too, and counted). Each load counts what the commits before it left.
    write(root, "d20/new.txt", b"new");
    assert_eq!(commit_watched_in_part(root, twin.path()).1, 840);
    std::fs::remove_file(root.join("d35/f10.txt")).unwrap();
    assert_eq!(commit_watched_in_part(root, twin.path()).1, 841);
    std::fs::remove_dir_all(root.join("d10")).unwrap();
    assert_eq!(commit_watched_in_part(root, twin.path()).1, 840);
    std::fs::create_dir_all(root.join("d10x/deep")).unwrap();
    write(root, "d10x/deep/a.txt", b"a");
    write(root, "d10/back.txt", b"back");
    assert_eq!(commit_watched_in_part(root, twin.path()).1, 840 - 21);
    write(root, "d10x/deep/a.txt", b"again");
    assert_eq!(commit_watched_in_part(root, twin.path()).1, 819 + 3 + 2);
    // `status` reads the index in part as the commit does, and agrees with it.
    write(root, "d30/f00.txt", b"status first");
    std::fs::remove_file(root.join("d31/f01.txt")).unwrap();
    write(root, "d32/added.txt", b"added");
    let out = status_then_commit_watched(root, twin.path());
    assert_eq!(out["files_changed"], 3, "{out}");
    let status = json(root, &["status"]);
    for k in ["added", "modified", "removed"] {
        assert_eq!(status[k], serde_json::json!([]), "{status}");
    }
    // Nothing changed: the counts alone, as the whole index has them.
    let out = json(root, &["commit", "-m", "same"]);
    assert_eq!(out["nothing_to_commit"], true, "{out}");
    assert_eq!(out["files_skipped"], 800 + 1 - 1 - 20 + 2 - 1 + 1, "{out}");
    // A table that does not check: the whole index, and the same commits.
    std::fs::write(root.join(".snapgraph/index.table"), b"SGITABL\0garbage").unwrap();
    write(root, "d39/f19.txt", b"last");
    let out = commit_watched(root, twin.path(), Some(1));
    assert_eq!(out["files_changed"], 1, "{out}");
}

/// `checkout REV` of `root` with a watcher: it must move by what differs and read
/// the index in part (its timeline says so); its JSON report.
fn checkout_watched(root: &Path, rev: &str) -> Value {
    let (report, timeline) = checkout_switched(root, rev);
    let line = timeline
        .lines()
        .find(|l| l.contains("index loaded ("))
        .unwrap_or_else(|| panic!("no index line: {timeline}"));
    assert!(line.contains(" of "), "the index was read whole: {line}");
    report
}

/// A clean checkout with a watcher running takes the watcher's report for its dirty
/// check, reads the index in part, and leaves the watcher trusted: the next commit
/// takes its report (the switch's own writes among it) and misses nothing.
#[test]
fn a_watched_switch_reads_the_index_in_part_and_keeps_the_watcher() {
    if !inotify_available() {
        return;
    }
    let t = repo();
    let root = t.path();
    grid(root, 30);
    ok(root, &["commit", "-m", "one"]);
    ok(root, &["branch", "old"]);
    let _w = start(root);
    json(root, &["commit", "-m", "token"]);
    let twin = repo();
    write(root, "d05/f03.txt", b"edited");
    write(root, "d20/new.txt", b"new");
    std::fs::remove_file(root.join("d25/f10.txt")).unwrap();
    write(root, "d40/deep/g.txt", b"a new directory");
    commit_watched(root, twin.path(), Some(4));
    for (rev, files) in [("old", 600), ("main", 601)] {
        let report = checkout_watched(root, rev);
        assert_eq!(report["files"], files, "{report}");
        let fresh = tempfile::tempdir().unwrap();
        let to = fresh.path().join("t");
        let full = json(root, &["checkout", rev, "--to", to.to_str().unwrap()]);
        for k in ["files", "dirs", "symlinks", "bytes"] {
            assert_eq!(report[k], full[k], "{k}: switched {report} full {full}");
        }
        assert_eq!(snapshot_of(root), snapshot_of(&to), "checkout {rev}");
        // The watcher's report (the switch's writes) is taken, and finds the tree
        // the branch holds.
        let same = json(root, &["commit", "-m", "same"]);
        assert!(
            same["watched_paths"].is_u64(),
            "the watcher was not used: {same}"
        );
        assert_eq!(same["nothing_to_commit"], true, "{same}");
    }
    write(root, "d07/f07.txt", b"after the switches");
    let out = commit_watched(root, twin.path(), None);
    assert_eq!(out["files_changed"], 1, "{out}");
}

fn p_join(root: &Path, rel: &str) -> PathBuf {
    root.join(rel)
}

#[test]
fn stop_ends_the_watcher_and_commits_scan_again() {
    let Some((t, twin, mut w)) = armed() else {
        return;
    };
    let root = t.path();
    let out = json(root, &["watch", "--stop"]);
    assert_eq!(out["stopped"], true, "{out}");
    let status = w.child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(!root.join(".snapgraph/watch.sock").exists());
    assert_eq!(json(root, &["status"])["watcher"], Value::Null);
    assert!(!ok(root, &["status"]).contains("watcher"));
    write(root, "a.txt", b"after the stop");
    commit_scanned(root, twin.path());
    let again = json(root, &["watch", "--stop"]);
    assert_eq!(again["stopped"], false, "{again}");
}

#[test]
fn a_second_watcher_is_refused() {
    let Some((t, _twin, _w)) = armed() else {
        return;
    };
    let err = fails(t.path(), &["watch"]);
    assert!(err.contains("already runs"), "{err}");
}

// ------------------------------------------------------------------ proptest

const FILES: &[&str] = &["a", "b", "d/c", "d/k", "d/f/g", "h/i"];
const DIRS: &[&str] = &["d", "d/f", "h", "x/y"];

#[derive(Debug, Clone)]
enum Edit {
    Write { file: usize, len: u8, seed: u8 },
    SameSize { file: usize, seed: u8 },
    Remove { file: usize },
    Chmod { file: usize, exec: bool },
    Mkdir { dir: usize },
    RemoveDir { dir: usize },
    Rename { from: usize, to: usize },
    Link { file: usize, target: usize },
    Ignore { file: usize },
    Unignore,
}

fn edit() -> impl Strategy<Value = Edit> {
    let f = 0..FILES.len();
    let d = 0..DIRS.len();
    prop_oneof![
        (f.clone(), any::<u8>(), any::<u8>()).prop_map(|(file, len, seed)| Edit::Write {
            file,
            len,
            seed
        }),
        (f.clone(), any::<u8>()).prop_map(|(file, seed)| Edit::SameSize { file, seed }),
        f.clone().prop_map(|file| Edit::Remove { file }),
        (f.clone(), any::<bool>()).prop_map(|(file, exec)| Edit::Chmod { file, exec }),
        d.clone().prop_map(|dir| Edit::Mkdir { dir }),
        d.prop_map(|dir| Edit::RemoveDir { dir }),
        (f.clone(), f.clone()).prop_map(|(from, to)| Edit::Rename { from, to }),
        (f.clone(), f.clone()).prop_map(|(file, target)| Edit::Link { file, target }),
        f.prop_map(|file| Edit::Ignore { file }),
        Just(Edit::Unignore),
    ]
}

fn apply(root: &Path, e: &Edit) {
    let p = |rel: &str| root.join(rel);
    let is_file = |rel: &str| std::fs::symlink_metadata(p(rel)).is_ok_and(|m| m.is_file());
    let parent_ok = |rel: &str| {
        let parent = p(rel).parent().unwrap().to_path_buf();
        let _ = std::fs::create_dir_all(&parent);
        parent.is_dir()
    };
    match e {
        Edit::Write { file, len, seed } => {
            let rel = FILES[*file];
            if parent_ok(rel) && !p(rel).is_dir() {
                let _ = std::fs::remove_file(p(rel));
                std::fs::write(p(rel), pseudo_random(usize::from(*len), u64::from(*seed))).unwrap();
            }
        }
        Edit::SameSize { file, seed } => {
            let rel = FILES[*file];
            if is_file(rel) {
                let m = std::fs::metadata(p(rel)).unwrap();
                let old = m.modified().unwrap();
                let len = m.len() as usize;
                std::fs::write(p(rel), pseudo_random(len, u64::from(*seed) + 7)).unwrap();
                let f = std::fs::File::options().write(true).open(p(rel)).unwrap();
                f.set_modified(old).unwrap();
            }
        }
        Edit::Remove { file } => {
            if !p(FILES[*file]).is_dir() {
                let _ = std::fs::remove_file(p(FILES[*file]));
            }
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
        Edit::RemoveDir { dir } => {
            if std::fs::symlink_metadata(p(DIRS[*dir])).is_ok_and(|m| m.is_dir()) {
                std::fs::remove_dir_all(p(DIRS[*dir])).unwrap();
            }
        }
        Edit::Rename { from, to } => {
            let (a, b) = (FILES[*from], FILES[*to]);
            if a != b && is_file(a) && parent_ok(b) && !p(b).is_dir() {
                std::fs::rename(p(a), p(b)).unwrap();
            }
        }
        Edit::Link { file, target } => {
            let rel = FILES[*file];
            if parent_ok(rel) && !p(rel).is_dir() {
                let _ = std::fs::remove_file(p(rel));
                std::os::unix::fs::symlink(FILES[*target], p(rel)).unwrap();
            }
        }
        Edit::Ignore { file } => {
            let name = FILES[*file].rsplit('/').next().unwrap();
            std::fs::write(p(".snapgraphignore"), format!("{name}\n")).unwrap();
        }
        Edit::Unignore => {
            let _ = std::fs::remove_file(p(".snapgraphignore"));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Random edits in rounds with a watcher running: after every commit the tip's
    /// tree is the one a commit without the watcher (and without a stat cache)
    /// records for the same directory.
    #[test]
    fn a_watched_commit_is_a_commit_without_the_watcher(
        rounds in prop::collection::vec(prop::collection::vec(edit(), 1..6), 1..6)
    ) {
        let Some((t, twin, _w)) = armed() else { return Ok(()) };
        let when = SystemTime::now() - Duration::from_secs(1000);
        for rel in FILES {
            write(t.path(), rel, &pseudo_random(8, 1));
            let f = std::fs::File::options().write(true).open(t.path().join(rel)).unwrap();
            f.set_modified(when).unwrap();
        }
        commit_watched(t.path(), twin.path(), None);
        for round in &rounds {
            for e in round {
                apply(t.path(), e);
            }
            status_then_commit_watched(t.path(), twin.path());
            let again = commit_watched(t.path(), twin.path(), Some(0));
            prop_assert_eq!(&again["nothing_to_commit"], &serde_json::json!(true), "{}", again);
        }
    }
}

/// A checkout of the moved branch keeps the directory's own changes (made while
/// watched, before the checkout asked the watcher): the next commit sees them,
/// though the watcher saw nothing change after the checkout.
#[test]
fn own_changes_kept_by_a_checkout_of_the_moved_branch_are_committed() {
    let Some((t, _twin, _w)) = armed() else {
        return;
    };
    let other = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", t.path().join(".snapgraph/store.db").display());
    ok(other.path(), &["init", "--store", &store]);
    ok(other.path(), &["checkout", "main"]);
    write(other.path(), "a.txt", b"alpha from the other directory");
    ok(other.path(), &["commit", "-m", "other"]);

    write(t.path(), "d/b.txt", b"bravo changed here");
    let out = json(t.path(), &["checkout", "main"]);
    assert_eq!(out["kept"], serde_json::json!(["/d/b.txt"]), "{out}");
    let committed = json(t.path(), &["commit", "-m", "mine"]);
    assert_eq!(committed["files_modified"], 1, "{committed}");
    assert_eq!(ok(t.path(), &["cat", "main:d/b.txt"]), "bravo changed here");
    assert_eq!(
        ok(t.path(), &["cat", "main:a.txt"]),
        "alpha from the other directory"
    );
}
