//! Regression tests for the CLI's data-safety promises (issue 13: nothing committed
//! or present in the working directory is lost without `--force`, and no archive or
//! store makes the CLI write where it should not), one test per numbered item, and
//! for secrets at rest (issue 23).

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

mod common;
use common::*;

/// A tar archive of `(name, kind, data)` entries; kinds: `f` file, `d` directory,
/// `h` hard link (data is the target), `s` symlink (data is the target).
fn tar_of(entries: &[(&str, char, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, kind, data) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o644);
        match kind {
            'f' => {
                h.set_size(data.len() as u64);
                b.append_data(&mut h, name, *data).unwrap();
            }
            'd' => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_size(0);
                b.append_data(&mut h, name, std::io::empty()).unwrap();
            }
            'h' | 's' => {
                h.set_entry_type(if *kind == 'h' {
                    tar::EntryType::Link
                } else {
                    tar::EntryType::Symlink
                });
                h.set_size(0);
                b.append_link(&mut h, name, std::str::from_utf8(data).unwrap())
                    .unwrap();
            }
            _ => unreachable!(),
        }
    }
    b.into_inner().unwrap()
}

// ------------------------------------------------------------------ hostile input

/// Item 1: no archive, commit or scan may name `.snapgraph` (in any spelling a file
/// system could fold into it); nested repositories are skipped and reported.
#[test]
fn item01_dot_snapgraph_is_refused_everywhere() {
    let t = repo();
    for name in [
        ".snapgraph/config",
        "sub/.snapgraph/config",
        ".SnapGraph/config",
        ".snapgraph./config",
        "SNAPGR~1/config",
    ] {
        std::fs::write(
            t.path().join("evil.tar"),
            tar_of(&[(name, 'f', b"store = dir:/tmp/attacker\n")]),
        )
        .unwrap();
        let err = fails(t.path(), &["import", "evil.tar"]);
        assert!(
            err.contains("reserved") && err.contains(name),
            "{name}: {err}"
        );
    }
    assert!(json(t.path(), &["branch"]).as_array().unwrap().is_empty());

    // A commit holding such a name is refused on checkout, into any directory.
    for name in [".snapgraph", ".SNAPGRAPH"] {
        let t = repo();
        let id = plant(t.path(), vec![file_entry(name, b"store = dir:/tmp/x\n")]);
        let out = tempfile::tempdir().unwrap();
        let to = out.path().join("out");
        let err = fails(t.path(), &["checkout", &id, "--to", to.to_str().unwrap()]);
        assert!(err.contains("reserved"), "{err}");
        assert!(!to.exists());
    }

    // A scan: a file that folds into .snapgraph is refused; a nested repository is
    // skipped and reported, not committed.
    let w = repo();
    write(w.path(), "a.txt", b"a");
    write(w.path(), "deep/.Snapgraph", b"x");
    let err = fails(w.path(), &["commit", "-m", "x"]);
    assert!(
        err.contains("deep/.Snapgraph") && err.contains("reserved"),
        "{err}"
    );
    std::fs::remove_file(w.path().join("deep/.Snapgraph")).unwrap();
    ok(&w.path().join("deep"), &["init", "inner", "--force"]);
    write(w.path(), "deep/inner/secret.txt", b"inner");
    let out = run_in(w.path(), &["commit", "-m", "x"]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("deep/inner") && stderr.contains("another repository"),
        "{stderr}"
    );
    let files = ok(w.path(), &["ls", "-r", "main"]);
    assert!(!files.contains("inner"), "{files}");
    let status = json(w.path(), &["status"]);
    assert!(
        status["nested"][0]
            .as_str()
            .unwrap()
            .ends_with("deep/inner"),
        "{status}"
    );
}

/// Item 2: a tiny archive declaring a huge entry is a typed error naming it, not an
/// allocation failure.
#[test]
fn item02_a_huge_declared_size_is_refused() {
    let t = repo();
    let mut h = tar::Header::new_gnu();
    h.set_path("huge.bin").unwrap();
    h.set_size(1 << 40);
    h.set_mode(0o644);
    h.set_entry_type(tar::EntryType::Regular);
    h.set_cksum();
    let mut bytes = h.as_bytes().to_vec();
    bytes.extend_from_slice(&[0u8; 1024]);
    assert!(bytes.len() < 2048);
    std::fs::write(t.path().join("bomb.tar"), &bytes).unwrap();
    let err = fails(t.path(), &["import", "bomb.tar"]);
    assert!(
        err.contains("bomb.tar") && err.contains("huge.bin") && err.contains("limit"),
        "{err}"
    );
    // A declared size within the limit but past the data is a truncation.
    let mut h = tar::Header::new_gnu();
    h.set_path("short.bin").unwrap();
    h.set_size(1 << 20);
    h.set_mode(0o644);
    h.set_cksum();
    let mut bytes = h.as_bytes().to_vec();
    bytes.extend_from_slice(&[7u8; 512]);
    std::fs::write(t.path().join("short.tar"), &bytes).unwrap();
    let err = fails(t.path(), &["import", "short.tar"]);
    assert!(err.contains("short.tar"), "{err}");
}

/// Item 3: both names of a hard link are imported with the content; a link to a
/// name that is not an earlier file of the archive is refused.
#[test]
fn item03_hardlinks_are_imported() {
    let t = repo();
    std::fs::write(
        t.path().join("links.tar"),
        tar_of(&[
            ("d", 'd', b""),
            ("d/original.txt", 'f', b"shared bytes"),
            ("second.txt", 'h', b"d/original.txt"),
        ]),
    )
    .unwrap();
    ok(t.path(), &["import", "links.tar", "-m", "links"]);
    assert_eq!(
        run_in(t.path(), &["cat", "main:second.txt"]).stdout,
        b"shared bytes"
    );
    assert_eq!(
        run_in(t.path(), &["cat", "main:d/original.txt"]).stdout,
        b"shared bytes"
    );
    for target in ["/etc/passwd", "../outside", "missing.txt", "d"] {
        std::fs::write(
            t.path().join("bad.tar"),
            tar_of(&[("d", 'd', b""), ("x", 'h', target.as_bytes())]),
        )
        .unwrap();
        let err = fails(t.path(), &["import", "bad.tar"]);
        assert!(
            err.contains("bad.tar") && err.contains("\"x\""),
            "{target}: {err}"
        );
    }
}

/// An entry the workspace cannot hold (below a file of the archive, too deep, a
/// name too long) is refused naming the archive and the entry; a later entry of a
/// name replaces an earlier one, as tar extracts them.
#[test]
fn archive_entries_the_workspace_cannot_hold_name_the_entry() {
    let t = repo();
    let deep = format!("{}f", "d/".repeat(300));
    let long = "x".repeat(300);
    let below_file: &[(&str, char, &[u8])] = &[("a", 'f', b"1"), ("a/b", 'f', b"2")];
    let too_deep: &[(&str, char, &[u8])] = &[(&deep, 'f', b"1")];
    let too_long: &[(&str, char, &[u8])] = &[(&long, 'f', b"1")];
    for (entries, entry, why) in [
        (
            below_file,
            "\"a/b\"",
            "lies below \"a\", a file of the archive",
        ),
        (too_deep, "\"d/d/", "more than 256 components"),
        (too_long, "\"xxx", "name longer than 255 bytes"),
    ] {
        std::fs::write(t.path().join("bad.tar"), tar_of(entries)).unwrap();
        let err = fails(t.path(), &["import", "bad.tar"]);
        assert!(
            err.contains("bad.tar") && err.contains(entry) && err.contains(why),
            "{why}: {err}"
        );
    }
    assert!(json(t.path(), &["branch"]).as_array().unwrap().is_empty());

    std::fs::write(
        t.path().join("later.tar"),
        tar_of(&[
            ("a", 'f', b"1"),
            ("a", 'd', b""),
            ("a/b", 'f', b"2"),
            ("c", 'f', b"old"),
            ("c", 'f', b"new"),
        ]),
    )
    .unwrap();
    ok(t.path(), &["import", "later.tar", "-m", "later"]);
    assert_eq!(run_in(t.path(), &["cat", "main:a/b"]).stdout, b"2");
    assert_eq!(run_in(t.path(), &["cat", "main:c"]).stdout, b"new");
}

/// Item 4: names with control characters are quoted in text output (git's
/// `core.quotePath` style) and unchanged in JSON.
#[test]
fn item04_names_are_quoted_in_text_output() {
    let t = repo();
    write(t.path(), "plain.txt", b"p");
    ok(t.path(), &["commit", "-m", "one"]);
    write(t.path(), "new\nline.txt", b"n");
    write(t.path(), "esc\x1b[2J.txt", b"e");
    let check = |out: &str, what: &str| {
        assert!(!out.contains('\x1b'), "{what}: raw ESC in {out:?}");
        assert!(out.contains("\"esc\\033[2J.txt\""), "{what}: {out}");
        assert!(out.contains("\"new\\nline.txt\""), "{what}: {out}");
    };
    check(&ok(t.path(), &["status"]), "status");
    check(&ok(t.path(), &["diff", "main"]), "diff");
    ok(t.path(), &["commit", "-m", "evil\x1b]0;title\x07 names"]);
    check(&ok(t.path(), &["ls", "main"]), "ls");
    check(&ok(t.path(), &["show", "main"]), "show");
    let log = ok(t.path(), &["log"]);
    assert!(
        !log.contains('\x1b') && log.contains("evil\\033]0;title\\007 names"),
        "{log}"
    );
    assert!(
        ok(t.path(), &["ls", "main"]).contains("plain.txt\n"),
        "plain names as they are"
    );
    // JSON carries the names themselves.
    let ls = json(t.path(), &["ls", "main"]);
    let names: Vec<&str> = ls
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"new\nline.txt") && names.contains(&"esc\x1b[2J.txt"),
        "{names:?}"
    );
}

// ------------------------------------------------------------------ lost work

/// Item 6: checkout keeps ignored files anywhere in the tree and refuses to lose
/// untracked ones.
#[test]
fn item06_checkout_keeps_ignored_files() {
    let t = repo();
    write(t.path(), ".snapgraphignore", b"*.log\n");
    write(t.path(), "src/main.rs", b"fn main() {}\n");
    write(t.path(), "top.log", b"top");
    write(t.path(), "src/build.log", b"precious build log");
    write(t.path(), "src/deeper/x.log", b"deeper");
    let one = commit_id(&ok(t.path(), &["commit", "-m", "one"]));
    write(t.path(), "src/main.rs", b"fn main() { two() }\n");
    write(t.path(), "gone/file.txt", b"only in two");
    ok(t.path(), &["commit", "-m", "two"]);
    ok(t.path(), &["checkout", &one]);
    assert_eq!(
        std::fs::read(t.path().join("src/main.rs")).unwrap(),
        b"fn main() {}\n"
    );
    assert_eq!(
        std::fs::read(t.path().join("src/build.log")).unwrap(),
        b"precious build log"
    );
    assert_eq!(
        std::fs::read(t.path().join("src/deeper/x.log")).unwrap(),
        b"deeper"
    );
    assert_eq!(std::fs::read(t.path().join("top.log")).unwrap(), b"top");
    assert!(!t.path().join("gone").exists());
    // An ignored file in a directory the commit lacks stays too.
    write(t.path(), "gone2/y.log", b"y");
    ok(t.path(), &["checkout", "main", "--force"]);
    assert_eq!(std::fs::read(t.path().join("gone2/y.log")).unwrap(), b"y");
    assert_eq!(
        std::fs::read(t.path().join("src/build.log")).unwrap(),
        b"precious build log"
    );
    // An untracked, not ignored file makes checkout refuse without --force.
    std::fs::remove_dir_all(t.path().join("gone2")).unwrap();
    write(t.path(), "src/untracked.rs", b"work in progress");
    let err = fails(t.path(), &["checkout", &one]);
    assert!(
        err.contains("uncommitted") && err.contains("--force"),
        "{err}"
    );
    assert!(t.path().join("src/untracked.rs").exists());
}

