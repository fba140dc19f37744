//! Criterion benchmarks of the snapgraph core, with the hardware ceilings it is
//! compared against measured in the same run.
//!
//! Run with `cargo bench -p snapgraph-benches --bench core`. Byte counts (criterion
//! measures only time) are printed to stderr during setup and, in full, by the
//! `figures` bench target.

mod common;

use std::collections::HashMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use common::{
    pseudo_random, summarize, text_like, BigFile, Store, Turns, BIG_FILE, BIG_PATH, FILE_SIZE,
};
use criterion::{
    criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use fastcdc::v2020::{FastCDC, Normalization};
use snapgraph::{
    BoxError, CheckoutPolicy, CommitOptions, ObjectId, ObjectSource, SnapshotGraph,
    SnapshotOptions, Workspace,
};

/// FastCDC parameters, as in `crates/snapgraph/src/chunk.rs`.
const CDC_MIN: usize = 4 << 10;
const CDC_AVG: usize = 16 << 10;
const CDC_MAX: usize = 64 << 10;
const PIECE: usize = 16 << 10;
const CEILING_BYTES: usize = 64 << 20;

fn cdc(data: &[u8]) -> FastCDC<'_> {
    FastCDC::with_level(data, CDC_MIN, CDC_AVG, CDC_MAX, Normalization::Level1)
}

/// memcpy, BLAKE3, FastCDC and FastCDC + BLAKE3 over 64 MiB of pseudo-random bytes.
fn ceilings(c: &mut Criterion) {
    let data = common::pseudo_random(CEILING_BYTES, 0xCE11);
    let mut dst = vec![0u8; CEILING_BYTES];
    let mut g = c.benchmark_group("ceiling");
    g.throughput(Throughput::Bytes(CEILING_BYTES as u64))
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));

    g.bench_function("memcpy_16KiB_pieces", |b| {
        b.iter(|| {
            for (d, s) in dst.chunks_exact_mut(PIECE).zip(data.chunks_exact(PIECE)) {
                d.copy_from_slice(black_box(s));
            }
            black_box(&mut dst);
        })
    });
    g.bench_function("blake3_16KiB_pieces", |b| {
        b.iter(|| {
            for piece in black_box(&data).chunks(PIECE) {
                black_box(blake3::hash(piece));
            }
        })
    });
    // Objects as small as the 4 KB files of the other groups: BLAKE3 has less
    // parallelism to use per call (a 1 KiB BLAKE3 chunk is its unit of SIMD work).
    g.bench_function("blake3_4000B_pieces", |b| {
        b.iter(|| {
            for piece in black_box(&data).chunks(FILE_SIZE) {
                black_box(blake3::hash(piece));
            }
        })
    });
    g.bench_function("fastcdc_cut_points", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for chunk in cdc(black_box(&data)) {
                n += chunk.length;
            }
            black_box(n)
        })
    });
    g.bench_function("fastcdc_cut_plus_blake3", |b| {
        b.iter(|| {
            for chunk in cdc(black_box(&data)) {
                black_box(blake3::hash(
                    &data[chunk.offset..chunk.offset + chunk.length],
                ));
            }
        })
    });
    // What the library does per chunk when it builds a file's objects: copy the chunk
    // behind a 2-byte header into a fresh Vec, then hash that.
    g.bench_function("fastcdc_cut_copy_blake3", |b| {
        b.iter(|| {
            for chunk in cdc(black_box(&data)) {
                let body = &data[chunk.offset..chunk.offset + chunk.length];
                let mut stored = Vec::with_capacity(body.len() + 2);
                stored.extend_from_slice(&[1, 1]);
                stored.extend_from_slice(body);
                black_box(blake3::hash(&stored));
            }
        })
    });
    g.finish();
}

