//! Two-thread throughput against the ceilings, as same-round ratios (issue #21).
//!
//! `cargo bench -p snapgraph-benches --bench two_threads -- [ROUNDS]` (default 15).
//! On 64 MiB of pseudo-random bytes, each round times once, in this order:
//!
//! - the one-thread cut-and-hash ceiling: FastCDC 2020 (4/16/64 KiB) cut points and
//!   `blake3::hash` of each chunk, serially;
//! - ingest on two threads: `Workspace::write` of the file and `commit`
//!   (`set_parallelism(2)`), and the same on one thread (for scale: on a loaded
//!   machine every hand-over between threads waits for a core); then on two threads
//!   with `write_owned` of a `Vec` the caller hands over (a copy of the data made
//!   before the timer starts, as the bytes of the ceiling are in memory already), and
//!   with `write_shared` of bytes already in an `Arc<[u8]>` (neither copies the 64 MiB
//!   into a fresh buffer it must fault in);
//! - the two-thread BLAKE3 ceiling: `blake3::hash` of each chunk, the chunks split in
//!   two runs of about equal bytes, one per thread (again after the checkouts);
//! - checkout on two threads from a `HashMap` (which lends its bytes: one copy);
//! - checkout on two threads from a source that hands each buffer over (`Cow::Owned`,
//!   as a store that decodes what it reads does; the map it drains is cloned before the
//!   timer starts);
//! - `write` + commit and checkout from the `HashMap` again, on two threads, each in a
//!   new workspace given one [`BufferPool`] that lives across the rounds (a caller that
//!   ingests or checks out large files turn after turn): the 64 MiB buffer comes from
//!   the pool, touched in an earlier round, so the copy faults in no fresh page.
//!
//! Besides the times, each row's minor page faults are counted (from
//! `/proc/self/stat`, Linux only): a count the load of a shared machine does not move.
//!
//! Each round's ratios use that round's figures, so the load of a shared machine
//! weighs on ceiling and engine alike; the medians of the per-round ratios are the
//! figures to quote. Drops are outside the timers.
//!
//! Every row starts with cold caches: before each timer starts, a 64 MiB scratch
//! buffer (twice the 32 MiB L3 of the project's machines) is written one byte a cache
//! line, so no row reads bytes the row before it left in the cache (the 2-thread
//! BLAKE3 ceiling used to hash `data` right after the pooled `write` had read it,
//! half of it from the L3, while each checkout reads the store's cold chunks; and
//! `write_owned` took over a copy made just before its timer). The BLAKE3 ceiling is
//! timed twice a round (before and after the checkout rows) and the faster of the
//! two is the round's ceiling: the stricter comparison.

mod common;

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use fastcdc::v2020::{FastCDC, Normalization};
use snapgraph::{
    BoxError, BufferPool, CheckoutPolicy, CommitOptions, ObjectId, ObjectSource, Workspace,
};

const BYTES: usize = 64 << 20;
const PATH: &str = "/big.bin";

/// Drains its map: each read hands the stored buffer over.
struct Owning(RefCell<HashMap<ObjectId, Vec<u8>>>);

impl ObjectSource for Owning {
    fn get(&self, id: &ObjectId) -> Result<Option<Cow<'_, [u8]>>, BoxError> {
        Ok(self.0.borrow_mut().remove(id).map(Cow::Owned))
    }
}

fn cut(data: &[u8]) -> Vec<(usize, usize)> {
    FastCDC::with_level(data, 4 << 10, 16 << 10, 64 << 10, Normalization::Level1)
        .map(|c| (c.offset, c.offset + c.length))
        .collect()
}

/// The process's minor page faults so far (0 where `/proc/self/stat` is missing).
fn minor_faults() -> u64 {
    // Field 10 (`minflt`), counting from the first after the command's closing
    // parenthesis as field 3.
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let rest = &s[s.rfind(')')? + 1..];
            rest.split_whitespace().nth(7)?.parse().ok()
        })
        .unwrap_or(0)
}

