//! History on the handle: after N turns, checking out turn k and listing the tree
//! prints exactly what turn k's script saw; forks are independent; the same through a
//! `Repo` on SQLite and PostgreSQL; and a turn's commit costs what it changed.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use bashkit::Bash;
use common::{exec, rt, Outcome};
use snapgraph::{CheckoutPolicy, CommitOptions, ObjectId, SnapshotGraph};
use snapgraph_bashkit::SnapgraphFs;
use snapgraph_store::sqlite::SqliteStore;
use snapgraph_store::{Repo, RepoCommitOptions, Store};

/// What a turn's script sees: every file of the tree, then the project's contents.
const PROBE: &str = "find / -type f | sort; for f in $(find /work -type f | sort); do echo \"== $f\"; cat \"$f\"; done; find /work -type l | sort";

/// Agent-like turns: directories, redirections, copies, moves, removals, links, loops.
const TURNS: &[&str] = &[
    "mkdir -p /work/src /work/docs && echo 'fn main() {}' > /work/src/main.rs && echo '# notes' > /work/docs/README.md",
    "cd /work && for i in 1 2 3 4 5; do echo \"case $i\" > src/case$i.txt; done && cp src/main.rs src/lib.rs",
    "cd /work && mv docs manual && echo 'more' >> manual/README.md && ln -s manual/README.md README",
    "cd /work && rm -r src/case3.txt src/case4.txt && grep -l case src/*.txt | xargs -I{} sh -c 'echo done >> {}'",
    "cd /work && mkdir -p build/out && for f in src/*.rs; do cp $f build/out/; done && chmod 755 build/out/main.rs",
    "rm -r /work/build && echo 'fn main() { println!(\"hi\"); }' > /work/src/main.rs && find /work -name '*.txt' | sort",
];

fn stdout(o: Outcome) -> String {
    match o {
        Outcome::Ran { stdout, code, .. } => {
            assert_eq!(code, 0, "probe failed: {stdout}");
            stdout
        }
        Outcome::Failed(e) => panic!("interpreter error: {e}"),
    }
}

#[test]
fn checking_out_turn_k_shows_what_turn_k_saw() {
    let rt = rt();
    let mut store: HashMap<ObjectId, Vec<u8>> = HashMap::new();
    let fs = SnapgraphFs::new();
    let mut bash = Bash::builder().fs(Arc::new(fs.clone())).build();
    let mut seen = Vec::new();
    let mut ids: Vec<ObjectId> = Vec::new();
    for turn in TURNS {
        let out = rt.block_on(exec(&mut bash, turn));
        assert!(
            matches!(out, Outcome::Ran { code: 0, .. }),
            "{turn}: {out:?}"
        );
        seen.push(stdout(rt.block_on(exec(&mut bash, PROBE))));
        let mut opts = CommitOptions::new().have_in(&store);
        if let Some(&prev) = ids.last() {
            opts = opts.parent(prev);
        }
        let commit = fs.commit(opts).unwrap();
        ids.push(commit.id());
        assert_eq!(fs.head(), Some(commit.id()));
        store.extend(commit.into_objects());
    }
    // Every turn left a different tree.
    for (k, s) in seen.iter().enumerate().skip(1) {
        assert_ne!(s, &seen[k - 1], "turn {k} changed nothing");
    }
    // Out of order, and each twice: the probe prints what the turn's script saw.
    for k in (0..TURNS.len()).rev().chain(0..TURNS.len()) {
        let _restore = fs
            .checkout(ids[k], &store, CheckoutPolicy::default())
            .unwrap();
        assert_eq!(fs.head(), Some(ids[k]));
        assert_eq!(
            stdout(rt.block_on(exec(&mut bash, PROBE))),
            seen[k],
            "turn {k}"
        );
    }
    // History reads back from the store.
    let ancestry = SnapshotGraph::ancestry(ids[TURNS.len() - 1], &store, 100).unwrap();
    assert_eq!(ancestry, ids.iter().rev().copied().collect::<Vec<_>>());
    // Rewind and diverge: a turn on top of turn 2 is a new branch of history.
    let _restore = fs
        .checkout(ids[2], &store, CheckoutPolicy::default())
        .unwrap();
    rt.block_on(exec(&mut bash, "echo branch > /work/branch.txt"));
    let alt = fs
        .commit(CommitOptions::new().parent(ids[2]).have_in(&store))
        .unwrap();
    let alt_id = alt.id();
    store.extend(alt.into_objects());
    let diff = SnapshotGraph::diff(ids[2], alt_id, &store).unwrap();
    assert_eq!(diff.files_added, vec!["/work/branch.txt".to_string()]);
    assert!(diff.files_modified.is_empty() && diff.files_removed.is_empty());
}

