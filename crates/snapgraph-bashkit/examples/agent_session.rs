//! An agent-like session: bash turns run by Bashkit on a snapgraph workspace, a commit
//! to a branch after each turn, a rewind to an earlier turn, a fork that diverges on
//! its own branch, and the diff of two turns.
//!
//! ```sh
//! cargo run -p snapgraph-bashkit --example agent_session                      # in memory
//! cargo run -p snapgraph-bashkit --example agent_session -- sqlite:/tmp/s.db  # any store URL
//! ```

use std::error::Error;
use std::sync::Arc;

use bashkit::Bash;
use snapgraph::{CheckoutPolicy, ObjectId, SnapshotGraph};
use snapgraph_bashkit::SnapgraphFs;
use snapgraph_store::{Repo, RepoCommitOptions};

/// What the "agent" does, one script per turn.
const TURNS: &[(&str, &str)] = &[
    (
        "scaffold the project",
        "mkdir -p /project/src /project/tests
         cd /project
         printf 'def main():\\n    print(\"hello\")  # TODO: args\\n' > src/app.py
         echo 'import app' > tests/test_app.py
         echo '# project' > README.md",
    ),
    (
        "generate data files in a loop",
        "mkdir -p /project/data
         for i in $(seq 1 40); do echo \"id,value\\n$i,$((i * i))\" > /project/data/row$i.csv; done
         ls /project/data | wc -l",
    ),
    (
        "refactor: move, copy, edit",
        "cd /project
         mv src lib
         cp lib/app.py lib/cli.py
         sed -i 's/hello/hello, world/' lib/app.py
         echo 'see lib/' >> README.md",
    ),
    (
        "clean up and look around",
        "rm -r /project/data/row1*.csv
         find /project -type f | sort | head -5
         grep -rn TODO /project | sort",
    ),
];

fn main() -> Result<(), Box<dyn Error>> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "memory:".to_string());
    let repo = Repo::new(snapgraph_store::open(&url)?);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;

    // The three lines of embedding: a handle, Bashkit on it, a commit per turn.
    let fs = SnapgraphFs::new();
    let mut bash = Bash::builder().fs(Arc::new(fs.clone())).build();

    let mut turns: Vec<ObjectId> = Vec::new();
    for (k, (what, script)) in TURNS.iter().enumerate() {
        let out = rt.block_on(bash.exec(script))?;
        let committed = fs.commit_to(&repo, "main", RepoCommitOptions::message(*what))?;
        println!(
            "turn {k} ({what}): exit {}, commit {}, {} new objects, {} new bytes",
            out.exit_code,
            short(committed.id),
            committed.objects_written,
            committed.bytes_written
        );
        for line in out.stdout.text_lossy().lines() {
            println!("    | {line}");
        }
        turns.push(committed.id);
    }

    // Rewind: the next script sees the files of turn 1 (before the refactor).
    let _restore = fs.checkout_from(&repo, &turns[1].to_string(), CheckoutPolicy::default())?;
    let out = rt.block_on(bash.exec("ls /project; ls /project/data | wc -l"))?;
    println!("\nrewound to turn 1:");
    for line in out.stdout.text_lossy().lines() {
        println!("    | {line}");
    }

    // Fork at turn 1: an independent handle and its own branch, diverging.
    let fork = fs.fork();
    let mut forked = Bash::builder().fs(Arc::new(fork.clone())).build();
    repo.fork("experiment", &turns[1].to_string())?;
    rt.block_on(forked.exec("cd /project && rm -r data && echo 'print(1)' > src/quick.py"))?;
    let experiment =
        fork.commit_to(&repo, "experiment", RepoCommitOptions::message("quick try"))?;
    let seen_by_original = rt.block_on(bash.exec("ls /project/src"))?;
    println!(
        "\nfork committed {} on branch experiment; the original still lists: {}",
        short(experiment.id),
        seen_by_original
            .stdout
            .text_lossy()
            .trim()
            .replace('\n', " ")
    );

    // What the refactor turn changed, and how the fork differs from main.
    let store = repo.store();
    for (label, a, b) in [
        ("turn 1 -> turn 2", turns[1], turns[2]),
        ("main -> experiment", turns[3], experiment.id),
    ] {
        let diff = SnapshotGraph::diff(a, b, store)?;
        println!(
            "\ndiff {label}: {} added, {} modified, {} removed",
            diff.files_added.len(),
            diff.files_modified.len(),
            diff.files_removed.len()
        );
        for p in diff.files_added.iter().take(5) {
            println!("    + {p}");
        }
        for p in diff.files_modified.iter().take(5) {
            println!("    ~ {p}");
        }
        for p in diff.files_removed.iter().take(5) {
            println!("    - {p}");
        }
    }
    for (name, id) in repo.branches()? {
        println!("branch {name} at {}", short(id));
    }
    Ok(())
}

fn short(id: ObjectId) -> String {
    id.to_string()[..12].to_string()
}
