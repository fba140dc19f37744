//! End-to-end tests: run the `snapgraph` binary on temporary directories.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

mod common;
use common::*;

#[test]
fn round_trip_of_a_rich_tree() {
    let t = repo();
    rich_tree(t.path());
    let out = ok(t.path(), &["commit", "-m", "first"]);
    assert_eq!(field(&out, "files read"), 7, "{out}");
    let id = commit_id(&out);
    let dest = tempfile::tempdir().unwrap();
    let to = dest.path().join("out");
    ok(t.path(), &["checkout", &id, "--to", to.to_str().unwrap()]);
    assert_eq!(snapshot_of(t.path()), snapshot_of(&to));
    assert!(to.join("empty/nested/deeper").is_dir());
    assert_eq!(
        std::fs::read_link(to.join("absolute-link")).unwrap(),
        Path::new("/etc/hostname")
    );
    // A second checkout into an existing non-empty directory is refused.
    let err = fails(t.path(), &["checkout", &id, "--to", to.to_str().unwrap()]);
    assert!(err.contains("not empty") && err.contains("out"), "{err}");
    // ls and cat see the same content.
    let listing = json(t.path(), &["ls", "main:data"]);
    let names: Vec<&str> = listing
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["blob.bin", "large.bin", "medium.bin", "readme-link"]
    );
    let cat = run_in(t.path(), &["cat", "main:data/large.bin"]);
    assert_eq!(cat.stdout, pseudo_random(5 << 20, 42));
    let cat = run_in(t.path(), &["cat", "main:ünïcødé/日本語 ファイル.txt"]);
    assert_eq!(cat.stdout, "こんにちは\n".as_bytes());
    let tool = json(t.path(), &["ls", "main:bin/tool.sh"]);
    assert_eq!(tool[0]["mode"], "0755");
}

