//! End-to-end tests of the git-style CLI: revisions, detached heads, dates and
//! authors, patches, renames and path restores.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

mod common;
use common::*;

/// A repository with `n` linear commits on main, each changing `f.txt`; returns the
/// ids, oldest first.
fn linear(n: usize) -> (tempfile::TempDir, Vec<String>) {
    let t = repo();
    let mut ids = Vec::new();
    for i in 0..n {
        write(t.path(), "f.txt", format!("version {i}\n").as_bytes());
        ids.push(commit_id(&ok(
            t.path(),
            &["commit", "-m", &format!("c{i}")],
        )));
    }
    (t, ids)
}

/// Runs with the global flags first, so that nothing lands after a `--`
/// (the shared helpers append `--quiet`/`--json`); requires success.
fn ok_first(dir: &std::path::Path, json_out: bool, args: &[&str]) -> String {
    let mut cmd = std::process::Command::new(&*BIN);
    cmd.arg("--quiet");
    if json_out {
        cmd.arg("--json");
    }
    let out = cmd.args(args).current_dir(dir).output().unwrap();
    assert!(
        out.status.success(),
        "snapgraph {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn id_of(dir: &std::path::Path, rev: &str) -> String {
    json(dir, &["show", rev])["id"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn revisions_walk_ancestry_and_prefixes() {
    let (t, ids) = linear(4);
    let p = t.path();
    assert_eq!(id_of(p, "HEAD"), ids[3]);
    assert_eq!(id_of(p, "@"), ids[3]);
    assert_eq!(id_of(p, "main"), ids[3]);
    assert_eq!(id_of(p, "HEAD~1"), ids[2]);
    assert_eq!(id_of(p, "@~"), ids[2]);
    assert_eq!(id_of(p, "main~3"), ids[0]);
    assert_eq!(id_of(p, "HEAD^"), ids[2]);
    assert_eq!(id_of(p, "HEAD^1^1"), ids[1]);
    assert_eq!(id_of(p, "HEAD~2^0"), ids[1]);
    assert_eq!(id_of(p, "heads/main~1"), ids[2]);
    // A unique prefix of at least 4 hex digits (either case), and with steps.
    assert_eq!(id_of(p, &ids[1][..8]), ids[1]);
    assert_eq!(id_of(p, &ids[1][..12].to_uppercase()), ids[1]);
    assert_eq!(id_of(p, &format!("{}~1", &ids[2][..10])), ids[1]);
    // A snapshot name, with steps.
    ok(p, &["tag", "v1", "--at", "HEAD~1"]);
    assert_eq!(
        json(p, &["show", "v1"])["parents"][0].as_str().unwrap(),
        ids[2]
    );
    // REV:PATH reads from that commit.
    let cat = run_in(p, &["cat", "HEAD~2:f.txt"]);
    assert_eq!(cat.stdout, b"version 1\n");
    let cat = run_in(p, &["cat", &format!("{}:f.txt", &ids[0][..6])]);
    assert_eq!(cat.stdout, b"version 0\n");
    // Past the root, a missing second parent, bad syntax, too short a prefix.
    let err = fails(p, &["show", "HEAD~4"]);
    assert!(
        err.contains("has no parent 1") && err.contains(&ids[0]),
        "{err}"
    );
    let err = fails(p, &["show", "HEAD^2"]);
    assert!(
        err.contains("has no parent 2") && err.contains(&ids[3]),
        "{err}"
    );
    let err = fails(p, &["show", "HEAD~x"]);
    assert!(err.contains("bad revision \"HEAD~x\""), "{err}");
    let err = fails(p, &["show", &ids[0][..3]]);
    assert!(err.contains("unknown revision"), "{err}");
    let err = fails(p, &["cat", "HEAD"]);
    assert!(err.contains("expected REV:PATH"), "{err}");
}

#[test]
fn an_ambiguous_prefix_lists_the_candidates() {
    let t = repo();
    let p = t.path();
    // Commit until two commit ids share their first 4 hex digits (expected after
    // about 2^8 commits; ids come from the API, never hard-coded).
    let mut seen: std::collections::HashMap<String, String> = Default::default();
    let mut pair = None;
    for i in 0..4000 {
        let id = commit_id(&ok(p, &["commit", "--allow-empty", "-m", &format!("n{i}")]));
        if let Some(other) = seen.insert(id[..4].to_string(), id.clone()) {
            pair = Some((other, id));
            break;
        }
    }
    let (a, b) = pair.expect("a shared 4-digit prefix within 4000 commits");
    let err = fails(p, &["show", &a[..4]]);
    assert!(
        err.contains("ambiguous revision") && err.contains(&a) && err.contains(&b),
        "{err}"
    );
    // Longer prefixes tell them apart.
    let n = (0..64)
        .find(|&i| a.as_bytes()[i] != b.as_bytes()[i])
        .unwrap()
        + 1;
    assert_eq!(id_of(p, &a[..n.max(4)]), a);
}

#[test]
fn a_prefix_of_a_non_commit_object_says_what_it_is() {
    let (t, ids) = linear(1);
    let tree = json(t.path(), &["show", &ids[0]])["tree"]
        .as_str()
        .unwrap()
        .to_string();
    let err = fails(t.path(), &["show", &tree]);
    assert!(err.contains("not a commit") && err.contains(&tree), "{err}");
}

#[test]
fn detached_head_is_reported_and_commit_needs_a_branch() {
    let (t, ids) = linear(3);
    let p = t.path();
    ok(p, &["checkout", "HEAD~1"]);
    assert_eq!(std::fs::read(p.join("f.txt")).unwrap(), b"version 1\n");
    let status = ok(p, &["status"]);
    assert!(
        status.contains(&format!("HEAD detached at {}", ids[1])),
        "{status}"
    );
    let s = json(p, &["status"]);
    assert_eq!(s["detached"], ids[1].as_str());
    assert_eq!(s["branch"], serde_json::Value::Null);
    assert_eq!(id_of(p, "HEAD"), ids[1]);
    write(p, "f.txt", b"on a side branch\n");
    let err = fails(p, &["commit", "-m", "lost?"]);
    assert!(
        err.contains("detached") && err.contains("--branch") && err.contains(&ids[1]),
        "{err}"
    );
    // main did not move.
    assert_eq!(id_of(p, "main"), ids[2]);
    let out = ok(p, &["commit", "-m", "side", "--branch", "side"]);
    let side = commit_id(&out);
    assert_eq!(json(p, &["show", "side"])["parents"][0], ids[1].as_str());
    assert_eq!(id_of(p, "side"), side);
    // HEAD follows the new branch.
    assert!(ok(p, &["status"]).contains("on branch side"));
    // Checking out a branch by name attaches HEAD again.
    ok(p, &["checkout", "main"]);
    assert_eq!(json(p, &["status"])["branch"], "main");
    assert_eq!(std::fs::read(p.join("f.txt")).unwrap(), b"version 2\n");
}

#[test]
fn commits_record_time_author_and_host_and_log_shows_them() {
    let t = repo();
    let p = t.path();
    std::fs::write(
        p.join(".snapgraph/config"),
        format!(
            "{}author = Ada Lovelace <ada@example.org>\n",
            std::fs::read_to_string(p.join(".snapgraph/config")).unwrap()
        ),
    )
    .unwrap();
    write(p, "a.txt", b"a\n");
    ok(p, &["commit", "-m", "first line\n\nbody"]);
    write(p, "b.txt", b"b\n");
    ok(
        p,
        &["commit", "-m", "second", "--meta", "author=Someone Else"],
    );
    let log = json(p, &["log"]);
    let time = log[0]["meta"]["time"].as_str().unwrap();
    // RFC 3339, UTC, to the second.
    assert_eq!(time.len(), 20, "{time}");
    assert!(time.ends_with('Z') && time.as_bytes()[10] == b'T', "{time}");
    assert_eq!(log[1]["meta"]["author"], "Ada Lovelace <ada@example.org>");
    assert_eq!(log[0]["author"], "Someone Else", "--meta overrides");
    assert!(log[0]["meta"]["host"]
        .as_str()
        .is_some_and(|h| !h.is_empty()));
    assert_eq!(log[1]["subject"], "first line");
    let text = ok(p, &["log"]);
    assert!(text.contains(&format!("Date:   {time}\n")), "{text}");
    assert!(
        text.contains("Author: Ada Lovelace <ada@example.org>\n"),
        "{text}"
    );
    // --oneline: 12 hex digits and the subject; -n limits.
    let ids: Vec<String> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        ok(p, &["log", "--oneline"]),
        format!("{} second\n{} first line\n", &ids[0][..12], &ids[1][..12])
    );
    assert_eq!(
        ok(p, &["log", "--oneline", "-n", "1"]),
        format!("{} second\n", &ids[0][..12])
    );
    // The environment when the config says nothing.
    let u = repo();
    write(u.path(), "x", b"x");
    let out = std::process::Command::new(&*BIN)
        .args(["commit", "-m", "env", "--quiet"])
        .env("SNAPGRAPH_AUTHOR", "Env Author")
        .current_dir(u.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(json(u.path(), &["log"])[0]["author"], "Env Author");
}

#[test]
fn log_of_a_path_lists_the_commits_that_changed_it() {
    let t = repo();
    let p = t.path();
    write(p, "src/a.rs", b"1");
    write(p, "doc.md", b"1");
    ok(p, &["commit", "-m", "both"]);
    write(p, "doc.md", b"2");
    ok(p, &["commit", "-m", "doc only"]);
    write(p, "src/a.rs", b"2");
    ok(p, &["commit", "-m", "src only"]);
    let subjects = |args: &[&str]| -> Vec<String> {
        serde_json::from_str::<serde_json::Value>(&ok_first(p, true, args))
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["subject"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(subjects(&["log", "--", "src"]), ["src only", "both"]);
    assert_eq!(subjects(&["log", "--", "doc.md"]), ["doc only", "both"]);
    assert_eq!(
        subjects(&["log", "-n", "1", "--", "src/a.rs"]),
        ["src only"]
    );
    assert!(subjects(&["log", "--", "nowhere"]).is_empty());
}

/// `diff -- PATH` and `log -- PATH` take PATH as git does: relative to the current
/// directory (`.`, `..` and `./x` included), or absolute inside the working
/// directory; one that leads out of it is an error naming it. Before, PATH was
/// read from the root whatever the current directory, so `./src`, `.` and a name
/// typed in a subdirectory matched nothing: an empty diff or log, with no error.
#[test]
fn history_paths_are_relative_to_the_current_directory() {
    let t = repo();
    let p = t.path();
    write(p, "src/a.rs", b"1");
    write(p, "src/deep/b.rs", b"1");
    write(p, "doc.md", b"1");
    ok(p, &["commit", "-m", "both"]);
    write(p, "doc.md", b"2");
    ok(p, &["commit", "-m", "doc only"]);
    write(p, "src/a.rs", b"2");
    write(p, "src/deep/b.rs", b"2");
    let src = p.join("src");
    let deep = src.join("deep");
    // `--json` before `--` (after it, it would be a PATH).
    let json = |dir: &Path, args: &[&str]| -> serde_json::Value {
        serde_json::from_str(&ok(dir, &[&["--json"], args].concat())).unwrap()
    };
    let subjects = |dir: &Path, args: &[&str]| -> Vec<String> {
        json(dir, args)
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["subject"].as_str().unwrap().to_string())
            .collect()
    };
    let modified = |dir: &Path, args: &[&str]| json(dir, args)["modified"].clone();
    let both = serde_json::json!(["/src/a.rs", "/src/deep/b.rs"]);
    for (dir, path) in [
        (p, "./src"),
        (p, "src/"),
        (&src, "."),
        (&deep, ".."),
        (&deep, "../a.rs/../deep/.."),
    ] {
        assert_eq!(modified(dir, &["diff", "--", path]), both, "{path}");
    }
    assert_eq!(
        modified(&src, &["diff", "--", "a.rs"]),
        serde_json::json!(["/src/a.rs"])
    );
    let abs = deep.join("b.rs");
    assert_eq!(
        modified(&src, &["diff", "--", abs.to_str().unwrap()]),
        serde_json::json!(["/src/deep/b.rs"])
    );
    assert_eq!(
        subjects(&src, &["log", "--", "../doc.md"]),
        ["doc only", "both"]
    );
    assert_eq!(subjects(&src, &["log", "--", "a.rs"]), ["both"]);
    // `REV:PATH` is from the root, or from here with `./` or `../` (git's rule).
    assert_eq!(ok(&src, &["cat", "HEAD:./a.rs"]), "1");
    assert_eq!(ok(&deep, &["cat", "HEAD:../a.rs"]), "1");
    assert_eq!(ok(&deep, &["cat", "HEAD:src/a.rs"]), "1");
    let listed = json(&deep, &["ls", "HEAD:.."]);
    assert_eq!(listed.as_array().map(Vec::len), Some(2), "{listed}");
    let err = fails(&src, &["cat", "HEAD:../../x"]);
    assert!(err.contains("outside the working directory"), "{err}");
    // Out of the working directory: an error, not an empty answer.
    for path in ["../..", "/"] {
        let err = fails(&src, &["diff", "--", path]);
        assert!(
            err.contains("outside the working directory"),
            "{path}: {err}"
        );
        let err = fails(&src, &["log", "--", path]);
        assert!(
            err.contains("outside the working directory"),
            "{path}: {err}"
        );
    }
}

#[test]
fn diff_prints_patches_stats_and_name_status() {
    let t = repo();
    let p = t.path();
    write(p, "keep.txt", b"one\ntwo\nthree\n");
    write(p, "gone.txt", b"bye\n");
    write(p, "bin.dat", b"\0\x01\x02");
    write(p, "src/x.txt", b"x\n");
    ok(p, &["commit", "-m", "one"]);
    write(p, "keep.txt", b"one\n2\nthree\nfour\n");
    std::fs::remove_file(p.join("gone.txt")).unwrap();
    write(p, "bin.dat", b"\0\x01\x03");
    write(p, "new.txt", b"hello\n");
    let patch = ok(p, &["diff", "-p"]);
    assert!(
        patch.contains(
            "diff --git a/keep.txt b/keep.txt\n--- a/keep.txt\n+++ b/keep.txt\n@@ -1,3 +1,4 @@\n one\n-two\n+2\n three\n+four\n"
        ),
        "{patch}"
    );
    assert!(patch.contains("diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\n--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"), "{patch}");
    assert!(
        patch.contains("new file mode 100644\n--- /dev/null\n+++ b/new.txt\n"),
        "{patch}"
    );
    assert!(
        patch.contains("Binary files a/bin.dat and b/bin.dat differ\n"),
        "{patch}"
    );
    // --stat: per file and totals.
    let stat = ok(p, &["diff", "--stat"]);
    assert!(stat.contains(" keep.txt | "), "{stat}");
    assert!(stat.contains(" bin.dat  | Bin"), "{stat}");
    assert!(
        stat.ends_with(" 4 files changed, 3 insertions(+), 2 deletions(-)\n"),
        "{stat}"
    );
    let s = json(p, &["diff", "--stat"]);
    assert_eq!(s["stat"]["insertions"], 3);
    assert_eq!(s["stat"]["deletions"], 2);
    // --name-status.
    assert_eq!(
        ok(p, &["diff", "--name-status"]),
        "M\tbin.dat\nD\tgone.txt\nM\tkeep.txt\nA\tnew.txt\n"
    );
    // Path limits.
    assert_eq!(
        ok_first(p, false, &["diff", "HEAD", "--", "keep.txt", "new.txt"]),
        "M keep.txt\nA new.txt\n"
    );
    assert_eq!(ok_first(p, false, &["diff", "--", "src"]), "");
    // --exit-code: 1 with differences, 0 without.
    let out = run_in(p, &["diff", "--exit-code"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = std::process::Command::new(&*BIN)
        .args(["--quiet", "diff", "--exit-code", "--", "src"])
        .current_dir(p)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    // JSON keeps the patches.
    let j = json(p, &["diff", "-p"]);
    assert!(j["patches"].as_array().unwrap().len() == 4);
    // Between two commits, and show -p.
    ok(p, &["commit", "-m", "two"]);
    let show = ok(p, &["show", "HEAD", "-p"]);
    assert!(show.contains("message:\n    two\n"), "{show}");
    assert!(show.contains("+four\n"), "{show}");
    let between = ok_first(
        p,
        false,
        &["diff", "HEAD~1", "HEAD", "-p", "--", "keep.txt"],
    );
    assert!(
        between.starts_with("diff --git a/keep.txt b/keep.txt\n"),
        "{between}"
    );
    assert_eq!(between.matches("diff --git").count(), 1, "{between}");
}

#[test]
fn diff_and_status_report_renames() {
    let t = repo();
    let p = t.path();
    let body: String = (0..40).map(|i| format!("line {i}\n")).collect();
    write(p, "old.txt", body.as_bytes());
    write(p, "tiny.txt", b"t");
    write(p, "edit-me.txt", body.replace("line", "row").as_bytes());
    ok(p, &["commit", "-m", "one"]);
    std::fs::create_dir(p.join("moved")).unwrap();
    std::fs::rename(p.join("old.txt"), p.join("moved/new.txt")).unwrap();
    std::fs::rename(p.join("tiny.txt"), p.join("tiny2.txt")).unwrap();
    // Moved and edited: a rename only with -M.
    let edited = body
        .replace("line", "row")
        .replace("row 7\n", "row seven\n");
    std::fs::remove_file(p.join("edit-me.txt")).unwrap();
    write(p, "edited.txt", edited.as_bytes());
    let status = ok(p, &["status"]);
    assert!(status.contains("R old.txt -> moved/new.txt\n"), "{status}");
    assert!(status.contains("R tiny.txt -> tiny2.txt\n"), "{status}");
    assert!(
        status.contains("D edit-me.txt\n") && status.contains("A edited.txt\n"),
        "{status}"
    );
    let status = ok(p, &["status", "-M"]);
    assert!(status.contains("R edit-me.txt -> edited.txt\n"), "{status}");
    assert_eq!(
        ok_first(
            p,
            false,
            &[
                "diff",
                "-M",
                "--name-status",
                "--",
                "edit-me.txt",
                "edited.txt"
            ]
        ),
        "R097\tedit-me.txt\tedited.txt\n"
    );
    // A threshold above the similarity keeps them apart.
    assert!(ok(p, &["diff", "-M", "--threshold", "99"]).contains("A edited.txt\n"));
    let j = json(p, &["status"]);
    let renamed: Vec<_> = j["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "renamed")
        .collect();
    assert_eq!(renamed.len(), 2);
    // The patch of an exact rename is headers only.
    let patch = ok_first(p, false, &["diff", "-p", "--", "old.txt", "moved"]);
    assert_eq!(
        patch,
        "diff --git a/old.txt b/moved/new.txt\nsimilarity index 100%\nrename from old.txt\nrename to moved/new.txt\n"
    );
}

#[test]
fn restore_puts_paths_back_and_touches_nothing_else() {
    let t = repo();
    let p = t.path();
    write(p, "a.txt", b"a1");
    write(p, "dir/x.txt", b"x1");
    write(p, "dir/sub/y.sh", b"#!/bin/sh\n");
    std::fs::set_permissions(
        p.join("dir/sub/y.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    write(p, "other.txt", b"o1");
    ok(p, &["commit", "-m", "one"]);
    write(p, "a.txt", b"a2");
    write(p, "dir/x.txt", b"x2");
    write(p, "dir/added.txt", b"new in two");
    ok(p, &["commit", "-m", "two"]);
    // Working-directory edits everywhere.
    write(p, "a.txt", b"a3");
    write(p, "other.txt", b"o3");
    write(p, "dir/x.txt", b"x3");
    write(p, "dir/untracked.txt", b"mine");
    std::fs::remove_file(p.join("dir/sub/y.sh")).unwrap();
    // Default source: HEAD. The edit is uncommitted: it is not discarded without
    // --force (git's restore would discard it), and nothing is written.
    let err = fails(p, &["restore", "a.txt"]);
    assert!(err.contains("(a.txt)") && err.contains("--force"), "{err}");
    assert_eq!(std::fs::read(p.join("a.txt")).unwrap(), b"a3");
    ok(p, &["restore", "--force", "a.txt"]);
    assert_eq!(std::fs::read(p.join("a.txt")).unwrap(), b"a2");
    assert_eq!(std::fs::read(p.join("other.txt")).unwrap(), b"o3");
    // A directory from an older commit: its files back with modes; what HEAD has
    // there and the source lacks goes; untracked files stay.
    let err = fails(p, &["restore", "--source", "HEAD~1", "dir"]);
    assert!(err.contains("(dir/x.txt)"), "{err}");
    assert_eq!(std::fs::read(p.join("dir/x.txt")).unwrap(), b"x3");
    ok(p, &["restore", "-f", "--source", "HEAD~1", "dir"]);
    assert_eq!(std::fs::read(p.join("dir/x.txt")).unwrap(), b"x1");
    let mode = std::fs::metadata(p.join("dir/sub/y.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
    assert!(!p.join("dir/added.txt").exists());
    assert_eq!(std::fs::read(p.join("dir/untracked.txt")).unwrap(), b"mine");
    assert_eq!(std::fs::read(p.join("other.txt")).unwrap(), b"o3");
    assert_eq!(std::fs::read(p.join("a.txt")).unwrap(), b"a2");
    // checkout REV -- PATH does the same and leaves HEAD where it is.
    ok_first(p, false, &["checkout", "HEAD~1", "--", "a.txt"]);
    assert_eq!(std::fs::read(p.join("a.txt")).unwrap(), b"a1");
    assert_eq!(json(p, &["status"])["branch"], "main");
    // A path the commit lacks, and a directory where the commit has a file.
    let err = fails(p, &["restore", "nope.txt"]);
    assert!(
        err.contains("/nope.txt") && err.contains("not found"),
        "{err}"
    );
    std::fs::remove_file(p.join("other.txt")).unwrap();
    std::fs::create_dir(p.join("other.txt")).unwrap();
    let err = fails(p, &["restore", "other.txt"]);
    assert!(
        err.contains("other.txt") && err.contains("directory"),
        "{err}"
    );
    // Nothing was written by the refused restore.
    assert!(p.join("other.txt").is_dir());
}

/// A text file over `TEXT_DIFF_MAX_BYTES` (16 MiB) is not diffed line by line:
/// `diff -p` between two commits says its versions differ as binary, `--stat` counts
/// it as binary, and neither reads it: both run under a 40 MiB address-space limit
/// (`ulimit -v`), where holding its two versions would abort. A small file changed in
/// the same commits still gets its patch.
#[test]
fn files_over_the_text_limit_diff_as_binary_without_being_read() {
    let t = repo();
    let p = t.path();
    let mut big = String::new();
    let mut n = 0u64;
    while big.len() <= 33 << 20 {
        big.push_str(&format!("line {n}\n"));
        n += 1;
    }
    write(p, "big.txt", big.as_bytes());
    write(p, "small.txt", b"one\ntwo\n");
    let one = commit_id(&ok(p, &["commit", "-m", "one"]));
    write(
        p,
        "big.txt",
        big.replacen("line 7\n", "line seven\n", 1).as_bytes(),
    );
    write(p, "small.txt", b"one\n2\n");
    let two = commit_id(&ok(p, &["commit", "-m", "two"]));
    let limited = |args: &[&str]| String::from_utf8(ok_within(p, 40960, args)).unwrap();
    let patch = limited(&["diff", "-p", &one, &two]);
    assert!(
        patch.contains(
            "diff --git a/big.txt b/big.txt\nBinary files a/big.txt and b/big.txt differ\n"
        ),
        "{patch}"
    );
    assert!(
        patch.contains("--- a/small.txt\n+++ b/small.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n"),
        "{patch}"
    );
    let stat = limited(&["diff", "--stat", &one, &two]);
    assert!(stat.contains(" big.txt   | Bin"), "{stat}");
    assert!(stat.contains(" small.txt | "), "{stat}");
}
