//! A process killed with SIGKILL in the middle of commits to a SQLite store loses no
//! commit whose ref move had returned, and leaves a store that verifies.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use snapgraph::{ObjectId, Workspace};
use snapgraph_store::sqlite::SqliteStore;
use snapgraph_store::{verify, Repo, RepoCommitOptions};

const DB_ENV: &str = "SNAPGRAPH_CRASH_DB";

/// The child: commits turn after turn, printing each id once `commit` returned.
/// Does nothing unless started by `sigkill_mid_commit_loses_nothing`.
#[test]
fn crash_child() {
    let Ok(path) = std::env::var(DB_ENV) else {
        return;
    };
    let repo = Repo::new(SqliteStore::open(&path).unwrap());
    let mut ws = match repo.branch("main").unwrap() {
        Some(_) => repo.checkout("main").unwrap(),
        None => Workspace::new(),
    };
    let out = std::io::stdout();
    for turn in 0u64.. {
        // A few files per turn, one large enough to span several chunks, so kills
        // land inside multi-object writes too.
        let body: Vec<u8> = (0..200_000u64)
            .map(|i| (i.wrapping_mul(2_654_435_761) ^ turn.wrapping_mul(40_503)) as u8)
            .collect();
        ws.write(&format!("/t{}/big.bin", turn % 7), body).unwrap();
        ws.write(
            &format!("/t{}/small-{turn}.txt", turn % 7),
            turn.to_string(),
        )
        .unwrap();
        let c = repo
            .commit(
                &mut ws,
                "main",
                RepoCommitOptions::message(format!("turn {turn}")),
            )
            .unwrap();
        let mut lock = out.lock();
        writeln!(lock, "COMMITTED {}", c.id).unwrap();
        lock.flush().unwrap();
    }
}

#[test]
fn sigkill_mid_commit_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store.db");
    let exe = std::env::current_exe().unwrap();
    let mut acknowledged: Vec<ObjectId> = Vec::new();
    for (round, run_for) in [150u64, 400, 275, 600, 90].into_iter().enumerate() {
        let mut child = Command::new(&exe)
            .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
            .env(DB_ENV, &db)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .filter_map(|l| {
                    l.strip_prefix("COMMITTED ")
                        .map(|id| id.parse::<ObjectId>().unwrap())
                })
                .collect::<Vec<_>>()
        });
        // Let it commit for a while (at least one commit), then SIGKILL it.
        let start = Instant::now();
        std::thread::sleep(Duration::from_millis(run_for));
        child.kill().unwrap(); // SIGKILL on Unix
        child.wait().unwrap();
        let ids = reader.join().unwrap();
        assert!(start.elapsed() < Duration::from_secs(60));
        acknowledged.extend(ids);

        let store = SqliteStore::open(&db).unwrap();
        let report = verify(&store, true).unwrap();
        assert!(report.is_clean(), "round {round}: {:?}", report.problems);
        let repo = Repo::new(store);
        if acknowledged.is_empty() {
            continue;
        }
        let history: Vec<ObjectId> = repo
            .log("main", usize::MAX)
            .unwrap()
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        for id in &acknowledged {
            assert!(
                history.contains(id),
                "round {round}: acknowledged commit {id} lost"
            );
        }
        repo.checkout("main").unwrap();
    }
    eprintln!(
        "{} acknowledged commits survived 5 kills",
        acknowledged.len()
    );
    assert!(
        acknowledged.len() >= 3,
        "the child committed too little to test anything"
    );
}