#[test]
fn a_forks_writes_never_show_in_the_original() {
    let rt = rt();
    let fs = SnapgraphFs::new();
    let mut bash = Bash::builder().fs(Arc::new(fs.clone())).build();
    rt.block_on(exec(
        &mut bash,
        "mkdir -p /work && echo base > /work/a && touch -t 202001010000 /work/a",
    ));
    let fork = fs.fork();
    let mut forked = Bash::builder().fs(Arc::new(fork.clone())).build();
    // The fork starts with the same files and times.
    assert_eq!(
        stdout(rt.block_on(exec(&mut forked, "cat /work/a; stat -c %Y /work/a"))),
        "base\n1577836800\n"
    );
    rt.block_on(exec(
        &mut forked,
        "echo fork > /work/a; echo only > /work/b; rm -r /tmp; mkdir /work/d",
    ));
    rt.block_on(exec(
        &mut bash,
        "echo original >> /work/a; echo mine > /work/c",
    ));
    assert_eq!(
        stdout(rt.block_on(exec(&mut bash, "cat /work/a; ls /work; ls -d /tmp"))),
        "base\noriginal\na\nc\n/tmp\n"
    );
    assert_eq!(
        stdout(rt.block_on(exec(
            &mut forked,
            "cat /work/a; ls /work; [ -e /tmp ] || echo gone"
        ))),
        "fork\na\nb\nd\ngone\n"
    );
    // Usage is per handle too.
    use bashkit::FileSystemExt;
    assert_eq!(fs.usage().total_bytes, 19);
    assert_eq!(fork.usage().total_bytes, 10);
    // A clone of the handle is the same file system, not a fork.
    let same = fs.clone();
    rt.block_on(exec(&mut bash, "echo again > /work/e"));
    assert_eq!(same.workspace().read("/work/e").unwrap(), b"again\n");
}

#[test]
fn a_checkout_resets_times_and_keeps_modes_and_links() {
    let rt = rt();
    let mut store: HashMap<ObjectId, Vec<u8>> = HashMap::new();
    let fs = SnapgraphFs::new();
    let mut bash = Bash::builder().fs(Arc::new(fs.clone())).build();
    rt.block_on(exec(
        &mut bash,
        "mkdir /w && echo x > /w/f && chmod 750 /w/f && ln -s f /w/l && touch -t 202001010000 /w/f",
    ));
    let c = fs.commit(CommitOptions::new()).unwrap();
    let id = c.id();
    store.extend(c.into_objects());
    rt.block_on(exec(&mut bash, "rm -r /w"));
    let _restore = fs.checkout(id, &store, CheckoutPolicy::default()).unwrap();
    let out = stdout(rt.block_on(exec(
        &mut bash,
        "stat -c '%a %F' /w/f /w/l; readlink /w/l; cat /w/l; [ $(stat -c %Y /w/f) -gt 1577836800 ] && echo fresh",
    )));
    assert_eq!(out, "750 regular file\n777 symbolic link\nf\nx\nfresh\n");
}

