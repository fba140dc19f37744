//! snapgraph against Bashkit's own commit API (`Bash::commit`) on the per-turn
//! workload, side by side in one process.
//!
//! Workload: 2,000 files of 4,000 bytes of pseudo-random data in 20 directories
//! (100 per directory), one full first commit, then one turn after another: overwrite
//! one file with new 4,000-byte content and commit against everything stored so far.
//! A few warm-up turns, then the measured turns. Both tools get the same files, the
//! same edits in the same order, and each keeps its objects in a
//! `HashMap<ObjectId, Vec<u8>>`, the store type both APIs accept directly.
//!
//! Per turn, per tool (the order of the two tools alternates from turn to turn):
//! - write: putting the new content into the tool's in-memory filesystem (not part of
//!   the commit figure);
//! - commit: building the commit options (parent, and what the store already holds),
//!   the commit call, and inserting the new objects into the store;
//! - new bytes: what the commit hands back to be stored (`stored_bytes()` of both).
//!
//! After the last turn: checkout of the final commit into a fresh instance, repeated,
//! and a check that every file came back with the expected content.
//!
//! Then the same number of turns inside the interpreter: each turn a bash script
//! (`printf ... > FILE`, one 4,000-byte overwrite) run by `Bash::exec`, then a commit,
//! on Bashkit's own file system (`Bash::commit`) and on `SnapgraphFs`
//! (`SnapgraphFs::commit`), with exec and commit timed apart.
//!
//! `cargo run --release --manifest-path benches/bashkit/Cargo.toml [-- TURNS [WARMUP]]`
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Files in the workspace.
const FILES: usize = 2_000;
/// Size of each file (below both tools' single-chunk / inline thresholds).
const FILE_SIZE: usize = 4_000;
/// Directories the files are dealt over (round-robin: 100 per directory).
const DIRS: usize = 20;
/// Measured turns unless given on the command line.
const TURNS: usize = 50;
/// Warm-up turns (not counted) unless given on the command line.
const WARMUP: usize = 5;
/// Checkouts of the final commit per tool.
const CHECKOUTS: usize = 11;

/// Versions this build is pinned to (see Cargo.toml).
const BASHKIT_VERSION: &str = "0.20.2";
const SNAPGRAPH_VERSION: &str = "0.1.0 (path dependency, ../../crates/snapgraph)";

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

// ---------------------------------------------------------------------------
// Deterministic data: the generator of benches/benches/common/mod.rs, copied.
// ---------------------------------------------------------------------------

/// splitmix64 of `seed`: turns consecutive seeds into unrelated xorshift states.
fn mix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) | 1
}

/// Fills `buf` with xorshift64 output seeded from `seed`.
fn fill(buf: &mut [u8], seed: u64) {
    let mut s = mix(seed);
    let mut chunks = buf.chunks_exact_mut(8);
    for c in &mut chunks {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        c.copy_from_slice(&s.to_le_bytes());
    }
    let rest = chunks.into_remainder();
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    let n = rest.len();
    rest.copy_from_slice(&s.to_le_bytes()[..n]);
}

/// `len` deterministic pseudo-random bytes.
fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut v = vec![0u8; len];
    fill(&mut v, seed);
    v
}

/// Directory of file `i`.
fn dir_path(d: usize) -> String {
    format!("/d{d:04}")
}

/// Path of file `i`: 20 directories, files dealt round-robin.
fn file_path(i: usize) -> String {
    format!("{}/f{i:06}.bin", dir_path(i % DIRS))
}

/// Edit number `k`: which file, and its new content (never seen before). Same as
/// `Turns::next_edit` in the criterion benches.
fn edit(k: u64) -> (usize, Vec<u8>) {
    let idx = (k % FILES as u64) as usize;
    (idx, pseudo_random(FILE_SIZE, (1 << 40) + k))
}