#[test]
fn incremental_commit_reads_only_changed_files() {
    let t = repo();
    for i in 0..200 {
        write(
            t.path(),
            &format!("files/{i:03}.txt"),
            &pseudo_random(1000 + i, i as u64),
        );
    }
    write(t.path(), "big.bin", &pseudo_random(3 << 20, 1));
    age(t.path());
    let first = ok(t.path(), &["commit", "-m", "one"]);
    assert_eq!(field(&first, "files read"), 201, "{first}");
    // Nothing changed: nothing read, no commit...
    let none = json(t.path(), &["commit", "-m", "same"]);
    assert_eq!(none["nothing_to_commit"], true, "{none}");
    assert_eq!(none["files_read"], 0, "{none}");
    // ... unless asked for: nothing new but the commit object.
    let same = json(t.path(), &["commit", "-m", "same", "--allow-empty"]);
    assert_eq!(same["files_read"], 0, "{same}");
    assert_eq!(same["files_changed"], 0, "{same}");
    assert_eq!(same["new_objects"], 1, "{same}");
    // One file touched: one read.
    write(t.path(), "files/100.txt", b"changed");
    let second = ok(t.path(), &["commit", "-m", "two"]);
    assert_eq!(field(&second, "files read"), 1, "{second}");
    assert_eq!(field(&second, "files changed"), 1, "{second}");
    // Removal and a mode change are seen without reading.
    std::fs::remove_file(t.path().join("files/000.txt")).unwrap();
    std::fs::set_permissions(
        t.path().join("files/001.txt"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let third = ok(t.path(), &["commit", "-m", "three"]);
    assert_eq!(field(&third, "files changed"), 2, "{third}");
    let diff = ok(t.path(), &["diff", "HEAD", "main"]);
    assert_eq!(diff, "");
    let log = json(t.path(), &["log"]);
    let messages: Vec<&str> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["meta"]["message"].as_str().unwrap())
        .collect();
    assert_eq!(messages, ["three", "two", "same", "one"]);
    // Without the index every file is read again, same commit tree.
    std::fs::remove_file(t.path().join(".snapgraph/index")).unwrap();
    let again = json(t.path(), &["commit", "-m", "four"]);
    assert_eq!(again["files_read"], 200);
    assert_eq!(again["files_changed"], 0);
}

/// `SNAPGRAPH_TIMINGS=1` prints a commit's phases, in order, on stderr only: the
/// JSON on stdout is what it is without it, and an unset, empty or `0` variable
/// prints nothing.
#[test]
fn timings_show_a_commits_phases_on_stderr_only() {
    let t = repo();
    write(t.path(), "a.txt", b"one");
    age(t.path());
    ok(t.path(), &["commit", "-m", "one"]);
    let with = |value: Option<&str>, args: &[&str]| {
        let mut c = std::process::Command::new(&*BIN);
        c.args(args).arg("--quiet").current_dir(t.path());
        match value {
            Some(v) => c.env("SNAPGRAPH_TIMINGS", v),
            None => c.env_remove("SNAPGRAPH_TIMINGS"),
        };
        let out = c.output().expect("the binary runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    write(t.path(), "a.txt", b"two");
    let (stdout, stderr) = with(Some("1"), &["commit", "-m", "two", "--json"]);
    let report: serde_json::Value =
        serde_json::from_str(&stdout).expect("stdout is the JSON alone");
    assert_eq!(report["files_changed"], 1, "{report}");
    let phases: Vec<&str> = stderr
        .lines()
        .map(|l| {
            let (head, phase) = l.split_once(" ms  ").unwrap_or_else(|| panic!("{l:?}"));
            assert!(head.starts_with("timings: +"), "{l:?}");
            let ms: f64 = head["timings: +".len()..]
                .parse()
                .unwrap_or_else(|_| panic!("{l:?}"));
            assert!(ms >= 0.0, "{l:?}");
            phase
        })
        .collect();
    let at = |want: &str| {
        phases
            .iter()
            .position(|p| p.contains(want))
            .unwrap_or_else(|| panic!("no phase {want:?} in {phases:?}"))
    };
    let order = [
        "arguments parsed",
        "index loaded (",
        "branch tip read",
        "scan done (1 files read",
        "commit written (",
        "diffed, index saved",
        "command done",
    ];
    let positions: Vec<usize> = order.iter().map(|p| at(p)).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{phases:?}");
    assert!(
        phases.iter().any(|p| p == &"[snapgraph-open] store opened"),
        "{phases:?}"
    );
    // Nothing changed: once the index vouches for the file again (its stat
    // recorded past the racy window), the fast path says so.
    age(t.path());
    with(None, &["commit", "-m", "same"]);
    let (_, stderr) = with(Some("1"), &["commit", "-m", "same"]);
    assert!(
        stderr.contains("nothing changed (the index holds)"),
        "{stderr}"
    );
    for off in [None, Some(""), Some("0")] {
        write(t.path(), "a.txt", format!("{off:?}").as_bytes());
        let (stdout, stderr) = with(off, &["commit", "-m", "quiet"]);
        assert!(stdout.contains("committed"), "{stdout}");
        assert_eq!(stderr, "", "SNAPGRAPH_TIMINGS={off:?}");
    }
}

#[test]
fn racy_files_are_read_again() {
    let t = repo();
    write(t.path(), "a.txt", b"one");
    // Not aged: the file may share the commit's timestamp tick, or not; either
    // way a same-size rewrite right after must be seen.
    ok(t.path(), &["commit", "-m", "one"]);
    write(t.path(), "a.txt", b"two");
    let out = ok(t.path(), &["commit", "-m", "two"]);
    assert_eq!(field(&out, "files changed"), 1, "{out}");
    assert_eq!(run_in(t.path(), &["cat", "main:a.txt"]).stdout, b"two");
}

#[test]
fn snapgraphignore_is_respected() {
    let t = repo();
    write(t.path(), ".snapgraphignore", b"*.log\nbuild/\n!keep.log\n");
    write(t.path(), "src/main.rs", b"fn main() {}\n");
    write(t.path(), "src/debug.log", b"noise");
    write(t.path(), "keep.log", b"kept");
    write(t.path(), "build/out.o", b"object");
    write(t.path(), "sub/.snapgraphignore", b"secret.txt\n");
    write(t.path(), "sub/secret.txt", b"hidden");
    write(t.path(), "sub/public.txt", b"shown");
    ok(t.path(), &["commit", "-m", "ignore"]);
    let all = json(t.path(), &["ls", "-r", "main"]);
    let names: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            ".snapgraphignore",
            "keep.log",
            "src",
            "src/main.rs",
            "sub",
            "sub/.snapgraphignore",
            "sub/public.txt"
        ]
    );
}

/// A PATH named to `commit` that the scan leaves out (ignored itself or under an
/// ignored directory, a FIFO) is refused with its reason, and nothing is committed;
/// before, the commit reported "nothing to commit" (or, for a file the tip holds
/// that became ignored, committed its removal) without saying the path was never
/// looked at. A path that is gone is still a removal to commit, and a directory
/// named commits what it holds but its ignored entries, as a whole commit does.
#[test]
fn commit_refuses_a_named_path_it_would_not_record() {
    let t = repo();
    write(t.path(), "a.txt", b"a");
    write(t.path(), "x.log", b"log");
    write(t.path(), "gone.txt", b"gone");
    let one = commit_id(&ok(t.path(), &["commit", "-m", "one"]));
    write(t.path(), ".snapgraphignore", b"*.log\nlogs/\n");
    write(t.path(), "x.log", b"log, edited");
    write(t.path(), "logs/q.txt", b"q");
    write(t.path(), "nested/n.txt", b"n");
    ok(&t.path().join("nested"), &["init", "--force"]);
    let fifo = t.path().join("fifo");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    for (named, why) in [
        ("x.log", "x.log is ignored by a .snapgraphignore rule"),
        ("logs", "logs is ignored by a .snapgraphignore rule"),
        ("logs/q.txt", "logs is ignored by a .snapgraphignore rule"),
        ("fifo", "a socket, FIFO or device holds no content"),
        (
            "nested/n.txt",
            "nested is a nested repository (it has its own .snapgraph)",
        ),
    ] {
        let err = fails(t.path(), &["commit", named, "a.txt", "-m", "named"]);
        assert!(
            err.contains(&format!("{named}: a commit does not record it: {why}")),
            "{named}: {err}"
        );
    }
    assert_eq!(json(t.path(), &["log", "-n", "1"])[0]["id"], one.as_str());
    // What is gone is a removal; what a directory holds is committed but its
    // ignored entries.
    std::fs::remove_file(t.path().join("gone.txt")).unwrap();
    write(t.path(), "sub/b.txt", b"b");
    write(t.path(), "sub/c.log", b"c");
    let c = json(t.path(), &["commit", "gone.txt", "sub", "-m", "paths"]);
    let d = json(t.path(), &["diff", &one, c["id"].as_str().unwrap()]);
    assert_eq!(d["added"], serde_json::json!(["/sub/b.txt"]), "{d}");
    assert_eq!(d["removed"], serde_json::json!(["/gone.txt"]), "{d}");
    assert_eq!(d["modified"], serde_json::json!([]), "{d}");
}

#[test]
fn checkout_into_the_working_directory() {
    let t = repo();
    write(t.path(), ".snapgraphignore", b"target/\n");
    write(t.path(), "a.txt", b"version 1");
    write(t.path(), "gone.txt", b"later removed");
    write(t.path(), "target/cache", b"ignored, kept");
    let one = commit_id(&ok(t.path(), &["commit", "-m", "one"]));
    write(t.path(), "a.txt", b"version 2");
    std::fs::remove_file(t.path().join("gone.txt")).unwrap();
    write(t.path(), "new/b.txt", b"new");
    ok(t.path(), &["commit", "-m", "two"]);
    ok(t.path(), &["branch", "old", "--at", &one]);
    // Uncommitted changes are protected.
    write(t.path(), "a.txt", b"dirty");
    let err = fails(t.path(), &["checkout", "old"]);
    assert!(
        err.contains("uncommitted changes") && err.contains("1 modified"),
        "{err}"
    );
    assert_eq!(std::fs::read(t.path().join("a.txt")).unwrap(), b"dirty");
    ok(t.path(), &["checkout", "old", "--force"]);
    assert_eq!(std::fs::read(t.path().join("a.txt")).unwrap(), b"version 1");
    assert_eq!(
        std::fs::read(t.path().join("gone.txt")).unwrap(),
        b"later removed"
    );
    assert!(!t.path().join("new").exists());
    assert_eq!(
        std::fs::read(t.path().join("target/cache")).unwrap(),
        b"ignored, kept"
    );
    // The branch is current now, and the working directory is clean.
    let branches = json(t.path(), &["branch"]);
    let current: Vec<&str> = branches
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["current"].as_bool().unwrap())
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(current, ["old"]);
    assert_eq!(
        json(t.path(), &["status"])["modified"],
        serde_json::json!([])
    );
    ok(t.path(), &["checkout", "main"]);
    assert_eq!(std::fs::read(t.path().join("new/b.txt")).unwrap(), b"new");
    // The index written by checkout keeps the next commit cheap.
    age(t.path());
    let c = json(t.path(), &["commit", "-m", "same"]);
    assert_eq!(c["files_changed"], 0, "{c}");
}

