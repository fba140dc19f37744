//! End-to-end: `clone` (full and `--depth`), a deeper `sync --depth`, `forget`
//! (snapshots and branch history), `reindex`, `verify SNAPSHOT` and
//! `snapshots inspect NAME --verify`.

use std::path::Path;

mod common;
use common::*;

/// Commits turn `t` with a recorded time on `day` of March 2026; returns its id.
fn turn(root: &Path, t: usize, day: usize) -> String {
    write(root, "shared.txt", format!("at turn {t}").as_bytes());
    write(
        root,
        &format!("turns/{t}.txt"),
        &pseudo_random(2000 + t, t as u64),
    );
    let time = format!("time=2026-03-{day:02}T10:{t:02}:00Z");
    let out = ok(
        root,
        &["commit", "-m", &format!("turn {t}"), "--meta", &time],
    );
    commit_id(&out)
}

fn log_ids(dir: &Path) -> Vec<String> {
    json(dir, &["log"])
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect()
}

fn checkout_to(dir: &Path, id: &str, to: &Path) -> std::process::Output {
    run_in(dir, &["checkout", id, "--to", to.to_str().unwrap()])
}

#[test]
fn clone_whole_and_shallow_then_deepen() {
    let src = repo();
    let ids: Vec<String> = (0..5).map(|t| turn(src.path(), t, 1 + t)).collect();
    ok(src.path(), &["tag", "v1"]);
    // A branch at the root: the last N commits of each ref come whole.
    ok(src.path(), &["branch", "side", "--at", &ids[0]]);
    let parent = tempfile::tempdir().unwrap();
    let src_dir = src.path().to_str().unwrap();

    // A whole clone: every ref, the files of the default branch, clean status.
    let out = json(parent.path(), &["clone", src_dir, "whole"]);
    assert_eq!(out["branch"], "main");
    assert_eq!(out["hollow"], 0);
    let whole = parent.path().join("whole");
    assert_eq!(snapshot_of(&whole), snapshot_of(src.path()));
    assert_eq!(log_ids(&whole), log_ids(src.path()));
    let branches = json(&whole, &["branch"]);
    let names: Vec<&str> = branches
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["main", "side"]);
    assert_eq!(json(&whole, &["snapshots"])[0]["name"], "v1");
    assert!(ok(&whole, &["verify", "--read-data"]).contains(": ok"));
    // Its own store: a commit there does not reach the source.
    turn(&whole, 9, 20);
    assert_eq!(log_ids(src.path()).len(), 5);
    // Into a non-empty directory: refused.
    let err = fails(parent.path(), &["clone", src_dir, "whole"]);
    assert!(err.contains("not empty"), "{err}");

    // A shallow clone from the store URL: the whole history, files of the last 2
    // of main (turns 3 and 4) and of side (turn 0).
    let url = format!("sqlite:{}/.snapgraph/store.db", src_dir);
    let out = json(parent.path(), &["clone", &url, "shallow", "--depth", "2"]);
    assert_eq!(out["branch"], "main");
    assert_eq!(out["hollow"], 2, "{out}");
    let shallow = parent.path().join("shallow");
    assert_eq!(snapshot_of(&shallow), snapshot_of(src.path()));
    assert_eq!(log_ids(&shallow), log_ids(src.path()), "log is whole");
    let scratch = tempfile::tempdir().unwrap();
    let old = checkout_to(&shallow, &ids[1], &scratch.path().join("old"));
    assert_eq!(old.status.code(), Some(1));
    let err = String::from_utf8_lossy(&old.stderr);
    assert!(err.contains("pruned") && err.contains(&ids[1]), "{err}");
    assert!(checkout_to(&shallow, &ids[3], &scratch.path().join("t3"))
        .status
        .success());
    let v = json(&shallow, &["verify", "--read-data"]);
    assert_eq!(v["clean"], true, "{v}");
    assert_eq!(v["hollow"], 2, "{v}");
    assert!(checkout_to(&shallow, &ids[0], &scratch.path().join("t0"))
        .status
        .success());

    // Deeper: turns 1 and 2 get their files back.
    let out = json(
        parent.path(),
        &["sync", src_dir, "shallow", "main", "--depth", "4"],
    );
    assert_eq!(out[0]["filled"], 2, "{out}");
    let t1 = scratch.path().join("t1");
    assert!(checkout_to(&shallow, &ids[1], &t1).status.success());
    assert_eq!(
        std::fs::read(t1.join("turns/1.txt")).unwrap(),
        pseudo_random(2001, 1)
    );
    assert_eq!(json(&shallow, &["verify", "--read-data"])["clean"], true);
}