/// Item 7: `commit PATH` commits the changes under PATH on top of the tip and keeps
/// the rest of the tree.
#[test]
fn item07_commit_path_keeps_the_rest_of_the_tree() {
    let t = repo();
    for i in 0..20 {
        write(t.path(), &format!("a/{i}.txt"), format!("a{i}").as_bytes());
        write(t.path(), &format!("b/{i}.txt"), format!("b{i}").as_bytes());
    }
    age(t.path());
    let one = commit_id(&ok(t.path(), &["commit", "-m", "one"]));
    write(t.path(), "a/0.txt", b"a0 changed");
    write(t.path(), "a/new.txt", b"new");
    std::fs::remove_file(t.path().join("a/1.txt")).unwrap();
    write(t.path(), "b/0.txt", b"b0 changed");
    let c = json(t.path(), &["commit", "a", "-m", "only a"]);
    assert_eq!(c["previous"], one.as_str(), "{c}");
    let d = json(t.path(), &["diff", &one, "main"]);
    assert_eq!(d["added"], serde_json::json!(["/a/new.txt"]), "{d}");
    assert_eq!(d["modified"], serde_json::json!(["/a/0.txt"]), "{d}");
    assert_eq!(d["removed"], serde_json::json!(["/a/1.txt"]), "{d}");
    assert_eq!(run_in(t.path(), &["cat", "main:b/0.txt"]).stdout, b"b0");
    assert_eq!(
        json(t.path(), &["ls", "-r", "main:b"])
            .as_array()
            .unwrap()
            .len(),
        20
    );
    // The change left out is still pending.
    assert_eq!(
        json(t.path(), &["status"])["modified"],
        serde_json::json!(["/b/0.txt"])
    );
    // From a subdirectory, relative paths work; paths outside are refused.
    let c = json(&t.path().join("b"), &["commit", "0.txt", "-m", "b0"]);
    assert_eq!(c["files_changed"], 1, "{c}");
    let outside = tempfile::tempdir().unwrap();
    let err = fails(t.path(), &["commit", outside.path().to_str().unwrap()]);
    assert!(err.contains("outside the working directory"), "{err}");
}

/// A symlink named to `commit` or `restore` is the entry meant, not the file it
/// points to: `commit LINK` records the link (and leaves its target's edit pending),
/// `restore LINK` puts the link back without discarding its target's edit, and a
/// link that points out of the working directory is still an entry of it. Before,
/// the whole path was resolved: `commit link` committed the edit of `x` instead,
/// `restore link` overwrote that edit with HEAD's `x`, and a link out of the tree
/// was refused as "outside the working directory". A path *through* a link out of
/// the tree is still refused; `LINK/` and a path ending in `..` name the directory
/// reached.
#[test]
fn a_symlink_named_is_the_entry_itself_not_its_target() {
    let t = repo();
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "o", b"outside");
    write(t.path(), "x", b"one");
    write(t.path(), "sub/s", b"s");
    let one = commit_id(&ok(t.path(), &["commit", "-m", "one"]));
    let link = |target: &Path, name: &str| {
        std::os::unix::fs::symlink(target, t.path().join(name)).unwrap();
    };
    link(Path::new("x"), "link");
    link(&outside.path().join("o"), "out-file");
    link(outside.path(), "out-dir");
    link(Path::new("sub"), "sub-link");
    write(t.path(), "x", b"edited");

    // `commit link`: the link alone, the edit of `x` still pending.
    let c = json(t.path(), &["commit", "link", "-m", "the link"]);
    assert_eq!(c["files_added"], 1, "{c}");
    assert_eq!(c["files_modified"], 0, "{c}");
    let d = json(t.path(), &["diff", &one, "main"]);
    assert_eq!(d["added"], serde_json::json!(["/link"]), "{d}");
    assert_eq!(run_in(t.path(), &["cat", "main:x"]).stdout, b"one");
    assert_eq!(
        json(t.path(), &["status"])["modified"],
        serde_json::json!(["/x"])
    );

    // Links out of the working directory are entries of it.
    ok(t.path(), &["commit", "out-file", "out-dir", "-m", "out"]);
    let listed = json(t.path(), &["ls", "main"]);
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert!(
        names.contains(&"out-file") && names.contains(&"out-dir"),
        "{listed}"
    );
    // A path through one is not.
    let err = fails(t.path(), &["commit", "out-dir/o", "-m", "through"]);
    assert!(err.contains("outside the working directory"), "{err}");

    // `restore link`: the link back, the edit of `x` kept.
    std::fs::remove_file(t.path().join("link")).unwrap();
    ok(t.path(), &["restore", "link"]);
    assert_eq!(
        std::fs::read_link(t.path().join("link")).unwrap(),
        Path::new("x")
    );
    ok(t.path(), &["restore", "link"]);
    assert_eq!(std::fs::read(t.path().join("x")).unwrap(), b"edited");

    // `sub-link/` is the directory it points to; `sub/..` the root.
    write(t.path(), "sub/new", b"new");
    let c = json(t.path(), &["commit", "sub-link/", "-m", "sub"]);
    let d = json(t.path(), &["diff", c["previous"].as_str().unwrap(), "main"]);
    assert_eq!(d["added"], serde_json::json!(["/sub/new"]), "{d}");
    let c = json(t.path(), &["commit", "sub/..", "-m", "all"]);
    assert_eq!(c["files_modified"], 1, "{c}");
    assert_eq!(c["files_added"], 1, "{c}");
    assert_eq!(run_in(t.path(), &["cat", "main:x"]).stdout, b"edited");
}

/// Item 8: `branch -d` refuses unmerged work; deleted tips survive gc for the grace
/// period; `--prune=now` and `--dry-run` do what they say.
#[test]
fn item08_deleted_branches_survive_the_grace_period() {
    let t = repo();
    write(t.path(), "a", b"main");
    ok(t.path(), &["commit", "-m", "main"]);
    ok(t.path(), &["branch", "merged"]);
    ok(t.path(), &["branch", "-d", "merged"]);
    ok(t.path(), &["branch", "exp"]);
    write(t.path(), "a", b"experiment only");
    let exp = json(t.path(), &["commit", "-m", "exp", "-b", "exp"]);
    let exp = exp["id"].as_str().unwrap().to_string();
    let err = fails(t.path(), &["branch", "-d", "exp"]);
    assert!(
        err.contains("exp") && err.contains("not merged") && err.contains("-D"),
        "{err}"
    );
    let out = ok(t.path(), &["branch", "-D", "exp"]);
    assert!(out.contains(&format!("--at {exp}")), "{out}");
    // The reflog of the deleted branch still names its tip.
    let log = json(t.path(), &["reflog", "exp"]);
    assert_eq!(log[0]["old"], exp.as_str(), "{log}");
    assert_eq!(log[0]["new"], serde_json::Value::Null, "{log}");
    // gc within the grace period keeps it.
    ok(t.path(), &["gc"]);
    assert_eq!(
        run_in(t.path(), &["cat", &format!("{exp}:a")]).stdout,
        b"experiment only"
    );
    let dry = json(t.path(), &["gc", "--dry-run", "--prune=now"]);
    // Both deleted branches expire (ordered by deletion time, then name; the two
    // deletions may fall in different seconds).
    let expired: Vec<&str> = dry["expired"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["ref"].as_str().unwrap())
        .collect();
    assert!(expired.contains(&"heads/exp"), "{dry}");
    assert!(dry["objects"].as_u64().unwrap() >= 2, "{dry}");
    assert_eq!(
        run_in(t.path(), &["cat", &format!("{exp}:a")]).stdout,
        b"experiment only"
    );
    // A longer configured grace keeps it; `--prune=now` drops it.
    let cfg = t.path().join(".snapgraph/config");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str("gc.grace = 30d\n");
    std::fs::write(&cfg, text).unwrap();
    ok(t.path(), &["gc"]);
    ok(t.path(), &["branch", "back", "--at", &exp]);
    ok(t.path(), &["branch", "-D", "back"]);
    ok(t.path(), &["gc", "--prune=now"]);
    let err = fails(t.path(), &["cat", &format!("{exp}:a")]);
    assert!(err.contains(&exp[..12]), "{err}");
}

/// Item 9: only `init` creates a store: a missing or emptied one is an error naming
/// it, never a new empty repository.
#[test]
fn item09_an_emptied_store_is_not_a_new_repository() {
    let t = repo();
    write(t.path(), "a", b"1");
    ok(t.path(), &["commit", "-m", "one"]);
    let db = t.path().join(".snapgraph/store.db");
    std::fs::File::create(&db).unwrap(); // truncate to 0 bytes
    for verb in [
        &["log"][..],
        &["verify"],
        &["commit", "-m", "x"],
        &["status"],
    ] {
        let err = fails(t.path(), verb);
        assert!(
            err.contains("store.db") && err.contains("holds no snapgraph repository"),
            "{verb:?}: {err}"
        );
    }
    assert_eq!(std::fs::metadata(&db).unwrap().len(), 0, "left as found");
    std::fs::remove_file(&db).unwrap();
    let err = fails(t.path(), &["log"]);
    assert!(err.contains("does not exist"), "{err}");
    assert!(!db.exists(), "not created");
    // A directory store emptied by hand.
    let d = tempfile::tempdir().unwrap();
    ok(
        d.path(),
        &["init", "--store", "dir:.snapgraph/objects-here"],
    );
    write(d.path(), "a", b"1");
    ok(d.path(), &["commit", "-m", "one"]);
    std::fs::remove_dir_all(d.path().join(".snapgraph/objects-here")).unwrap();
    let err = fails(d.path(), &["verify"]);
    assert!(
        err.contains("objects-here") && err.contains("only `snapgraph init`"),
        "{err}"
    );
}

fn dead_pid() -> u32 {
    (4_000_000..4_100_000)
        .find(|p| !Path::new(&format!("/proc/{p}")).exists())
        .unwrap()
}

/// Item 10: staging directories of killed checkouts are reported and removed.
#[test]
fn item10_stale_staging_directories_are_removed() {
    let t = repo();
    write(t.path(), "a", b"1");
    ok(t.path(), &["commit", "-m", "one"]);
    let pid = dead_pid();
    let stale = t.path().join(format!(".snapgraph/staging-{pid}-0"));
    write(&stale, "big.bin", &[0u8; 4096]);
    let old = t.path().join(format!(".snapgraph/old-{pid}-1"));
    write(&old, "mine.txt", b"user file");
    let status = ok(t.path(), &["status"]);
    assert!(status.contains(&format!("staging-{pid}-0")), "{status}");
    assert!(status.contains(&format!("old-{pid}-1")), "{status}");
    let mine = t
        .path()
        .join(format!(".snapgraph/staging-{}-0", std::process::id()));
    std::fs::create_dir_all(&mine).unwrap();
    ok(t.path(), &["checkout", "main"]);
    assert!(!stale.exists(), "removed by checkout");
    assert!(
        old.join("mine.txt").exists(),
        "the user's files are never removed"
    );
    write(&stale, "again", b"x");
    ok(t.path(), &["gc"]);
    assert!(!stale.exists(), "removed by gc");
    assert!(mine.exists(), "a live process's staging stays");
}

/// Item 11: verify says what it checked, and fails when it finds a problem.
#[test]
fn item11_verify_says_what_it_checked() {
    let t = tempfile::tempdir().unwrap();
    ok(t.path(), &["init", "--store", "dir:.snapgraph/st"]);
    write(t.path(), "big.bin", &pseudo_random(2 << 20, 3));
    ok(t.path(), &["commit", "-m", "one"]);
    // Corrupt the largest object (a chunk).
    let biggest = walk(&t.path().join(".snapgraph/st/objects"))
        .into_iter()
        .filter(|(_, k)| *k == Kind::File)
        .max_by_key(|(p, _)| std::fs::metadata(p).unwrap().len())
        .unwrap()
        .0;
    let mut bytes = std::fs::read(&biggest).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0xff;
    std::fs::write(&biggest, bytes).unwrap();
    let out = ok(t.path(), &["verify"]);
    assert!(
        out.contains("structure only; chunk bytes not re-hashed: --read-data"),
        "{out}"
    );
    let err = fails(t.path(), &["verify", "--read-data"]);
    assert!(err.contains("problem"), "{err}");
}

/// Item 12: `init` inside a repository is refused without `--force`.
#[test]
fn item12_init_does_not_nest_silently() {
    let t = repo();
    std::fs::create_dir_all(t.path().join("sub/dir")).unwrap();
    let err = fails(&t.path().join("sub/dir"), &["init"]);
    assert!(
        err.contains("inside the snapgraph repository") && err.contains("--force"),
        "{err}"
    );
    assert!(!t.path().join("sub/dir/.snapgraph").exists());
    ok(&t.path().join("sub/dir"), &["init", "--force"]);
    assert!(t.path().join("sub/dir/.snapgraph/config").is_file());
    // `init DIR` creates DIR/.snapgraph (a global `-C DIR` once captured DIR too,
    // making DIR/DIR/.snapgraph).
    ok(&t.path().join("sub"), &["init", "other", "--force"]);
    assert!(t.path().join("sub/other/.snapgraph/config").is_file());
    assert!(!t.path().join("sub/other/other").exists());
}

// ------------------------------------------------------------------ crashes and surprises