#[test]
fn diff_against_the_working_directory() {
    let t = repo();
    write(t.path(), "a.txt", b"a");
    write(t.path(), "b.txt", b"b");
    ok(t.path(), &["commit", "-m", "one"]);
    write(t.path(), "a.txt", b"changed");
    std::fs::remove_file(t.path().join("b.txt")).unwrap();
    write(t.path(), "c.txt", b"c");
    assert_eq!(
        ok(t.path(), &["diff", "main"]),
        "M a.txt\nD b.txt\nA c.txt\n"
    );
    assert!(ok(t.path(), &["diff", "main", "--stat"])
        .ends_with(" 3 files changed, 2 insertions(+), 2 deletions(-)\n"));
    let d = json(t.path(), &["diff", "main"]);
    assert_eq!(d["added"], serde_json::json!(["/c.txt"]));
    // Nothing moved: the branch still has one commit.
    assert_eq!(json(t.path(), &["log"]).as_array().unwrap().len(), 1);
}

#[test]
fn export_is_deterministic_and_imports_to_the_same_commit() {
    // Commits record their time: pin it (SOURCE_DATE_EPOCH) for the same ids.
    let pinned = |dir: &Path, args: &[&str]| -> String {
        let out = std::process::Command::new(&*BIN)
            .args(args)
            .arg("--quiet")
            .env("SOURCE_DATE_EPOCH", "1700000000")
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let t = repo();
    rich_tree(t.path());
    let id = commit_id(&pinned(t.path(), &["commit", "-m", "snap"]));
    let out = tempfile::tempdir().unwrap();
    let a = out.path().join("a.tar");
    let b = out.path().join("b.tar");
    ok(t.path(), &["export", &id, "-o", a.to_str().unwrap()]);
    std::thread::sleep(std::time::Duration::from_millis(20));
    ok(t.path(), &["export", "main", "-o", b.to_str().unwrap()]);
    let bytes = std::fs::read(&a).unwrap();
    assert_eq!(bytes, std::fs::read(&b).unwrap());
    let za = out.path().join("a.tar.zst");
    let zb = out.path().join("b.tar.zst");
    ok(t.path(), &["export", &id, "-o", za.to_str().unwrap()]);
    ok(t.path(), &["export", &id, "-o", zb.to_str().unwrap()]);
    assert_eq!(std::fs::read(&za).unwrap(), std::fs::read(&zb).unwrap());
    // Readable by a tar reader, with fixed metadata.
    let mut archive = tar::Archive::new(&bytes[..]);
    let mut names = Vec::new();
    for e in archive.entries().unwrap() {
        let e = e.unwrap();
        assert_eq!(e.header().mtime().unwrap(), 0);
        assert_eq!(e.header().uid().unwrap(), 0);
        names.push(e.path().unwrap().to_string_lossy().into_owned());
    }
    assert!(names.contains(&"data/large.bin".to_string()), "{names:?}");
    assert!(
        names.contains(&"empty/nested/deeper/".to_string()),
        "{names:?}"
    );
    // Importing into a fresh repository with the same message gives the same commit.
    for archive in [&a, &za] {
        let other = repo();
        let imported: serde_json::Value = serde_json::from_str(&pinned(
            other.path(),
            &["import", archive.to_str().unwrap(), "-m", "snap", "--json"],
        ))
        .unwrap();
        assert_eq!(imported["id"], id.as_str());
    }
    // Importing into the same repository: same tree, nothing changed.
    let again = json(t.path(), &["import", a.to_str().unwrap(), "-m", "again"]);
    let d = json(t.path(), &["diff", &id, again["id"].as_str().unwrap()]);
    assert_eq!(d["added"], serde_json::json!([]));
    assert_eq!(d["modified"], serde_json::json!([]));
}

#[test]
fn pack_and_unpack_round_trip() {
    let t = repo();
    rich_tree(t.path());
    ok(t.path(), &["commit", "-m", "packed"]);
    let files = tempfile::tempdir().unwrap();
    let plain = files.path().join("snap.sgp");
    ok(
        t.path(),
        &["pack", "main", "-o", plain.to_str().unwrap(), "--compress"],
    );
    let key = files.path().join("key");
    std::fs::write(&key, hex_key()).unwrap();
    let keyed = files.path().join("keyed.sgp");
    ok(
        t.path(),
        &[
            "pack",
            "main",
            "-o",
            keyed.to_str().unwrap(),
            "--key-file",
            key.to_str().unwrap(),
        ],
    );
    let other = repo();
    let u = json(
        other.path(),
        &["unpack", plain.to_str().unwrap(), "--branch", "restored"],
    );
    assert_eq!(u["branch"], "restored");
    let to = files.path().join("out");
    ok(
        other.path(),
        &["checkout", "restored", "--to", to.to_str().unwrap()],
    );
    assert_eq!(snapshot_of(t.path()), snapshot_of(&to));
    // Keyed: needs the key; a wrong key is refused.
    let err = fails(other.path(), &["unpack", keyed.to_str().unwrap()]);
    assert!(err.contains("keyed"), "{err}");
    let wrong = files.path().join("wrong");
    std::fs::write(&wrong, [9u8; 32]).unwrap();
    let err = fails(
        other.path(),
        &[
            "unpack",
            keyed.to_str().unwrap(),
            "--key-file",
            wrong.to_str().unwrap(),
        ],
    );
    assert!(err.contains("not authentic"), "{err}");
    let k = json(
        other.path(),
        &[
            "unpack",
            keyed.to_str().unwrap(),
            "--key-file",
            key.to_str().unwrap(),
            "-b",
            "k",
        ],
    );
    assert_eq!(k["id"], u["id"]);
    let bad = files.path().join("bad-key");
    std::fs::write(&bad, b"short").unwrap();
    let err = fails(
        t.path(),
        &[
            "pack",
            "main",
            "-o",
            "x",
            "--key-file",
            bad.to_str().unwrap(),
        ],
    );
    assert!(err.contains("bad-key") && err.contains("64 hex"), "{err}");
}

fn hex_key() -> String {
    (0..32).map(|i| format!("{:02x}", i * 7 % 256)).collect()
}

#[test]
fn sync_between_stores() {
    let a = repo();
    write(a.path(), "x.txt", b"x");
    write(a.path(), "big.bin", &pseudo_random(200_000, 3));
    let first = commit_id(&ok(a.path(), &["commit", "-m", "one"]));
    ok(a.path(), &["tag", "v1", "--label", "kind=release"]);
    let b = repo();
    let r = json(
        b.path(),
        &[
            "sync",
            a.path().to_str().unwrap(),
            b.path().to_str().unwrap(),
        ],
    );
    assert_eq!(r.as_array().unwrap().len(), 2);
    assert!(r[0]["objects"].as_u64().unwrap() > 0);
    assert_eq!(json(b.path(), &["log"])[0]["id"], first.as_str());
    assert_eq!(
        json(b.path(), &["snapshots"])[0]["labels"]["kind"],
        "release"
    );
    // Incremental: a second commit sends only what is new.
    write(a.path(), "y.txt", b"y");
    ok(a.path(), &["commit", "-m", "two"]);
    let r = json(a.path(), &["sync", ".", b.path().to_str().unwrap(), "main"]);
    assert!(r[0]["objects"].as_u64().unwrap() <= 4, "{r}");
    // To a directory store given by URL, then verified.
    let d = tempfile::tempdir().unwrap();
    let url = format!("dir:{}", d.path().join("objects").display());
    ok(a.path(), &["sync", ".", &url, "main"]);
    let c = tempfile::tempdir().unwrap();
    ok(c.path(), &["init", "--store", &url]);
    let v = json(c.path(), &["verify", "--read-data"]);
    assert_eq!(v["clean"], true);
    assert_eq!(
        json(c.path(), &["log", "main"]).as_array().unwrap().len(),
        2
    );
    // Sqlite by URL as well.
    let url = format!("sqlite:{}", d.path().join("s.db").display());
    ok(a.path(), &["sync", ".", &url]);
    let err = fails(a.path(), &["sync", ".", &url, "nosuch"]);
    assert!(err.contains("nosuch"), "{err}");
}

#[test]
fn branches_tags_snapshots_gc_verify() {
    let t = repo();
    write(t.path(), "a", b"1");
    let one = commit_id(&ok(t.path(), &["commit", "-m", "one"]));
    write(t.path(), "a", b"2");
    ok(t.path(), &["commit", "-m", "two", "--meta", "ticket=42"]);
    ok(t.path(), &["fork", "exp", "--at", &one]);
    write(t.path(), "a", b"3");
    let three = json(t.path(), &["commit", "-m", "three", "-b", "exp"]);
    assert_eq!(three["previous"], one.as_str());
    let names: Vec<String> = json(t.path(), &["branch"])
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["exp", "main"]);
    let show = json(t.path(), &["show", "main"]);
    assert_eq!(show["meta"]["ticket"], "42");
    assert_eq!(show["diff"]["modified"], serde_json::json!(["/a"]));
    ok(
        t.path(),
        &["tag", "release", "--at", "exp", "--label", "env=prod"],
    );
    let s = json(t.path(), &["snapshots", "inspect", "release"]);
    assert_eq!(s["labels"]["env"], "prod");
    assert_eq!(run_in(t.path(), &["cat", "release:a"]).stdout, b"3");
    ok(t.path(), &["snapshots", "remove", "release"]);
    let err = fails(t.path(), &["branch", "-d", "exp"]);
    assert!(err.contains("not merged") && err.contains("-D"), "{err}");
    ok(t.path(), &["branch", "-D", "exp"]);
    let err = fails(t.path(), &["branch", "-d", "main"]);
    assert!(err.contains("current branch"), "{err}");
    let gc = json(t.path(), &["gc", "--prune=now"]);
    assert!(gc["deleted"].as_u64().unwrap() >= 1, "{gc}");
    let v = json(t.path(), &["verify", "--read-data"]);
    assert_eq!(v["clean"], true, "{v}");
    assert_eq!(json(t.path(), &["log"]).as_array().unwrap().len(), 2);
}

