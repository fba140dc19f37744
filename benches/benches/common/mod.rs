//! Fixtures shared by the bench targets: deterministic data and prepared workspaces.
#![allow(dead_code)] // each bench target uses a different subset

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::borrow::Cow;
use std::cell::Cell;

use snapgraph::{BoxError, Commit, CommitOptions, ObjectId, ObjectSource, Workspace};

/// The store every bench persists into.
pub type Store = HashMap<ObjectId, Vec<u8>>;

/// Size of each small file (4 KB, below the 4 KiB FastCDC minimum: one chunk per file).
pub const FILE_SIZE: usize = 4_000;
/// Directories the small files are spread over.
pub const DIRS: usize = 20;
/// Size of the large file of the 16-byte-edit bench.
pub const BIG_FILE: usize = 64 << 20;

/// splitmix64 of `seed`: turns consecutive seeds into unrelated xorshift states.
fn mix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) | 1
}

/// Fills `buf` with xorshift64 output seeded from `seed`.
pub fn fill(buf: &mut [u8], seed: u64) {
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
pub fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut v = vec![0u8; len];
    fill(&mut v, seed);
    v
}

/// `len` deterministic text-like bytes: words of a small vocabulary, chosen by
/// xorshift64 (compressible, and with natural repeats, unlike `pseudo_random`).
pub fn text_like(len: usize, seed: u64) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "the",
        "workspace",
        "commit",
        "of",
        "a",
        "tree",
        "file",
        "and",
        "to",
        "history",
        "agent",
        "turn",
        "restore",
        "fn",
        "let",
        "mut",
        "return",
        "value",
        "error",
        "self",
        "\n",
        "    ",
        "{",
        "}",
        "(",
        ")",
        ";",
        "=",
        "if",
        "else",
        "match",
        "Some",
    ];
    let mut s = mix(seed);
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        out.extend_from_slice(WORDS[(s % WORDS.len() as u64) as usize].as_bytes());
        out.push(b' ');
    }
    out.truncate(len);
    out
}

/// Path of small file `i`: 20 directories, files dealt round-robin.
pub fn file_path(i: usize) -> String {
    file_path_in(i, DIRS)
}

/// Path of small file `i` when the files are dealt over `dirs` directories.
pub fn file_path_in(i: usize, dirs: usize) -> String {
    format!("/d{:04}/f{:06}.bin", i % dirs, i)
}

/// What one commit emitted.
#[derive(Debug, Clone, Copy)]
pub struct Emitted {
    /// `Commit::stored_bytes`.
    pub bytes: u64,
    /// `Commit::object_count`.
    pub objects: usize,
    /// Of `bytes`, those of chunk objects (file content).
    pub chunk_bytes: u64,
    /// Questions the commit asked the `have_in` store (0 when not counted).
    pub lookups: u64,
}

/// A store wrapper counting the questions a commit asks it.
pub struct Counting<'a> {
    pub inner: &'a Store,
    pub asked: Cell<u64>,
}

impl<'a> Counting<'a> {
    pub fn new(inner: &'a Store) -> Self {
        Self {
            inner,
            asked: Cell::new(0),
        }
    }
}

impl ObjectSource for Counting<'_> {
    fn get(&self, id: &ObjectId) -> Result<Option<Cow<'_, [u8]>>, BoxError> {
        self.asked.set(self.asked.get() + 1);
        ObjectSource::get(self.inner, id)
    }
    fn contains(&self, id: &ObjectId) -> Result<bool, BoxError> {
        self.asked.set(self.asked.get() + 1);
        ObjectSource::contains(self.inner, id)
    }
}

impl Emitted {
    pub fn of(commit: &Commit) -> Self {
        Self {
            bytes: commit.stored_bytes(),
            objects: commit.object_count(),
            chunk_bytes: commit
                .objects()
                .iter()
                .filter(|(_, b)| b.first() == Some(&1))
                .map(|(_, b)| b.len() as u64)
                .sum(),
            lookups: 0,
        }
    }
}