/// Minor page faults of each timed row, summed over the rounds.
static FAULTS: std::sync::Mutex<Vec<(&'static str, u64)>> = std::sync::Mutex::new(Vec::new());

/// Bytes written before each row to evict the caches: twice the L3.
const SCRUB_BYTES: usize = 64 << 20;

/// Writes one byte a cache line of a scratch buffer of [`SCRUB_BYTES`], so that the
/// caches hold nothing of the data the next row reads.
fn scrub() {
    static SCRATCH: std::sync::Mutex<Vec<u8>> = std::sync::Mutex::new(Vec::new());
    let mut scratch = SCRATCH.lock().expect("scratch");
    if scratch.is_empty() {
        scratch.resize(SCRUB_BYTES, 0);
    }
    for b in scratch.iter_mut().step_by(64) {
        *b = b.wrapping_add(1);
    }
    black_box(&mut scratch[..]);
}

/// Times `f` (the row `row`) from cold caches, dropping what it returns after the
/// timer stops, and adds the page faults it took to the row's count.
fn timed<T>(row: &'static str, f: impl FnOnce() -> T) -> Duration {
    scrub();
    let faults = minor_faults();
    let start = Instant::now();
    let out = black_box(f());
    let elapsed = start.elapsed();
    let faults = minor_faults() - faults;
    drop(out);
    let mut all = FAULTS.lock().expect("fault counts");
    match all.iter_mut().find(|(r, _)| *r == row) {
        Some((_, n)) => *n += faults,
        None => all.push((row, faults)),
    }
    elapsed
}

fn checkout(id: ObjectId, source: &dyn ObjectSource, pool: Option<&BufferPool>) -> Workspace {
    let mut ws = Workspace::new();
    ws.set_parallelism(2);
    ws.set_buffer_pool(pool.cloned());
    let restore = ws
        .checkout(id, source, CheckoutPolicy::default())
        .expect("checkout");
    black_box(&restore);
    ws
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; the first number given is the round count.
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(15);
    let data = common::pseudo_random(BYTES, 0x2_7EAD);
    let cuts = cut(&data);
    // Two runs of chunks of about equal bytes: the ceiling's split.
    let half = cuts.partition_point(|&(_, end)| end <= BYTES / 2);
    let mut ws = Workspace::new();
    ws.write(PATH, &data).expect("write");
    let c = ws.commit(CommitOptions::new()).expect("commit");
    drop(ws);
    let id = c.id();
    let store: HashMap<ObjectId, Vec<u8>> = c.into_objects().into_iter().collect();
    let mb = BYTES as f64 / (1 << 20) as f64;
    let shared: std::sync::Arc<[u8]> = data.as_slice().into();
    // One pool across the rounds, as a caller keeps it across turns; warmed by one
    // ingest and one checkout (both buffers back in the pool once dropped).
    let pool = BufferPool::new(256 << 20);
    let pooled_ingest = || {
        let mut ws = Workspace::new();
        ws.set_parallelism(2);
        ws.set_buffer_pool(Some(pool.clone()));
        ws.write(PATH, &data).expect("write");
        let c = ws.commit(CommitOptions::new()).expect("commit");
        (ws, c)
    };
    drop((pooled_ingest(), checkout(id, &store, Some(&pool))));

    println!(
        "| round | cut+hash ceiling, 1 thread | ingest, 1 thread | ingest, 2 threads | ratio | ingest (owned), 2 threads | ratio | ingest (shared), 2 threads | ratio | ingest (pool), 2 threads | ratio | BLAKE3 ceiling, 2 threads | checkout (map), 2 threads | vs ceiling | checkout (owned), 2 threads | vs ceiling | checkout (map, pool), 2 threads | vs ceiling |"
    );
    println!(
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let (mut ingest_ratio, mut shared_ratio) = (Vec::new(), Vec::new());
    let mut owned_ingest_ratio = Vec::new();
    let (mut map_ratio, mut owned_ratio) = (Vec::new(), Vec::new());
    let (mut pooled_ingest_ratio, mut pooled_map_ratio) = (Vec::new(), Vec::new());
    // The slower of a round's two BLAKE3 ceilings over the faster.
    let mut b3_spread = Vec::new();
    let s = |d: Duration| d.as_secs_f64();
    for round in 1..=rounds {
        let ceiling1 = timed("cut+hash ceiling, 1 thread", || {
            for (start, end) in cut(&data) {
                black_box(blake3::hash(&data[start..end]));
            }
        });
        let ingest_on = |threads, row: &'static str| {
            timed(row, || {
                let mut ws = Workspace::new();
                ws.set_parallelism(threads);
                ws.write(PATH, &data).expect("write");
                let c = ws.commit(CommitOptions::new()).expect("commit");
                (ws, c)
            })
        };
        let ingest = ingest_on(2, "ingest, 2 threads");
        let ingest1 = ingest_on(1, "ingest, 1 thread");
        let handed = data.clone();
        let ingest_owned = timed("ingest (owned), 2 threads", move || {
            let mut ws = Workspace::new();
            ws.set_parallelism(2);
            ws.write_owned(PATH, handed).expect("write");
            let c = ws.commit(CommitOptions::new()).expect("commit");
            (ws, c)
        });
        let ingest_shared = timed("ingest (shared), 2 threads", || {
            let mut ws = Workspace::new();
            ws.set_parallelism(2);
            ws.write_shared(PATH, shared.clone()).expect("write");
            let c = ws.commit(CommitOptions::new()).expect("commit");
            (ws, c)
        });
        let ingest_pooled = timed("ingest (pool), 2 threads", pooled_ingest);
        let hash2 = || {
            std::thread::scope(|scope| {
                let (a, b) = cuts.split_at(half);
                let hash = |part: &[(usize, usize)]| {
                    for &(start, end) in part {
                        black_box(blake3::hash(&data[start..end]));
                    }
                };
                let other = scope.spawn(move || hash(b));
                hash(a);
                other.join().expect("hashing thread");
            })
        };
        let b3_first = timed("BLAKE3 ceiling, 2 threads", hash2);
        let map = timed("checkout (map), 2 threads", || checkout(id, &store, None));
        let owning = Owning(RefCell::new(store.clone()));
        let owned = timed("checkout (owned), 2 threads", || {
            checkout(id, &owning, None)
        });
        let map_pooled = timed("checkout (map, pool), 2 threads", || {
            checkout(id, &store, Some(&pool))
        });
        let b3_second = timed("BLAKE3 ceiling, 2 threads", hash2);
        let b3 = b3_first.min(b3_second);
        b3_spread.push(s(b3_first.max(b3_second)) / s(b3));
        ingest_ratio.push(s(ceiling1) / s(ingest));
        shared_ratio.push(s(ceiling1) / s(ingest_shared));
        owned_ingest_ratio.push(s(ceiling1) / s(ingest_owned));
        map_ratio.push(s(b3) / s(map));
        owned_ratio.push(s(b3) / s(owned));
        pooled_ingest_ratio.push(s(ceiling1) / s(ingest_pooled));
        pooled_map_ratio.push(s(b3) / s(map_pooled));
        let ms = |d: Duration| format!("{:.1} ms ({:.0} MiB/s)", s(d) * 1e3, mb / s(d));
        println!(
            "| {round} | {} | {} | {} | {:.2}x | {} | {:.2}x | {} | {:.2}x | {} | {:.2}x | {} | {} | {:.0}% | {} | {:.0}% | {} | {:.0}% |",
            ms(ceiling1),
            ms(ingest1),
            ms(ingest),
            s(ceiling1) / s(ingest),
            ms(ingest_owned),
            s(ceiling1) / s(ingest_owned),
            ms(ingest_shared),
            s(ceiling1) / s(ingest_shared),
            ms(ingest_pooled),
            s(ceiling1) / s(ingest_pooled),
            ms(b3),
            ms(map),
            100.0 * s(b3) / s(map),
            ms(owned),
            100.0 * s(b3) / s(owned),
            ms(map_pooled),
            100.0 * s(b3) / s(map_pooled),
        );
    }
    println!(
        "median of {rounds} rounds: ingest on 2 threads {:.2}x ({:.2}x owned, {:.2}x shared, \
         {:.2}x with a pool) the 1-thread cut+hash ceiling; checkout on 2 threads {:.0}% (map), \
         {:.0}% (owned) and {:.0}% (map, with a pool) of the 2-thread BLAKE3 ceiling",
        median(ingest_ratio),
        median(owned_ingest_ratio),
        median(shared_ratio),
        median(pooled_ingest_ratio),
        100.0 * median(map_ratio),
        100.0 * median(owned_ratio),
        100.0 * median(pooled_map_ratio),
    );
    println!(
        "the 2-thread BLAKE3 ceiling's two runs a round: the slower {:.2}x the faster (median; \
         the faster is the round's ceiling)",
        median(b3_spread)
    );
    println!("minor page faults per round (mean of {rounds}):");
    for (row, faults) in FAULTS.lock().expect("fault counts").iter() {
        println!("- {row}: {}", faults / rounds as u64);
    }
}