// ------------------------------------------------------------------ hostile input

#[test]
fn hostile_commits_are_refused_on_checkout() {
    use snapgraph::object::tree::{Entry, EntryNode};
    for (what, entries) in [
        ("dot dot", vec![file_entry("..", b"escape")]),
        ("slash", vec![file_entry("a/../../escape", b"escape")]),
        ("dot", vec![file_entry(".", b"escape")]),
    ] {
        let t = repo();
        let id = plant(t.path(), entries);
        let outside = tempfile::tempdir().unwrap();
        let to = outside.path().join("inner").join("target");
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        let err = fails(
            t.path(),
            &["checkout", "evil", "--to", to.to_str().unwrap()],
        );
        assert!(err.contains(&id) || err.contains("entry"), "{what}: {err}");
        assert!(
            err.contains("..") || err.contains("\".\"") || err.contains('/'),
            "{what}: {err}"
        );
        // Nothing written anywhere: not the target, not beside it.
        assert!(!to.exists(), "{what}");
        assert_eq!(
            std::fs::read_dir(to.parent().unwrap()).unwrap().count(),
            0,
            "{what}"
        );
        assert_eq!(
            std::fs::read_dir(outside.path()).unwrap().count(),
            1,
            "{what}"
        );
        let err = fails(t.path(), &["export", "evil", "-o", "x.tar"]);
        assert!(!err.is_empty());
        assert!(!t.path().join("x.tar").exists());
    }
    // An absolute symlink is recorded and restored as-is, and never followed.
    let t = repo();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    plant(
        t.path(),
        vec![Entry {
            name: "link".into(),
            mode: 0o777,
            node: EntryNode::Symlink {
                target: victim.to_str().unwrap().into(),
            },
        }],
    );
    let to = outside.path().join("out");
    ok(
        t.path(),
        &["checkout", "evil", "--to", to.to_str().unwrap()],
    );
    assert_eq!(std::fs::read_link(to.join("link")).unwrap(), victim);
    assert!(!victim.exists());
}