/// A workspace of `n` 4 KB files committed into a `HashMap` store, edited turn by turn.
pub struct Turns {
    pub ws: Workspace,
    pub store: Store,
    pub head: ObjectId,
    pub paths: Vec<String>,
    /// Edits made so far; picks the next file and the seed of its new content.
    pub edits: u64,
    /// Wall time of writing all files and of the first full commit (single runs).
    pub write_time: Duration,
    pub first_commit_time: Duration,
    pub first_commit: Emitted,
}

impl Turns {
    /// Writes `n` files, commits them all, and stores the objects. `reserve` extra
    /// store slots are allocated up front so that store growth during a measurement
    /// does not rehash the map.
    pub fn new(n: usize, reserve: usize) -> Self {
        Self::with_dirs(n, DIRS, reserve)
    }

    /// Like [`new`](Self::new), the files dealt over `dirs` directories.
    pub fn with_dirs(n: usize, dirs: usize, reserve: usize) -> Self {
        let paths: Vec<String> = (0..n).map(|i| file_path_in(i, dirs)).collect();
        let mut ws = Workspace::new();
        let mut buf = vec![0u8; FILE_SIZE];
        let t = Instant::now();
        for (i, p) in paths.iter().enumerate() {
            fill(&mut buf, i as u64);
            ws.write(p, &buf).expect("write");
        }
        let write_time = t.elapsed();
        let t = Instant::now();
        let commit = ws.commit(CommitOptions::new()).expect("first commit");
        let first_commit_time = t.elapsed();
        let first_commit = Emitted::of(&commit);
        let head = commit.id();
        let mut store = Store::with_capacity(commit.object_count() + reserve);
        store.extend(commit.into_objects());
        Self {
            ws,
            store,
            head,
            paths,
            edits: 0,
            write_time,
            first_commit_time,
            first_commit,
        }
    }

    /// The next edit: which file, and its new content (never seen before). Not part
    /// of any measurement.
    pub fn next_edit(&mut self) -> (usize, Vec<u8>) {
        let idx = (self.edits % self.paths.len() as u64) as usize;
        let data = pseudo_random(FILE_SIZE, (1 << 40) + self.edits);
        self.edits += 1;
        (idx, data)
    }

    /// One turn: write the file, commit with the store as `have_in`, insert the new
    /// objects into the store.
    pub fn apply(&mut self, idx: usize, data: &[u8]) -> Emitted {
        self.ws.write(&self.paths[idx], data).expect("write");
        self.commit()
    }

    /// Commits what was written since the last commit, against the store.
    pub fn commit(&mut self) -> Emitted {
        let commit = self
            .ws
            .commit(CommitOptions::new().parent(self.head).have_in(&self.store))
            .expect("commit");
        let e = Emitted::of(&commit);
        self.head = commit.id();
        self.store.extend(commit.into_objects());
        e
    }

    /// Like [`commit`](Self::commit), counting the store lookups (not for timing).
    pub fn commit_counted(&mut self) -> Emitted {
        let counting = Counting::new(&self.store);
        let commit = self
            .ws
            .commit(CommitOptions::new().parent(self.head).have_in(&counting))
            .expect("commit");
        let e = Emitted {
            lookups: counting.asked.get(),
            ..Emitted::of(&commit)
        };
        self.head = commit.id();
        self.store.extend(commit.into_objects());
        e
    }

    /// Edits `k` distinct files (the next ones in turn) and commits them at once.
    pub fn edit_many(&mut self, k: usize) -> Emitted {
        assert!(k <= self.paths.len());
        for _ in 0..k {
            let (idx, data) = self.next_edit();
            self.ws.write(&self.paths[idx], &data).expect("write");
        }
        self.commit()
    }

    /// Runs `k` turns (store lookups counted) and returns what each emitted.
    pub fn probe(&mut self, k: usize) -> Vec<Emitted> {
        (0..k)
            .map(|_| {
                let (idx, data) = self.next_edit();
                self.ws.write(&self.paths[idx], &data).expect("write");
                self.commit_counted()
            })
            .collect()
    }
}

/// One 64 MiB file committed into a store, edited 16 bytes at a time.
pub struct BigFile {
    pub ws: Workspace,
    pub store: Store,
    pub head: ObjectId,
    /// The caller's copy of the file, edited in place.
    pub buf: Vec<u8>,
    pub edits: u64,
    pub first_commit_time: Duration,
    pub first_commit: Emitted,
}