/// The turns through a `Repo`: one commit per turn on a branch, checkouts of any
/// turn, a fork at an earlier turn that diverges.
fn turns_through_a_repo<S: Store>(repo: &Repo<S>) {
    let rt = rt();
    let fs = SnapgraphFs::new();
    let mut bash = Bash::builder().fs(Arc::new(fs.clone())).build();
    let mut seen = Vec::new();
    let mut ids = Vec::new();
    for (k, turn) in TURNS.iter().enumerate() {
        let out = rt.block_on(exec(&mut bash, turn));
        assert!(
            matches!(out, Outcome::Ran { code: 0, .. }),
            "{turn}: {out:?}"
        );
        seen.push(stdout(rt.block_on(exec(&mut bash, PROBE))));
        let committed = fs
            .commit_to(
                repo,
                "main",
                RepoCommitOptions::message(format!("turn {k}")),
            )
            .unwrap();
        assert_eq!(committed.previous, ids.last().copied());
        ids.push(committed.id);
    }
    assert_eq!(repo.branch("main").unwrap(), ids.last().copied());
    assert_eq!(repo.log("main", 100).unwrap().len(), TURNS.len());
    for k in [1, 4, 0, 5] {
        let _restore = fs
            .checkout_from(repo, &ids[k].to_string(), CheckoutPolicy::default())
            .unwrap();
        assert_eq!(
            stdout(rt.block_on(exec(&mut bash, PROBE))),
            seen[k],
            "turn {k}"
        );
    }
    // A fresh handle from the branch sees the last turn.
    let again = SnapgraphFs::from_workspace(repo.checkout("main").unwrap());
    let mut other = Bash::builder().fs(Arc::new(again.clone())).build();
    assert_eq!(
        stdout(rt.block_on(exec(&mut other, PROBE))),
        seen[TURNS.len() - 1]
    );
    // Fork at turn 2 and diverge on its own branch; main does not move.
    repo.fork("alt", &ids[2].to_string()).unwrap();
    let _restore = fs
        .checkout_from(repo, "alt", CheckoutPolicy::default())
        .unwrap();
    rt.block_on(exec(&mut bash, "echo alt > /work/alt.txt"));
    let alt = fs
        .commit_to(repo, "alt", RepoCommitOptions::message("alt turn"))
        .unwrap();
    assert_eq!(alt.previous, Some(ids[2]));
    // One new file in one directory: its chunk is inline, so the directory node, the
    // root node and the commit are all that is new.
    assert!(alt.objects_written <= 4, "{alt:?}");
    assert_eq!(repo.branch("main").unwrap(), ids.last().copied());
    // The workspace is at alt's tip: committing to main from here is refused.
    assert!(fs
        .commit_to(repo, "main", RepoCommitOptions::message("wrong branch"))
        .is_err());
}

#[test]
fn turns_through_a_repo_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("repo.sqlite")).unwrap();
    turns_through_a_repo(&Repo::new(store));
}

#[test]
fn turns_through_a_repo_on_postgres() {
    let Ok(base) = std::env::var("SNAPGRAPH_PG_URL") else {
        assert!(
            std::env::var("SNAPGRAPH_SKIP_PG").is_ok(),
            "SNAPGRAPH_PG_URL is unset: run scripts/postgres (or scripts/test), or set SNAPGRAPH_SKIP_PG=1"
        );
        return;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let schema = format!("bashkit_{}_{nanos}", std::process::id());
    let sep = if base.contains('?') { '&' } else { '?' };
    let store = snapgraph_store::open(&format!("{base}{sep}snapgraph_schema={schema}")).unwrap();
    turns_through_a_repo(&Repo::new(store));
}

/// A turn that edits one file of many commits that file, its directory's node, the
/// root's and the commit: not the whole tree.
#[test]
fn a_turns_commit_costs_what_it_changed() {
    let rt = rt();
    let mut store: HashMap<ObjectId, Vec<u8>> = HashMap::new();
    let fs = SnapgraphFs::new();
    let mut bash = Bash::builder().fs(Arc::new(fs.clone())).build();
    rt.block_on(exec(
        &mut bash,
        "for d in 0 1 2 3 4 5 6 7 8 9; do mkdir -p /data/d$d; for f in $(seq 1 50); do printf '%0100d' $d$f > /data/d$d/f$f; done; done",
    ));
    let first = fs.commit(CommitOptions::new()).unwrap();
    let mut head = first.id();
    assert!(first.object_count() > 400, "{}", first.object_count());
    store.extend(first.into_objects());
    for k in 0..5 {
        rt.block_on(exec(
            &mut bash,
            &format!("printf '%0200d' {k} > /data/d{k}/f7"),
        ));
        let c = fs
            .commit(CommitOptions::new().parent(head).have_in(&store))
            .unwrap();
        // The new 200-byte chunk, its directory node, the root node, the commit.
        assert!(
            c.object_count() <= 5,
            "turn {k}: {} objects",
            c.object_count()
        );
        head = c.id();
        store.extend(c.into_objects());
    }
    // A turn that changes nothing commits nothing new but the commit itself.
    rt.block_on(exec(
        &mut bash,
        "cat /data/d1/f1 > /dev/null; ls /data > /dev/null",
    ));
    let c = fs
        .commit(CommitOptions::new().parent(head).have_in(&store))
        .unwrap();
    assert_eq!(c.object_count(), 1);
}