// ---------------------------------------------------------------------------
// What one turn measured.
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, Default)]
struct Turn {
    /// Putting the new content into the tool's filesystem.
    write: Duration,
    /// Building the commit options (parent + what the store holds).
    options: Duration,
    /// The commit call itself.
    commit: Duration,
    /// Inserting the returned objects into the store.
    insert: Duration,
    /// Bytes handed back to store (`stored_bytes()`).
    new_bytes: u64,
    /// Objects handed back to store.
    new_objects: usize,
    /// Of `new_bytes`, those of the objects carrying file content (snapgraph: chunk
    /// objects; bashkit: file objects, which hold a file of at most 4 KiB inline).
    /// The rest is structure: trees and the commit object.
    content_bytes: u64,
}

impl Turn {
    /// The per-commit figure: options + commit + store insert.
    fn total(&self) -> Duration {
        self.options + self.commit + self.insert
    }
}

/// Median (mean of the two middle values for an even count).
fn median_dur(mut v: Vec<Duration>) -> Duration {
    v.sort();
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2
    }
}

fn mean_dur(v: &[Duration]) -> Duration {
    v.iter().sum::<Duration>() / v.len() as u32
}

fn median_u64(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2
    }
}

fn fmt_dur(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us >= 1_000.0 {
        format!("{:.2} ms", us / 1_000.0)
    } else {
        format!("{us:.1} µs")
    }
}