#[test]
fn hostile_archives_are_refused_on_import() {
    let t = repo();
    for name in ["../escape.txt", "/abs.txt", "a/../../b"] {
        let mut h = tar::Header::new_gnu();
        h.set_size(1);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        {
            let gnu = h.as_gnu_mut().unwrap();
            gnu.name[..name.len()].copy_from_slice(name.as_bytes());
        }
        h.set_cksum();
        let mut bytes = h.as_bytes().to_vec();
        bytes.extend_from_slice(b"x");
        bytes.resize(512 * 2, 0);
        bytes.extend_from_slice(&[0u8; 1024]);
        let file = t.path().join("evil.tar");
        std::fs::write(&file, &bytes).unwrap();
        let err = fails(t.path(), &["import", "evil.tar"]);
        assert!(
            err.contains("evil.tar") && err.contains(name),
            "{name}: {err}"
        );
    }
    // Symlink then a file through it.
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Symlink);
    h.set_size(0);
    b.append_link(&mut h, "link", "/tmp").unwrap();
    let mut h = tar::Header::new_gnu();
    h.set_size(1);
    h.set_mode(0o644);
    b.append_data(&mut h, "link/file", &b"x"[..]).unwrap();
    std::fs::write(t.path().join("evil2.tar"), b.into_inner().unwrap()).unwrap();
    let err = fails(t.path(), &["import", "evil2.tar"]);
    assert!(
        err.contains("link/file") && err.contains("symlink"),
        "{err}"
    );
    assert!(json(t.path(), &["branch"]).as_array().unwrap().is_empty());
}