/// Runs the binary, reads the start of its stdout, closes the pipe and returns the
/// exit code and stderr.
fn head_one(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(&*BIN)
        .args(args)
        .arg("--quiet")
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Like `head -c 100`: read a little, then close the pipe.
    let mut start = [0u8; 100];
    child.stdout.take().unwrap().read_exact(&mut start).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Item 13: a closed stdout ends every command quietly (like git), never a panic.
#[test]
fn item13_a_closed_pipe_ends_quietly() {
    let t = repo();
    let long = "a long message line\n".repeat(4_000);
    write(t.path(), "first.txt", b"x");
    let first = commit_id(&ok(t.path(), &["commit", "-m", &long]));
    for i in 0..3000 {
        write(
            t.path(),
            &format!("d{}/file-with-a-long-name-{i:05}.txt", i % 7),
            b"x",
        );
    }
    ok(t.path(), &["commit", "-m", &long]);
    for args in [
        &["ls", "-r", "main"][..],
        &["ls", "-r", "main", "--json"],
        &["log"],
        &["log", "--json"],
        &["show", "main"],
        &["diff", &first, "main"],
        &["diff", &first, "main", "--json"],
    ] {
        let (code, stderr) = head_one(t.path(), args);
        assert_eq!(code, Some(141), "{args:?}: {stderr}");
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
    }
}

/// Item 14: committing nothing new creates no commit unless `--allow-empty`.
#[test]
fn item14_nothing_to_commit() {
    let t = repo();
    let out = ok(t.path(), &["commit", "-m", "empty dir"]);
    assert!(out.contains("nothing to commit"), "{out}");
    write(t.path(), "a.txt", b"a");
    let one = commit_id(&ok(t.path(), &["commit", "-m", "one"]));
    let out = ok(t.path(), &["commit", "-m", "again"]);
    assert!(out.contains("nothing to commit"), "{out}");
    // A rewrite with the same bytes (read again, same size) is still nothing.
    std::thread::sleep(std::time::Duration::from_millis(20));
    write(t.path(), "a.txt", b"a");
    let out = ok(t.path(), &["commit", "-m", "touched"]);
    assert!(out.contains("nothing to commit"), "{out}");
    assert_eq!(json(t.path(), &["log"]).as_array().unwrap().len(), 1);
    let two = json(t.path(), &["commit", "-m", "forced", "--allow-empty"]);
    assert_eq!(two["previous"], one.as_str());
    assert_eq!(json(t.path(), &["log"]).as_array().unwrap().len(), 2);
    // Same size, other bytes: a change.
    write(t.path(), "a.txt", b"b");
    let three = json(t.path(), &["commit", "-m", "b"]);
    assert_eq!(three["files_modified"], 1, "{three}");
}

/// Item 15: unpacking a pack of X gives a new root commit with X's contents and
/// metadata, and says so (with the pack's root id).
#[test]
fn item15_pack_then_unpack_says_what_it_gives() {
    let t = repo();
    write(t.path(), "a.txt", b"one");
    ok(t.path(), &["commit", "-m", "one"]);
    write(t.path(), "a.txt", b"two");
    let x = json(
        t.path(),
        &["commit", "-m", "the second", "--meta", "ticket=7"],
    );
    let x = x["id"].as_str().unwrap().to_string();
    let packed = json(t.path(), &["pack", &x, "-o", "x.snap"]);
    let root = packed["root"].as_str().unwrap().to_string();
    let out = ok(t.path(), &["unpack", "x.snap", "-b", "copy"]);
    assert!(out.contains("new root commit") && out.contains(&x), "{out}");
    let log = json(t.path(), &["log", "copy"]);
    assert_eq!(log.as_array().unwrap().len(), 1);
    assert_eq!(log[0]["id"], root.as_str());
    assert_eq!(log[0]["meta"]["message"], "the second");
    assert_eq!(log[0]["meta"]["ticket"], "7");
    assert_eq!(log[0]["meta"]["snapgraph.packed_from"], x.as_str());
    let d = json(t.path(), &["diff", &x, "copy", "--stat"]);
    for list in ["added", "modified", "removed", "changes"] {
        assert_eq!(d[list], serde_json::json!([]), "{list}: {d}");
    }
    assert_eq!(d["stat"]["files"], serde_json::json!([]), "{d}");
    // Unpacking twice gives the same commit again.
    let again = json(t.path(), &["unpack", "x.snap", "-b", "copy2"]);
    assert_eq!(again["id"], root.as_str());
}

/// Item 16: the scan counts what it must read, then reads it against that total.
#[test]
fn item16_scan_progress_counts_against_totals() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "a.bin", &pseudo_random(10_000, 1));
    write(t.path(), "d/b.bin", &pseudo_random(5_000, 2));
    let dot = t.path().join(".snapgraph");
    std::fs::create_dir(&dot).unwrap();
    let pb = indicatif::ProgressBar::hidden();
    let mut ws = snapgraph::Workspace::new();
    let report = snapgraph_cli::scan::scan(
        t.path(),
        &mut ws,
        snapgraph_cli::scan::ScanOptions {
            ..snapgraph_cli::scan::ScanOptions::new(&dot)
        },
        &pb,
    )
    .unwrap();
    assert_eq!(report.bytes_read, 15_000);
    assert_eq!(pb.length(), Some(15_000));
    assert_eq!(pb.position(), 15_000);
    assert_eq!(pb.message(), "2/2 files");
}

// ------------------------------------------------------------------ secrets at rest

fn pg_password_url() -> Option<String> {
    match std::env::var("SNAPGRAPH_PG_PASSWORD_URL") {
        Ok(u) => Some(u),
        Err(_) => {
            // A server named by SNAPGRAPH_PG_URL alone has no password-checked role.
            let external = std::env::var("SNAPGRAPH_PG_URL").is_ok();
            assert!(
                std::env::var("SNAPGRAPH_SKIP_PG").is_ok() || external,
                "SNAPGRAPH_PG_PASSWORD_URL is unset: run scripts/postgres (or scripts/test), or set SNAPGRAPH_SKIP_PG=1"
            );
            eprintln!("skipped: SNAPGRAPH_PG_PASSWORD_URL is unset (scripts/postgres sets it)");
            None
        }
    }
}

fn unique_schema(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("cli_{tag}_{}_{nanos}", std::process::id())
}