#[test]
fn forget_snapshots_and_branch_history() {
    let t = repo();
    let mut ids = Vec::new();
    for day in 1..=6 {
        ids.push(turn(t.path(), day, day));
        ok(t.path(), &["tag", &format!("day{day}")]);
    }
    // No rule: refused, nothing dropped.
    let out = run_in(t.path(), &["forget"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--keep-last"));

    let dry = json(t.path(), &["forget", "--keep-last", "2", "--dry-run"]);
    let kept: Vec<&str> = dry["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["keep"] == true)
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(kept, ["day6", "day5"]);
    assert_eq!(json(t.path(), &["snapshots"]).as_array().unwrap().len(), 6);
    let text = ok(
        t.path(),
        &["forget", "--keep-last", "2", "--keep-within", "4d"],
    );
    assert!(text.contains("remove 2 snapshots"), "{text}");
    let left: Vec<String> = json(t.path(), &["snapshots"])
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(left, ["day3", "day4", "day5", "day6"]);

    // Branch history: the last 2 commits keep their files, the rest become
    // hollow (a snapshot's own commit still holds its files).
    let out = json(
        t.path(),
        &["forget", "--branch", "main", "--keep-last", "2"],
    );
    let hollowed: Vec<&str> = out["branches"][0]["hollowed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_str().unwrap())
        .collect();
    assert_eq!(hollowed.len(), 4, "{out}");
    for id in &ids[..4] {
        assert!(hollowed.contains(&id.as_str()));
    }
    ok(t.path(), &["gc", "--prune", "now"]);
    assert_eq!(log_ids(t.path()).len(), 6, "log keeps the whole history");
    let scratch = tempfile::tempdir().unwrap();
    // Day 1 and 2 had their snapshots forgotten: their files are gone.
    let out = checkout_to(t.path(), &ids[0], &scratch.path().join("d1"));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pruned"));
    // Day 3's snapshot still holds its files.
    assert!(ok(
        t.path(),
        &[
            "checkout",
            "day3",
            "--to",
            scratch.path().join("d3").to_str().unwrap()
        ]
    )
    .contains("checked out"));
    let v = json(t.path(), &["verify", "--read-data"]);
    assert_eq!(v["clean"], true, "{v}");
    assert_eq!(v["hollow"], 4);
    assert!(ok(t.path(), &["verify"]).contains("4 hollow commits"));
    // The working directory is at the tip: still clean, still committable.
    turn(t.path(), 7, 7);
}

#[test]
fn reindex_and_verify_one_snapshot() {
    let t = tempfile::tempdir().unwrap();
    ok(
        t.path(),
        &["init", "--store", "dir:.snapgraph/objects-here"],
    );
    turn(t.path(), 1, 1);
    ok(t.path(), &["tag", "v1"]);
    turn(t.path(), 2, 2);
    ok(t.path(), &["tag", "v2"]);

    // A lost snapshot name comes back.
    ok(t.path(), &["snapshots", "remove", "v1"]);
    let r = json(t.path(), &["reindex"]);
    assert_eq!(r["tags_restored"][0]["name"], "v1", "{r}");
    assert_eq!(json(t.path(), &["snapshots"]).as_array().unwrap().len(), 2);
    assert!(ok(t.path(), &["reindex"]).contains("0 snapshots restored"));

    let one = json(t.path(), &["verify", "v1", "--read-data"]);
    assert_eq!(one["clean"], true);
    assert_eq!(one["snapshot"], "v1");
    let inspect = json(t.path(), &["snapshots", "inspect", "v2", "--verify"]);
    assert_eq!(inspect["verify"]["clean"], true, "{inspect}");

    // Damage only v2's own file: v2 fails, v1 still verifies.
    let file = pseudo_random(2002, 2);
    let chunk_ids: Vec<String> =
        std::fs::read_dir(t.path().join(".snapgraph/objects-here/objects"))
            .unwrap()
            .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
            .map(|e| e.unwrap().path().to_str().unwrap().to_string())
            .collect();
    let mut damaged = 0;
    for path in &chunk_ids {
        let bytes = std::fs::read(path).unwrap();
        // The file's bytes are stored raw inside one object (incompressible).
        if bytes.windows(64).any(|w| w == &file[..64]) {
            let mut b = bytes.clone();
            let last = b.len() - 1;
            b[last] ^= 1;
            std::fs::write(path, b).unwrap();
            damaged += 1;
        }
    }
    assert!(damaged >= 1);
    let out = run_in(t.path(), &["verify", "v2", "--read-data"]);
    assert_eq!(out.status.code(), Some(1));
    let out = run_in(
        t.path(),
        &["snapshots", "inspect", "v2", "--verify", "--read-data"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("PROBLEMS"));
    assert_eq!(
        json(t.path(), &["verify", "v1", "--read-data"])["clean"],
        true
    );
}