/// `1234567` -> `1,234,567`.
fn fmt_int(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

// ---------------------------------------------------------------------------
// snapgraph side.
// ---------------------------------------------------------------------------

mod sg {
    use super::*;
    use snapgraph::{CheckoutPolicy, CommitOptions, ObjectId, Workspace};

    pub struct Side {
        pub ws: Workspace,
        pub store: HashMap<ObjectId, Vec<u8>>,
        pub head: ObjectId,
        pub first_commit: Duration,
        pub first_bytes: u64,
    }

    impl Side {
        pub fn new(files: &[Vec<u8>]) -> Result<Self> {
            let mut ws = Workspace::new();
            for (i, data) in files.iter().enumerate() {
                ws.write(&file_path(i), data)?;
            }
            let t = Instant::now();
            let c = ws.commit(CommitOptions::new())?;
            let first_commit = t.elapsed();
            let first_bytes = c.stored_bytes();
            let head = c.id();
            let mut store = HashMap::new();
            store.extend(c.into_objects());
            Ok(Self {
                ws,
                store,
                head,
                first_commit,
                first_bytes,
            })
        }

        pub fn turn(&mut self, path: &str, data: &[u8]) -> Result<Turn> {
            let t = Instant::now();
            self.ws.write(path, data)?;
            let write = t.elapsed();

            let t = Instant::now();
            let opts = CommitOptions::new().parent(self.head).have_in(&self.store);
            let options = t.elapsed();

            let t = Instant::now();
            let c = self.ws.commit(opts)?;
            let commit = t.elapsed();
            let new_bytes = c.stored_bytes();
            let new_objects = c.object_count();
            // Chunk objects start with kind byte 1 (as in the criterion benches).
            let content_bytes = c
                .objects()
                .iter()
                .filter(|(_, b)| b.first() == Some(&1))
                .map(|(_, b)| b.len() as u64)
                .sum();
            let head = c.id();

            let t = Instant::now();
            self.store.extend(c.into_objects());
            let insert = t.elapsed();
            self.head = head;
            Ok(Turn {
                write,
                options,
                commit,
                insert,
                new_bytes,
                new_objects,
                content_bytes,
            })
        }

        /// Checkout of the head into a fresh workspace: (time, workspace). The
        /// workspace is created before the clock starts and dropped after it stops.
        pub fn checkout(&self) -> Result<(Duration, Workspace)> {
            let mut ws = Workspace::new();
            let t = Instant::now();
            ws.checkout(self.head, &self.store, CheckoutPolicy::default())?;
            Ok((t.elapsed(), ws))
        }

        pub fn verify(ws: &Workspace, files: &[Vec<u8>]) -> Result<()> {
            for (i, want) in files.iter().enumerate() {
                let got = ws.read(&file_path(i))?;
                if got != want.as_slice() {
                    return Err(format!("snapgraph checkout: {} differs", file_path(i)).into());
                }
            }
            Ok(())
        }

        pub fn store_bytes(&self) -> u64 {
            self.store.values().map(|v| v.len() as u64).sum()
        }
    }
}

// ---------------------------------------------------------------------------
// bashkit side.
// ---------------------------------------------------------------------------

mod bk {
    use super::*;
    use bashkit::{Bash, CheckoutPolicy, CommitOptions, ObjectId, SnapshotGraph};

    pub struct Side {
        pub bash: Bash,
        pub store: HashMap<ObjectId, Vec<u8>>,
        pub head: ObjectId,
        pub first_commit: Duration,
        pub first_bytes: u64,
        rt: tokio::runtime::Runtime,
    }

    impl Side {
        pub fn new(files: &[Vec<u8>]) -> Result<Self> {
            let rt = tokio::runtime::Builder::new_current_thread().build()?;
            let bash = Bash::new();
            let fs = bash.fs();
            rt.block_on(async {
                for d in 0..DIRS {
                    fs.mkdir(Path::new(&dir_path(d)), true).await?;
                }
                for (i, data) in files.iter().enumerate() {
                    fs.write_file(Path::new(&file_path(i)), data).await?;
                }
                Ok::<_, bashkit::Error>(())
            })?;
            let t = Instant::now();
            let c = bash.commit(CommitOptions::new())?;
            let first_commit = t.elapsed();
            let first_bytes = c.stored_bytes() as u64;
            let head = c.id();
            let mut store = HashMap::new();
            store.extend(c.into_objects());
            Ok(Self {
                bash,
                store,
                head,
                first_commit,
                first_bytes,
                rt,
            })
        }

        pub fn turn(&mut self, path: &str, data: &[u8]) -> Result<Turn> {
            let fs = self.bash.fs();
            let t = Instant::now();
            self.rt
                .block_on(fs.write_file(Path::new(path), data))
                .map_err(|e| format!("bashkit write {path}: {e}"))?;
            let write = t.elapsed();

            // The documented way to make a commit incremental: pass `store.keys()`.
            let t = Instant::now();
            let opts = CommitOptions::new()
                .parent(self.head)
                .have(self.store.keys());
            let options = t.elapsed();

            let t = Instant::now();
            let c = self.bash.commit(opts)?;
            let commit = t.elapsed();
            let new_bytes = c.stored_bytes() as u64;
            let new_objects = c.object_count();
            let sizes: HashMap<ObjectId, u64> =
                c.objects().map(|(id, b)| (id, b.len() as u64)).collect();
            let head = c.id();

            let t = Instant::now();
            self.store.extend(c.into_objects());
            let insert = t.elapsed();
            self.head = head;

            // Structure = the commit object and its (flat, whole-filesystem) tree.
            let tree = SnapshotGraph::read_commit(head, &self.store)?.tree;
            let structure = sizes.get(&head).copied().unwrap_or(0)
                + tree.and_then(|t| sizes.get(&t).copied()).unwrap_or(0);
            Ok(Turn {
                write,
                options,
                commit,
                insert,
                new_bytes,
                new_objects,
                content_bytes: new_bytes - structure,
            })
        }

        /// Checkout of the head into a fresh `Bash`: (time, instance). The instance is
        /// created before the clock starts and dropped after it stops.
        pub fn checkout(&self) -> Result<(Duration, Bash)> {
            let mut bash = Bash::new();
            let t = Instant::now();
            bash.checkout(self.head, &self.store, CheckoutPolicy::default())?;
            Ok((t.elapsed(), bash))
        }

        pub fn verify(&self, bash: &Bash, files: &[Vec<u8>]) -> Result<()> {
            let fs = bash.fs();
            self.rt.block_on(async {
                for (i, want) in files.iter().enumerate() {
                    let got = fs.read_file(Path::new(&file_path(i))).await?;
                    if &got != want {
                        return Err(format!("bashkit checkout: {} differs", file_path(i)).into());
                    }
                }
                Ok(())
            })
        }

        pub fn store_bytes(&self) -> u64 {
            self.store.values().map(|v| v.len() as u64).sum()
        }
    }
}

// ---------------------------------------------------------------------------
// Inside the interpreter: the same turns as bash scripts run by `Bash::exec`, on
// Bashkit's own file system (then `Bash::commit`) and on `SnapgraphFs` (then
// `SnapgraphFs::commit`).
// ---------------------------------------------------------------------------

/// The script of edit `k`: one `printf` overwriting one file with 4,000 new bytes of
/// text (bash strings cannot hold arbitrary bytes).
fn edit_script(k: u64) -> (usize, String, Vec<u8>) {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+-";
    let (idx, random) = edit(k);
    let text: Vec<u8> = random.iter().map(|b| ALPHABET[(*b & 63) as usize]).collect();
    let script = format!(
        "printf '%s' '{}' > {}",
        std::str::from_utf8(&text).expect("ASCII"),
        file_path(idx)
    );
    (idx, script, text)
}

/// What one interpreter turn measured.
#[derive(Debug, Clone, Copy, Default)]
struct ExecTurn {
    /// `bash.exec(script)`.
    exec: Duration,
    /// Commit options + commit + store insert, as in [`Turn::total`].
    commit: Duration,
    new_bytes: u64,
}

mod interp {
    use super::*;
    use std::sync::Arc;

    /// Files written through the file system the interpreter runs on.
    async fn populate(fs: &dyn bashkit::FileSystem, files: &[Vec<u8>]) -> bashkit::Result<()> {
        for d in 0..DIRS {
            fs.mkdir(Path::new(&dir_path(d)), true).await?;
        }
        for (i, data) in files.iter().enumerate() {
            fs.write_file(Path::new(&file_path(i)), data).await?;
        }
        Ok(())
    }

    fn exec(rt: &tokio::runtime::Runtime, bash: &mut bashkit::Bash, script: &str) -> Result<Duration> {
        let t = Instant::now();
        let out = rt.block_on(bash.exec(script))?;
        let d = t.elapsed();
        if out.exit_code != 0 {
            return Err(format!("script failed ({}): {}", out.exit_code, out.stderr).into());
        }
        Ok(d)
    }

    /// Bashkit on its own in-memory file system, committed with `Bash::commit`.
    pub struct Bashkit {
        pub bash: bashkit::Bash,
        store: HashMap<bashkit::ObjectId, Vec<u8>>,
        head: bashkit::ObjectId,
    }

    impl Bashkit {
        pub fn new(rt: &tokio::runtime::Runtime, files: &[Vec<u8>]) -> Result<Self> {
            let bash = bashkit::Bash::new();
            rt.block_on(populate(&*bash.fs(), files))?;
            let c = bash.commit(bashkit::CommitOptions::new())?;
            let head = c.id();
            let mut store = HashMap::new();
            store.extend(c.into_objects());
            Ok(Self { bash, store, head })
        }

        pub fn turn(&mut self, rt: &tokio::runtime::Runtime, script: &str) -> Result<ExecTurn> {
            let exec = exec(rt, &mut self.bash, script)?;
            let t = Instant::now();
            let opts = bashkit::CommitOptions::new()
                .parent(self.head)
                .have(self.store.keys());
            let c = self.bash.commit(opts)?;
            let new_bytes = c.stored_bytes() as u64;
            self.head = c.id();
            self.store.extend(c.into_objects());
            Ok(ExecTurn {
                exec,
                commit: t.elapsed(),
                new_bytes,
            })
        }
    }

    /// Bashkit on `SnapgraphFs`, committed with `SnapgraphFs::commit`.
    pub struct Snapgraph {
        pub bash: bashkit::Bash,
        pub fs: snapgraph_bashkit::SnapgraphFs,
        store: HashMap<snapgraph::ObjectId, Vec<u8>>,
        head: snapgraph::ObjectId,
    }

    impl Snapgraph {
        pub fn new(rt: &tokio::runtime::Runtime, files: &[Vec<u8>]) -> Result<Self> {
            let fs = snapgraph_bashkit::SnapgraphFs::new();
            let bash = bashkit::Bash::builder().fs(Arc::new(fs.clone())).build();
            rt.block_on(populate(&*bash.fs(), files))?;
            let c = fs.commit(snapgraph::CommitOptions::new())?;
            let head = c.id();
            let mut store = HashMap::new();
            store.extend(c.into_objects());
            Ok(Self {
                bash,
                fs,
                store,
                head,
            })
        }

        pub fn turn(&mut self, rt: &tokio::runtime::Runtime, script: &str) -> Result<ExecTurn> {
            let exec = exec(rt, &mut self.bash, script)?;
            let t = Instant::now();
            let opts = snapgraph::CommitOptions::new()
                .parent(self.head)
                .have_in(&self.store);
            let c = self.fs.commit(opts)?;
            let new_bytes = c.stored_bytes();
            self.head = c.id();
            self.store.extend(c.into_objects());
            Ok(ExecTurn {
                exec,
                commit: t.elapsed(),
                new_bytes,
            })
        }
    }

    /// Both interpreters read back the last edit of every file edited.
    pub fn verify(
        rt: &tokio::runtime::Runtime,
        a: &Bashkit,
        b: &Snapgraph,
        edited: &HashMap<usize, Vec<u8>>,
    ) -> Result<()> {
        let (fa, fb) = (a.bash.fs(), b.bash.fs());
        rt.block_on(async {
            for (i, want) in edited {
                let p = file_path(*i);
                let (x, y) = (
                    fa.read_file(Path::new(&p)).await?,
                    fb.read_file(Path::new(&p)).await?,
                );
                if &x != want || &y != want {
                    return Err(format!("{p}: an interpreter lost the edit").into());
                }
            }
            Ok(())
        })
    }
}

fn interpreter_turns(files: &[Vec<u8>], turns: usize, warmup: usize) -> Result<()> {
    // `Bash::exec` needs timers (execution time limits).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    let mut a = interp::Bashkit::new(&rt, files)?;
    let mut b = interp::Snapgraph::new(&rt, files)?;
    let mut ta = Vec::with_capacity(turns);
    let mut tb = Vec::with_capacity(turns);
    let mut edited = HashMap::new();
    for k in 0..(warmup + turns) as u64 {
        let (idx, script, text) = edit_script(k);
        let (x, y) = if k % 2 == 0 {
            let x = a.turn(&rt, &script)?;
            (x, b.turn(&rt, &script)?)
        } else {
            let y = b.turn(&rt, &script)?;
            (a.turn(&rt, &script)?, y)
        };
        edited.insert(idx, text);
        if k as usize >= warmup {
            ta.push(x);
            tb.push(y);
        }
    }
    interp::verify(&rt, &a, &b, &edited)?;
    println!("\n## Inside the interpreter: `Bash::exec` + commit ({turns} measured turns)\n");
    println!(
        "Each turn runs one script, `printf '%s' '<4,000 new characters>' > FILE`, through \
         `Bash::exec`, then commits: on Bashkit's own file system with `Bash::commit` (options \
         `parent(head).have(store.keys())`), and on `SnapgraphFs` with `SnapgraphFs::commit` \
         (options `parent(head).have_in(&store)`). Same {FILES} files, same scripts, tool order \
         alternating. Both interpreters read back every edited file afterwards.\n"
    );
    println!("| file system | exec median | exec mean | commit median | commit mean | new bytes median |");
    println!("|---|---|---|---|---|---|");
    let row = |name: &str, t: &[ExecTurn]| {
        let exec: Vec<Duration> = t.iter().map(|x| x.exec).collect();
        let commit: Vec<Duration> = t.iter().map(|x| x.commit).collect();
        println!(
            "| {name} | {} | {} | {} | {} | {} |",
            fmt_dur(median_dur(exec.clone())),
            fmt_dur(mean_dur(&exec)),
            fmt_dur(median_dur(commit.clone())),
            fmt_dur(mean_dur(&commit)),
            fmt_int(median_u64(t.iter().map(|x| x.new_bytes).collect())),
        );
    };
    row("Bashkit InMemoryFs + `Bash::commit`", &ta);
    row("`SnapgraphFs` + `SnapgraphFs::commit`", &tb);
    let med = |t: &[ExecTurn], f: fn(&ExecTurn) -> Duration| {
        median_dur(t.iter().map(f).collect()).as_secs_f64()
    };
    println!("\n| figure (Bashkit / SnapgraphFs) | ratio | target |");
    println!("|---|---|---|");
    println!(
        "| commit time, median | **{:.0}x** | at least 100x |",
        med(&ta, |x| x.commit) / med(&tb, |x| x.commit)
    );
    println!(
        "| exec time, median | **{:.2}x** | at least 1x (no slower) |",
        med(&ta, |x| x.exec) / med(&tb, |x| x.exec)
    );
    println!(
        "| exec + commit, median | {:.1}x | |",
        median_dur(ta.iter().map(|x| x.exec + x.commit).collect()).as_secs_f64()
            / median_dur(tb.iter().map(|x| x.exec + x.commit).collect()).as_secs_f64()
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// Machine description.
// ---------------------------------------------------------------------------

fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".to_string());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or_else(String::new, |kb| format!(", {} GiB RAM", kb >> 20));
    format!("{cpus} CPUs (available_parallelism), {model}{mem}")
}

fn rustc_version() -> String {
    Command::new("rustc")
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map_or_else(|| "rustc (unknown)".to_string(), |s| s.trim().to_string())
}

// ---------------------------------------------------------------------------

struct Summary {
    name: &'static str,
    turns: Vec<Turn>,
    checkouts: Vec<Duration>,
    first_commit: Duration,
    first_bytes: u64,
    store_objects: usize,
    store_bytes: u64,
}

impl Summary {
    fn totals(&self) -> Vec<Duration> {
        self.turns.iter().map(Turn::total).collect()
    }
    fn median_of(&self, f: impl Fn(&Turn) -> Duration) -> Duration {
        median_dur(self.turns.iter().map(f).collect())
    }
    fn commit_median(&self) -> Duration {
        median_dur(self.totals())
    }
    fn commit_mean(&self) -> Duration {
        mean_dur(&self.totals())
    }
    /// The `q`-quantile of the per-turn commit time (nearest rank).
    fn commit_quantile(&self, q: f64) -> Duration {
        let mut v = self.totals();
        v.sort();
        let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
        v[rank - 1]
    }
    fn content_median(&self) -> u64 {
        median_u64(self.turns.iter().map(|t| t.content_bytes).collect())
    }
    fn structure_median(&self) -> u64 {
        median_u64(
            self.turns
                .iter()
                .map(|t| t.new_bytes - t.content_bytes)
                .collect(),
        )
    }
    fn bytes_median(&self) -> u64 {
        median_u64(self.turns.iter().map(|t| t.new_bytes).collect())
    }
    fn bytes_mean(&self) -> u64 {
        self.turns.iter().map(|t| t.new_bytes).sum::<u64>() / self.turns.len() as u64
    }
    fn objects_median(&self) -> u64 {
        median_u64(self.turns.iter().map(|t| t.new_objects as u64).collect())
    }
    fn checkout_median(&self) -> Duration {
        median_dur(self.checkouts.clone())
    }
    fn checkout_mean(&self) -> Duration {
        mean_dur(&self.checkouts)
    }
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let turns: usize = args.next().map_or(Ok(TURNS), |s| s.parse())?;
    let warmup: usize = args.next().map_or(Ok(WARMUP), |s| s.parse())?;
    if turns == 0 {
        return Err("TURNS must be at least 1".into());
    }

    println!("# snapgraph vs bashkit `Bash::commit`: per-turn workload\n");
    println!("- machine: {}", machine());
    println!("- {}", rustc_version());
    println!("- snapgraph {SNAPGRAPH_VERSION}; bashkit {BASHKIT_VERSION} (crates.io, default features off)");
    println!(
        "- workload: {FILES} files x {FILE_SIZE} B pseudo-random in {DIRS} dirs; \
         {warmup} warm-up turns, then {turns} measured turns of one 4,000 B overwrite + commit; \
         {CHECKOUTS} checkouts of the final commit per tool\n"
    );

    // The files as they stand, kept by the harness to check the checkouts.
    let mut files: Vec<Vec<u8>> = (0..FILES)
        .map(|i| pseudo_random(FILE_SIZE, i as u64))
        .collect();

    let mut s = sg::Side::new(&files)?;
    let mut b = bk::Side::new(&files)?;

    let mut sg_turns = Vec::with_capacity(turns);
    let mut bk_turns = Vec::with_capacity(turns);
    for k in 0..(warmup + turns) as u64 {
        let (idx, data) = edit(k);
        let path = file_path(idx);
        // Alternate which tool goes first, so neither always runs on a cache the
        // other just warmed (or cooled).
        let (ts, tb) = if k % 2 == 0 {
            let ts = s.turn(&path, &data)?;
            (ts, b.turn(&path, &data)?)
        } else {
            let tb = b.turn(&path, &data)?;
            (s.turn(&path, &data)?, tb)
        };
        files[idx] = data;
        if k as usize >= warmup {
            sg_turns.push(ts);
            bk_turns.push(tb);
        }
    }

    // Checkouts, alternating too; verify the first of each fully.
    let mut sg_co = Vec::with_capacity(CHECKOUTS);
    let mut bk_co = Vec::with_capacity(CHECKOUTS);
    for r in 0..CHECKOUTS {
        let (d, ws) = s.checkout()?;
        if r == 0 {
            sg::Side::verify(&ws, &files)?;
        }
        drop(ws);
        sg_co.push(d);
        let (d, bash) = b.checkout()?;
        if r == 0 {
            b.verify(&bash, &files)?;
        }
        drop(bash);
        bk_co.push(d);
    }
    println!("Both checkouts verified: all {FILES} files match the final state.\n");

    let sgs = Summary {
        name: "snapgraph",
        turns: sg_turns,
        checkouts: sg_co,
        first_commit: s.first_commit,
        first_bytes: s.first_bytes,
        store_objects: s.store.len(),
        store_bytes: s.store_bytes(),
    };
    let bks = Summary {
        name: "bashkit",
        turns: bk_turns,
        checkouts: bk_co,
        first_commit: b.first_commit,
        first_bytes: b.first_bytes,
        store_objects: b.store.len(),
        store_bytes: b.store_bytes(),
    };

    println!("## Per turn ({turns} measured turns) and checkout\n");
    println!(
        "| tool | commit median | commit mean | new bytes median | new bytes mean | new objects median | checkout median | checkout mean |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for x in [&sgs, &bks] {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            x.name,
            fmt_dur(x.commit_median()),
            fmt_dur(x.commit_mean()),
            fmt_int(x.bytes_median()),
            fmt_int(x.bytes_mean()),
            x.objects_median(),
            fmt_dur(x.checkout_median()),
            fmt_dur(x.checkout_mean()),
        );
    }

    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    println!("\n## Ratios (bashkit / snapgraph)\n");
    println!("| figure | ratio |");
    println!("|---|---|");
    println!(
        "| commit time, median | **{:.0}x** |",
        ratio(bks.commit_median(), sgs.commit_median())
    );
    println!(
        "| commit time, mean | {:.0}x |",
        ratio(bks.commit_mean(), sgs.commit_mean())
    );
    println!(
        "| new bytes per commit, median | **{:.1}x** |",
        bks.bytes_median() as f64 / sgs.bytes_median() as f64
    );
    println!(
        "| checkout time, median | {:.2}x |",
        ratio(bks.checkout_median(), sgs.checkout_median())
    );

    println!("\n## Breakdown (medians per turn unless said)\n");
    println!("| tool | commit p90 | commit max | options | commit call | store insert | write (not in commit) | new content bytes | new structure bytes |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for x in [&sgs, &bks] {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            x.name,
            fmt_dur(x.commit_quantile(0.9)),
            fmt_dur(x.commit_quantile(1.0)),
            fmt_dur(x.median_of(|t| t.options)),
            fmt_dur(x.median_of(|t| t.commit)),
            fmt_dur(x.median_of(|t| t.insert)),
            fmt_dur(x.median_of(|t| t.write)),
            fmt_int(x.content_median()),
            fmt_int(x.structure_median()),
        );
    }
    println!("\n| tool | first full commit | first commit bytes | store after the run |");
    println!("|---|---|---|---|");
    for x in [&sgs, &bks] {
        println!(
            "| {} | {} | {} | {} objects, {} B |",
            x.name,
            fmt_dur(x.first_commit),
            fmt_int(x.first_bytes),
            fmt_int(x.store_objects as u64),
            fmt_int(x.store_bytes),
        );
    }

    let initial: Vec<Vec<u8>> = (0..FILES)
        .map(|i| pseudo_random(FILE_SIZE, i as u64))
        .collect();
    interpreter_turns(&initial, turns, warmup)?;
    Ok(())
}