/// Issue 23: a password given to `init` lands only in a 0600 file, commits and sync
/// still authenticate, nothing prints it, and a readable credentials file is refused.
#[test]
fn secret_in_init_url_stays_out_of_readable_files() {
    let Some(url) = pg_password_url() else { return };
    let secret = url
        .split("://")
        .nth(1)
        .and_then(|r| r.split('@').next())
        .and_then(|u| u.split(':').nth(1))
        .expect("a password in SNAPGRAPH_PG_PASSWORD_URL")
        .to_string();
    let url = format!("{url}?snapgraph_schema={}", unique_schema("secret"));
    let t = tempfile::tempdir().unwrap();
    let init = ok(t.path(), &["init", "--store", &url]);
    assert!(
        !init.contains(&secret) && init.contains("credentials"),
        "{init}"
    );
    // No file under .snapgraph that others may read holds the password.
    let cred = t.path().join(".snapgraph/credentials");
    for (p, k) in walk(&t.path().join(".snapgraph")) {
        if k != Kind::File {
            continue;
        }
        let mode = std::fs::metadata(&p).unwrap().permissions().mode();
        let text = String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned();
        if mode & 0o077 != 0 {
            assert!(
                !text.contains(&secret),
                "{} (mode {mode:o}) holds the password",
                p.display()
            );
        }
    }
    assert_eq!(
        std::fs::metadata(&cred).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(std::fs::read_to_string(&cred).unwrap().contains(&secret));
    // Commits authenticate (the role needs its password), and sync does.
    write(t.path(), "a.txt", b"on the server");
    let one = commit_id(&ok(t.path(), &["commit", "-m", "one"]));
    let b = repo();
    ok(b.path(), &["sync", t.path().to_str().unwrap(), ".", "main"]);
    assert_eq!(json(b.path(), &["log"])[0]["id"], one.as_str());
    // No verb prints it.
    write(t.path(), "b.txt", b"pending");
    for args in [
        &["status"][..],
        &["status", "--json"],
        &["log"],
        &["log", "--json"],
        &["verify"],
        &["branch", "--json"],
        &["commit", "-m", "two", "--json"],
    ] {
        let out = run_in(t.path(), args);
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{args:?}: {all}");
        assert!(
            !all.contains(&secret),
            "{args:?} printed the password: {all}"
        );
    }
    // Errors neither.
    let bad = url.replace("127.0.0.1:", "127.0.0.1:1");
    let err = fails(b.path(), &["sync", &bad, "."]);
    assert!(!err.contains(&secret), "{err}");
    // A credentials file others may read is refused.
    std::fs::set_permissions(&cred, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = fails(t.path(), &["log"]);
    assert!(
        err.contains("credentials") && err.contains("0644") && !err.contains(&secret),
        "{err}"
    );
    // So is a symlink in its place.
    std::fs::remove_file(&cred).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let target = elsewhere.path().join("pw");
    std::fs::write(&target, &secret).unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink(&target, &cred).unwrap();
    let err = fails(t.path(), &["log"]);
    assert!(err.contains("not a regular file"), "{err}");
    // A password put into the config by hand is refused too.
    std::fs::remove_file(&cred).unwrap();
    let cfg = t.path().join(".snapgraph/config");
    std::fs::write(&cfg, format!("store = {url}\n")).unwrap();
    let err = fails(t.path(), &["log"]);
    assert!(
        err.contains("holds a password") && !err.contains(&secret),
        "{err}"
    );
}

/// Issue 23: without a password in the URL, the adapter takes it from `PGPASSWORD`
/// or a 0600 `PGPASSFILE`, and refuses a readable one.
#[test]
fn libpq_password_sources() {
    let Some(url) = pg_password_url() else { return };
    let (with_user, rest) = url.split_once('@').unwrap();
    let (scheme_user, secret) = with_user.rsplit_once(':').unwrap();
    let bare = format!(
        "{scheme_user}@{rest}?snapgraph_schema={}",
        unique_schema("pgpass")
    );
    let t = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let run = |envs: &[(&str, &str)], args: &[&str]| {
        let mut c = Command::new(&*BIN);
        c.args(args)
            .arg("--quiet")
            .current_dir(t.path())
            .env_remove("PGPASSWORD");
        c.env("HOME", home.path()).env_remove("PGPASSFILE");
        for (k, v) in envs {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let out = run(&[], &["init", "--store", &bare]);
    assert!(
        !out.status.success(),
        "no password anywhere: refused by the server"
    );
    let out = run(&[("PGPASSWORD", secret)], &["init", "--store", &bare]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!t.path().join(".snapgraph/credentials").exists());
    write(t.path(), "a.txt", b"a");
    let out = run(&[("PGPASSWORD", secret)], &["commit", "-m", "one"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pgpass = home.path().join(".pgpass");
    std::fs::write(&pgpass, format!("*:*:*:snapgraph_pw:{secret}\n")).unwrap();
    std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = run(&[], &["log"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains(".pgpass") && err.contains("0644"),
        "{err}"
    );
    std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = run(&[], &["log"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// ------------------------------------------------------------------ checkout to disk

/// The repository's SQLite store, opened beside the CLI.
fn open_store(repo: &Path) -> Box<dyn snapgraph_store::Store> {
    snapgraph_store::open(&format!(
        "sqlite:{}",
        repo.join(".snapgraph/store.db").display()
    ))
    .unwrap()
}

/// The chunk id of `path`'s content at commit `rev`, and its stored bytes.
fn content_of(repo: &Path, rev: &str, path: &str) -> (snapgraph::ObjectId, Vec<u8>) {
    use snapgraph_store::ObjectStore;
    let store = open_store(repo);
    let repo = snapgraph_store::Repo::new(store);
    let ws = repo.checkout_shallow(rev).unwrap();
    let id = ws
        .file_content_id(path)
        .unwrap_or_else(|| panic!("{path} is one chunk"));
    let stored = repo
        .store()
        .get_many(&[id])
        .unwrap()
        .pop()
        .flatten()
        .unwrap();
    (id, stored)
}

/// Replaces the object `id` in the repository's store with other bytes (a store
/// does not re-hash what it is given: the wrong bytes are caught when read).
fn tamper_record(repo: &Path, id: snapgraph::ObjectId, stored: &[u8]) {
    use snapgraph_store::ObjectStore;
    let store = open_store(repo);
    store.delete_many(&[id]).unwrap();
    store.put_many(&[(id, stored)]).unwrap();
}

/// The store leaves the hash of what a checkout reads to the core (each object is
/// hashed once): a tampered object is still refused, naming its id, by `checkout`,
/// `checkout --to` and `restore`; a checkout fails after some files were already
/// staged, and the working directory, HEAD and the target stay as they were.
#[test]
fn a_tampered_object_fails_every_restore_by_id_and_changes_nothing() {
    let t = repo();
    rich_tree(t.path());
    for i in 0..60u64 {
        write(
            t.path(),
            &format!("many/f{i:02}.txt"),
            &pseudo_random(3_000 + i as usize * 50, i + 1),
        );
    }
    let one = commit_id(&ok(t.path(), &["commit", "-m", "one"]));
    std::fs::remove_dir_all(t.path().join("many")).unwrap();
    write(t.path(), "README.md", b"# two\n");
    write(t.path(), "two/only.txt", b"only in two");
    ok(t.path(), &["commit", "-m", "two"]);
    let (id, mut stored) = content_of(t.path(), &one, "/many/f40.txt");
    let last = stored.len() - 1;
    stored[last] ^= 1;
    tamper_record(t.path(), id, &stored);
    let before = snapshot_of(t.path());
    let head = json(t.path(), &["status"]);
    let dot: Vec<_> = std::fs::read_dir(t.path().join(".snapgraph"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();

    let err = fails(t.path(), &["checkout", &one]);
    assert!(err.contains(&id.to_string()), "{err}");
    let err = fails(t.path(), &["checkout", &one, "--force"]);
    assert!(err.contains(&id.to_string()), "{err}");
    assert_eq!(snapshot_of(t.path()), before);
    assert_eq!(json(t.path(), &["status"]), head);
    let mut after: Vec<_> = std::fs::read_dir(t.path().join(".snapgraph"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    after.sort();
    let mut dot = dot;
    dot.sort();
    assert_eq!(after, dot, "no staging directory is left");

    let out = tempfile::tempdir().unwrap();
    let to = out.path().join("copy");
    let err = fails(t.path(), &["checkout", &one, "--to", to.to_str().unwrap()]);
    assert!(err.contains(&id.to_string()), "{err}");
    assert_eq!(
        std::fs::read_dir(out.path()).unwrap().count(),
        0,
        "nothing left"
    );
    // `restore` writes path by path (each file beside its place, then renamed):
    // it stops at the tampered file, naming it, and leaves no temporary file.
    let err = fails(t.path(), &["restore", "--source", &one, "many"]);
    assert!(err.contains(&id.to_string()), "{err}");
    let now = snapshot_of(t.path());
    assert!(!now.contains_key("many/f40.txt"));
    assert!(
        now.keys().all(|k| !k.contains("snapgraph-restore")),
        "{now:?}"
    );
    std::fs::remove_dir_all(t.path().join("many")).unwrap();
    // The untouched commit still checks out, byte for byte.
    ok(
        t.path(),
        &["checkout", "main", "--to", to.to_str().unwrap()],
    );
    let mut copy = snapshot_of(&to);
    let mut here = before.clone();
    copy.retain(|k, _| !k.starts_with(".snapgraph"));
    here.retain(|k, _| !k.starts_with(".snapgraph"));
    assert_eq!(copy, here);
}

/// The chunk ids of the manifest file `path` at commit `rev`, in file order.
fn chunks_of(repo: &Path, rev: &str, path: &str) -> Vec<snapgraph::ObjectId> {
    use snapgraph::object::manifest::Manifest;
    use snapgraph_store::ObjectStore;
    let store = open_store(repo);
    let repo = snapgraph_store::Repo::new(store);
    let ws = repo.checkout_shallow(rev).unwrap();
    let Some((root, snapgraph::ObjectKind::Manifest)) = ws.file_content_object(path) else {
        panic!("{path} is a manifest")
    };
    let (mut level, mut chunks) = (vec![root], Vec::new());
    while !level.is_empty() {
        let mut next = Vec::new();
        for (id, stored) in level.iter().zip(repo.store().get_many(&level).unwrap()) {
            match Manifest::decode(id, &stored.unwrap()[2..]).unwrap() {
                Manifest::Leaf(c) => chunks.extend(c.iter().map(|c| c.id)),
                Manifest::Internal { children, .. } => next.extend(children.iter().map(|c| c.id)),
            }
        }
        level = next;
    }
    chunks
}

/// A file over `materialize::STREAM_MIN` is written from its chunks a window at a
/// time, not loaded whole: it checks out byte for byte (into a directory and into
/// the working directory, whose index then vouches for it), and a damaged chunk
/// past the first window (pieces already written) fails the checkout, naming the
/// chunk, with nothing left behind.
#[test]
fn a_large_file_streams_out_and_a_bad_chunk_leaves_nothing() {
    use snapgraph_cli::materialize::STREAM_MIN;
    let t = repo();
    let big = pseudo_random(STREAM_MIN as usize * 3 + 12_345, 77);
    write(t.path(), "data/big.bin", &big);
    write(t.path(), "small.txt", b"small");
    let one = commit_id(&ok(t.path(), &["commit", "-m", "one"]));
    let out = tempfile::tempdir().unwrap();
    let to = out.path().join("copy");
    ok(t.path(), &["checkout", &one, "--to", to.to_str().unwrap()]);
    assert_eq!(std::fs::read(to.join("data/big.bin")).unwrap(), big);
    assert_eq!(std::fs::read(to.join("small.txt")).unwrap(), b"small");
    // Into the working directory: the index records the streamed file's digest,
    // so the next commit finds nothing to read.
    std::fs::remove_file(t.path().join("data/big.bin")).unwrap();
    ok(t.path(), &["checkout", "main", "--force"]);
    assert_eq!(std::fs::read(t.path().join("data/big.bin")).unwrap(), big);
    let report = ok(t.path(), &["commit", "-m", "same", "--allow-empty"]);
    assert_eq!(field(&report, "files read"), 0, "{report}");
    // `restore` streams it too.
    std::fs::write(t.path().join("data/big.bin"), b"edited").unwrap();
    ok(t.path(), &["restore", "--force", "--source", &one, "data"]);
    assert_eq!(std::fs::read(t.path().join("data/big.bin")).unwrap(), big);

    let chunks = chunks_of(t.path(), &one, "/data/big.bin");
    assert!(
        chunks.len() > snapgraph::PIECES_WINDOW,
        "{} chunks",
        chunks.len()
    );
    let victim = chunks[snapgraph::PIECES_WINDOW + 1];
    flip_byte(t.path(), victim, 100);
    copy_refused(t.path(), &one, out.path(), victim);
    // Over the working directory, and by `restore`: refused, and nothing in it
    // changes (no temporary file is left beside the file).
    std::fs::write(t.path().join("data/big.bin"), b"edited").unwrap();
    let before = snapshot_of(t.path());
    let err = fails(t.path(), &["checkout", &one, "--force"]);
    assert!(err.contains(&victim.to_string()), "{err}");
    assert_eq!(snapshot_of(t.path()), before);
    let err = fails(t.path(), &["restore", "--force", "--source", &one, "data"]);
    assert!(err.contains(&victim.to_string()), "{err}");
    assert_eq!(snapshot_of(t.path()), before);
}

/// A manifest's chunks are read with its batch of files (not by the file's own
/// load): they still check out byte for byte, and a damaged one among them fails
/// the checkout, naming it, with nothing left behind.
#[test]
fn a_bad_chunk_read_with_its_batch_is_refused() {
    let t = repo();
    let mid = pseudo_random(300_000, 5);
    for i in 0..20u64 {
        write(
            t.path(),
            &format!("d/s{i:02}.txt"),
            &pseudo_random(2_000, i + 10),
        );
    }
    write(t.path(), "d/mid.bin", &mid);
    let one = commit_id(&ok(t.path(), &["commit", "-m", "one"]));
    let out = tempfile::tempdir().unwrap();
    let to = out.path().join("copy");
    ok(t.path(), &["checkout", &one, "--to", to.to_str().unwrap()]);
    assert_eq!(std::fs::read(to.join("d/mid.bin")).unwrap(), mid);
    assert_eq!(
        std::fs::read(to.join("d/s07.txt")).unwrap(),
        pseudo_random(2_000, 17)
    );
    let chunks = chunks_of(t.path(), &one, "/d/mid.bin");
    assert!(chunks.len() > 3, "{} chunks", chunks.len());
    let victim = chunks[2];
    flip_byte(t.path(), victim, 10);
    copy_refused(t.path(), &one, out.path(), victim);
}

/// `cat` streams a file a window of chunks at a time: a damaged chunk ends it with an
/// error naming that chunk, and what it wrote before is a prefix of the true bytes
/// (never a byte of the damaged chunk).
#[test]
fn cat_stops_at_a_bad_chunk_having_written_only_true_bytes() {
    let t = repo();
    let big = pseudo_random(3_000_000, 41);
    write(t.path(), "big.bin", &big);
    let one = commit_id(&ok(t.path(), &["commit", "-m", "one"]));
    let spec = format!("{one}:big.bin");
    assert_eq!(run_in(t.path(), &["cat", &spec]).stdout, big);
    let chunks = chunks_of(t.path(), &one, "/big.bin");
    assert!(chunks.len() > 20, "{} chunks", chunks.len());
    let victim = chunks[chunks.len() - 3];
    flip_byte(t.path(), victim, 10);
    let out = run_in(t.path(), &["cat", &spec]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&victim.to_string()), "{err}");
    assert!(out.stdout.len() < big.len());
    assert_eq!(out.stdout[..], big[..out.stdout.len()]);
}

/// Flips byte `at` of object `id`'s stored bytes in the repository's store.
fn flip_byte(repo: &Path, id: snapgraph::ObjectId, at: usize) {
    use snapgraph_store::ObjectStore;
    let mut stored = open_store(repo)
        .get_many(&[id])
        .unwrap()
        .pop()
        .flatten()
        .unwrap();
    stored[at] ^= 1;
    tamper_record(repo, id, &stored);
}

/// `checkout REV --to OUT/copy2` fails naming `bad`, and OUT holds nothing but the
/// `copy` made before.
fn copy_refused(repo: &Path, rev: &str, out: &Path, bad: snapgraph::ObjectId) {
    let to = out.join("copy2");
    let err = fails(repo, &["checkout", rev, "--to", to.to_str().unwrap()]);
    assert!(err.contains(&bad.to_string()), "{err}");
    let left: Vec<_> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        left,
        vec![std::ffi::OsString::from("copy")],
        "nothing else left"
    );
}

/// Files are written by up to `WRITERS` threads: any count gives the same tree,
/// byte for byte and mode for mode, as one thread.
#[test]
fn a_parallel_checkout_writes_what_a_sequential_one_writes() {
    use snapgraph::{CheckoutOptions, CheckoutPolicy, CommitOptions, Workspace};
    use snapgraph_cli::materialize::{materialize_with, WRITERS};

    let mut ws = Workspace::new();
    for i in 0..200u64 {
        let len = [0, 10, 700, 5_000, 70_000, 400_000][i as usize % 6];
        let path = format!("/d{}/e{}/f{i:03}", i % 7, i % 3);
        ws.write(&path, pseudo_random(len, i + 1)).unwrap();
        if i % 5 == 0 {
            ws.set_mode(&path, 0o755).unwrap();
        }
        if i % 11 == 0 {
            ws.set_mode(&path, 0o600).unwrap();
        }
    }
    ws.symlink("/d0/link", "../d1").unwrap();
    ws.mkdir("/empty/deeper").unwrap();
    // Directory modes: created as recorded where the umask takes nothing and the
    // owner may fill the directory, set once filled otherwise (read-only, bits a
    // umask of 022 takes, set-id bits masked off).
    let dir_modes = [
        ("/d0", 0o555),
        ("/d0/e1", 0o500),
        ("/d1", 0o700),
        ("/d2", 0o750),
        ("/d3", 0o775),
        ("/d3/e0", 0o777),
        ("/d4", 0o711),
        ("/d5", 0o2755),
        ("/empty/deeper", 0o751),
    ];
    for (dir, mode) in dir_modes {
        ws.set_mode(dir, mode).unwrap();
    }
    let c = ws.commit(CommitOptions::new()).unwrap();
    let id = c.id();
    let store = snapgraph_store::MemoryStore::new();
    let objects: Vec<(snapgraph::ObjectId, Vec<u8>)> = c.into_objects().into_iter().collect();
    let batch: Vec<_> = objects.iter().map(|(i, b)| (*i, &b[..])).collect();
    snapgraph_store::ObjectStore::put_many(&store, &batch).unwrap();
    let source = snapgraph_store::CallerVerifies(&store);
    let mut shallow = Workspace::new();
    let _ = shallow
        .checkout_with(
            id,
            &source,
            CheckoutOptions::new()
                .policy(CheckoutPolicy::Force)
                .shallow(true),
        )
        .unwrap();

    let out = tempfile::tempdir().unwrap();
    let bar = indicatif::ProgressBar::hidden();
    let mut trees = Vec::new();
    for threads in [1, 2, WRITERS] {
        let dest = out.path().join(format!("t{threads}"));
        let done = materialize_with(&shallow, &source, id, &dest, &bar, threads).unwrap();
        assert_eq!(done.files, 200);
        for (dir, mode) in dir_modes {
            let m = std::fs::metadata(dest.join(&dir[1..]))
                .unwrap()
                .permissions();
            assert_eq!(
                std::os::unix::fs::PermissionsExt::mode(&m) & 0o7777,
                mode & 0o777,
                "{dir} with {threads} writers"
            );
        }
        trees.push(snapshot_of(&dest));
    }
    assert_eq!(trees[0].len(), 200 + 1 + 7 + 21 + 2);
    assert_eq!(trees[0], trees[1]);
    assert_eq!(trees[0], trees[2]);
    assert!(trees[0]["d5/e2/f005"].starts_with("file 755 400000 "));
    assert!(trees[0]["d0/e2/f077"].starts_with("file 600 "));
}

/// A checkout's totals, as its JSON report gives them.
fn totals(report: &serde_json::Value) -> [u64; 4] {
    ["files", "dirs", "symlinks", "bytes"].map(|k| report[k].as_u64().unwrap())
}

/// `checkout REV` of a clean working directory moves it by what differs: the files
/// the two commits share are not rewritten, the result is what a fresh checkout of
/// REV writes, `status` is clean after, and the stat cache still serves the next
/// commit (only what was written is read again).
#[test]
fn a_clean_checkout_touches_only_what_differs() {
    use std::os::unix::fs::MetadataExt;
    let t = repo();
    let root = t.path();
    rich_tree(root);
    write(root, ".snapgraphignore", b"*.log\n");
    for i in 0..40 {
        write(
            root,
            &format!("many/f{i:02}.txt"),
            format!("file {i}\n").as_bytes(),
        );
    }
    let one = commit_id(&ok(root, &["commit", "-m", "one"]));
    write(root, "README.md", b"# hello, two\n");
    std::fs::remove_file(root.join("data/blob.bin")).unwrap();
    write(root, "data/new/deep.txt", b"new in two");
    std::fs::set_permissions(
        root.join("many/f07.txt"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::remove_dir_all(root.join("empty")).unwrap();
    ok(root, &["commit", "-m", "two"]);
    write(root, "build.log", b"ignored, kept");
    let kept = std::fs::metadata(root.join("data/large.bin")).unwrap();
    for (rev, other) in [(one.as_str(), "main"), ("main", one.as_str())] {
        let (switched, _) = checkout_switched(root, rev);
        let fresh = tempfile::tempdir().unwrap();
        let to = fresh.path().join("t");
        let full = json(root, &["checkout", rev, "--to", to.to_str().unwrap()]);
        assert_eq!(totals(&switched), totals(&full), "checkout {rev}");
        let mut got = snapshot_of(root);
        assert!(got.remove("build.log").is_some(), "the ignored file stays");
        assert_eq!(got, snapshot_of(&to), "checkout {rev} (from {other})");
        let now = std::fs::metadata(root.join("data/large.bin")).unwrap();
        assert_eq!(
            (now.ino(), now.ctime_nsec()),
            (kept.ino(), kept.ctime_nsec())
        );
        assert!(ok(root, &["status"]).contains("nothing changed"));
        if rev == "main" {
            let committed = ok(root, &["commit", "-m", "again"]);
            assert!(committed.contains("nothing to commit"), "{committed}");
        }
    }
    assert_eq!(
        std::fs::read(root.join("build.log")).unwrap(),
        b"ignored, kept"
    );
    // The stat cache is complete for the tip: a commit reads only what the switch
    // wrote (newer than its clock probe), not the tree.
    write(root, "README.md", b"# hello, three\n");
    let summary = ok(root, &["commit", "-m", "three"]);
    assert!(field(&summary, "files read") <= 6, "{summary}");
}

/// A switch of a few hundred files (past the stat cache's one-by-one patching, short
/// of the switch's limit) leaves the cache complete and exact: `status` is clean and
/// the next commit reads only what the switch wrote.
#[test]
fn a_large_switch_keeps_the_stat_cache_complete() {
    let t = repo();
    let root = t.path();
    for i in 0..1_300 {
        write(
            root,
            &format!("d{}/f{i:04}.txt", i % 13),
            format!("one {i}\n").as_bytes(),
        );
    }
    let one = commit_id(&ok(root, &["commit", "-m", "one"]));
    for i in (0..1_300).step_by(5) {
        write(
            root,
            &format!("d{}/f{i:04}.txt", i % 13),
            format!("two {i}\n").as_bytes(),
        );
    }
    for i in 0..30 {
        write(root, &format!("new/g{i}.txt"), b"new");
    }
    ok(root, &["commit", "-m", "two"]);
    for (rev, files) in [(one.as_str(), 1_300), ("main", 1_330)] {
        let (switched, _) = checkout_switched(root, rev);
        assert!(ok(root, &["status"]).contains("nothing changed"));
        let fresh = tempfile::tempdir().unwrap();
        let to = fresh.path().join("t");
        let full = json(root, &["checkout", rev, "--to", to.to_str().unwrap()]);
        assert_eq!(totals(&switched), totals(&full), "checkout {rev}");
        assert_eq!(snapshot_of(root), snapshot_of(&to), "checkout {rev}");
        let entries = files + 13 + usize::from(rev == "main");
        assert_eq!(snapshot_of(root).len(), entries);
        // The cache holds every entry of the commit, and says it does.
        let ix = snapgraph_cli::index::Index::load(&root.join(".snapgraph/index"), root)
            .expect("an index");
        assert_eq!(ix.entries.len(), entries, "checkout {rev}");
        let head = json(root, &["log", "-n", "1"])[0]["id"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(ix.tip.map(|t| t.to_string()), Some(head), "checkout {rev}");
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    write(root, "d0/f0000.txt", b"three\n");
    let summary = ok(root, &["commit", "-m", "three"]);
    assert!(field(&summary, "files read") <= 1 + 260 + 30, "{summary}");
}

/// The check a checkout makes of what it takes away (`guard`) refuses nothing the
/// dirty check found clean: files whose stats all moved but whose bytes did not
/// (a tree copied over itself), a socket (never recorded), an ignored file where
/// the commit puts the same bytes; a switch and a full checkout alike.
#[test]
fn a_checkout_refuses_nothing_the_dirty_check_found_clean() {
    let t = repo();
    write(t.path(), ".snapgraphignore", b"*.log\n");
    grid(t.path(), 15);
    let one = commit_id(&ok(t.path(), &["commit", "-m", "one"]));
    // Every grid file changed: more than a switch takes on.
    for d in 0..15 {
        for f in 0..20 {
            write(t.path(), &format!("d{d:02}/f{f:02}.txt"), b"changed");
        }
    }
    // A log committed while logs were not ignored, then ignored again.
    std::fs::write(t.path().join(".snapgraphignore"), b"*.tmp\n").unwrap();
    write(t.path(), "src/out.log", b"commit's log");
    let two = commit_id(&ok(t.path(), &["commit", "-m", "two"]));
    std::fs::write(t.path().join(".snapgraphignore"), b"*.log\n").unwrap();
    ok(t.path(), &["commit", "-m", "three"]);
    let dot = t.path().join(".snapgraph");
    let same = |rev: &str| {
        // Every stat moved, no byte: each file rewritten with its own bytes.
        for (p, k) in walk(t.path()) {
            let regular = std::fs::symlink_metadata(&p).unwrap().is_file();
            if k == Kind::File && regular && !p.starts_with(&dot) {
                let bytes = std::fs::read(&p).unwrap();
                std::fs::write(&p, bytes).unwrap();
            }
        }
        ok(t.path(), &["checkout", rev]);
    };
    let _socket = std::os::unix::net::UnixListener::bind(t.path().join("d03/sock")).unwrap();
    // Ignored, with the bytes the commit puts there: it gives way (with others it
    // is refused, stop 57: `a_checkout_replaces_an_ignored_entry_only_when_nothing_is_lost`).
    write(t.path(), "src/out.log", b"commit's log");
    // A switch: the ignore file and the log differ.
    let (_, timeline) = checkout_switched(t.path(), &two);
    assert!(timeline.contains("switched ("), "{timeline}");
    assert_eq!(
        std::fs::read(t.path().join("src/out.log")).unwrap(),
        b"commit's log"
    );
    ok(t.path(), &["checkout", "main"]);
    write(t.path(), "src/out.log", b"commit's log");
    same(&two);
    // Full checkouts: every grid file differs.
    same(&one);
    assert_eq!(std::fs::read(t.path().join("d05/f00.txt")).unwrap(), b"5 0");
    same("main");
    assert_eq!(
        std::fs::read(t.path().join("d05/f00.txt")).unwrap(),
        b"changed"
    );
    let left: Vec<_> = std::fs::read_dir(&dot)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("old-") || n.starts_with("staging-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A full checkout finds what the scan does not record from the stat cache
/// (`scan::unrecorded_in`): ignored files and directories, nested repositories and
/// sockets stay where they are, across full checkouts both ways; a file the scan
/// would record that the cache lacks (made after the dirty check) is named.
#[test]
fn a_full_checkout_keeps_what_the_scan_does_not_record() {
    let t = repo();
    let root = t.path();
    write(root, ".snapgraphignore", b"*.log\nbuild/\n");
    write(root, "d01/.snapgraphignore", b"*.tmp\n");
    grid(root, 15);
    let one = commit_id(&ok(root, &["commit", "-m", "one"]));
    for d in 0..15 {
        for f in 0..20 {
            write(root, &format!("d{d:02}/f{f:02}.txt"), b"changed");
        }
    }
    ok(root, &["commit", "-m", "two"]);
    write(root, "top.log", b"top");
    write(root, "d03/x.log", b"x");
    write(root, "d01/y.tmp", b"y");
    write(root, "build/out.bin", b"out");
    write(root, "build/sub/z", b"z");
    std::fs::create_dir(root.join("nested")).unwrap();
    ok(&root.join("nested"), &["init", "--force"]);
    write(root, "nested/inner.txt", b"inner");
    let _socket = std::os::unix::net::UnixListener::bind(root.join("d04/sock")).unwrap();

    let index = |root: &Path| {
        snapgraph_cli::index::Index::load(&root.join(".snapgraph/index"), root).unwrap()
    };
    let (unrecorded, made) = snapgraph_cli::scan::unrecorded_in(root, &index(root)).unwrap();
    let shown: Vec<String> = unrecorded.iter().map(|p| p.display().to_string()).collect();
    assert_eq!(
        shown,
        [
            "build",
            "d01/y.tmp",
            "d03/x.log",
            "d04/sock",
            "nested",
            "top.log"
        ]
    );
    assert!(made.is_empty(), "{made:?}");
    write(root, "d02/new.txt", b"made since");
    let (_, made) = snapgraph_cli::scan::unrecorded_in(root, &index(root)).unwrap();
    assert_eq!(made, ["/d02/new.txt"]);
    std::fs::remove_file(root.join("d02/new.txt")).unwrap();

    for rev in [one.as_str(), "main", one.as_str()] {
        let out = std::process::Command::new(&*BIN)
            .args(["checkout", rev])
            .env("SNAPGRAPH_TIMINGS", "1")
            .current_dir(root)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(err.contains("declined"), "a full checkout: {err}");
        for (p, bytes) in [
            ("top.log", &b"top"[..]),
            ("d03/x.log", b"x"),
            ("d01/y.tmp", b"y"),
            ("build/out.bin", b"out"),
            ("build/sub/z", b"z"),
            ("nested/inner.txt", b"inner"),
        ] {
            assert_eq!(
                std::fs::read(root.join(p)).unwrap(),
                bytes,
                "{p} after {rev}"
            );
        }
        assert!(root.join("nested/.snapgraph").is_dir());
        assert!(std::fs::symlink_metadata(root.join("d04/sock")).is_ok());
    }
    assert_eq!(std::fs::read(root.join("d05/f00.txt")).unwrap(), b"5 0");
}

/// Two working directories on one store, on one branch: a commit from the one
/// behind never undoes the other's commits. It is refused (`--force` commits the
/// directory as it is); `checkout BRANCH` brings the new commits in, keeping the
/// directory's own changes to other paths, and refuses, writing nothing, where
/// both changed the same path.
#[test]
fn a_branch_moved_by_another_working_directory_is_not_undone() {
    let t = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", t.path().join("shared.db").display());
    let (a, b, c) = (t.path().join("a"), t.path().join("b"), t.path().join("c"));
    std::fs::create_dir(&a).unwrap();
    ok(&a, &["init", "--store", &store]);
    write(&a, "f", b"base f");
    write(&a, "g", b"base g");
    write(&a, "dir/h", b"base h");
    let first = commit_id(&ok(&a, &["commit", "-m", "base"]));
    // A directory made by `init` on the store is told of the branch, and an empty
    // one takes it without --force.
    for d in [&b, &c] {
        std::fs::create_dir(d).unwrap();
        let said = ok(d, &["init", "--store", &store]);
        assert!(
            said.contains(&first) && said.contains("checkout main"),
            "{said}"
        );
        ok(d, &["checkout", "main"]);
    }
    write(&a, "f", b"f from a");
    let second = commit_id(&ok(&a, &["commit", "-m", "a"]));

    // b changed g: its status lists that change only, and says it is behind.
    write(&b, "g", b"g from b");
    let status = json(&b, &["status"]);
    assert_eq!(status["behind"]["base"], first.as_str(), "{status}");
    assert_eq!(status["behind"]["tip"], second.as_str(), "{status}");
    assert_eq!(status["modified"], serde_json::json!(["/g"]), "{status}");
    assert!(ok(&b, &["status"]).contains("behind"));

    // A commit of the whole directory, or of a path, is refused.
    for args in [&["commit", "-m", "b"][..], &["commit", "g", "-m", "b"][..]] {
        let err = fails(&b, args);
        assert!(
            err.contains("moved") && err.contains(&second) && err.contains(&first),
            "{err}"
        );
    }
    assert_eq!(ok(&b, &["cat", "main:f"]), "f from a");

    // checkout brings a's commit in and keeps b's change.
    let out = json(&b, &["checkout", "main"]);
    assert_eq!(out["kept"], serde_json::json!(["/g"]), "{out}");
    assert_eq!(std::fs::read(b.join("f")).unwrap(), b"f from a");
    assert_eq!(std::fs::read(b.join("g")).unwrap(), b"g from b");
    assert!(json(&b, &["status"])["behind"].is_null());
    ok(&b, &["commit", "-m", "b"]);
    assert_eq!(ok(&b, &["cat", "main:f"]), "f from a");
    assert_eq!(ok(&b, &["cat", "main:g"]), "g from b");

    // c, with no change of its own, follows without --force.
    ok(&c, &["checkout", "main"]);
    assert_eq!(std::fs::read(c.join("g")).unwrap(), b"g from b");

    // Both change dir/h: c's checkout refuses, naming it, and writes nothing.
    ok(&a, &["checkout", "main"]);
    write(&a, "f", b"f again");
    write(&a, "dir/h", b"h from a");
    let third = commit_id(&ok(&a, &["commit", "-m", "a again"]));
    write(&c, "dir/h", b"h from c");
    let err = fails(&c, &["checkout", "main"]);
    assert!(err.contains("/dir/h") && err.contains("--force"), "{err}");
    assert_eq!(std::fs::read(c.join("dir/h")).unwrap(), b"h from c");
    assert_eq!(std::fs::read(c.join("f")).unwrap(), b"f from a");
    // The directory as it is, with --force: c's h over the branch's (and its f).
    let forced = commit_id(&ok(&c, &["commit", "-m", "c", "--force"]));
    let shown = ok(&c, &["show", &forced]);
    assert!(shown.contains(&third), "parent: {shown}");
    assert_eq!(ok(&c, &["cat", "main:dir/h"]), "h from c");
}

/// A store of files inside the working directory, other than in `.snapgraph/`, is
/// refused by `init` (which creates nothing) and by every command after (a config
/// edited to name one): each commit would snapshot the store into itself, and a
/// checkout write an old copy of it over the live one.
#[test]
fn a_store_inside_the_working_directory_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let w = t.path().join("w");
    std::fs::create_dir_all(w.join("sub")).unwrap();
    for url in [
        "sqlite:inside.db",
        "dir:inside-store",
        "sqlite:sub/../inside.db",
        "sqlite:.snapgraph/../inside.db",
        "cache:sqlite:inside.db|sqlite:../remote.db",
    ] {
        let err = fails(&w, &["init", "--store", url]);
        assert!(err.contains("inside the working directory"), "{url}: {err}");
        assert!(!w.join(".snapgraph").exists(), "{url}");
        assert!(!w.join("inside.db").exists() && !w.join("inside-store").exists());
    }
    // In .snapgraph/ or outside: fine.
    ok(&w, &["init", "--store", "sqlite:.snapgraph/own.db"]);
    std::fs::remove_dir_all(w.join(".snapgraph")).unwrap();
    ok(&w, &["init", "--store", "sqlite:../outside.db"]);
    write(&w, "a.txt", b"a");
    ok(&w, &["commit", "-m", "one"]);

    // The store moved into the working directory, the config following it.
    std::fs::rename(t.path().join("outside.db"), w.join("moved.db")).unwrap();
    std::fs::write(
        w.join(".snapgraph/config"),
        format!("store = sqlite:{}\n", w.join("sub/../moved.db").display()),
    )
    .unwrap();
    for args in [&["status"][..], &["commit", "-m", "two"][..], &["log"][..]] {
        let err = fails(&w, args);
        assert!(
            err.contains("moved.db") && err.contains("inside the working directory"),
            "{args:?}: {err}"
        );
    }
}

/// Behind its branch on a commit that retention hollowed since (from another
/// directory, then gc): that commit's files are gone, so the directory is compared
/// with the branch's tip as before (no error about a missing object); a commit is
/// still refused as behind.
#[test]
fn a_directory_behind_on_a_hollowed_commit_is_compared_with_the_tip() {
    let t = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", t.path().join("shared.db").display());
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    for d in [&a, &b] {
        std::fs::create_dir(d).unwrap();
        ok(d, &["init", "--store", &store]);
    }
    write(&a, "f", &pseudo_random(20_000, 1));
    ok(&a, &["commit", "-m", "1"]);
    ok(&b, &["checkout", "main"]);
    for i in 2..5 {
        write(&b, "f", &pseudo_random(20_000, i));
        ok(&b, &["commit", "-m", &i.to_string()]);
    }
    ok(&b, &["forget", "--branch", "main", "--keep-last", "1"]);
    ok(&b, &["gc"]);

    write(&a, "g", b"new here");
    let status = json(&a, &["status"]);
    assert!(status["behind"].is_null(), "{status}");
    assert_eq!(status["added"], serde_json::json!(["/g"]), "{status}");
    let err = fails(&a, &["checkout", "main"]);
    assert!(err.contains("uncommitted changes"), "{err}");
    let err = fails(&a, &["commit", "-m", "a"]);
    assert!(err.contains("moved"), "{err}");
    ok(&a, &["checkout", "--force", "main"]);
    assert_eq!(
        std::fs::read(a.join("f")).unwrap(),
        pseudo_random(20_000, 4)
    );
}

/// A signal (Ctrl-C) while a commit writes in batches: the commit stops before it
/// publishes, its writer's lease is released (so `gc` runs without
/// `--break-leases`), and the process ends killed by the signal, as a shell
/// expects. Before, the lease stayed and every `gc` stopped on it.
#[test]
fn a_signal_during_a_batched_commit_leaves_no_lease() {
    use std::os::unix::process::ExitStatusExt;
    let t = repo();
    write(t.path(), "big.bin", &pseudo_random(6 << 20, 9));
    write(t.path(), "small.txt", b"small");
    let out = std::process::Command::new(&*BIN)
        .args(["commit", "-m", "big", "--batch-bytes", "1048576"])
        .env("SNAPGRAPH_TEST_INTERRUPT", "batch")
        .current_dir(t.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(15), "{:?} {err}", out.status);
    assert!(err.contains("interrupted by SIGTERM"), "{err}");
    assert!(json(t.path(), &["branch"]).as_array().unwrap().is_empty());
    let gc = json(t.path(), &["gc", "--wait", "1"]);
    assert!(gc["deleted"].as_u64().unwrap() > 0, "{gc}");
    ok(
        t.path(),
        &["commit", "-m", "big", "--batch-bytes", "1048576"],
    );
    assert_eq!(
        run_in(t.path(), &["cat", "main:big.bin"]).stdout,
        pseudo_random(6 << 20, 9)
    );
}

/// Runs `args` in `dir` with a signal (`SIGTERM`, as from Ctrl-C) raised at the
/// command's `point` (`SNAPGRAPH_TEST_INTERRUPT`, see `interrupt::test_point`).
fn interrupted_at(dir: &Path, point: &str, args: &[&str]) -> (Option<i32>, String) {
    use std::os::unix::process::ExitStatusExt;
    let out = Command::new(&*BIN)
        .args(args)
        .env("SNAPGRAPH_TEST_INTERRUPT", point)
        .current_dir(dir)
        .output()
        .unwrap();
    (
        out.status.signal(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What `status` says of branch, changes and stale work, and any `staging-*` or
/// `old-*` directory left in `.snapgraph/`.
fn settled(dir: &Path) -> (String, usize, usize, Vec<String>) {
    let s = json(dir, &["status"]);
    let left: Vec<String> = std::fs::read_dir(dir.join(".snapgraph"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("staging-") || n.starts_with("old-"))
        .collect();
    (
        s["branch"].as_str().unwrap_or("").to_string(),
        s["changes"].as_array().unwrap().len(),
        s["stale"].as_array().unwrap().len(),
        left,
    )
}

/// A signal (Ctrl-C, `SIGTERM`) during a checkout leaves the working directory on
/// the old commit or on the new one, never between. Before, a signal after the
/// swap (while the replaced tree was checked and deleted) left the new commit's
/// files under the old HEAD: `status` listed them as changes, and the next commit
/// recorded them on the old branch.
#[test]
fn a_signal_during_a_checkout_leaves_the_old_commit_or_the_new_one() {
    let t = repo();
    grid(t.path(), 20);
    ok(t.path(), &["commit", "-m", "a"]);
    ok(t.path(), &["branch", "b"]);
    ok(t.path(), &["branch", "c"]);
    ok(t.path(), &["checkout", "b"]);
    // Every file changed: the switch declines, the checkout swaps the whole tree.
    for d in 0..20 {
        for f in 0..20 {
            write(
                t.path(),
                &format!("d{d:02}/f{f:02}.txt"),
                format!("b {d} {f}").as_bytes(),
            );
        }
    }
    ok(t.path(), &["commit", "-m", "b"]);
    let b = snapshot_of(t.path());
    ok(t.path(), &["checkout", "c"]);
    write(t.path(), "d03/f04.txt", b"c");
    ok(t.path(), &["commit", "-m", "c"]);
    let c = snapshot_of(t.path());
    ok(t.path(), &["checkout", "main"]);
    let a = snapshot_of(t.path());
    assert_ne!(a, b);

    // While the staging directory is written: the checkout stops, nothing changed.
    for args in [&["checkout", "b"][..], &["checkout", "--force", "b"]] {
        let (signal, err) = interrupted_at(t.path(), "write", args);
        assert_eq!(signal, Some(15), "{args:?}: {err}");
        assert!(err.contains("nothing was checked out"), "{err}");
        assert_eq!(snapshot_of(t.path()), a, "{args:?}");
        assert_eq!(settled(t.path()), ("main".into(), 0, 0, vec![]), "{args:?}");
    }
    // From the swap: the checkout finishes, then the process ends by the signal.
    for args in [&["checkout", "b"][..], &["checkout", "--force", "b"]] {
        let (signal, err) = interrupted_at(t.path(), "swap", args);
        assert_eq!(signal, Some(15), "{args:?}: {err}");
        assert_eq!(snapshot_of(t.path()), b, "{args:?}");
        assert_eq!(settled(t.path()), ("b".into(), 0, 0, vec![]), "{args:?}");
        ok(t.path(), &["checkout", "--force", "main"]);
        assert_eq!(snapshot_of(t.path()), a);
    }
    // Killed (`SIGKILL`) while the replaced tree is deleted: the stat cache and HEAD
    // named the new commit first, so the directory is on it; `status` lists the
    // rest of the replaced tree as stale. Before, HEAD moved once it was deleted.
    let (signal, err) = interrupted_at(t.path(), "kill:published", &["checkout", "b"]);
    assert_eq!(signal, Some(9), "{err}");
    assert_eq!(snapshot_of(t.path()), b);
    let (branch, changes, stale, _) = settled(t.path());
    assert_eq!((branch.as_str(), changes, stale), ("b", 0, 1));
    let out = ok(t.path(), &["commit", "-m", "nothing"]);
    assert!(out.contains("nothing to commit"), "{out}");
    for e in std::fs::read_dir(t.path().join(".snapgraph")).unwrap() {
        let e = e.unwrap();
        if e.file_name().to_string_lossy().starts_with("old-") {
            std::fs::remove_dir_all(e.path()).unwrap();
        }
    }
    ok(t.path(), &["checkout", "main"]);
    assert_eq!(snapshot_of(t.path()), a);
    // A switch (one file differs from a to c): stopped while it stages, run to its
    // end from its apply.
    let (signal, err) = interrupted_at(t.path(), "write", &["checkout", "c"]);
    assert_eq!(signal, Some(15), "{err}");
    assert!(err.contains("nothing was checked out"), "{err}");
    assert_eq!(snapshot_of(t.path()), a);
    assert_eq!(settled(t.path()), ("main".into(), 0, 0, vec![]));
    let (signal, err) = interrupted_at(t.path(), "apply", &["checkout", "c"]);
    assert_eq!(signal, Some(15), "{err}");
    assert_eq!(snapshot_of(t.path()), c);
    assert_eq!(settled(t.path()), ("c".into(), 0, 0, vec![]));
    // And the directory commits as any other.
    write(t.path(), "d00/f00.txt", b"after");
    ok(t.path(), &["commit", "-m", "after"]);
    assert_eq!(run_in(t.path(), &["cat", "c:d03/f04.txt"]).stdout, b"c");
}

/// A signal during `restore` stops it between files, leaving no temporary file
/// beside the one it was writing (the next commit would record it), and during
/// `checkout --to` leaves neither the target nor its staging directory.
#[test]
fn a_signal_during_a_restore_or_a_checkout_to_leaves_no_partial_file() {
    let t = repo();
    write(t.path(), "f1", b"one");
    write(t.path(), "d/f2", b"two");
    ok(t.path(), &["commit", "-m", "a"]);
    write(t.path(), "f1", b"edited");
    std::fs::remove_file(t.path().join("d/f2")).unwrap();
    let before = snapshot_of(t.path());
    let (signal, err) = interrupted_at(t.path(), "write", &["restore", "-f", "f1", "d"]);
    assert_eq!(signal, Some(15), "{err}");
    assert!(err.contains("run the restore again"), "{err}");
    assert_eq!(snapshot_of(t.path()), before);
    ok(t.path(), &["restore", "-f", "f1", "d"]);
    assert_eq!(std::fs::read(t.path().join("f1")).unwrap(), b"one");
    assert_eq!(std::fs::read(t.path().join("d/f2")).unwrap(), b"two");

    let out = tempfile::tempdir().unwrap();
    let to = out.path().join("copy");
    let (signal, err) = interrupted_at(
        t.path(),
        "write",
        &["checkout", "main", "--to", to.to_str().unwrap()],
    );
    assert_eq!(signal, Some(15), "{err}");
    assert!(err.contains("nothing was checked out"), "{err}");
    let left: Vec<_> = std::fs::read_dir(out.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A signal during `gc`, `sync` or `clone` stops it with nothing held in the store:
/// the collection ends its sweep (killed in it, it left the marker every writer
/// then waited for), the sync releases its lease and moves no ref, and the clone
/// removes the directory it made (a half-made one refused the next clone).
#[test]
fn a_signal_during_gc_sync_or_clone_leaves_nothing_held() {
    let t = repo();
    write(t.path(), "f", b"one");
    ok(t.path(), &["commit", "-m", "one"]);
    ok(t.path(), &["branch", "side"]);
    ok(t.path(), &["checkout", "side"]);
    write(t.path(), "f", &pseudo_random(300_000, 3));
    ok(t.path(), &["commit", "-m", "garbage"]);
    ok(t.path(), &["checkout", "main"]);
    ok(t.path(), &["branch", "-D", "side"]);

    let (signal, err) = interrupted_at(t.path(), "gc", &["gc", "--prune", "now"]);
    assert_eq!(signal, Some(15), "{err}");
    assert!(err.contains("interrupted by SIGTERM"), "{err}");
    assert!(err.contains("ended its sweep"), "{err}");
    // No marker left: a commit goes through at once, and the next gc deletes.
    write(t.path(), "g", b"g");
    ok(t.path(), &["commit", "-m", "three"]);
    let gc = json(t.path(), &["gc", "--prune", "now", "--wait", "1"]);
    assert!(gc["deleted"].as_u64().unwrap() > 0, "{gc}");

    let out = tempfile::tempdir().unwrap();
    let dst = format!("dir:{}", out.path().join("store").display());
    let (signal, err) = interrupted_at(t.path(), "sync", &["sync", ".", &dst]);
    assert_eq!(signal, Some(15), "{err}");
    assert!(err.contains("did not move on the destination"), "{err}");
    let refs = |url: &str| -> usize {
        let store = snapgraph_store::open(url).unwrap();
        ["heads/", "snapgraph/lease/", "snapgraph/wait/"]
            .iter()
            .map(|p| store.list_refs(p).unwrap().len())
            .sum()
    };
    assert_eq!(refs(&dst), 0, "no ref, no lease, no wait");
    ok(t.path(), &["sync", ".", &dst]);
    assert!(refs(&dst) > 0);

    let dir = out.path().join("clone");
    let (signal, err) = interrupted_at(t.path(), "sync", &["clone", ".", dir.to_str().unwrap()]);
    assert_eq!(signal, Some(15), "{err}");
    assert!(err.contains("interrupted by SIGTERM"), "{err}");
    assert!(!dir.exists(), "{err}");
    ok(t.path(), &["clone", ".", dir.to_str().unwrap()]);
    assert_eq!(std::fs::read(dir.join("g")).unwrap(), b"g");
}

/// Holds `.snapgraph/lock` of `dir` as another snapgraph process would (`PID
/// COMMAND` written in it: this test's own, a live process), exclusive or shared,
/// until dropped.
fn hold_lock(dir: &Path, exclusive: bool) -> std::fs::File {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.join(".snapgraph/lock"))
        .unwrap();
    if exclusive {
        f.lock().unwrap();
        f.set_len(0).unwrap();
        write!(f, "{} checkout", std::process::id()).unwrap();
    } else {
        f.lock_shared().unwrap();
    }
    f
}

/// One command at a time changes a working directory: `commit`, `checkout` and
/// `restore` wait for another one holding it (up to `SNAPGRAPH_LOCK_WAIT`), then
/// fail naming it; `status` and `diff` share it with each other, not with those.
#[test]
fn a_second_command_waits_for_the_one_changing_the_working_directory() {
    let t = repo();
    write(t.path(), "f", b"one");
    ok(t.path(), &["commit", "-m", "one"]);
    write(t.path(), "f", b"two");
    let run = |args: &[&str]| {
        Command::new(&*BIN)
            .args(args)
            .env("SNAPGRAPH_LOCK_WAIT", "1")
            .current_dir(t.path())
            .output()
            .unwrap()
    };
    let held = hold_lock(t.path(), true);
    for args in [
        &["commit", "-m", "two"][..],
        &["checkout", "--force", "main"],
        &["restore", "f"],
        &["status"],
        &["diff"],
    ] {
        let out = run(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        let holder = format!("process {} (snapgraph checkout)", std::process::id());
        assert!(
            err.contains(&format!("{holder} is still working in")),
            "{args:?}: {err}"
        );
    }
    assert_eq!(std::fs::read(t.path().join("f")).unwrap(), b"two");
    drop(held);

    let held = hold_lock(t.path(), false);
    assert!(run(&["status"]).status.success());
    assert!(run(&["diff"]).status.success());
    assert!(!run(&["commit", "-m", "two"]).status.success());
    drop(held);
    // Released (as the kernel does when a process ends): on as usual.
    let out = run(&["commit", "-m", "two"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A commit loop racing checkouts in the same working directory (an agent's
/// per-turn commits while a person switches branches) never records a tree half
/// switched. Before the lock, a commit that scanned during a checkout's swap put
/// 55 files' removal on the old branch, and the next one the same tree on the new.
#[test]
fn commits_racing_checkouts_never_record_a_half_switched_tree() {
    let t = repo();
    grid(t.path(), 30);
    ok(t.path(), &["commit", "-m", "a"]);
    ok(t.path(), &["branch", "b"]);
    ok(t.path(), &["checkout", "b"]);
    for d in 0..30 {
        for f in 0..10 {
            write(t.path(), &format!("d{d:02}/f{f:02}.txt"), b"b");
        }
    }
    ok(t.path(), &["commit", "-m", "b"]);
    ok(t.path(), &["checkout", "main"]);
    let tips = |t: &Path| {
        let log = |b: &str| json(t, &["log", b])[0]["id"].as_str().unwrap().to_string();
        (log("main"), log("b"))
    };
    let before = tips(t.path());
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let looping = s.spawn(|| {
            let mut commits = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let out = run_in(t.path(), &["commit", "-m", "turn"]);
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                commits += 1;
            }
            commits
        });
        for _ in 0..6 {
            ok(t.path(), &["checkout", "b"]);
            ok(t.path(), &["checkout", "main"]);
        }
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        assert!(looping.join().unwrap() > 0);
    });
    assert_eq!(
        tips(t.path()),
        before,
        "a commit recorded a checkout half done"
    );
}

/// `commit --branch OTHER` leaves HEAD on its branch, whose tip never had OTHER's
/// new commit: the directory is not *behind* it. Stop 55's check took it so, and
/// refused the next commit on HEAD's branch ("branch main moved"), and on an unborn
/// branch `status` said it "moved to nothing".
#[test]
fn a_commit_onto_another_branch_does_not_make_the_directory_behind() {
    let t = repo();
    write(t.path(), "a", b"a");
    ok(t.path(), &["commit", "-m", "one", "--branch", "side0"]);
    let s = json(t.path(), &["status"]);
    assert!(s["behind"].is_null(), "{s}");
    ok(t.path(), &["commit", "-m", "main one"]);
    write(t.path(), "b", b"b");
    ok(t.path(), &["commit", "-m", "two", "--branch", "side"]);
    let s = json(t.path(), &["status"]);
    assert!(s["behind"].is_null(), "{s}");
    assert_eq!(s["added"], serde_json::json!(["/b"]), "{s}");
    write(t.path(), "c", b"c");
    ok(t.path(), &["commit", "-m", "three"]);
    assert_eq!(run_in(t.path(), &["cat", "main:b"]).stdout, b"b");
    assert_eq!(run_in(t.path(), &["cat", "main:c"]).stdout, b"c");
}

/// A new branch or snapshot name that a command line would read as something else
/// is refused wherever names are made: `HEAD` and `@` (then `checkout HEAD` meant
/// the current commit, not the branch), a leading `-`, git's `..`.
#[test]
fn names_a_command_line_would_misread_are_refused() {
    let t = repo();
    write(t.path(), "a", b"a");
    ok(t.path(), &["commit", "-m", "one"]);
    for name in ["HEAD", "@", "-x", "a..b"] {
        for args in [
            vec!["branch", "--", name],
            vec!["fork", "--at", "main", "--", name],
            vec!["tag", "--", name],
        ] {
            let out = Command::new(&*BIN)
                .args(&args)
                .current_dir(t.path())
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{args:?}");
            assert!(
                err.contains("cannot name a new branch or snapshot"),
                "{args:?}: {err}"
            );
        }
    }
    for name in ["HEAD", "@", "a..b"] {
        let err = fails(
            t.path(),
            &["commit", "-m", "two", "--allow-empty", "--branch", name],
        );
        assert!(
            err.contains("cannot name a new branch or snapshot"),
            "{err}"
        );
    }
    assert_eq!(json(t.path(), &["branch"]).as_array().unwrap().len(), 1);
    ok(t.path(), &["branch", "release-1.0"]);
}

/// `restore` (and `checkout REV -- PATH`) never discards work no commit holds
/// without `--force` (stop 57; before, it overwrote an edited file as `git restore`
/// does): an edited, retargeted or re-moded entry it would overwrite, an untracked
/// file where the source has one, an edited file it would remove. It refuses
/// naming them and writes nothing. What it may replace: entries as HEAD's commit
/// (or, behind its branch, the directory's own commit) has them, entries already
/// as the source has them, and untracked files outside what it writes.
#[test]
fn a_restore_never_discards_uncommitted_work_without_force() {
    use std::os::unix::fs::PermissionsExt;
    let t = repo();
    let p = t.path();
    write(p, "d/edited", b"v1");
    write(p, "d/gone-in-two", b"v1");
    write(p, "d/same", b"v1");
    write(p, "d/run.sh", b"#!/bin/sh\n");
    std::os::unix::fs::symlink("same", p.join("d/link")).unwrap();
    write(p, "top", b"v1");
    let one = commit_id(&ok(p, &["commit", "-m", "one"]));
    write(p, "d/edited", b"v2");
    std::fs::remove_file(p.join("d/gone-in-two")).unwrap();
    write(p, "d/new-in-two", b"v2");
    ok(p, &["commit", "-m", "two"]);

    // Each kind of uncommitted change, alone, refuses the restore of `d`.
    type Edit = fn(&Path);
    let cases: [(&str, Edit, &str); 6] = [
        ("an edit", |p| write(p, "d/edited", b"mine"), "d/edited"),
        (
            "a new mode",
            |p| {
                let f = p.join("d/run.sh");
                std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).unwrap()
            },
            "d/run.sh",
        ),
        (
            "a retargeted symlink",
            |p| {
                std::fs::remove_file(p.join("d/link")).unwrap();
                std::os::unix::fs::symlink("edited", p.join("d/link")).unwrap();
            },
            "d/link",
        ),
        (
            "a symlink turned file",
            |p| {
                std::fs::remove_file(p.join("d/link")).unwrap();
                write(p, "d/link", b"mine");
            },
            "d/link",
        ),
        // The source (`one`) has it, HEAD does not: it would be overwritten.
        (
            "an untracked file",
            |p| write(p, "d/gone-in-two", b"mine"),
            "d/gone-in-two",
        ),
        // HEAD has it, the source does not: it would be removed.
        (
            "an edit of a file to remove",
            |p| write(p, "d/new-in-two", b"mine"),
            "d/new-in-two",
        ),
    ];
    for (what, edit, path) in cases {
        edit(p);
        let before = snapshot_of(p);
        for args in [
            &["restore", "--source", &one, "d"][..],
            &["-q", "checkout", &one, "--", "d"],
        ] {
            // Run as given (`fails` would add `--quiet` after the `--`).
            let out = Command::new(&*BIN)
                .args(args)
                .current_dir(p)
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(1), "{what}, {args:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains("uncommitted changes the restore would discard")
                    && err.contains(&format!("({path})"))
                    && err.contains("--force"),
                "{what}, {args:?}: {err}"
            );
            assert_eq!(snapshot_of(p), before, "{what}: nothing is written");
        }
        ok(p, &["restore", "--force", "d"]);
        // HEAD lacks it: a restore from HEAD leaves it, as any untracked file.
        let _ = std::fs::remove_file(p.join("d/gone-in-two"));
    }
    let clean = snapshot_of(p);

    // Nothing uncommitted under the path: no --force needed, and an untracked
    // file the source lacks stays.
    write(p, "d/untracked", b"mine");
    write(p, "top", b"mine, outside the path");
    ok(p, &["restore", "--source", &one, "d"]);
    assert_eq!(std::fs::read(p.join("d/edited")).unwrap(), b"v1");
    assert!(!p.join("d/new-in-two").exists());
    assert_eq!(std::fs::read(p.join("d/untracked")).unwrap(), b"mine");
    assert_eq!(
        std::fs::read(p.join("top")).unwrap(),
        b"mine, outside the path"
    );
    // `d` now differs from HEAD as `status` shows: a change like any other, even
    // though `one` holds it.
    let err = fails(p, &["restore", "top", "d"]);
    assert!(err.contains("(d/edited, top)"), "{err}");
    ok(p, &["restore", "--force", "d"]);
    // A working version equal to the source's is no loss.
    write(p, "top", b"v1");
    ok(p, &["restore", "--source", &one, "top"]);
    ok(p, &["restore", "top"]);
    // What `one` put back and HEAD lacks is untracked now: the restore from HEAD
    // left it.
    std::fs::remove_file(p.join("d/gone-in-two")).unwrap();
    std::fs::remove_file(p.join("d/untracked")).unwrap();
    assert_eq!(snapshot_of(p), clean);
    // A removed file comes back without --force: nothing is lost.
    std::fs::remove_file(p.join("d/edited")).unwrap();
    ok(p, &["restore", "d/edited"]);
    assert_eq!(std::fs::read(p.join("d/edited")).unwrap(), b"v2");

    // Entries already as the source has them are not written again: their stat
    // cache entries hold, and the next commit reads only what the restore wrote.
    use std::os::unix::fs::MetadataExt;
    ok(
        p,
        &["commit", "-m", "settle the stat cache", "--allow-empty"],
    );
    let ino = |f: &str| std::fs::symlink_metadata(p.join(f)).unwrap().ino();
    let kept = [ino("d/same"), ino("d/link"), ino("d/run.sh")];
    let edited = ino("d/edited");
    let report = ok(p, &["restore", "--source", &one, "d"]);
    assert!(report.contains(": 2 files, 0 symlinks"), "{report}");
    assert_eq!([ino("d/same"), ino("d/link"), ino("d/run.sh")], kept);
    assert_ne!(ino("d/edited"), edited);
    let report = ok(p, &["commit", "-m", "three"]);
    assert_eq!(field(&report, "files read"), 2, "{report}");
}

/// Behind its branch (another directory moved it), the directory's files are its
/// own commit's: a restore from the new tip replaces them without --force, as they
/// are committed, and still refuses the directory's own edits.
#[test]
fn a_restore_behind_the_branch_counts_the_held_commit_as_committed() {
    let t = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", t.path().join("shared.db").display());
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    for d in [&a, &b] {
        std::fs::create_dir(d).unwrap();
        ok(d, &["init", "--store", &store]);
    }
    write(&a, "f", b"one");
    write(&a, "g", b"one");
    ok(&a, &["commit", "-m", "1"]);
    ok(&b, &["checkout", "main"]);
    write(&b, "f", b"two");
    write(&b, "g", b"two");
    ok(&b, &["commit", "-m", "2"]);
    // `a` holds commit 1; HEAD (main) is commit 2.
    write(&a, "g", b"mine");
    ok(&a, &["restore", "f"]);
    assert_eq!(std::fs::read(a.join("f")).unwrap(), b"two");
    let err = fails(&a, &["restore", "g"]);
    assert!(err.contains("(g)"), "{err}");
    assert_eq!(std::fs::read(a.join("g")).unwrap(), b"mine");
}

/// An ignored entry where the commit being checked out puts one (it was committed
/// before it was ignored, as a `.env` or a log often is) is replaced only where
/// that loses nothing, or with `--force` (stop 57; before, the commit's entry won
/// without a word, as in git). An ignored directory where the commit has one keeps
/// what the commit lacks, by either way of checking out. Each case runs through the
/// switch (a few files change) and through the full checkout (most change).
#[test]
fn a_checkout_replaces_an_ignored_entry_only_when_nothing_is_lost() {
    for full in [false, true] {
        let t = repo();
        let p = t.path();
        // More files than a switch takes on (`switch::MOST_CHANGED_MIN`), for the
        // full checkout to rewrite.
        for i in 0..300 {
            write(p, &format!("many/f{i:03}"), format!("{i}").as_bytes());
        }
        write(p, ".env", b"TOKEN=committed");
        write(p, "app.log", b"committed log");
        write(p, "build/README", b"what build/ holds");
        std::os::unix::fs::symlink("many", p.join("link")).unwrap();
        ok(p, &["commit", "-m", "one"]);
        ok(p, &["branch", "old"]);
        write(p, ".snapgraphignore", b".env\n*.log\nbuild/\nlink\n");
        if full {
            for i in 0..300 {
                write(p, &format!("many/f{i:03}"), format!("{i} two").as_bytes());
            }
        }
        ok(p, &["commit", "-m", "two, the local files ignored"]);
        let checkout = |args: &[&str]| {
            let out = Command::new(&*BIN)
                .args(args)
                .env("SNAPGRAPH_TIMINGS", "1")
                .current_dir(p)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr).into_owned();
            // --force skips the dirty check, which the switch needs.
            let forced = args.contains(&"--force");
            assert_eq!(err.contains("declined"), full || forced, "{err}");
            (out.status.code(), err)
        };
        // The directory holds the ignored entries as the tip left them (the commit
        // of `.snapgraphignore` kept them in place). Each made different alone.
        type Edit = fn(&Path);
        let cases: [(&str, Edit, &str); 4] = [
            (".env", |p| write(p, ".env", b"TOKEN=local secret"), "file"),
            ("app.log", |p| write(p, "app.log", b"local log"), "file"),
            (
                "link",
                |p| {
                    std::fs::remove_file(p.join("link")).unwrap();
                    std::os::unix::fs::symlink("elsewhere", p.join("link")).unwrap();
                },
                "symlink",
            ),
            (
                "build/README",
                |p| write(p, "build/README", b"my notes"),
                "file",
            ),
        ];
        // The ignored entries as `old` has them (a checkout of `main` from `old`
        // takes them away: `main` does not record them).
        let as_committed = |p: &Path| {
            write(p, ".env", b"TOKEN=committed");
            write(p, "app.log", b"committed log");
            write(p, "build/README", b"what build/ holds");
            let _ = std::fs::remove_file(p.join("link"));
            std::os::unix::fs::symlink("many", p.join("link")).unwrap();
        };
        for (path, edit, theirs) in cases {
            as_committed(p);
            edit(p);
            let before = snapshot_of(p);
            let (code, err) = checkout(&["checkout", "old"]);
            assert_eq!(code, Some(1), "{path}: {err}");
            assert!(
                err.contains(&format!(
                    "{}: not recorded (ignored, or a nested repository), and the commit has a {theirs} here",
                    p.join(path).display()
                )) && err.contains("--force"),
                "{path} (full: {full}): {err}"
            );
            assert_eq!(snapshot_of(p), before, "{path}: nothing changed");
            assert_eq!(json(p, &["status"])["branch"], "main");
            // Put back as the commit has it: no loss, no refusal.
            ok(p, &["checkout", "--force", "old"]);
            ok(p, &["checkout", "--force", "main"]);
        }
        // The same bytes: replaced without --force. An ignored directory where
        // the commit has one keeps what the commit lacks.
        as_committed(p);
        write(p, "build/artifact.o", b"local build output");
        write(p, "build/sub/deeper.o", b"deeper");
        let (code, err) = checkout(&["checkout", "old"]);
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(std::fs::read(p.join(".env")).unwrap(), b"TOKEN=committed");
        assert_eq!(
            std::fs::read(p.join("build/artifact.o")).unwrap(),
            b"local build output"
        );
        assert_eq!(
            std::fs::read(p.join("build/sub/deeper.o")).unwrap(),
            b"deeper"
        );
        assert_eq!(
            std::fs::read(p.join("build/README")).unwrap(),
            b"what build/ holds"
        );
        // --force lets the commit's entries win, and still keeps what it lacks.
        // (`old` has no ignore file: the local files are untracked there.)
        ok(p, &["checkout", "--force", "main"]);
        as_committed(p);
        write(p, "build/artifact.o", b"local build output");
        write(p, ".env", b"TOKEN=local secret");
        let (code, err) = checkout(&["checkout", "--force", "old"]);
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(std::fs::read(p.join(".env")).unwrap(), b"TOKEN=committed");
        assert_eq!(
            std::fs::read(p.join("build/artifact.o")).unwrap(),
            b"local build output"
        );
    }
}

/// A commit (and `status`) while another process creates and deletes files and
/// directories in the tree, as a build or a test run does with its temporary
/// files: entries gone between the listing and their read are absent from the
/// snapshot, never an error (stop 57; before, about a third of such commits failed
/// with "No such file or directory"). Once the churn ends, a commit records the
/// tree as it is and `status` is clean.
#[test]
fn commits_racing_a_process_that_deletes_files_never_fail() {
    let t = repo();
    let p = t.path().to_path_buf();
    for i in 0..500 {
        write(&p, &format!("src/f{i:03}"), format!("{i}").as_bytes());
    }
    ok(&p, &["commit", "-m", "base"]);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let (p, done) = (p.clone(), done.clone());
        std::thread::spawn(move || {
            let mut rounds = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) || rounds < 50 {
                let tmp = p.join("tmp");
                std::fs::create_dir_all(tmp.join("a/b")).unwrap();
                for i in 0..30 {
                    std::fs::write(tmp.join(format!("t{i}")), b"x").unwrap();
                    std::fs::write(tmp.join(format!("a/b/u{i}")), vec![7u8; 100 * i]).unwrap();
                }
                std::os::unix::fs::symlink("t1", tmp.join("link")).unwrap();
                std::fs::remove_dir_all(&tmp).unwrap();
                rounds += 1;
            }
            rounds
        })
    };
    let mut failed = Vec::new();
    for n in 0..120 {
        let args: &[&str] = if n % 4 == 3 {
            &["status"]
        } else {
            &["commit", "-m", "turn", "--allow-empty"]
        };
        let out = run_in(&p, args);
        if !out.status.success() {
            failed.push(String::from_utf8_lossy(&out.stderr).into_owned());
        }
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let rounds = churn.join().unwrap();
    assert!(
        failed.is_empty(),
        "{} of 120 failed ({rounds} rounds of churn): {failed:?}",
        failed.len()
    );
    ok(&p, &["commit", "-m", "after", "--allow-empty"]);
    let status = json(&p, &["status"]);
    assert_eq!(status["added"], serde_json::json!([]), "{status}");
    assert_eq!(status["modified"], serde_json::json!([]), "{status}");
    assert_eq!(status["removed"], serde_json::json!([]), "{status}");
    assert!(!p.join("tmp").exists());
    let listed = ok(&p, &["ls", "HEAD", "-r"]);
    assert!(!listed.contains("tmp"), "{listed}");
    ok(&p, &["verify"]);
}

/// `restore` of a path the source has where the directory holds an ignored file
/// (a `.env` committed before it was ignored): the file is kept unless it holds
/// the source's bytes already, or with `--force`.
#[test]
fn a_restore_keeps_an_ignored_file_it_would_overwrite() {
    let t = repo();
    let p = t.path();
    write(p, ".env", b"TOKEN=committed");
    write(p, "cfg/app.toml", b"committed");
    std::os::unix::fs::symlink("app.toml", p.join("cfg/link")).unwrap();
    let one = commit_id(&ok(p, &["commit", "-m", "one"]));
    write(p, ".snapgraphignore", b".env\ncfg/\n");
    ok(p, &["commit", "-m", "ignored since"]);
    write(p, ".env", b"TOKEN=local secret");
    let before = snapshot_of(p);
    for args in [
        &["restore", "--source", &one, ".env"][..],
        &["restore", "--source", &one, "."],
    ] {
        let err = fails(p, args);
        assert!(err.contains("(.env)"), "{args:?}: {err}");
        assert_eq!(snapshot_of(p), before, "{args:?}");
    }
    // The same bytes, the same link: nothing to lose.
    write(p, ".env", b"TOKEN=committed");
    ok(p, &["restore", "--source", &one, ".env", "cfg"]);
    // Another link target, another length, the same length with other bytes.
    std::fs::remove_file(p.join("cfg/link")).unwrap();
    std::os::unix::fs::symlink("elsewhere", p.join("cfg/link")).unwrap();
    let err = fails(p, &["restore", "--source", &one, "cfg"]);
    assert!(err.contains("(cfg/link)"), "{err}");
    write(p, "cfg/app.toml", b"committeD");
    let err = fails(p, &["restore", "--source", &one, "cfg"]);
    assert!(err.contains("(cfg/app.toml, cfg/link)"), "{err}");
    ok(p, &["restore", "--force", "--source", &one, "cfg"]);
    assert_eq!(std::fs::read(p.join("cfg/app.toml")).unwrap(), b"committed");
    assert_eq!(
        std::fs::read_link(p.join("cfg/link")).unwrap(),
        Path::new("app.toml")
    );
}
