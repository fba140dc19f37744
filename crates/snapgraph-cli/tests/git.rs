//! End-to-end tests of the git-style CLI: revisions, detached heads, dates and
//! authors, patches, renames and path restores.

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