/// One turn: edit one 4 KB file, commit against the store (`have_in`), insert the new
/// objects. Timed: `write` + `commit` + store insert. Not timed: generating the new
/// content.
fn commit_turn(c: &mut Criterion) {
    let mut g = c.benchmark_group("commit_turn");
    g.sample_size(30)
        .warm_up_time(Duration::from_secs(3))
        .measurement_time(Duration::from_secs(12));
    for n in [2_000usize, 100_000] {
        let mut fixture: Option<Turns> = None;
        g.bench_function(BenchmarkId::new("files", n), |b| {
            let t = fixture.get_or_insert_with(|| {
                let mut t = Turns::new(n, 0);
                eprintln!(
                    "[setup] {n} files: wrote {:?}, first full commit {:?} ({} bytes, {} objects)",
                    t.write_time, t.first_commit_time, t.first_commit.bytes, t.first_commit.objects
                );
                let probe = t.probe(50);
                eprintln!(
                    "[sizes] {}",
                    summarize(&format!("commit_turn/files/{n}"), &probe)
                );
                t
            });
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let (idx, data) = t.next_edit();
                    let start = Instant::now();
                    let e = t.apply(idx, &data);
                    total += start.elapsed();
                    black_box(e);
                }
                total
            })
        });
    }
    g.finish();
}

/// The same turn with all 100,000 files in one directory: how the per-turn cost
/// follows the size of the edited directory.
fn commit_turn_one_dir(c: &mut Criterion) {
    let mut g = c.benchmark_group("commit_turn_one_dir");
    g.sample_size(20)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(10));
    let n = 100_000;
    let mut fixture: Option<Turns> = None;
    g.bench_function(BenchmarkId::new("files", n), |b| {
        let t = fixture.get_or_insert_with(|| {
            let mut t = Turns::with_dirs(n, 1, 0);
            let probe = t.probe(50);
            eprintln!(
                "[sizes] {}",
                summarize(&format!("commit_turn_one_dir/files/{n}"), &probe)
            );
            t
        });
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (idx, data) = t.next_edit();
                let start = Instant::now();
                let e = t.apply(idx, &data);
                total += start.elapsed();
                black_box(e);
            }
            total
        })
    });
    g.finish();
}

/// Checkout of 2,000 files of 4 KB from a `HashMap` store into a fresh workspace.
/// Timed: `Workspace::new` + `checkout`. Not timed: dropping the workspace.
fn checkout(c: &mut Criterion) {
    let t = Turns::new(2_000, 0);
    let (head, store) = (t.head, t.store);
    drop(t.ws);
    let mut g = c.benchmark_group("checkout");
    g.throughput(Throughput::Bytes((2_000 * FILE_SIZE) as u64))
        .sample_size(30)
        .measurement_time(Duration::from_secs(10));
    g.bench_function("files/2000", |b| {
        b.iter_with_large_drop(|| {
            let mut ws = Workspace::new();
            let _ = ws
                .checkout(head, &store, CheckoutPolicy::default())
                .expect("checkout");
            ws
        })
    });
    g.finish();
    drop(store);

    // 1 GiB in 64 files of 16 MiB of random bytes: every chunk is read, re-hashed
    // and copied into place, so compare with the BLAKE3 ceiling over 16 KiB pieces.
    const FILES: usize = 64;
    const SIZE: usize = 16 << 20;
    let mut ws = Workspace::new();
    for i in 0..FILES {
        ws.write(
            &format!("/big/{i:02}.bin"),
            pseudo_random(SIZE, 1_000 + i as u64),
        )
        .expect("write");
    }
    let commit = ws.commit(CommitOptions::new()).expect("commit");
    drop(ws);
    let head = commit.id();
    let store: HashMap<ObjectId, Vec<u8>> = commit
        .into_objects()
        .iter()
        .map(|(id, b)| (*id, b.to_vec()))
        .collect();
    let mut g = c.benchmark_group("checkout_1GiB");
    g.throughput(Throughput::Bytes((FILES * SIZE) as u64))
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(15));
    g.bench_function("random/64_files", |b| {
        b.iter_with_large_drop(|| {
            let mut ws = Workspace::new();
            let _ = ws
                .checkout(head, &store, CheckoutPolicy::default())
                .expect("checkout");
            ws
        })
    });
    g.finish();
}

/// A have-set that claims to hold everything: the commit then emits only itself, so
/// the measurement is chunking, hashing and tree building (what the ceilings do).
struct HoldsAll;