// ------------------------------------------------------------------ errors

#[test]
fn error_paths_print_useful_messages() {
    let t = tempfile::tempdir().unwrap();
    // No repository.
    let err = fails(t.path(), &["log"]);
    assert!(err.contains("not a snapgraph repository"), "{err}");
    // Bad store URL.
    let err = fails(t.path(), &["init", "--store", "ftp://nowhere"]);
    assert!(err.contains("ftp://nowhere"), "{err}");
    assert!(!t.path().join(".snapgraph").exists());
    ok(t.path(), &["init"]);
    let err = fails(t.path(), &["init"]);
    assert!(err.contains("already"), "{err}");
    // Empty branch.
    let err = fails(t.path(), &["log"]);
    assert!(err.contains("no commits yet"), "{err}");
    write(t.path(), "a.txt", b"a");
    ok(t.path(), &["commit", "-m", "one"]);
    // Unknown revisions.
    let err = fails(t.path(), &["show", "nosuch"]);
    assert!(
        err.contains("unknown revision") && err.contains("nosuch"),
        "{err}"
    );
    let zeros = "0".repeat(64);
    let err = fails(t.path(), &["checkout", &zeros, "--to", "out"]);
    assert!(err.contains(&zeros), "{err}");
    // Missing paths in a commit.
    let err = fails(t.path(), &["cat", "main:missing.txt"]);
    assert!(
        err.contains("/missing.txt") && err.contains("not found"),
        "{err}"
    );
    let err = fails(t.path(), &["cat", "main"]);
    assert!(err.contains("REV:PATH"), "{err}");
    // Bad --meta.
    let err = fails(t.path(), &["commit", "--meta", "novalue"]);
    assert!(err.contains("novalue"), "{err}");
    // Missing files.
    let err = fails(t.path(), &["import", "nosuch.tar"]);
    assert!(err.contains("nosuch.tar"), "{err}");
    let err = fails(t.path(), &["commit", "no/such/dir"]);
    assert!(err.contains("no/such/dir"), "{err}");
    // A file name that is not UTF-8.
    {
        use std::os::unix::ffi::OsStrExt;
        // With an escape sequence too: the error quotes the name, every byte
        // outside printable ASCII an octal escape, so it cannot drive the terminal.
        let name = std::ffi::OsStr::from_bytes(b"bad\xff\x1b[2Jname");
        std::fs::write(t.path().join(name), b"x").unwrap();
        let err = fails(t.path(), &["commit", "-m", "bad"]);
        assert!(err.contains("UTF-8"), "{err}");
        assert!(err.contains("/bad\\377\\033[2Jname\": "), "{err}");
        assert!(
            !err.contains('\u{1b}') && !err.contains('\u{fffd}'),
            "{err}"
        );
        // The way around it is named, and works.
        assert!(
            err.contains("a .snapgraphignore rule leaves it out"),
            "{err}"
        );
        write(t.path(), ".snapgraphignore", b"bad*\n");
        ok(t.path(), &["commit", "-m", "bad left out"]);
        std::fs::remove_file(t.path().join(".snapgraphignore")).unwrap();
        std::fs::remove_file(t.path().join(name)).unwrap();
    }
    // An unreadable file: tests/unprivileged.rs (it needs a user who is not root).
    // Usage errors exit with 2.
    let out = run_in(t.path(), &["frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
}

/// The server store: a repository on PostgreSQL (its own schema), committed to,
/// synced from and verified; then synced back into a SQLite repository.
#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn a_repository_on_postgres() {
    let base = std::env::var("SNAPGRAPH_PG_URL").expect(
        "SNAPGRAPH_PG_URL is unset: run scripts/postgres (or scripts/test), or build the tests with SNAPGRAPH_SKIP_PG=1 to skip them",
    );
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let schema = format!("cli_{}_{nanos}", std::process::id());
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}snapgraph_schema={schema}");
    let a = tempfile::tempdir().unwrap();
    ok(a.path(), &["init", "--store", &url]);
    write(a.path(), "notes.txt", b"on the server");
    write(a.path(), "big.bin", &pseudo_random(300_000, 9));
    let first = commit_id(&ok(a.path(), &["commit", "-m", "one"]));
    write(a.path(), "notes.txt", b"edited");
    let second = commit_id(&ok(a.path(), &["commit", "-m", "two"]));
    assert_eq!(json(a.path(), &["log"]).as_array().unwrap().len(), 2);
    assert_eq!(json(a.path(), &["verify", "--read-data"])["clean"], true);
    let b = repo();
    ok(b.path(), &["sync", a.path().to_str().unwrap(), ".", "main"]);
    let log = json(b.path(), &["log", "main"]);
    assert_eq!(log[0]["id"], second.as_str());
    assert_eq!(log[1]["id"], first.as_str());
    let out = tempfile::tempdir().unwrap();
    let to = out.path().join("restored");
    ok(
        b.path(),
        &["checkout", "main", "--to", to.to_str().unwrap()],
    );
    assert_eq!(std::fs::read(to.join("notes.txt")).unwrap(), b"edited");
}