pub const BIG_PATH: &str = "/data/big.bin";

impl BigFile {
    pub fn new() -> Self {
        let buf = pseudo_random(BIG_FILE, 0xB16);
        let mut ws = Workspace::new();
        ws.write(BIG_PATH, &buf).expect("write");
        let t = Instant::now();
        let commit = ws.commit(CommitOptions::new()).expect("first commit");
        let first_commit_time = t.elapsed();
        let first_commit = Emitted::of(&commit);
        let head = commit.id();
        let mut store = Store::with_capacity(commit.object_count() + 4096);
        store.extend(commit.into_objects());
        Self {
            ws,
            store,
            head,
            buf,
            edits: 0,
            first_commit_time,
            first_commit,
        }
    }

    /// Overwrites 16 bytes of the caller's copy at a different offset each time.
    pub fn edit16(&mut self) {
        let offset = (self.edits.wrapping_mul(7_654_321_019).wrapping_add(12_345)
            % (BIG_FILE as u64 - 16)) as usize;
        fill(&mut self.buf[offset..offset + 16], (1 << 41) + self.edits);
        self.edits += 1;
    }

    /// The caller's copy as shared bytes (a 64 MiB copy).
    pub fn shared(&self) -> Arc<[u8]> {
        Arc::from(&self.buf[..])
    }

    /// Commits with the store as `have_in` and inserts the new objects.
    pub fn commit(&mut self) -> Emitted {
        let commit = self
            .ws
            .commit(CommitOptions::new().parent(self.head).have_in(&self.store))
            .expect("commit");
        let e = Emitted::of(&commit);
        self.head = commit.id();
        self.store.extend(commit.into_objects());
        e
    }

    /// One complete edit outside any measurement (store lookups counted); returns
    /// what the commit emitted.
    pub fn probe(&mut self) -> Emitted {
        self.edit16();
        let data = self.shared();
        self.ws.write_shared(BIG_PATH, data).expect("write");
        let counting = Counting::new(&self.store);
        let commit = self
            .ws
            .commit(CommitOptions::new().parent(self.head).have_in(&counting))
            .expect("commit");
        let e = Emitted {
            lookups: counting.asked.get(),
            ..Emitted::of(&commit)
        };
        self.head = commit.id();
        self.store.extend(commit.into_objects());
        e
    }
}

impl Default for BigFile {
    fn default() -> Self {
        Self::new()
    }
}

/// min / median / max / mean of a list of emitted figures.
pub fn summarize(label: &str, e: &[Emitted]) -> String {
    let mut b: Vec<u64> = e.iter().map(|x| x.bytes).collect();
    let mut m: Vec<u64> = e.iter().map(|x| x.bytes - x.chunk_bytes).collect();
    let mut l: Vec<u64> = e.iter().map(|x| x.lookups).collect();
    l.sort_unstable();
    m.sort_unstable();
    let mean_m = m.iter().sum::<u64>() as f64 / m.len() as f64;
    let mut o: Vec<usize> = e.iter().map(|x| x.objects).collect();
    b.sort_unstable();
    o.sort_unstable();
    let mean_b = b.iter().sum::<u64>() as f64 / b.len() as f64;
    let mean_o = o.iter().sum::<usize>() as f64 / o.len() as f64;
    format!(
        "{label}: {} commits; new bytes min {} / median {} / max {} / mean {:.0}; \
         new objects min {} / median {} / max {} / mean {:.2}; \
         of the bytes, non-chunk (trees, manifests, commit) min {} / median {} / max {} / mean {:.0}; \
         have_in store lookups min {} / median {} / max {}",
        e.len(),
        b[0],
        b[b.len() / 2],
        b[b.len() - 1],
        mean_b,
        o[0],
        o[o.len() / 2],
        o[o.len() - 1],
        mean_o,
        m[0],
        m[m.len() / 2],
        m[m.len() - 1],
        mean_m,
        l[0],
        l[l.len() / 2],
        l[l.len() - 1]
    )
}