impl ObjectSource for HoldsAll {
    fn get(&self, _id: &ObjectId) -> Result<Option<std::borrow::Cow<'_, [u8]>>, BoxError> {
        Ok(None)
    }
    fn contains(&self, _id: &ObjectId) -> Result<bool, BoxError> {
        Ok(true)
    }
}

/// Ingest of 1 GiB of new data (64 files of 16 MiB), random and text-like, on one
/// thread and on all cores: `hash` emits nothing (compare with the ceilings),
/// `emit` also copies every object out.
fn ingest(c: &mut Criterion) {
    const FILES: usize = 64;
    const SIZE: usize = 16 << 20;
    let mut g = c.benchmark_group("ingest_1GiB");
    g.throughput(Throughput::Bytes((FILES * SIZE) as u64))
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(15));
    let all = Workspace::new().parallelism();
    for kind in ["random", "text"] {
        let mut base = Workspace::new();
        for i in 0..FILES {
            let data = if kind == "random" {
                pseudo_random(SIZE, i as u64 + 1)
            } else {
                text_like(SIZE, i as u64 + 1)
            };
            base.write(&format!("/ingest/{i:02}.bin"), data)
                .expect("write");
        }
        for threads in [1, all] {
            g.bench_function(format!("{kind}/hash/{threads}_threads"), |b| {
                b.iter_batched(
                    || {
                        let mut ws = base.clone();
                        ws.set_parallelism(threads);
                        ws
                    },
                    |mut ws| {
                        let c = ws
                            .commit(CommitOptions::new().have_in(&HoldsAll))
                            .expect("commit");
                        (ws, c)
                    },
                    BatchSize::PerIteration,
                )
            });
        }
        g.bench_function(format!("{kind}/emit/{all}_threads"), |b| {
            b.iter_batched(
                || base.clone(),
                |mut ws| {
                    let c = ws.commit(CommitOptions::new()).expect("commit");
                    (ws, c)
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

/// Packed snapshots of the 2,000-file workspace: pack, and restore into a fresh
/// workspace (plain and zstd).
fn pack(c: &mut Criterion) {
    let t = Turns::new(2_000, 0);
    let ws = t.ws;
    let mut g = c.benchmark_group("pack");
    g.throughput(Throughput::Bytes((2_000 * FILE_SIZE) as u64))
        .sample_size(20)
        .measurement_time(Duration::from_secs(8));
    for compress in [false, true] {
        let name = if compress { "zstd" } else { "plain" };
        let opts = SnapshotOptions {
            compress,
            ..Default::default()
        };
        g.bench_function(format!("snapshot/files_2000/{name}"), |b| {
            b.iter_with_large_drop(|| ws.snapshot_with_options(opts).expect("snapshot"))
        });
        let bytes = ws.snapshot_with_options(opts).expect("snapshot");
        eprintln!("[sizes] pack/files_2000/{name}: {} bytes", bytes.len());
        g.bench_function(format!("restore/files_2000/{name}"), |b| {
            b.iter_with_large_drop(|| Workspace::from_snapshot(&bytes).expect("restore"))
        });
    }
    g.finish();
}

/// A 16-byte edit in a 64 MiB file.
fn big_file_edit(c: &mut Criterion) {
    let mut g = c.benchmark_group("edit16_in_64MiB");
    g.throughput(Throughput::Bytes(BIG_FILE as u64))
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    let mut fixture: Option<BigFile> = None;
    let default_threads = Workspace::new().parallelism();
    eprintln!("[setup] default commit parallelism: {default_threads} thread(s)");
    let setup = |fixture: &mut Option<BigFile>| {
        if fixture.is_none() {
            let mut f = BigFile::new();
            eprintln!(
                "[setup] 64 MiB file: first full commit {:?} ({} bytes, {} objects)",
                f.first_commit_time, f.first_commit.bytes, f.first_commit.objects
            );
            let probe: Vec<_> = (0..10).map(|_| f.probe()).collect();
            eprintln!("[sizes] {}", summarize("edit16_in_64MiB", &probe));
            *fixture = Some(f);
        }
    };
    // Timed: commit (have_in) + store insert. Not timed: editing the caller's buffer,
    // copying it into an Arc<[u8]> and `write_shared`.
    g.bench_function("commit", |b| {
        setup(&mut fixture);
        let Some(f) = fixture.as_mut() else { return };
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                f.edit16();
                let data = f.shared();
                f.ws.write_shared(BIG_PATH, data).expect("write");
                let start = Instant::now();
                black_box(f.commit());
                total += start.elapsed();
            }
            total
        })
    });
    // The same on one thread (`set_parallelism(1)`), comparable with the
    // single-threaded ceilings.
    g.bench_function("commit_1_thread", |b| {
        setup(&mut fixture);
        let Some(f) = fixture.as_mut() else { return };
        f.ws.set_parallelism(1);
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                f.edit16();
                let data = f.shared();
                f.ws.write_shared(BIG_PATH, data).expect("write");
                let start = Instant::now();
                black_box(f.commit());
                total += start.elapsed();
            }
            total
        });
        f.ws.set_parallelism(default_threads);
    });
    // Timed: `write` of the whole 64 MiB (the API has no partial write, so it copies
    // the caller's buffer) + commit + store insert. Not timed: editing the buffer.
    g.bench_function("write_and_commit", |b| {
        setup(&mut fixture);
        let Some(f) = fixture.as_mut() else { return };
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                f.edit16();
                let start = Instant::now();
                f.ws.write(BIG_PATH, &f.buf).expect("write");
                black_box(f.commit());
                total += start.elapsed();
            }
            total
        })
    });
    g.finish();
}