/// A repository in an S3 bucket (`init --store s3://BUCKET/PREFIX?endpoint=…`, the
/// test server of `scripts/s3`, credentials from the AWS environment variables):
/// committed to, verified, and checked out by a second repository on the same URL.
#[test]
#[cfg_attr(snapgraph_skip_s3, ignore = "SNAPGRAPH_SKIP_S3=1: no S3 server")]
fn a_repository_in_an_s3_bucket() {
    let base = std::env::var("SNAPGRAPH_S3_URL").expect(
        "SNAPGRAPH_S3_URL is unset: run `eval \"$(scripts/s3)\"` (or scripts/test), or build the tests with SNAPGRAPH_SKIP_S3=1 to skip them",
    );
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let (head, query) = base.split_once('?').unwrap_or((&base, ""));
    let url = format!(
        "{}/cli-{}-{nanos}?{query}",
        head.trim_end_matches('/'),
        std::process::id()
    );
    let a = tempfile::tempdir().unwrap();
    ok(a.path(), &["init", "--store", &url]);
    write(a.path(), "notes.txt", b"in the bucket");
    write(a.path(), "big.bin", &pseudo_random(300_000, 4));
    let first = commit_id(&ok(a.path(), &["commit", "-m", "one"]));
    write(a.path(), "notes.txt", b"edited");
    let second = commit_id(&ok(a.path(), &["commit", "-m", "two"]));
    assert_eq!(json(a.path(), &["log"]).as_array().unwrap().len(), 2);
    assert_eq!(json(a.path(), &["verify", "--read-data"])["clean"], true);
    let b = tempfile::tempdir().unwrap();
    ok(b.path(), &["init", "--store", &url]);
    let log = json(b.path(), &["log", "main"]);
    assert_eq!(log[0]["id"], second.as_str());
    assert_eq!(log[1]["id"], first.as_str());
    let out = tempfile::tempdir().unwrap();
    let to = out.path().join("restored");
    ok(
        b.path(),
        &["checkout", "main", "--to", to.to_str().unwrap()],
    );
    assert_eq!(std::fs::read(to.join("notes.txt")).unwrap(), b"edited");
    assert_eq!(
        std::fs::read(to.join("big.bin")).unwrap(),
        pseudo_random(300_000, 4)
    );
}