/// diff, plan_checkout and reachable over the 2,000-file workspace.
fn graph(c: &mut Criterion) {
    let mut t = Turns::new(2_000, 0);
    let c0 = t.head;
    t.edit_many(1);
    let c1 = t.head;
    t.edit_many(1_000);
    let c2 = t.head;
    let store: Store = t.store;
    drop(t.ws);
    let d1 = SnapshotGraph::diff(c0, c1, &store).expect("diff");
    let d1000 = SnapshotGraph::diff(c1, c2, &store).expect("diff");
    assert_eq!(d1.files_modified.len(), 1);
    assert_eq!(d1000.files_modified.len(), 1_000);
    let reachable = SnapshotGraph::reachable(c0, &store).expect("reachable");
    eprintln!(
        "[setup] graph: commit {c0} reaches {} objects",
        reachable.len()
    );

    let mut g = c.benchmark_group("graph");
    g.sample_size(30).measurement_time(Duration::from_secs(6));
    g.bench_function("diff/1_change", |b| {
        b.iter(|| SnapshotGraph::diff(black_box(c0), c1, &store).expect("diff"))
    });
    g.bench_function("diff/1000_changes", |b| {
        b.iter(|| SnapshotGraph::diff(black_box(c1), c2, &store).expect("diff"))
    });
    let empty: HashMap<ObjectId, Vec<u8>> = HashMap::new();
    g.bench_function("plan_checkout/empty_store", |b| {
        b.iter(|| SnapshotGraph::plan_checkout(black_box(c0), &empty).expect("plan"))
    });
    g.bench_function("plan_checkout/full_store", |b| {
        b.iter(|| SnapshotGraph::plan_checkout(black_box(c0), &store).expect("plan"))
    });
    // The whole fetch loop a client runs: plan, copy what is missing from the remote
    // store into the local one, repeat until nothing is missing.
    g.bench_function("plan_checkout/fetch_loop_from_empty", |b| {
        b.iter_batched(
            || Store::with_capacity(reachable.len()),
            |mut local| {
                let mut rounds = 0u32;
                loop {
                    let missing = SnapshotGraph::plan_checkout(c0, &local).expect("plan");
                    if missing.is_empty() {
                        break;
                    }
                    for id in missing {
                        local.insert(id, store[&id].clone());
                    }
                    rounds += 1;
                }
                (rounds, local)
            },
            BatchSize::PerIteration,
        )
    });
    g.bench_function("reachable/files_2000", |b| {
        b.iter(|| SnapshotGraph::reachable(black_box(c0), &store).expect("reachable"))
    });
    g.finish();
}

criterion_group!(
    benches,
    ceilings,
    commit_turn,
    commit_turn_one_dir,
    checkout,
    ingest,
    pack,
    big_file_edit,
    graph
);
criterion_main!(benches);