/// A repository on PostgreSQL read through a local SQLite cache
/// (`cache:sqlite:.snapgraph/cache.db|postgres://…`; a cache inside the working
/// directory but outside `.snapgraph/` is refused): the relative cache path is made absolute
/// in the config, the remote's password (if the test server has a password role)
/// goes to the credentials file, objects land in both stores and refs only in the
/// remote, and another repository syncs the history from it.
#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn a_repository_on_postgres_through_a_local_cache() {
    use snapgraph_store::{ObjectStore, RefStore};
    let base = std::env::var("SNAPGRAPH_PG_PASSWORD_URL")
        .or_else(|_| std::env::var("SNAPGRAPH_PG_URL"))
        .expect("SNAPGRAPH_PG_URL is unset: run scripts/postgres (or scripts/test)");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let schema = format!("cli_cache_{}_{nanos}", std::process::id());
    let sep = if base.contains('?') { '&' } else { '?' };
    let remote = format!("{base}{sep}snapgraph_schema={schema}");
    let a = tempfile::tempdir().unwrap();
    ok(
        a.path(),
        &[
            "init",
            "--store",
            &format!("cache:sqlite:.snapgraph/cache.db|{remote}"),
        ],
    );
    let config = std::fs::read_to_string(a.path().join(".snapgraph/config")).unwrap();
    let cache = a.path().join(".snapgraph/cache.db");
    assert!(
        config.contains(&format!("cache:sqlite:{}|postgres", cache.display())),
        "{config}"
    );
    if let Some(secret) = std::env::var("SNAPGRAPH_PG_PASSWORD_URL")
        .ok()
        .and_then(|u| {
            Some(
                u.split("://")
                    .nth(1)?
                    .split('@')
                    .next()?
                    .split(':')
                    .nth(1)?
                    .to_string(),
            )
        })
    {
        assert!(!config.contains(&secret), "{config}");
    }

    write(a.path(), "notes.txt", b"through the cache");
    write(a.path(), "big.bin", &pseudo_random(200_000, 3));
    let first = commit_id(&ok(a.path(), &["commit", "-m", "one"]));
    assert!(cache.is_file(), "the cache file was created");
    let local = snapgraph_store::open(&format!("sqlite:{}", cache.display())).unwrap();
    let id = snapgraph::ObjectId::from_hex(&first).unwrap();
    assert!(local.has_many(&[id]).unwrap().is_empty(), "cached");
    assert_eq!(
        local.get_ref("heads/main").unwrap(),
        None,
        "refs are the remote's"
    );
    assert_eq!(json(a.path(), &["verify", "--read-data"])["clean"], true);

    let b = repo();
    ok(b.path(), &["sync", a.path().to_str().unwrap(), ".", "main"]);
    assert_eq!(json(b.path(), &["log", "main"])[0]["id"], first.as_str());
}

/// A writer killed while holding its lease blocks collections, with a message that
/// says what to do; `gc --break-leases` clears it.
#[test]
fn a_dead_writers_lease_is_reported_and_can_be_broken() {
    let t = repo();
    write(t.path(), "a", b"1");
    ok(t.path(), &["commit", "-m", "one"]);
    let url = format!("sqlite:{}", t.path().join(".snapgraph/store.db").display());
    let store = snapgraph_store::open(&url).unwrap();
    let lease = snapgraph_store::gc::Lease::acquire(&*store, std::time::Duration::ZERO)
        .unwrap()
        .unwrap();
    drop(lease); // never released: as if the writer had been killed
    let err = fails(t.path(), &["gc", "--wait", "0"]);
    assert!(err.contains("lease"), "{err}");
    ok(t.path(), &["gc", "--break-leases", "--wait", "0"]);
    assert_eq!(json(t.path(), &["verify"])["clean"], true);
}

/// The store is opened ahead of argument parsing from the directory the arguments
/// seem to name (`repo::Opening::ahead`); a command that clap reads as running
/// elsewhere still commits there, and only there.
#[test]
fn a_commit_run_in_another_directory_commits_there_only() {
    let a = repo();
    let b = repo();
    write(a.path(), "a.txt", b"a");
    write(b.path(), "b.txt", b"b");
    ok(a.path(), &["commit", "-m", "a"]);
    let b_dir = b.path().to_str().unwrap();
    // From A, naming B after the verb and then with a relative path.
    let out = ok(a.path(), &["commit", "-m", "b", "-C", b_dir]);
    assert_eq!(field(&out, "files read"), 1, "{out}");
    let log_b = ok(b.path(), &["log", "--oneline"]);
    assert_eq!(log_b.lines().count(), 1, "{log_b}");
    let log_a = ok(a.path(), &["log", "--oneline"]);
    assert_eq!(log_a.lines().count(), 1, "{log_a}");
    write(b.path(), "b.txt", b"bb");
    let parent = b.path().parent().unwrap();
    let name = b.path().file_name().unwrap().to_str().unwrap();
    ok(parent, &["-C", name, "commit", "-m", "b2"]);
    assert_eq!(ok(b.path(), &["log", "--oneline"]).lines().count(), 2);
    assert_eq!(ok(a.path(), &["log", "--oneline"]).lines().count(), 1);
    // Outside any repository, the error names the directory clap read.
    let none = tempfile::tempdir().unwrap();
    let err = fails(
        a.path(),
        &["commit", "-m", "x", "-C", none.path().to_str().unwrap()],
    );
    assert!(
        err.contains("not") && err.contains(none.path().file_name().unwrap().to_str().unwrap()),
        "{err}"
    );
}
