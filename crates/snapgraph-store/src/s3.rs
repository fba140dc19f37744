//! An S3-compatible object store: objects in bounded packs, each carrying its index
//! (layout 3; layout 2 keeps an index object beside each pack), refs in the bucket by
//! conditional writes (or in another store, through [`Paired`](crate::Paired)).
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Objects and refs in the bucket (credentials from the AWS environment variables
//! // or ~/.aws/credentials; TLS unless the endpoint says http://):
//! let store = snapgraph_store::open("s3://my-bucket/histories/a?region=eu-west-1")?;
//! // Objects in the bucket, refs in PostgreSQL (the `refs` value percent-encoded):
//! let paired = snapgraph_store::open(
//!     "s3://my-bucket/a?endpoint=https://s3.example.net&refs=postgres%3A%2F%2Fu%40db%2Fh",
//! )?;
//! # Ok(()) }
//! ```
//!
//! # Layouts (docs/FORMAT.md section 12, "S3 layout" and "S3 layout 3")
//!
//! Every key is under `PREFIX/` (no prefix: the bucket's root). A bucket keeps the
//! layout its `layout` marker names, written by its first client
//! ([`S3Options::layout`]: 3 by default) and checked on open; this version reads and
//! writes both.
//!
//! | key | what |
//! |---|---|
//! | `layout` | `snapgraph-s3 3\n` (or `2`): the layout version |
//! | `packs/HEX.N.pack` | layout 3: a pack: a header with a nonce, the objects as the codec keeps them at rest, then their index (every object's id, offset and length, sorted by id) in its last `N` bytes; `HEX` is BLAKE3 of what precedes the index |
//! | `packs/HEX.pack` | layout 2: a pack: a header, then the objects; `HEX` is BLAKE3 of the whole pack |
//! | `meta/HEX.SUM.idx` | layout 2: the index of pack `HEX`; `SUM` names the index's own checksum |
//! | `packs/SUM.del` | layout 3: a tombstone: (pack, id) pairs deleted, in packs not yet rewritten or removed |
//! | `meta/SUM.del` | layout 2: a tombstone: (pack, id) pairs deleted but not yet compacted away |
//! | `refs` | every ref and the reflog, one object changed by compare-and-swap |
//! | `gc-epoch` | rewritten by every deletion, so cached indexes are re-read after one |
//!
//! **Layout 3.** A pack and its index are one object, written by one PUT: a commit's
//! objects cost one request per 64 MiB, and a crash leaves nothing unindexed. A client
//! finds packs and tombstones by listing `packs/` and reads each new pack's index with one
//! suffix-range GET (`Range: bytes=-N`, `N` from the key), as layout 2 reads each new
//! index object with one GET. Since an index cannot change without its pack, a
//! deletion that leaves a pack above [`S3Options::repack_below`] keeps a tombstone
//! naming the pack's dead entries until a later deletion repacks or empties it (one
//! tombstone for all such packs, rewritten by each deletion); the header's nonce
//! makes every pack distinct, so a tombstone never hides a later write of the same
//! records.
//!
//! **Layout 2.** A pack is visible once its index is: [`ObjectStore::put_many`] writes
//! the pack, then its index, so a crash leaves at worst an unindexed pack (bytes,
//! never a dangling entry). Packs and indexes are immutable; a deletion writes a new
//! index or a new pack and removes the old one. An unindexed pack left by a writer
//! that died is removed by a collection's sweep once older than
//! [`S3Options::orphan_grace`] ([`ObjectStore::remove_orphans`]).
//!
//! # Costs
//!
//! - **Commit:** one `put_many` is one PUT per 64 MiB in layout 3 (a pack carrying its
//!   index), two in layout 2 (a pack, its index object); packs are bounded by
//!   [`S3Options::pack_limit`]. `has_many` answers from the
//!   cached indexes. A writer's lease is followed by the
//!   [fence](ObjectStore::fence) (see below): no request when no collection ran since
//!   this client's last fence, else one, a HEAD of `gc-epoch`, or a LIST of the
//!   indexes when the last listing is older than [`S3Options::refresh_after`] (then
//!   objects other clients wrote are found, not written twice). Without a fence,
//!   `has_many` lists when it would answer "absent" from a listing older than that,
//!   and costs a HEAD when it would answer "present". The store
//!   keeps no deltas ([`ObjectStore::keeps_deltas`] is false), so
//!   [`Repo`](crate::Repo) reads no parent trees for delta hints. A per-turn commit
//!   through [`Repo`](crate::Repo) in layout 3 with refs in the bucket is three PUTs:
//!   the `refs` object taking the lease, the pack, the `refs` object publishing (see
//!   "Refs in the bucket" below for why no GET and no HEAD are needed); with refs in
//!   PostgreSQL it is one S3 request, the pack (the fence needs none while no
//!   collection ran: "A fence without a request" below). Layout 2 adds the index
//!   object's PUT to each (four and two).
//! - **Checkout:** `get_many` groups ids by pack and fetches all ranges of one call at
//!   once (concurrent ranged GETs, adjacent ranges merged): one round trip per call,
//!   plus two on a store's first call (LIST with the epoch's HEAD, then the new
//!   indexes). The core announces what it will read
//!   ([`ObjectStore::will_read`]: the whole walk's content once the trees are read,
//!   a large file's chunks once its manifest is), and the store then starts a
//!   *prefetch*: ranged GETs of at most 4 MiB over the announced records, in the
//!   announced order, sent by a task with at most [`S3Options::prefetch_bytes`] in
//!   flight and each answer handed over through a one-slot channel (so a GET is sent
//!   only once the consumer took an earlier one's bytes: the buffer is bounded,
//!   never the file). The checkout's windows (`get_many` calls of 64 chunks, or
//!   1,024 content objects) take their records from it as they arrive. So a
//!   checkout costs the graph's depth (commit, tree levels, manifest levels,
//!   chunks) plus two round trips, a 1 GiB file included, with more requests than
//!   round trips. An announced id asked far out of order (past the buffer), a failed
//!   GET, or a pack gone (a repack) drops the prefetch: those ids are read as if
//!   never announced, and errors are reported by that read.
//!
//! **A round trip** ([`S3Requests::round_trips`]) is one wave of requests: a set of
//! requests each of which is sent without waiting for the answer of another request
//! of the same operation. Each batch the store sends and waits for together is one
//! (a `get_many`'s ranged GETs, a LIST with the epoch's HEAD); a prefetch is one,
//! however many GETs it sends and however the buffer paces them, because every one
//! of its requests is known when it starts and none waits for the contents of an
//! answer (only for room in the buffer). Latency is paid once per wave; the time a
//! wave takes beyond that is its bytes over the bandwidth.
//! - **GC:** `delete_many` writes one tombstone (all ids of the call hidden at once),
//!   then compacts each pack it touched: a pack whose live bytes fall below
//!   [`S3Options::repack_below`] of its size is rewritten with only its live objects;
//!   otherwise, in layout 2, only its index is rewritten, and in layout 3 the pack
//!   stays and the tombstone left at the end names its dead entries (the dead bytes
//!   stay until it falls below).
//!
//! # Consistency
//!
//! The store relies on what S3 (since December 2020) and S3-compatible services
//! promise: strong read-after-write consistency for PUT, DELETE and LIST. On that:
//!
//! - **Objects.** `has_many` may answer "absent" from a stale cache (the object is
//!   then written twice, harmlessly), but answers "present" only from a cache that
//!   has seen the latest `gc-epoch`: every `delete_many` rewrites it before and after
//!   deleting. Deletions happen only during a GC sweep, when no writer holds a lease
//!   ([`mod@crate::gc`]), and a writer checks its closure under a lease taken after the
//!   sweep ended, so its HEAD sees the last epoch and its cache is re-read.
//!
//!   **One epoch read per lease is enough.** A writer takes its lease (at time A),
//!   then fences the store ([`ObjectStore::fence`]: a HEAD of `gc-epoch` after A,
//!   re-listing if it moved, or a fresh listing: one made after A shows every
//!   deletion before A done, since a deletion's tombstone and index rewrites all
//!   happen inside its sweep), then asks `has_many` and publishes, releasing the lease
//!   (at R). A sweep deletes only while no lease is held, so every deletion D is
//!   before A or after R. One before A: the sweep that made it ended before A (a
//!   lease cannot be created while the sweep marker exists, and the marker goes
//!   after the deletions and the epoch's second rewrite), so the fence's HEAD, after
//!   A, sees its epoch and re-reads the indexes. One after R cannot matter to this
//!   commit. A sweep that begins inside [A, R] waits for the lease (or gives up,
//!   deleting nothing) and makes the writer's guarded publish fail, so the writer
//!   starts over under a new lease and a new fence. Hence the `has_many` calls
//!   between the fence and R answer "present" from the fenced cache without a HEAD
//!   each. The fence is trusted for `refresh_after` at most (a long commit pays a
//!   HEAD again; a caller that holds no lease, which has no protection from a
//!   concurrent collector anyway, sees deletions at most that late). A time stamp
//!   alone could not replace the fence: a cache checked shortly *before* A may
//!   predate a sweep that ended just before A. A reader
//!   whose cached index names a pack a repack removed gets 404, re-reads the indexes
//!   and retries; its `get_many` may still return an unreachable object's verified
//!   bytes from a stale cache until the pack itself is gone.
//! - **Refs in the bucket** (`S3Store` as a [`RefStore`]): all refs and the reflog
//!   live in one object, `refs`; an update reads it (or uses the copy of its last
//!   write), applies the batch and writes it back with `If-Match: ETAG` (or
//!   `If-None-Match: *` when it does not exist yet): a compare-and-swap of the whole
//!   table, so a batch of updates is atomic. A lost conditional write is retried
//!   after a fresh read; a write whose reply was lost is recognised by the random
//!   nonce it carries. This needs a server whose conditional writes are atomic: AWS
//!   S3 (since 2024), MinIO, Cloudflare R2, Ceph's radosgw. **`s3s-fs` 0.14 (the
//!   test server) checks the condition and then writes without a lock**, so two
//!   racing writers can both succeed there: its tests cover refs in the bucket one
//!   writer at a time, and the contention tests run on S3 objects paired with
//!   PostgreSQL refs (`SNAPGRAPH_S3_ATOMIC_CAS=1` runs them on refs in the bucket too,
//!   against a server that is atomic). The reflog grows the `refs` object by one
//!   entry per logged move (leases are not logged).
//!
//!   **A turn without reads.** [`RefStore::get_ref_for_update`] answers from the copy
//!   of `refs` this client last read or wrote: the lease protocol reads the
//!   collection token that way, and [`Repo::commit`](crate::Repo::commit) the branch
//!   tip (it asks [`RefStore::get_ref`], one GET, when the copy disagrees with the
//!   workspace). Both go into a guarded update whose `If-Match` is the copy's ETag:
//!   if anyone wrote `refs` since, the PUT fails with 412, the update re-reads and
//!   decides on the bucket's `refs`, so a stale copy costs a retry, never a wrong
//!   update.
//!
//!   **A fence without a request** (refs in the bucket or elsewhere).
//!   [`Repo`](crate::Repo) and [`sync`](crate::sync()) fence with
//!   [`ObjectStore::fence_leased`], passing the collection token their lease was
//!   granted under ([`crate::gc::Lease::token`]); the fence needs no request when it
//!   is the token of the lease under which this client last fenced with a request
//!   (that fence at time F was under a lease taken at A' <= F; this lease is taken
//!   at A). Every sweep changes the token when it begins and again when it ends,
//!   tokens never repeat, and a lease is only granted, atomically with the check of
//!   its token, while there is no sweep marker: so with the same token at A' and A,
//!   no sweep began in between and none was running at A', and deletions happen only
//!   inside sweeps. The cache was current at F, nothing was deleted in [F, A], so it
//!   is current at A. Any other case (another token: a collection ran; a fence
//!   without a token) fences with a request as described above.
//! - **Refs elsewhere** (`s3://…?refs=postgres://…`): the other store's guarantees
//!   (a PostgreSQL transaction); objects are durable when `put_many` returns, and refs
//!   move only afterwards ([`Paired`](crate::Paired)).
//!
//! # Client
//!
//! [`object_store`] (Apache Arrow's, used by DataFusion, delta-rs, InfluxDB) was
//! chosen over `rust-s3` and `aws-sdk-s3`: it has conditional puts (`PutMode::Create`
//! and `PutMode::Update` on the ETag) as a first-class API, ranged GETs with range
//! coalescing (`get_ranges`), retries with backoff and SigV4 signing against any
//! endpoint, with a small dependency tree (reqwest and rustls, crypto from ring as the
//! PostgreSQL TLS already uses). `aws-sdk-s3` is the official SDK but builds a large
//! generated tree (several minutes on CI's two cores) for the five calls used here;
//! `rust-s3` has no typed precondition errors and needs headers set by hand for
//! conditional writes. `object_store` does not read `~/.aws/credentials` or
//! `~/.aws/config`, so this module does (the profile of `AWS_PROFILE`, or `default`).

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use hashbrown::{HashMap, HashSet};
use object_store::aws::{AmazonS3, AmazonS3Builder, S3ConditionalPut};
use object_store::path::Path;
use object_store::{
    ObjectStore as _, ObjectStoreExt as _, PutMode, PutOptions, PutPayload, UpdateVersion,
};
use snapgraph::ObjectId;

use crate::codec::{self, Compression};
use crate::error::StoreError;
use crate::refs::{apply_updates, check_batch, logged};
use crate::store::{validate_ref_name, ObjectStore, RefStore, RefUpdate, ReflogEntry};

/// The layout marker a new bucket gets ([`S3Options::layout`] 3, the default): each
/// pack carries its index.
pub const LAYOUT: &[u8] = b"snapgraph-s3 3\n";
/// The marker of layout 2 (an index object beside each pack): read, and written to
/// buckets created with [`S3Options::layout`] 2.
pub const LAYOUT_2: &[u8] = b"snapgraph-s3 2\n";
const PACK_MAGIC: &[u8; 4] = b"SNPK";
const INDEX_MAGIC: &[u8; 4] = b"SNIX";
const TOMB_MAGIC: &[u8; 4] = b"SNTB";
const REFS_MAGIC: &[u8; 4] = b"SNRF";
/// Version byte of index, tombstone and `refs` objects (both layouts) and of a layout-2
/// pack's header.
const VERSION: u8 = 2;
/// Version byte of a layout-3 pack's header: its index follows its records.
const PACK_VERSION_3: u8 = 3;
/// Pack header: magic, version, three zero bytes.
const PACK_HEADER: usize = 8;
/// Layout-3 pack header: magic, version 3, three zero bytes, a 16-byte nonce.
const PACK_HEADER_3: usize = 24;
/// Index: header (8), pack digest (32), pack length (8), count (4), entries, checksum (32).
const INDEX_FIXED: usize = 8 + 32 + 8 + 4 + 32;
const INDEX_ENTRY: usize = 32 + 8 + 4;
const TOMB_FIXED: usize = 8 + 4 + 32;
const TOMB_ENTRY: usize = 64;
/// Ranges of one pack closer than this are read by one GET.
const MERGE_GAP: u64 = 256 << 10;
/// Attempts of a `get_many` whose packs vanish under it (a concurrent repack).
const GET_ATTEMPTS: usize = 4;
/// Attempts of a ref update losing its compare-and-swap to writers of other refs.
const CAS_ATTEMPTS: usize = 200;
/// Largest ranged GET of a prefetch: the unit its buffer is counted in.
const PREFETCH_PIECE: u64 = 4 << 20;
/// Prefetches kept at once: checkout's content stream and the large file being read.
const PREFETCHES: usize = 2;

/// Tuning of an [`S3Store`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct S3Options {
    /// How objects are kept inside packs (zstd level 1 by default).
    pub compression: Compression,
    /// Largest pack in bytes (64 MiB); an object larger than this gets a pack of its own.
    pub pack_limit: usize,
    /// A pack whose live bytes fall below this fraction of its size is rewritten by a
    /// deletion (0.5).
    pub repack_below: f64,
    /// Age after which a `has_many` that would answer "absent" re-lists the indexes
    /// first (2 s): writes by other clients are then found, not written again.
    pub refresh_after: Duration,
    /// Retries of a failed request (3) and the time they may take (10 s).
    pub retries: usize,
    /// See `retries`.
    pub retry_timeout: Duration,
    /// Requests in flight at once (16).
    pub concurrency: usize,
    /// Age after which a pack no index names (its writer died between the pack and
    /// the index) is removed by a collection's sweep (15 minutes: longer than any
    /// writer takes from a pack's upload to its index's).
    pub orphan_grace: Duration,
    /// Bytes a prefetch ([`ObjectStore::will_read`]) may hold at once (32 MiB): its
    /// ranged GETs in flight, and the records that arrived before they are asked for.
    pub prefetch_bytes: usize,
    /// The layout a bucket without a `layout` marker is created with: 3 (the
    /// default; each pack carries its index, so a pack is one PUT) or 2 (an index
    /// object beside each pack, for readers older than layout 3). A bucket that has a
    /// marker keeps its layout whatever this says.
    pub layout: u8,
}

impl Default for S3Options {
    fn default() -> Self {
        Self {
            compression: Compression::default(),
            pack_limit: 64 << 20,
            repack_below: 0.5,
            refresh_after: Duration::from_secs(2),
            retries: 3,
            retry_timeout: Duration::from_secs(10),
            concurrency: 16,
            orphan_grace: Duration::from_secs(15 * 60),
            prefetch_bytes: 32 << 20,
            layout: 3,
        }
    }
}

/// Where a store lives: bucket, key prefix, endpoint and region, as an
/// `s3://BUCKET/PREFIX?endpoint=URL&region=NAME` URL names them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct S3Location {
    /// The bucket.
    pub bucket: String,
    /// The key prefix, without leading or trailing `/` (empty: the bucket's root).
    pub prefix: String,
    /// The service's endpoint (`https://…`; `http://…` turns TLS off); `None`: AWS.
    pub endpoint: Option<String>,
    /// The region; `None`: `AWS_REGION`, `AWS_DEFAULT_REGION`, the profile's, or `us-east-1`.
    pub region: Option<String>,
    /// `refs=URL`: the store whose refs to pair with these objects.
    pub refs: Option<String>,
}

impl S3Location {
    /// A location in `bucket` under `prefix`, at AWS.
    pub fn new(bucket: impl Into<String>, prefix: impl Into<String>) -> Self {
        Self {
            bucket: bucket.into(),
            prefix: prefix.into().trim_matches('/').to_string(),
            endpoint: None,
            region: None,
            refs: None,
        }
    }

    /// With an endpoint (`https://…`, or `http://…` for a server without TLS).
    pub fn endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// Parses `s3://BUCKET[/PREFIX][?endpoint=URL][&region=NAME][&refs=URL]`; query
    /// values are percent-decoded.
    pub fn parse(url: &str) -> Result<Self, StoreError> {
        let bad = |why: String| StoreError::backend(format!("store URL {url:?}"), why);
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| bad("expected s3://BUCKET/PREFIX".into()))?;
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (bucket, prefix) = path.split_once('/').unwrap_or((path, ""));
        let valid_bucket = (3..=63).contains(&bucket.len())
            && bucket
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
        if !valid_bucket {
            return Err(bad(format!(
                "bucket {bucket:?}: 3 to 63 lowercase letters, digits, '-' or '.'"
            )));
        }
        let prefix = prefix.trim_matches('/');
        if !prefix.is_empty() {
            validate_prefix(prefix).map_err(|why| bad(format!("prefix {prefix:?}: {why}")))?;
        }
        let mut location = Self::new(bucket, prefix);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_decode(value).ok_or_else(|| {
                bad(format!(
                    "query parameter {key:?} is not percent-encoded UTF-8"
                ))
            })?;
            match key {
                "endpoint" => {
                    if !(value.starts_with("https://") || value.starts_with("http://")) {
                        return Err(bad(format!(
                            "endpoint {value:?}: expected https://… or http://…"
                        )));
                    }
                    location.endpoint = Some(value);
                }
                "region" => location.region = Some(value),
                "refs" => location.refs = Some(value),
                _ => {
                    return Err(bad(format!(
                        "unknown query parameter {key:?} (endpoint, region, refs)"
                    )))
                }
            }
        }
        Ok(location)
    }

    fn label(&self) -> String {
        if self.prefix.is_empty() {
            format!("s3://{}", self.bucket)
        } else {
            format!("s3://{}/{}", self.bucket, self.prefix)
        }
    }
}

fn validate_prefix(prefix: &str) -> Result<(), &'static str> {
    if prefix.len() > 512 {
        return Err("longer than 512 bytes");
    }
    if !prefix
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"._-=+@/".contains(&b))
    {
        return Err("only ASCII letters, digits and . _ - = + @ / are allowed");
    }
    if prefix
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err("empty, '.' or '..' path component");
    }
    Ok(())
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// A pack as reads name it: its digest and the length of the index it carries (0 in
/// layout 2), which together make its key ([`pack_key`]).
type PackRef = ([u8; 32], u32);

/// Where an object is: its pack (digest, and the length of the index the pack
/// carries: 0 in layout 2), offset and length there.
#[derive(Debug, Clone, Copy)]
struct Loc {
    pack: [u8; 32],
    tail: u32,
    offset: u64,
    len: u32,
}

/// A parsed index: an index object (layout 2) or the index a pack carries after its
/// records (layout 3).
#[derive(Debug)]
struct Index {
    pack: [u8; 32],
    /// Bytes of the pack's header and records (the index a layout-3 pack carries
    /// starts here).
    pack_len: u64,
    /// Layout 3: the length of the index the pack carries (its key names it); 0 in
    /// layout 2.
    tail: u32,
    entries: Vec<(ObjectId, u64, u32)>,
}

/// A parsed tombstone.
#[derive(Debug)]
struct Tomb {
    entries: Vec<([u8; 32], ObjectId)>,
}

/// What this client knows of the bucket's indexes.
#[derive(Default)]
struct Cache {
    /// When the indexes were last listed; `None`: never.
    listed: Option<Instant>,
    /// The `gc-epoch` ETag seen before that listing (`None` inside: no epoch yet).
    epoch: Option<Option<String>>,
    indexes: HashMap<String, Arc<Index>>,
    tombs: HashMap<String, Arc<Tomb>>,
    objects: HashMap<ObjectId, Loc>,
    /// When a writer last fenced the store ([`ObjectStore::fence`]) with this cache
    /// current: until `refresh_after` later, "present" needs no `gc-epoch` read.
    fenced: Option<Instant>,
    /// The collection token (`snapgraph/gc`) the writer's lease was granted under,
    /// at the last fence that read the bucket ([`ObjectStore::fence_leased`]; `None`
    /// outside: that fence was told no token).
    lease_token: Option<Option<ObjectId>>,
}

impl Cache {
    fn rebuild(&mut self) {
        let dead: HashSet<([u8; 32], ObjectId)> = self
            .tombs
            .values()
            .flat_map(|t| t.entries.iter().copied())
            .collect();
        self.objects.clear();
        for index in self.indexes.values() {
            for &(id, offset, len) in &index.entries {
                if !dead.contains(&(index.pack, id)) {
                    self.objects.insert(
                        id,
                        Loc {
                            pack: index.pack,
                            tail: index.tail,
                            offset,
                            len,
                        },
                    );
                }
            }
        }
    }

    fn add_index(&mut self, key: String, index: Arc<Index>) {
        for &(id, offset, len) in &index.entries {
            self.objects.insert(
                id,
                Loc {
                    pack: index.pack,
                    tail: index.tail,
                    offset,
                    len,
                },
            );
        }
        self.indexes.insert(key, index);
    }
}

/// The refs table: every ref, the reflog, and the nonce of the write that made it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct RefDoc {
    nonce: [u8; 16],
    refs: BTreeMap<String, ObjectId>,
    log: Vec<(String, ReflogEntry)>,
}

/// The `refs` object as last read or written, with its version for the next CAS.
type RefState = (Option<UpdateVersion>, RefDoc);

/// Requests an [`S3Store`] made, by kind, and what they carried (see
/// [`S3Store::requests`]). A round trip is one wave of requests (module docs, "A
/// round trip"): requests sent together (a `get_many`'s ranged GETs) count once, and
/// so does a prefetch's stream of ranged GETs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct S3Requests {
    /// GET requests (whole objects and ranges).
    pub gets: u64,
    /// PUT requests.
    pub puts: u64,
    /// HEAD requests.
    pub heads: u64,
    /// LIST requests (pages of up to 1,000 keys).
    pub lists: u64,
    /// DELETE requests.
    pub deletes: u64,
    /// Body bytes sent (PUTs).
    pub bytes_sent: u64,
    /// Body bytes received (GETs).
    pub bytes_received: u64,
    /// Waits for the server.
    pub round_trips: u64,
}

impl S3Requests {
    /// Every request.
    pub fn total(&self) -> u64 {
        self.gets + self.puts + self.heads + self.lists + self.deletes
    }
}

#[derive(Default)]
struct Tally {
    gets: AtomicU64,
    puts: AtomicU64,
    heads: AtomicU64,
    lists: AtomicU64,
    deletes: AtomicU64,
    sent: AtomicU64,
    received: AtomicU64,
    round_trips: AtomicU64,
}

fn bump(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// One ranged GET of a prefetch: the records it holds (id, range in the bytes) and
/// the bytes; `None`: it failed (the pack gone, the server unreachable), which ends
/// the prefetch (the ids are then read as if never announced).
struct Piece {
    members: Vec<(ObjectId, Range<usize>)>,
    bytes: Option<Bytes>,
}

/// A stream of ranged GETs started by [`ObjectStore::will_read`]: every GET is known
/// when it starts, so they form one wave (one round trip); a task sends them with at
/// most [`S3Options::prefetch_bytes`] in flight, each GET's answer handed over
/// through a channel of one slot (backpressure: a GET is sent only when an earlier
/// one's bytes were taken), and `get_many` takes the records as it is asked for them.
struct Prefetch {
    /// Ids still to arrive, with how often the announcement names them.
    coming: HashMap<ObjectId, u32>,
    /// Records that arrived, not yet asked for as often as announced.
    ready: HashMap<ObjectId, (Bytes, u32)>,
    ready_bytes: usize,
    rx: futures::channel::mpsc::Receiver<Piece>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Prefetch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Prefetch {
    fn is_done(&self) -> bool {
        self.coming.is_empty() && self.ready.is_empty()
    }

    fn holds(&self, id: &ObjectId) -> bool {
        self.coming.contains_key(id) || self.ready.contains_key(id)
    }

    /// The record of `id` if this prefetch has or will have it, waiting for it on
    /// `rt`; `Err(())`: the prefetch failed or outgrew `limit` (drop it).
    fn take(
        &mut self,
        id: &ObjectId,
        rt: &tokio::runtime::Runtime,
        limit: usize,
    ) -> Result<Option<Bytes>, ()> {
        while !self.ready.contains_key(id) {
            if !self.coming.contains_key(id) {
                return Ok(None);
            }
            if self.ready_bytes > limit {
                return Err(()); // asked far out of the announced order
            }
            let Some(piece) = rt.block_on(self.rx.next()) else {
                return Err(());
            };
            let Some(bytes) = piece.bytes else {
                return Err(());
            };
            for (member, range) in piece.members {
                if let Some(uses) = self.coming.remove(&member) {
                    self.ready_bytes += range.len();
                    self.ready.insert(member, (bytes.slice(range), uses));
                }
            }
        }
        let (bytes, uses) = self.ready.get_mut(id).expect("checked above");
        let record = bytes.clone();
        *uses -= 1;
        if *uses == 0 {
            self.ready_bytes -= record.len();
            self.ready.remove(id);
        }
        Ok(Some(record))
    }
}

/// A store in an S3 bucket (see the [module docs](self)).
pub struct S3Store {
    tally: Arc<Tally>,
    rt: tokio::runtime::Runtime,
    client: Arc<AmazonS3>,
    prefix: String,
    label: String,
    options: S3Options,
    cache: Mutex<Cache>,
    refs: Mutex<Option<RefState>>,
    /// Streams started by [`ObjectStore::will_read`], oldest first (at most
    /// [`PREFETCHES`]).
    prefetches: Mutex<Vec<Prefetch>>,
    /// The bucket's layout (2 or 3), as its `layout` marker says.
    layout: u8,
}

impl fmt::Debug for S3Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Store")
            .field("location", &self.label)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// Why a request failed, sorted for the callers that react to it.
enum Failure {
    NotFound,
    Precondition,
    Other(object_store::Error),
}

impl From<object_store::Error> for Failure {
    fn from(e: object_store::Error) -> Self {
        match e {
            object_store::Error::NotFound { .. } => Failure::NotFound,
            object_store::Error::Precondition { .. }
            | object_store::Error::AlreadyExists { .. } => Failure::Precondition,
            e => Failure::Other(e),
        }
    }
}

impl S3Store {
    /// Opens (creating its layout marker if absent) the store at `location`, with
    /// credentials from the AWS environment variables (`AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`), else from the profile
    /// (`AWS_PROFILE` or `default`) in `~/.aws/credentials`
    /// (`AWS_SHARED_CREDENTIALS_FILE`), else the instance's role. A bucket holding
    /// another layout version is refused.
    pub fn open(location: &S3Location, options: S3Options) -> Result<Self, StoreError> {
        let label = location.label();
        let fail = |why: String| StoreError::backend(label.clone(), why);
        // reqwest's rustls takes the process's provider: ring, as for PostgreSQL.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = AmazonS3Builder::from_env()
            .with_bucket_name(&location.bucket)
            .with_conditional_put(S3ConditionalPut::ETagMatch)
            .with_retry(object_store::RetryConfig {
                max_retries: options.retries,
                retry_timeout: options.retry_timeout,
                ..Default::default()
            });
        let profile = aws_profile();
        if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
            if let Some(creds) = profile.credentials.clone() {
                builder = builder
                    .with_access_key_id(creds.0)
                    .with_secret_access_key(creds.1);
                if let Some(token) = creds.2 {
                    builder = builder.with_token(token);
                }
            }
        }
        let region = location
            .region
            .clone()
            .or_else(|| std::env::var("AWS_REGION").ok())
            .or_else(|| std::env::var("AWS_DEFAULT_REGION").ok())
            .or(profile.region)
            .unwrap_or_else(|| "us-east-1".into());
        builder = builder.with_region(region);
        if let Some(endpoint) = &location.endpoint {
            builder = builder
                .with_endpoint(endpoint)
                .with_allow_http(endpoint.starts_with("http://"));
        }
        let client = builder
            .build()
            .map_err(|e| fail(format!("S3 client: {e}")))?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("snapgraph-s3")
            .enable_all()
            .build()
            .map_err(|e| fail(format!("async runtime: {e}")))?;
        let prefix = if location.prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", location.prefix)
        };
        let store = Self {
            tally: Arc::default(),
            rt,
            client: Arc::new(client),
            prefix,
            label,
            options,
            cache: Mutex::new(Cache::default()),
            refs: Mutex::new(None),
            prefetches: Mutex::new(Vec::new()),
            layout: 0,
        };
        let mut store = store;
        store.layout = store.check_layout()?;
        Ok(store)
    }

    /// Opens `s3://…` (see [`S3Location::parse`]) with default options; a `refs`
    /// parameter is ignored here (`crate::open` pairs it).
    pub fn open_url(url: &str) -> Result<Self, StoreError> {
        Self::open(&S3Location::parse(url)?, S3Options::default())
    }

    /// The requests made so far.
    pub fn requests(&self) -> S3Requests {
        let t = &self.tally;
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        S3Requests {
            gets: get(&t.gets),
            puts: get(&t.puts),
            heads: get(&t.heads),
            lists: get(&t.lists),
            deletes: get(&t.deletes),
            bytes_sent: get(&t.sent),
            bytes_received: get(&t.received),
            round_trips: get(&t.round_trips),
        }
    }

    /// The requests made since the last call (or since opening), resetting the count.
    pub fn take_requests(&self) -> S3Requests {
        let t = &self.tally;
        let take = |c: &AtomicU64| c.swap(0, Ordering::Relaxed);
        S3Requests {
            gets: take(&t.gets),
            puts: take(&t.puts),
            heads: take(&t.heads),
            lists: take(&t.lists),
            deletes: take(&t.deletes),
            bytes_sent: take(&t.sent),
            bytes_received: take(&t.received),
            round_trips: take(&t.round_trips),
        }
    }

    /// Waits for `f`: one round trip.
    fn run<F: std::future::Future>(&self, f: F) -> F::Output {
        bump(&self.tally.round_trips, 1);
        self.rt.block_on(f)
    }

    /// `s3://BUCKET/PREFIX`: what error contexts name.
    pub fn label(&self) -> &str {
        &self.label
    }

    fn path(&self, key: &str) -> Path {
        Path::from(format!("{}{key}", self.prefix))
    }

    fn err(&self, key: &str, e: impl Into<snapgraph::BoxError>) -> StoreError {
        StoreError::backend(format!("{}/{key}", self.label), e)
    }

    fn fail(&self, key: &str, f: Failure) -> StoreError {
        match f {
            Failure::NotFound => self.err(key, "not found"),
            Failure::Precondition => self.err(key, "precondition failed"),
            Failure::Other(e) => self.err(key, e),
        }
    }

    fn lock_cache(&self) -> MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes sure `cache` has seen the last deletion before it answers "present":
    /// nothing to do within a writer's fence, else a HEAD of `gc-epoch` (and a
    /// re-listing if it moved).
    fn current_for_presence(&self, cache: &mut Cache) -> Result<(), StoreError> {
        if cache
            .fenced
            .is_some_and(|at| at.elapsed() < self.options.refresh_after)
        {
            return Ok(());
        }
        let epoch = self.epoch()?;
        if cache.epoch.as_ref() != Some(&epoch) {
            self.refresh(cache)?;
        }
        Ok(())
    }

    fn get_key(&self, key: &str) -> Result<Option<(Bytes, UpdateVersion)>, StoreError> {
        let path = self.path(key);
        bump(&self.tally.gets, 1);
        let got = self.run(async {
            let r = self.client.get(&path).await?;
            let version = UpdateVersion {
                e_tag: r.meta.e_tag.clone(),
                version: r.meta.version.clone(),
            };
            Ok::<_, object_store::Error>((r.bytes().await?, version))
        });
        if let Ok((b, _)) = &got {
            bump(&self.tally.received, b.len() as u64);
        }
        match got.map_err(Failure::from) {
            Ok(v) => Ok(Some(v)),
            Err(Failure::NotFound) => Ok(None),
            Err(f) => Err(self.fail(key, f)),
        }
    }

    fn put_key(&self, key: &str, bytes: Vec<u8>, mode: PutMode) -> Result<UpdateVersion, Failure> {
        let path = self.path(key);
        let opts = PutOptions {
            mode,
            ..Default::default()
        };
        bump(&self.tally.puts, 1);
        bump(&self.tally.sent, bytes.len() as u64);
        let r = self.run(self.client.put_opts(&path, PutPayload::from(bytes), opts))?;
        Ok(UpdateVersion {
            e_tag: r.e_tag,
            version: r.version,
        })
    }

    fn delete_key(&self, key: &str) -> Result<(), StoreError> {
        bump(&self.tally.deletes, 1);
        match self.run(self.client.delete(&self.path(key))) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.err(key, e)),
        }
    }

    /// The bucket's layout, creating its marker (of [`S3Options::layout`]) if absent.
    fn check_layout(&self) -> Result<u8, StoreError> {
        let wanted = match self.options.layout {
            2 => LAYOUT_2,
            3 => LAYOUT,
            n => {
                return Err(self.err(
                    "layout",
                    format!("S3Options::layout is {n}: this version writes layout 2 or 3"),
                ))
            }
        };
        let found = match self.get_key("layout")? {
            Some((b, _)) => b,
            None => match self.put_key("layout", wanted.to_vec(), PutMode::Create) {
                Ok(_) => return Ok(self.options.layout),
                // Another client created it first: read what it wrote.
                Err(Failure::Precondition) => match self.get_key("layout")? {
                    Some((b, _)) => b,
                    None => return Err(self.err("layout", "vanished after a conflicting create")),
                },
                Err(f) => return Err(self.fail("layout", f)),
            },
        };
        match found.as_ref() {
            LAYOUT => Ok(3),
            LAYOUT_2 => Ok(2),
            _ => Err(self.err(
                "layout",
                format!(
                    "holds {:?}, this version reads {:?} and {:?}",
                    String::from_utf8_lossy(&found[..found.len().min(64)]),
                    String::from_utf8_lossy(LAYOUT_2),
                    String::from_utf8_lossy(LAYOUT)
                ),
            )),
        }
    }

    /// Where the listing looks: `meta` (layout 2: index objects and tombstones) or
    /// `packs` (layout 3: packs, each its own index, and tombstones).
    fn dir(&self) -> &'static str {
        if self.layout == 2 {
            "meta"
        } else {
            "packs"
        }
    }

    /// The bucket's layout: 2 (an index object beside each pack) or 3 (each pack
    /// carries its index); see the module docs.
    pub fn layout(&self) -> u8 {
        self.layout
    }

    /// The ETag of `gc-epoch` (`None`: absent).
    fn epoch(&self) -> Result<Option<String>, StoreError> {
        self.run(self.epoch_async())
    }

    async fn epoch_async(&self) -> Result<Option<String>, StoreError> {
        bump(&self.tally.heads, 1);
        match self.client.head(&self.path("gc-epoch")).await {
            Ok(meta) => Ok(Some(meta.e_tag.unwrap_or_default())),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.err("gc-epoch", e)),
        }
    }

    fn bump_epoch(&self) -> Result<(), StoreError> {
        self.put_key("gc-epoch", nonce().to_vec(), PutMode::Overwrite)
            .map(|_| ())
            .map_err(|f| self.fail("gc-epoch", f))
    }

    /// Re-lists the indexes and tombstones, reading the new ones and forgetting the
    /// vanished ones.
    fn refresh(&self, cache: &mut Cache) -> Result<(), StoreError> {
        self.relist(cache, true)
    }

    /// [`refresh`](Self::refresh), reading `gc-epoch` beside the listing only
    /// `with_epoch` (else the cache's epoch is unknown: the next "present" without a
    /// fence re-lists).
    fn relist(&self, cache: &mut Cache, with_epoch: bool) -> Result<(), StoreError> {
        // Layout 2: the index and tombstone objects, under `meta/`. Layout 3: the
        // packs (each its own index) and the tombstones, under `packs/`.
        let what = self.dir();
        let root = self.path(what);
        let (epoch, keys) = self.run(async {
            let epoch = async {
                if with_epoch {
                    Ok::<_, StoreError>(self.epoch_async().await.map(Some))
                } else {
                    Ok(Ok(None))
                }
            };
            let list = async {
                let metas: Vec<object_store::ObjectMeta> = self
                    .client
                    .list(Some(&root))
                    .try_collect()
                    .await
                    .map_err(|e| self.err(&format!("{what}/"), e))?;
                bump(
                    &self.tally.lists,
                    1 + metas.len().saturating_sub(1) as u64 / 1000,
                );
                Ok::<_, StoreError>(metas)
            };
            let (epoch, list) = futures::join!(epoch, list);
            Ok::<_, StoreError>((epoch?, list?))
        })?;
        let epoch = epoch?;
        let mut listed: HashSet<String> = HashSet::new();
        // Keys to read: the key, the size the listing gave, and for a layout-3
        // pack the length of the index it carries (read by a suffix range).
        let mut new: Vec<(String, u64, Option<u32>)> = Vec::new();
        for m in keys {
            let full = m.location.as_ref().to_string();
            let Some(key) = full.strip_prefix(&self.prefix) else {
                continue;
            };
            let key = key.to_string();
            let tail = if self.layout == 2 {
                if !(key.ends_with(".idx") || key.ends_with(".del")) {
                    continue;
                }
                None
            } else if key.ends_with(".del") {
                None
            } else {
                // Keys of neither kind (a layout-2 pack key, anything a tool left)
                // are not the store's objects.
                match parse_pack_key(&key) {
                    Some((_, tail)) if tail > 0 => Some(tail),
                    _ => continue,
                }
            };
            if !cache.indexes.contains_key(&key) && !cache.tombs.contains_key(&key) {
                new.push((key.clone(), m.size, tail));
            }
            listed.insert(key);
        }
        let got: Vec<(String, u64, Option<Bytes>)> = if new.is_empty() {
            Vec::new()
        } else {
            self.run(async {
                futures::stream::iter(new.into_iter().map(|(key, size, tail)| async move {
                    bump(&self.tally.gets, 1);
                    let path = self.path(&key);
                    let got = match tail {
                        None => self.client.get(&path).await,
                        Some(n) => {
                            let opts = object_store::GetOptions {
                                range: Some(object_store::GetRange::Suffix(u64::from(n))),
                                ..Default::default()
                            };
                            self.client.get_opts(&path, opts).await
                        }
                    };
                    match got {
                        Ok(r) => match r.bytes().await {
                            Ok(b) => {
                                bump(&self.tally.received, b.len() as u64);
                                Ok((key, size, Some(b)))
                            }
                            Err(e) => Err(self.err(&key, e)),
                        },
                        // Removed by a compaction since the listing.
                        Err(object_store::Error::NotFound { .. }) => Ok((key, size, None)),
                        Err(e) => Err(self.err(&key, e)),
                    }
                }))
                .buffer_unordered(self.options.concurrency)
                .try_collect()
                .await
            })?
        };
        cache.indexes.retain(|k, _| listed.contains(k));
        cache.tombs.retain(|k, _| listed.contains(k));
        for (key, size, bytes) in got {
            let Some(bytes) = bytes else { continue };
            if key.ends_with(".idx") {
                let index = parse_index(&key, &bytes).map_err(|why| self.err(&key, why))?;
                cache.indexes.insert(key, Arc::new(index));
            } else if key.ends_with(".pack") {
                let index = parse_tail(&key, &bytes, size).map_err(|why| self.err(&key, why))?;
                cache.indexes.insert(key, Arc::new(index));
            } else {
                let tomb =
                    parse_tomb(&key, self.dir(), &bytes).map_err(|why| self.err(&key, why))?;
                cache.tombs.insert(key, Arc::new(tomb));
            }
        }
        cache.rebuild();
        cache.epoch = epoch;
        cache.listed = Some(Instant::now());
        Ok(())
    }

    /// Writes one pack: in layout 3 one PUT of the pack with its index after its
    /// records; in layout 2 the pack, then its index object. Returns the key the
    /// cache keeps the index under (the pack's in layout 3) and the index.
    fn write_pack(&self, records: &[(ObjectId, &[u8])]) -> Result<(String, Index), StoreError> {
        let total: usize = records.iter().map(|(_, r)| r.len()).sum();
        let mut pack =
            Vec::with_capacity(PACK_HEADER_3 + total + INDEX_FIXED + records.len() * INDEX_ENTRY);
        pack.extend_from_slice(PACK_MAGIC);
        if self.layout == 2 {
            pack.extend_from_slice(&[VERSION, 0, 0, 0]);
        } else {
            // A nonce makes every pack a pack of its own, even of records another
            // pack holds: a tombstone naming (pack, id) never hides a later write.
            pack.extend_from_slice(&[PACK_VERSION_3, 0, 0, 0]);
            pack.extend_from_slice(&nonce());
        }
        let mut entries = Vec::with_capacity(records.len());
        for (id, record) in records {
            entries.push((*id, pack.len() as u64, record.len() as u32));
            pack.extend_from_slice(record);
        }
        entries.sort_unstable_by_key(|e| e.0);
        entries.dedup_by_key(|e| e.0);
        let digest = *blake3::hash(&pack).as_bytes();
        let mut index = Index {
            pack: digest,
            pack_len: pack.len() as u64,
            tail: 0,
            entries,
        };
        let (index_key, bytes) = encode_index(&index);
        if self.layout == 2 {
            let pack_key = pack_key(&digest, 0);
            self.put_key(&pack_key, pack, PutMode::Overwrite)
                .map_err(|f| self.fail(&pack_key, f))?;
            self.put_key(&index_key, bytes, PutMode::Overwrite)
                .map_err(|f| self.fail(&index_key, f))?;
            return Ok((index_key, index));
        }
        let tail = u32::try_from(bytes.len())
            .map_err(|_| self.err(&pack_key(&digest, 0), "index longer than 4 GiB"))?;
        index.tail = tail;
        pack.extend_from_slice(&bytes);
        let key = pack_key(&digest, tail);
        self.put_key(&key, pack, PutMode::Overwrite)
            .map_err(|f| self.fail(&key, f))?;
        Ok((key, index))
    }

    /// Reads `ranges` of pack `digest` (carrying an index of `tail` bytes), one GET
    /// per run of ranges less than [`MERGE_GAP`] apart, all at once; `None`: the
    /// pack is gone.
    async fn read_ranges(
        &self,
        (digest, tail): PackRef,
        ranges: Vec<Range<u64>>,
    ) -> Result<Option<Vec<Bytes>>, StoreError> {
        let key = pack_key(&digest, tail);
        let path = self.path(&key);
        let mut order: Vec<usize> = (0..ranges.len()).collect();
        order.sort_unstable_by_key(|&i| ranges[i].start);
        let mut merged: Vec<(Range<u64>, Vec<usize>)> = Vec::new();
        for i in order {
            let r = &ranges[i];
            match merged.last_mut() {
                Some((m, members)) if r.start <= m.end + MERGE_GAP => {
                    m.end = m.end.max(r.end);
                    members.push(i);
                }
                _ => merged.push((r.clone(), vec![i])),
            }
        }
        let (path, key_ref) = (&path, &key);
        /// A merged range, the asked ranges inside it, its bytes.
        type Part = (Range<u64>, Vec<usize>, Bytes);
        let got: Vec<Option<Part>> =
            futures::stream::iter(merged.into_iter().map(|(m, members)| async move {
                bump(&self.tally.gets, 1);
                match self.client.get_range(path, m.clone()).await {
                    Ok(b) => {
                        bump(&self.tally.received, b.len() as u64);
                        Ok(Some((m, members, b)))
                    }
                    Err(object_store::Error::NotFound { .. }) => Ok(None),
                    Err(e) => Err(self.err(key_ref, e)),
                }
            }))
            .buffer_unordered(self.options.concurrency)
            .try_collect()
            .await?;
        let mut out = vec![Bytes::new(); ranges.len()];
        for part in got {
            let Some((m, members, bytes)) = part else {
                return Ok(None);
            };
            for i in members {
                let (start, end) = (ranges[i].start - m.start, ranges[i].end - m.start);
                if end as usize > bytes.len() {
                    return Err(self.err(
                        &key,
                        format!(
                            "shorter than its index says ({} bytes at {})",
                            bytes.len(),
                            m.start
                        ),
                    ));
                }
                out[i] = bytes.slice(start as usize..end as usize);
            }
        }
        Ok(Some(out))
    }

    /// The records at `locs` (grouped by pack, each pack's ranges in one call, all
    /// packs at once); `None` for those whose pack is gone.
    fn fetch(&self, locs: &[Loc]) -> Result<Vec<Option<Bytes>>, StoreError> {
        let mut by_pack: HashMap<PackRef, Vec<usize>> = HashMap::new();
        for (i, loc) in locs.iter().enumerate() {
            by_pack.entry((loc.pack, loc.tail)).or_default().push(i);
        }
        let groups: Vec<(PackRef, Vec<usize>)> = by_pack.into_iter().collect();
        if locs.is_empty() {
            return Ok(Vec::new());
        }
        let results: Vec<(Vec<usize>, Option<Vec<Bytes>>)> = self.run(async {
            futures::stream::iter(groups.into_iter().map(|(pack, members)| {
                let ranges = members
                    .iter()
                    .map(|&i| locs[i].offset..locs[i].offset + u64::from(locs[i].len))
                    .collect();
                async move { Ok::<_, StoreError>((members, self.read_ranges(pack, ranges).await?)) }
            }))
            .buffer_unordered(self.options.concurrency)
            .try_collect()
            .await
        })?;
        let mut out = vec![None; locs.len()];
        for (members, got) in results {
            if let Some(got) = got {
                for (i, b) in members.into_iter().zip(got) {
                    out[i] = Some(b);
                }
            }
        }
        Ok(out)
    }

    /// Rewrites the packs in `packs` without the objects their tombstones name: a
    /// pack with no live entry goes (in layout 2 its index objects first); one whose
    /// live bytes fall below [`S3Options::repack_below`] is rewritten (the new pack
    /// first, then the old one goes); any other gets a new index object of its live
    /// entries in layout 2, and stays as it is in layout 3 (the index a pack carries
    /// cannot change without the pack: `delete_many` keeps a tombstone for its dead
    /// entries instead).
    fn compact(&self, cache: &mut Cache, packs: &HashSet<[u8; 32]>) -> Result<(), StoreError> {
        let dead: HashSet<([u8; 32], ObjectId)> = cache
            .tombs
            .values()
            .flat_map(|t| t.entries.iter().copied())
            .collect();
        for pack in packs {
            let keys: Vec<String> = cache
                .indexes
                .iter()
                .filter(|(_, i)| i.pack == *pack)
                .map(|(k, _)| k.clone())
                .collect();
            let Some(first) = keys.first() else {
                if self.layout == 2 {
                    // Its indexes went before the pack did (an interrupted compaction).
                    self.delete_key(&pack_key(pack, 0))?;
                }
                // Layout 3: not listed, so gone (its index went with it).
                continue;
            };
            let (pack_len, tail) = (cache.indexes[first].pack_len, cache.indexes[first].tail);
            // In layout 3 the pack's key is also its index's (the only one of `keys`).
            let pack_key = pack_key(pack, tail);
            let mut live: BTreeMap<ObjectId, (u64, u32)> = BTreeMap::new();
            for k in &keys {
                for &(id, offset, len) in &cache.indexes[k].entries {
                    if !dead.contains(&(*pack, id)) {
                        live.insert(id, (offset, len));
                    }
                }
            }
            let live_bytes: u64 = live.values().map(|&(_, len)| u64::from(len)).sum();
            if live.is_empty() {
                for k in &keys {
                    if *k != pack_key {
                        self.delete_key(k)?;
                    }
                    cache.indexes.remove(k);
                }
                self.delete_key(&pack_key)?;
            } else if (live_bytes as f64) < self.options.repack_below * pack_len as f64 {
                let ids: Vec<ObjectId> = live.keys().copied().collect();
                let locs: Vec<Loc> = live
                    .values()
                    .map(|&(offset, len)| Loc {
                        pack: *pack,
                        tail,
                        offset,
                        len,
                    })
                    .collect();
                let records = self.fetch(&locs)?;
                let mut kept = Vec::with_capacity(ids.len());
                for (id, record) in ids.iter().zip(&records) {
                    let Some(record) = record else {
                        return Err(self.err(&pack_key, "vanished while being repacked"));
                    };
                    // Verified before it is copied: a repack never spreads corruption.
                    codec::decode(id, record)?;
                    kept.push((*id, record.as_ref()));
                }
                let (key, index) = self.write_pack(&kept)?;
                for k in &keys {
                    if *k != key {
                        if *k != pack_key {
                            self.delete_key(k)?;
                        }
                        cache.indexes.remove(k);
                    }
                }
                if key != pack_key {
                    self.delete_key(&pack_key)?;
                }
                cache.add_index(key, Arc::new(index));
            } else if self.layout == 2 {
                let index = Index {
                    pack: *pack,
                    pack_len,
                    tail: 0,
                    entries: live.into_iter().map(|(id, (o, l))| (id, o, l)).collect(),
                };
                let (key, bytes) = encode_index(&index);
                self.put_key(&key, bytes, PutMode::Overwrite)
                    .map_err(|f| self.fail(&key, f))?;
                for k in &keys {
                    if *k != key {
                        self.delete_key(k)?;
                        cache.indexes.remove(k);
                    }
                }
                cache.indexes.insert(key, Arc::new(index));
            }
        }
        Ok(())
    }

    /// What the bucket holds under the prefix: packs, their bytes, and index and
    /// tombstone objects (a LIST of every key; for tests, benchmarks and operators).
    pub fn usage(&self) -> Result<S3Usage, StoreError> {
        let root = if self.prefix.is_empty() {
            None
        } else {
            Some(Path::from(self.prefix.trim_end_matches('/')))
        };
        let all: Vec<object_store::ObjectMeta> = self
            .run(self.client.list(root.as_ref()).try_collect())
            .map_err(|e| self.err("", e))?;
        let mut usage = S3Usage::default();
        for m in all {
            let key = m.location.as_ref();
            usage.bytes += m.size;
            if key.ends_with(".pack") {
                usage.packs += 1;
                usage.pack_bytes += m.size;
            } else if key.ends_with(".idx") {
                usage.indexes += 1;
            } else if key.ends_with(".del") {
                usage.tombstones += 1;
            }
        }
        Ok(usage)
    }

    /// Reads the snapshot of `commit` (trees and file content, not history) into a
    /// [`MemoryStore`](crate::MemoryStore), one batched `get_many` per level of the
    /// graph (the core's [`CheckoutPlan`](snapgraph::graph::CheckoutPlan)), and
    /// returns it with the number of levels read. Checking out from it then costs no
    /// request, so a checkout is the levels plus the first call's two round trips.
    /// [`Repo::checkout`](crate::Repo::checkout) costs the same round trips without
    /// holding the snapshot twice (its content windows are served by the prefetch its
    /// [`will_read`](ObjectStore::will_read) starts); this reads each level whole,
    /// into memory: for tools that want the objects, not a workspace.
    pub fn prefetch(&self, commit: ObjectId) -> Result<(crate::MemoryStore, usize), StoreError> {
        let local = crate::MemoryStore::new();
        let mut plan = snapgraph::graph::CheckoutPlan::new(commit);
        let mut levels = 0;
        loop {
            let missing = plan.missing(&local).map_err(|e| {
                StoreError::backend(format!("{}: checkout of {commit}", self.label), e)
            })?;
            if missing.is_empty() {
                return Ok((local, levels));
            }
            levels += 1;
            let got = ObjectStore::get_many(self, &missing)?;
            let mut batch = Vec::with_capacity(missing.len());
            for (id, bytes) in missing.iter().zip(&got) {
                match bytes {
                    Some(b) => batch.push((*id, b.as_slice())),
                    None => {
                        return Err(StoreError::backend(
                            format!("{}: object {id}", self.label),
                            format!("missing below commit {commit}"),
                        ))
                    }
                }
            }
            local.put_many(&batch)?;
        }
    }

    /// Starts a [`Prefetch`] of the `ids` the cache knows (and no prefetch holds
    /// yet), in their order: one ranged GET per run of records of one pack that lie
    /// in that order, less than [`MERGE_GAP`] apart and within [`PREFETCH_PIECE`].
    fn start_prefetch(&self, ids: &[ObjectId]) {
        let mut prefetches = self.lock_prefetches();
        prefetches.retain(|p| !p.is_done());
        let mut uses: HashMap<ObjectId, u32> = HashMap::new();
        let mut order: Vec<(ObjectId, Loc)> = Vec::new();
        {
            let cache = self.lock_cache();
            if cache.listed.is_none() {
                return; // nothing located yet: the calls will list first
            }
            for id in ids {
                if prefetches.iter().any(|p| p.holds(id)) {
                    continue;
                }
                let Some(loc) = cache.objects.get(id) else {
                    continue;
                };
                let n = uses.entry(*id).or_insert(0);
                if *n == 0 {
                    order.push((*id, *loc));
                }
                *n += 1;
            }
        }
        if order.is_empty() {
            return;
        }
        /// Records of a run: id, range from the run's start.
        type Members = Vec<(ObjectId, Range<usize>)>;
        /// A run: its pack, its range in the pack, its records.
        type Run = (PackRef, Range<u64>, Members);
        let mut runs: Vec<Run> = Vec::new();
        for (id, loc) in order {
            let end = loc.offset + u64::from(loc.len);
            match runs.last_mut() {
                Some((pack, range, members))
                    if *pack == (loc.pack, loc.tail)
                        && loc.offset >= range.end
                        && loc.offset <= range.end + MERGE_GAP
                        && end - range.start <= PREFETCH_PIECE =>
                {
                    let at = (loc.offset - range.start) as usize;
                    members.push((id, at..at + loc.len as usize));
                    range.end = end;
                }
                _ => runs.push((
                    (loc.pack, loc.tail),
                    loc.offset..end,
                    vec![(id, 0..loc.len as usize)],
                )),
            }
        }
        while prefetches.len() >= PREFETCHES {
            prefetches.remove(0);
        }
        let in_flight = (self.options.prefetch_bytes / PREFETCH_PIECE as usize)
            .clamp(1, self.options.concurrency.max(1));
        let (mut tx, rx) = futures::channel::mpsc::channel(0);
        let (client, tally) = (self.client.clone(), self.tally.clone());
        let runs: Vec<(Path, Range<u64>, Members)> = runs
            .into_iter()
            .map(|((pack, tail), range, members)| {
                (self.path(&pack_key(&pack, tail)), range, members)
            })
            .collect();
        // One wave: every GET below is known now; the channel paces them.
        bump(&self.tally.round_trips, 1);
        let task = self.rt.spawn(async move {
            let mut pieces =
                futures::stream::iter(runs.into_iter().map(|(path, range, members)| {
                    let (client, tally) = (client.clone(), tally.clone());
                    async move {
                        bump(&tally.gets, 1);
                        let bytes = client.get_range(&path, range).await.ok();
                        if let Some(b) = &bytes {
                            bump(&tally.received, b.len() as u64);
                        }
                        let bytes =
                            bytes.filter(|b| members.last().is_none_or(|(_, r)| r.end <= b.len()));
                        Piece { members, bytes }
                    }
                }))
                .buffered(in_flight);
            while let Some(piece) = pieces.next().await {
                let failed = piece.bytes.is_none();
                if futures::SinkExt::send(&mut tx, piece).await.is_err() || failed {
                    break;
                }
            }
        });
        prefetches.push(Prefetch {
            coming: uses,
            ready: HashMap::new(),
            ready_bytes: 0,
            rx,
            task,
        });
    }

    /// Fills `out[i]` with the record of each `ids[i]` a prefetch holds (waiting for
    /// it to arrive); returns the indexes left to read. A prefetch that failed or was
    /// asked too far out of its order is dropped (its ids are read as usual).
    fn take_prefetched(&self, ids: &[ObjectId], out: &mut [Option<Bytes>]) -> Vec<usize> {
        let mut prefetches = self.lock_prefetches();
        let mut left = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            let mut found = None;
            let mut k = 0;
            while k < prefetches.len() && found.is_none() {
                match prefetches[k].take(id, &self.rt, self.options.prefetch_bytes) {
                    Ok(got) => {
                        found = got;
                        k += 1;
                    }
                    Err(()) => {
                        prefetches.remove(k);
                    }
                }
            }
            match found {
                Some(record) => out[i] = Some(record),
                None => left.push(i),
            }
        }
        prefetches.retain(|p| !p.is_done());
        left
    }

    /// The fence, trusting the cache without a request when `leased` (the writer's
    /// lease's collection token) is the token of the lease under which the cache was
    /// last made current.
    fn fence_with(&self, leased: Option<Option<ObjectId>>) -> Result<(), StoreError> {
        let mut cache = self.lock_cache();
        // Under a lease whose token is the one this client's last fence with a
        // request was under, no sweep ran in between: nothing was deleted since the
        // cache was current (module docs, "A fence without a request").
        if leased.is_some() && leased == cache.lease_token {
            cache.fenced = Some(Instant::now());
            return Ok(());
        }
        cache.fenced = None;
        cache.lease_token = None;
        match cache.listed {
            // A listing after the lease shows every earlier deletion done (see
            // the module docs), and other clients' new indexes.
            Some(at) if at.elapsed() < self.options.refresh_after && cache.epoch.is_some() => {
                self.current_for_presence(&mut cache)?
            }
            _ => self.relist(&mut cache, false)?,
        }
        cache.fenced = Some(Instant::now());
        cache.lease_token = leased;
        Ok(())
    }

    fn lock_prefetches(&self) -> MutexGuard<'_, Vec<Prefetch>> {
        self.prefetches.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn load_refs(&self) -> Result<RefState, StoreError> {
        match self.get_key("refs")? {
            None => Ok((None, RefDoc::default())),
            Some((bytes, version)) => {
                let doc = decode_refs(&bytes).map_err(|why| self.err("refs", why))?;
                Ok((Some(version), doc))
            }
        }
    }

    fn fresh_refs(&self) -> Result<RefDoc, StoreError> {
        let state = self.load_refs()?;
        let doc = state.1.clone();
        *self.refs.lock().unwrap_or_else(|p| p.into_inner()) = Some(state);
        Ok(doc)
    }
}

/// Keys and bytes under a store's prefix (see [`S3Store::usage`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct S3Usage {
    /// Bytes of every object under the prefix.
    pub bytes: u64,
    /// Pack objects.
    pub packs: u64,
    /// Their bytes.
    pub pack_bytes: u64,
    /// Index objects.
    pub indexes: u64,
    /// Tombstones not yet compacted away.
    pub tombstones: u64,
}

/// The key of pack `digest`: `packs/HEX.pack` in layout 2 (`tail` 0), and in layout 3
/// `packs/HEX.N.pack`, `N` the decimal length of the index the pack carries.
fn pack_key(digest: &[u8; 32], tail: u32) -> String {
    if tail == 0 {
        format!("packs/{}.pack", hex::encode(digest))
    } else {
        format!("packs/{}.{tail}.pack", hex::encode(digest))
    }
}

/// The digest and index length (0: none, layout 2) a pack key names; `None`: not a
/// pack key in its canonical form.
fn parse_pack_key(key: &str) -> Option<([u8; 32], u32)> {
    let name = key.strip_prefix("packs/")?.strip_suffix(".pack")?;
    let (hex_digest, tail) = match name.split_once('.') {
        None => (name, 0),
        Some((h, n)) => (h, n.parse::<u32>().ok().filter(|&n| n > 0)?),
    };
    let mut digest = [0; 32];
    hex::decode_to_slice(hex_digest, &mut digest).ok()?;
    // Canonical only: lowercase hex, no sign or leading zeros in N.
    (pack_key(&digest, tail) == key).then_some((digest, tail))
}

fn encode_index(index: &Index) -> (String, Vec<u8>) {
    let mut out = Vec::with_capacity(INDEX_FIXED + index.entries.len() * INDEX_ENTRY);
    out.extend_from_slice(INDEX_MAGIC);
    out.extend_from_slice(&[VERSION, 0, 0, 0]);
    out.extend_from_slice(&index.pack);
    out.extend_from_slice(&index.pack_len.to_le_bytes());
    out.extend_from_slice(&(index.entries.len() as u32).to_le_bytes());
    for (id, offset, len) in &index.entries {
        out.extend_from_slice(id.as_bytes());
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
    }
    let sum = *blake3::hash(&out).as_bytes();
    out.extend_from_slice(&sum);
    let key = format!(
        "meta/{}.{}.idx",
        hex::encode(index.pack),
        hex::encode(&sum[..8])
    );
    (key, out)
}

fn header(bytes: &[u8], magic: &[u8; 4]) -> Result<(), String> {
    if bytes.len() < 8 || &bytes[..4] != magic {
        return Err(format!("not a {} object", String::from_utf8_lossy(magic)));
    }
    if bytes[4] != VERSION || bytes[5..8] != [0, 0, 0] {
        return Err(format!("version {} (this build reads {VERSION})", bytes[4]));
    }
    Ok(())
}

fn checksum(bytes: &[u8]) -> Result<&[u8], String> {
    let (body, sum) = bytes.split_at(bytes.len().saturating_sub(32));
    if sum.len() != 32 || blake3::hash(body).as_bytes() != sum {
        return Err("checksum does not match".into());
    }
    Ok(body)
}

fn le_u64(b: &[u8]) -> u64 {
    let mut a = [0; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

fn le_u32(b: &[u8]) -> u32 {
    let mut a = [0; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_le_bytes(a)
}

fn id_at(b: &[u8]) -> ObjectId {
    let mut a = [0; 32];
    a.copy_from_slice(&b[..32]);
    ObjectId::from_bytes(a)
}

/// Checks an index's or tombstone's frame: magic and version, a length that matches
/// the count at `count_at` exactly, the trailing checksum. Returns the count and the
/// bytes before the checksum.
fn framed<'a>(
    bytes: &'a [u8],
    magic: &[u8; 4],
    fixed: usize,
    count_at: usize,
    entry: usize,
) -> Result<(usize, &'a [u8]), String> {
    header(bytes, magic)?;
    if bytes.len() < fixed {
        return Err("truncated".into());
    }
    let count = le_u32(&bytes[count_at..]) as usize;
    if bytes.len() != fixed + count * entry {
        return Err(format!("{} bytes for {count} entries", bytes.len()));
    }
    Ok((count, checksum(bytes)?))
}

/// An index object of layout 2 at `key`.
fn parse_index(key: &str, bytes: &[u8]) -> Result<Index, String> {
    let index = parse_index_bytes(bytes)?;
    let expected = format!(
        "meta/{}.{}.idx",
        hex::encode(index.pack),
        hex::encode(&bytes[bytes.len() - 32..bytes.len() - 24])
    );
    if key != expected {
        return Err(format!("its contents name it {expected}"));
    }
    Ok(index)
}

/// The index a layout-3 pack at `key` of `size` bytes carries: `bytes`, its last
/// bytes (as many as the key names).
fn parse_tail(key: &str, bytes: &[u8], size: u64) -> Result<Index, String> {
    let mut index = parse_index_bytes(bytes)?;
    let tail = u32::try_from(bytes.len()).map_err(|_| "index longer than 4 GiB".to_string())?;
    let expected = pack_key(&index.pack, tail);
    if key != expected {
        return Err(format!("the index it ends with names it {expected}"));
    }
    if let Some((id, ..)) = index.entries.iter().find(|e| e.1 < PACK_HEADER_3 as u64) {
        return Err(format!("entry {id} lies inside the pack's header"));
    }
    if index.pack_len.checked_add(u64::from(tail)) != Some(size) {
        return Err(format!(
            "{size} bytes, but its index says {} bytes of records and {tail} of index",
            index.pack_len
        ));
    }
    index.tail = tail;
    Ok(index)
}

/// An index's bytes (the same in both layouts), checked field by field.
fn parse_index_bytes(bytes: &[u8]) -> Result<Index, String> {
    let (count, body) = framed(bytes, INDEX_MAGIC, INDEX_FIXED, 48, INDEX_ENTRY)?;
    let mut pack = [0; 32];
    pack.copy_from_slice(&body[8..40]);
    let pack_len = le_u64(&body[40..]);
    let mut entries = Vec::with_capacity(count);
    for e in body[52..].chunks_exact(INDEX_ENTRY) {
        let (id, offset, len) = (id_at(e), le_u64(&e[32..]), le_u32(&e[40..]));
        if offset < PACK_HEADER as u64
            || offset
                .checked_add(u64::from(len))
                .is_none_or(|end| end > pack_len)
        {
            return Err(format!("entry {id} lies outside the pack"));
        }
        if entries
            .last()
            .is_some_and(|l: &(ObjectId, u64, u32)| l.0 >= id)
        {
            return Err(format!("entry {id} out of order"));
        }
        entries.push((id, offset, len));
    }
    Ok(Index {
        pack,
        pack_len,
        tail: 0,
        entries,
    })
}

/// A tombstone of `entries` and its key in `dir` (`meta` in layout 2, `packs` in 3).
fn encode_tomb(entries: &[([u8; 32], ObjectId)], dir: &str) -> (String, Vec<u8>) {
    let mut out = Vec::with_capacity(TOMB_FIXED + entries.len() * TOMB_ENTRY);
    out.extend_from_slice(TOMB_MAGIC);
    out.extend_from_slice(&[VERSION, 0, 0, 0]);
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for (pack, id) in entries {
        out.extend_from_slice(pack);
        out.extend_from_slice(id.as_bytes());
    }
    let sum = *blake3::hash(&out).as_bytes();
    out.extend_from_slice(&sum);
    (format!("{dir}/{}.del", hex::encode(&sum[..16])), out)
}

fn parse_tomb(key: &str, dir: &str, bytes: &[u8]) -> Result<Tomb, String> {
    let (_, body) = framed(bytes, TOMB_MAGIC, TOMB_FIXED, 8, TOMB_ENTRY)?;
    let expected = format!(
        "{dir}/{}.del",
        hex::encode(&bytes[bytes.len() - 32..bytes.len() - 16])
    );
    if key != expected {
        return Err(format!("its contents name it {expected}"));
    }
    let entries = body[12..]
        .chunks_exact(TOMB_ENTRY)
        .map(|e| {
            let mut pack = [0; 32];
            pack.copy_from_slice(&e[..32]);
            (pack, id_at(&e[32..]))
        })
        .collect();
    Ok(Tomb { entries })
}

/// 16 bytes no other write will carry: the clock, the process, a counter, hashed.
fn nonce() -> [u8; 16] {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = blake3::Hasher::new();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    h.update(&now.as_nanos().to_le_bytes());
    h.update(&std::process::id().to_le_bytes());
    h.update(
        &COUNTER
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .to_le_bytes(),
    );
    let mut out = [0; 16];
    out.copy_from_slice(&h.finalize().as_bytes()[..16]);
    out
}

fn put_name(out: &mut Vec<u8>, name: &str) {
    out.extend_from_slice(&(name.len() as u16).to_le_bytes());
    out.extend_from_slice(name.as_bytes());
}

fn put_opt(out: &mut Vec<u8>, id: &Option<ObjectId>) {
    if let Some(id) = id {
        out.extend_from_slice(id.as_bytes());
    }
}

fn encode_refs(doc: &RefDoc) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(REFS_MAGIC);
    out.extend_from_slice(&[VERSION, 0, 0, 0]);
    out.extend_from_slice(&doc.nonce);
    out.extend_from_slice(&(doc.refs.len() as u32).to_le_bytes());
    for (name, id) in &doc.refs {
        put_name(&mut out, name);
        out.extend_from_slice(id.as_bytes());
    }
    out.extend_from_slice(&(doc.log.len() as u32).to_le_bytes());
    for (name, e) in &doc.log {
        put_name(&mut out, name);
        out.push(u8::from(e.old.is_some()) | (u8::from(e.new.is_some()) << 1));
        put_opt(&mut out, &e.old);
        put_opt(&mut out, &e.new);
        out.extend_from_slice(&(e.message.len() as u32).to_le_bytes());
        out.extend_from_slice(e.message.as_bytes());
    }
    let sum = *blake3::hash(&out).as_bytes();
    out.extend_from_slice(&sum);
    out
}

/// A bounds-checked reader of the refs object.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("truncated".into());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u32(&mut self) -> Result<u32, String> {
        self.take(4).map(le_u32)
    }
    fn id(&mut self) -> Result<ObjectId, String> {
        self.take(32).map(id_at)
    }
    fn name(&mut self) -> Result<String, String> {
        let len = self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))?;
        let bytes = self.take(len.into())?;
        let name = std::str::from_utf8(bytes).map_err(|_| "ref name is not UTF-8".to_string())?;
        validate_ref_name(name).map_err(|e| e.to_string())?;
        Ok(name.to_string())
    }
}

fn decode_refs(bytes: &[u8]) -> Result<RefDoc, String> {
    header(bytes, REFS_MAGIC)?;
    let body = checksum(bytes)?;
    let mut r = Reader(&body[8..]);
    let mut doc = RefDoc::default();
    doc.nonce.copy_from_slice(r.take(16)?);
    let count = r.u32()?;
    for _ in 0..count {
        let name = r.name()?;
        let id = r.id()?;
        if doc
            .refs
            .last_key_value()
            .is_some_and(|(last, _)| *last >= name)
        {
            return Err(format!("ref {name} out of order"));
        }
        doc.refs.insert(name, id);
    }
    let count = r.u32()?;
    for _ in 0..count {
        let name = r.name()?;
        let flags = r.take(1)?[0];
        if flags > 3 {
            return Err(format!("reflog entry of {name}: flags {flags}"));
        }
        let old = if flags & 1 != 0 { Some(r.id()?) } else { None };
        let new = if flags & 2 != 0 { Some(r.id()?) } else { None };
        let len = r.u32()? as usize;
        let message = std::str::from_utf8(r.take(len)?)
            .map_err(|_| format!("reflog message of {name} is not UTF-8"))?
            .to_string();
        doc.log.push((name, ReflogEntry { old, new, message }));
    }
    if !r.0.is_empty() {
        return Err(format!("{} bytes after the reflog", r.0.len()));
    }
    Ok(doc)
}

impl ObjectStore for S3Store {
    fn get_many(&self, ids: &[ObjectId]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let mut out: Vec<Option<Vec<u8>>> = vec![None; ids.len()];
        // What a prefetch streamed first (no round trip of its own: it is in flight).
        let mut prefetched: Vec<Option<Bytes>> = vec![None; ids.len()];
        let mut pending = self.take_prefetched(ids, &mut prefetched);
        for (i, record) in prefetched.into_iter().enumerate() {
            if let Some(record) = record {
                out[i] = Some(codec::decode(&ids[i], &record)?);
            }
        }
        let mut refreshed = false;
        for _ in 0..GET_ATTEMPTS {
            let mut locs = Vec::with_capacity(pending.len());
            let mut wanted = Vec::with_capacity(pending.len());
            {
                let mut cache = self.lock_cache();
                let misses = pending
                    .iter()
                    .any(|&i| !cache.objects.contains_key(&ids[i]));
                if cache.listed.is_none() || (misses && !refreshed) {
                    self.refresh(&mut cache)?;
                    refreshed = true;
                }
                for &i in &pending {
                    if let Some(loc) = cache.objects.get(&ids[i]) {
                        locs.push(*loc);
                        wanted.push(i);
                    }
                }
            }
            let got = self.fetch(&locs)?;
            pending.clear();
            for (i, record) in wanted.into_iter().zip(got) {
                match record {
                    Some(record) => out[i] = Some(codec::decode(&ids[i], &record)?),
                    None => pending.push(i),
                }
            }
            if pending.is_empty() {
                break;
            }
            // A pack vanished under us (repacked): re-read the indexes and retry.
            self.refresh(&mut self.lock_cache())?;
        }
        Ok(out)
    }

    fn has_many(&self, ids: &[ObjectId]) -> Result<Vec<ObjectId>, StoreError> {
        let mut cache = self.lock_cache();
        match cache.listed {
            None => self.refresh(&mut cache)?,
            Some(at) => {
                let present = ids.iter().any(|id| cache.objects.contains_key(id));
                let absent = ids.iter().any(|id| !cache.objects.contains_key(id));
                // Within a fence, the fence's listing stands for "absent" too.
                let fenced = cache
                    .fenced
                    .is_some_and(|f| f.elapsed() < self.options.refresh_after);
                if absent && !fenced && at.elapsed() >= self.options.refresh_after {
                    self.refresh(&mut cache)?;
                } else if present {
                    // "Present" only from a cache that has seen the last deletion.
                    self.current_for_presence(&mut cache)?;
                }
            }
        }
        Ok(ids
            .iter()
            .filter(|id| !cache.objects.contains_key(*id))
            .copied()
            .collect())
    }

    fn put_many(&self, objects: &[(ObjectId, &[u8])]) -> Result<(), StoreError> {
        let mut cache = self.lock_cache();
        // Skipping an object the cache names is safe only if no deletion came since.
        if cache.listed.is_some() && objects.iter().any(|(id, _)| cache.objects.contains_key(id)) {
            self.current_for_presence(&mut cache)?;
        }
        let mut seen = HashSet::new();
        let fresh: Vec<&(ObjectId, &[u8])> = objects
            .iter()
            .filter(|(id, _)| !cache.objects.contains_key(id) && seen.insert(*id))
            .collect();
        let mut batch: Vec<(ObjectId, Vec<u8>)> = Vec::new();
        let mut size = 0;
        let compression = self.options.compression;
        // Packs in the order given, each indexed before the next is written.
        let flush = |batch: &mut Vec<(ObjectId, Vec<u8>)>, cache: &mut Cache| {
            if batch.is_empty() {
                return Ok::<_, StoreError>(());
            }
            let records: Vec<(ObjectId, &[u8])> =
                batch.iter().map(|(id, r)| (*id, r.as_slice())).collect();
            let (key, index) = self.write_pack(&records)?;
            cache.add_index(key, Arc::new(index));
            batch.clear();
            Ok(())
        };
        for (id, bytes) in fresh {
            let record = codec::encode(bytes, compression);
            if size + record.len() > self.options.pack_limit {
                flush(&mut batch, &mut cache)?;
                size = 0;
            }
            size += record.len();
            batch.push((*id, record));
        }
        flush(&mut batch, &mut cache)
    }

    fn delete_many(&self, ids: &[ObjectId]) -> Result<(), StoreError> {
        // Nothing deleted is handed out from a stream started before.
        self.lock_prefetches().clear();
        let mut cache = self.lock_cache();
        self.bump_epoch()?;
        self.refresh(&mut cache)?;
        let doomed: HashSet<ObjectId> = ids.iter().copied().collect();
        let mut hidden = Vec::new();
        for index in cache.indexes.values() {
            for (id, _, _) in &index.entries {
                if doomed.contains(id) {
                    hidden.push((index.pack, *id));
                }
            }
        }
        hidden.sort_unstable();
        hidden.dedup();
        // One tombstone hides every id of the call at once: a deletion interrupted
        // later never leaves a referrer without what it references.
        if !hidden.is_empty() {
            let (key, bytes) = encode_tomb(&hidden, self.dir());
            self.put_key(&key, bytes, PutMode::Overwrite)
                .map_err(|f| self.fail(&key, f))?;
            cache.tombs.insert(key, Arc::new(Tomb { entries: hidden }));
        }
        // Compact every pack a tombstone names (this call's, and any an interrupted
        // call left), then drop the tombstones.
        let packs: HashSet<[u8; 32]> = cache
            .tombs
            .values()
            .flat_map(|t| t.entries.iter().map(|e| e.0))
            .collect();
        self.compact(&mut cache, &packs)?;
        // Layout 3: the dead entries of packs that stay remain hidden, by one
        // tombstone naming them all, written before the others go (in layout 2
        // their packs got new index objects without them).
        let mut keep: Vec<([u8; 32], ObjectId)> = Vec::new();
        if self.layout != 2 {
            let held: HashSet<[u8; 32]> = cache.indexes.values().map(|i| i.pack).collect();
            keep = cache
                .tombs
                .values()
                .flat_map(|t| t.entries.iter().copied())
                .filter(|(pack, _)| held.contains(pack))
                .collect();
            keep.sort_unstable();
            keep.dedup();
        }
        let mut kept = None;
        if !keep.is_empty() {
            let (key, bytes) = encode_tomb(&keep, self.dir());
            if !cache.tombs.contains_key(&key) {
                self.put_key(&key, bytes, PutMode::Overwrite)
                    .map_err(|f| self.fail(&key, f))?;
                cache
                    .tombs
                    .insert(key.clone(), Arc::new(Tomb { entries: keep }));
            }
            kept = Some(key);
        }
        let tombs: Vec<String> = cache.tombs.keys().cloned().collect();
        for key in tombs.into_iter().filter(|k| Some(k) != kept.as_ref()) {
            self.delete_key(&key)?;
            cache.tombs.remove(&key);
        }
        cache.rebuild();
        self.bump_epoch()?;
        cache.epoch = Some(self.epoch()?);
        Ok(())
    }

    /// Starts streaming `ids` in one wave of ranged GETs (see the
    /// module docs, "Costs").
    fn will_read(&self, ids: &[ObjectId]) {
        self.start_prefetch(ids);
    }

    /// One request: a HEAD of `gc-epoch` when the cache was listed less than
    /// `refresh_after` ago with the epoch read (a re-listing if the epoch moved),
    /// else a LIST (plus GETs of indexes other clients wrote). The writer's
    /// `has_many` calls then answer from the cache until `refresh_after` has passed
    /// (module docs, "Consistency").
    fn fence(&self) -> Result<(), StoreError> {
        self.fence_with(None)
    }

    /// [`fence`](Self::fence), or no request at all when `token` is the token of
    /// the lease under which this client last fenced with a request (module docs,
    /// "A fence without a request").
    fn fence_leased(&self, token: Option<ObjectId>) -> Result<(), StoreError> {
        self.fence_with(Some(token))
    }

    /// Packs no index names, older than [`S3Options::orphan_grace`]: written by a
    /// writer that died before their index. Called by a sweep (no lease held, so
    /// no writer of the protocol is between a pack and its index); the grace
    /// covers writers outside it.
    ///
    /// Layout 3 has none (a pack is written with its index in one PUT): no request.
    fn remove_orphans(&self) -> Result<u64, StoreError> {
        if self.layout != 2 {
            return Ok(0);
        }
        let mut cache = self.lock_cache();
        self.refresh(&mut cache)?;
        let indexed: HashSet<String> = cache
            .indexes
            .values()
            .map(|i| pack_key(&i.pack, i.tail))
            .collect();
        drop(cache);
        let packs = self.path("packs");
        let metas: Vec<object_store::ObjectMeta> = self
            .run(self.client.list(Some(&packs)).try_collect())
            .map_err(|e| self.err("packs/", e))?;
        bump(
            &self.tally.lists,
            1 + metas.len().saturating_sub(1) as u64 / 1000,
        );
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let grace_ms = self.options.orphan_grace.as_millis() as i64;
        let mut freed = 0;
        for m in metas {
            let full = m.location.as_ref();
            let Some(key) = full.strip_prefix(&self.prefix) else {
                continue;
            };
            let old_enough = now_ms.saturating_sub(m.last_modified.timestamp_millis()) >= grace_ms;
            if key.ends_with(".pack") && !indexed.contains(key) && old_enough {
                self.delete_key(key)?;
                freed += m.size;
            }
        }
        Ok(freed)
    }

    fn for_each_id(
        &self,
        f: &mut dyn FnMut(ObjectId) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let ids: Vec<ObjectId> = {
            let mut cache = self.lock_cache();
            self.refresh(&mut cache)?;
            cache.objects.keys().copied().collect()
        };
        ids.into_iter().try_for_each(f)
    }
}

crate::impl_object_source!(S3Store);

impl RefStore for S3Store {
    fn get_ref(&self, name: &str) -> Result<Option<ObjectId>, StoreError> {
        validate_ref_name(name)?;
        Ok(self.fresh_refs()?.refs.get(name).copied())
    }

    /// From the copy of `refs` this client last read or wrote, if any (one GET
    /// otherwise): the update's `If-Match` checks it.
    fn get_ref_for_update(&self, name: &str) -> Result<Option<ObjectId>, StoreError> {
        validate_ref_name(name)?;
        if let Some((_, doc)) = self.refs.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            return Ok(doc.refs.get(name).copied());
        }
        Ok(self.fresh_refs()?.refs.get(name).copied())
    }

    fn update_refs(&self, updates: &[RefUpdate], message: &str) -> Result<(), StoreError> {
        check_batch(updates)?;
        let mut slot = self.refs.lock().unwrap_or_else(|p| p.into_inner());
        let (mut state, mut fresh) = match slot.take() {
            Some(s) => (s, false),
            None => (self.load_refs()?, true),
        };
        for _ in 0..CAS_ATTEMPTS {
            let (version, doc) = &state;
            if let Err(e) = apply_updates(updates, |n| Ok(doc.refs.get(n).copied())) {
                if !fresh {
                    // Our copy may be old: decide on the bucket's.
                    state = self.load_refs()?;
                    fresh = true;
                    continue;
                }
                *slot = Some(state);
                return Err(e);
            }
            let mut next = doc.clone();
            next.nonce = nonce();
            for u in updates.iter().filter(|u| u.changes()) {
                match u.new {
                    Some(id) => next.refs.insert(u.name.clone(), id),
                    None => next.refs.remove(&u.name),
                };
                if logged(&u.name) {
                    next.log.push((
                        u.name.clone(),
                        ReflogEntry {
                            old: u.expected,
                            new: u.new,
                            message: message.to_string(),
                        },
                    ));
                }
            }
            let mode = match version {
                Some(v) => PutMode::Update(v.clone()),
                None => PutMode::Create,
            };
            match self.put_key("refs", encode_refs(&next), mode) {
                Ok(v) => {
                    *slot = Some((Some(v), next));
                    return Ok(());
                }
                Err(Failure::Precondition) => {
                    // Someone else wrote first, or our own write landed and its reply
                    // was lost (then a retry found its own nonce).
                    state = self.load_refs()?;
                    fresh = true;
                    if state.1.nonce == next.nonce {
                        *slot = Some(state);
                        return Ok(());
                    }
                }
                Err(f) => return Err(self.fail("refs", f)),
            }
        }
        Err(self.err(
            "refs",
            format!("compare-and-swap lost {CAS_ATTEMPTS} times to other writers"),
        ))
    }

    fn list_refs(&self, prefix: &str) -> Result<Vec<(String, ObjectId)>, StoreError> {
        Ok(self
            .fresh_refs()?
            .refs
            .into_iter()
            .filter(|(n, _)| n.starts_with(prefix))
            .collect())
    }

    fn reflog(&self, name: &str) -> Result<Vec<ReflogEntry>, StoreError> {
        validate_ref_name(name)?;
        Ok(self
            .fresh_refs()?
            .log
            .into_iter()
            .filter(|(n, _)| n == name)
            .map(|(_, e)| e)
            .collect())
    }
}

/// The profile's credentials and region from the AWS shared files.
#[derive(Default)]
struct Profile {
    credentials: Option<(String, String, Option<String>)>,
    region: Option<String>,
}

fn aws_profile() -> Profile {
    let name = std::env::var("AWS_PROFILE").unwrap_or_else(|_| "default".into());
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let file = |var: &str, default: &str| {
        std::env::var_os(var)
            .map(std::path::PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".aws").join(default)))
            .and_then(|p| std::fs::read_to_string(p).ok())
    };
    let mut profile = Profile::default();
    if let Some(text) = file("AWS_SHARED_CREDENTIALS_FILE", "credentials") {
        let s = ini_section(&text, &name);
        if let (Some(key), Some(secret)) =
            (s.get("aws_access_key_id"), s.get("aws_secret_access_key"))
        {
            profile.credentials = Some((
                key.clone(),
                secret.clone(),
                s.get("aws_session_token").cloned(),
            ));
        }
    }
    if let Some(text) = file("AWS_CONFIG_FILE", "config") {
        let section = if name == "default" {
            name.clone()
        } else {
            format!("profile {name}")
        };
        profile.region = ini_section(&text, &section).get("region").cloned();
    }
    profile
}

/// The `key = value` lines of `[section]` in an INI file (`#` and `;` comments).
fn ini_section(text: &str, section: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut inside = false;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = name.trim() == section;
        } else if inside {
            if let Some((k, v)) = line.split_once('=') {
                out.insert(k.trim().to_string(), v.trim().to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_with_their_parameters() {
        let l = S3Location::parse(
            "s3://my-bucket/a/b/?endpoint=http%3A%2F%2F127.0.0.1%3A9100&region=eu-1&refs=postgres%3A%2F%2Fu%40h%2Fd",
        )
        .unwrap();
        assert_eq!(l.bucket, "my-bucket");
        assert_eq!(l.prefix, "a/b");
        assert_eq!(l.endpoint.as_deref(), Some("http://127.0.0.1:9100"));
        assert_eq!(l.region.as_deref(), Some("eu-1"));
        assert_eq!(l.refs.as_deref(), Some("postgres://u@h/d"));
        assert_eq!(S3Location::parse("s3://bkt").unwrap().prefix, "");
        for bad in [
            "s3://",
            "s3://B",
            "s3://bucket/a//b",
            "s3://bucket/../x",
            "s3://bucket?endpoint=ftp://x",
            "s3://bucket?colour=red",
            "s3://bucket?region=%zz",
        ] {
            assert!(S3Location::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn index_tombstone_and_refs_round_trip_and_refuse_damage() {
        let ids: Vec<ObjectId> = (0u8..3).map(|i| ObjectId::hash_stored(&[i])).collect();
        let mut entries: Vec<(ObjectId, u64, u32)> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| (*id, 8 + 10 * i as u64, 10))
            .collect();
        entries.sort_unstable_by_key(|e| e.0);
        let index = Index {
            pack: [7; 32],
            pack_len: 38,
            tail: 0,
            entries,
        };
        let (key, bytes) = encode_index(&index);
        let back = parse_index(&key, &bytes).unwrap();
        assert_eq!(back.entries, index.entries);
        let mut flipped = bytes.clone();
        flipped[60] ^= 1;
        assert!(parse_index(&key, &flipped).is_err());
        assert!(parse_index("meta/other.idx", &bytes).is_err());
        assert!(parse_index(&key, &bytes[..bytes.len() - 1]).is_err());

        let (tkey, tbytes) = encode_tomb(&[([7; 32], ids[0])], "meta");
        assert_eq!(
            parse_tomb(&tkey, "meta", &tbytes).unwrap().entries,
            vec![([7; 32], ids[0])]
        );
        assert!(parse_tomb(&tkey, "meta", &tbytes[1..]).is_err());
        assert!(
            parse_tomb(&tkey, "packs", &tbytes).is_err(),
            "a tombstone of the other layout"
        );

        let mut doc = RefDoc {
            nonce: [1; 16],
            ..Default::default()
        };
        doc.refs.insert("heads/main".into(), ids[1]);
        doc.log.push((
            "heads/main".into(),
            ReflogEntry {
                old: None,
                new: Some(ids[1]),
                message: "commit".into(),
            },
        ));
        let bytes = encode_refs(&doc);
        assert_eq!(decode_refs(&bytes).unwrap(), doc);
        for cut in [0, 8, 30, bytes.len() - 1] {
            assert!(decode_refs(&bytes[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn a_layout_3_pack_carries_its_index_and_its_key_names_it() {
        let ids: Vec<ObjectId> = (0u8..2).map(|i| ObjectId::hash_stored(&[i])).collect();
        let mut entries: Vec<(ObjectId, u64, u32)> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| (*id, 24 + 10 * i as u64, 10))
            .collect();
        entries.sort_unstable_by_key(|e| e.0);
        let index = Index {
            pack: [9; 32],
            pack_len: 44,
            tail: 0,
            entries,
        };
        let (_, tail) = encode_index(&index);
        let n = tail.len() as u32;
        assert_eq!(tail.len(), INDEX_FIXED + 2 * INDEX_ENTRY);
        let key = pack_key(&[9; 32], n);
        assert_eq!(key, format!("packs/{}.{n}.pack", "09".repeat(32)));
        assert_eq!(parse_pack_key(&key), Some(([9; 32], n)));
        assert_eq!(parse_pack_key(&pack_key(&[9; 32], 0)), Some(([9; 32], 0)));
        for bad in [
            format!("packs/{}.0{n}.pack", "09".repeat(32)),
            format!("packs/{}.+{n}.pack", "09".repeat(32)),
            format!("packs/{}.0.pack", "09".repeat(32)),
            format!("packs/{}.{n}.pack", "0A".repeat(32)),
            format!("packs/{}.{n}.pack", "09".repeat(31)),
            format!("meta/{}.{n}.pack", "09".repeat(32)),
        ] {
            assert_eq!(parse_pack_key(&bad), None, "{bad}");
        }
        let back = parse_tail(&key, &tail, 44 + u64::from(n)).unwrap();
        assert_eq!((back.entries, back.tail), (index.entries.clone(), n));
        // The size must be the records' and the index's, the key the contents'.
        assert!(parse_tail(&key, &tail, 45 + u64::from(n)).is_err());
        assert!(parse_tail(&pack_key(&[8; 32], n), &tail, 44 + u64::from(n)).is_err());
        assert!(parse_tail(&pack_key(&[9; 32], n + 1), &tail, 44 + u64::from(n)).is_err());
        let mut flipped = tail.clone();
        flipped[60] ^= 1;
        assert!(parse_tail(&key, &flipped, 44 + u64::from(n)).is_err());
        // An entry inside the 24-byte header of a layout-3 pack is refused.
        let low = Index {
            entries: vec![(ids[0], 8, 10)],
            ..index
        };
        let (_, tail) = encode_index(&low);
        let key = pack_key(&[9; 32], tail.len() as u32);
        assert!(parse_tail(&key, &tail, 44 + tail.len() as u64).is_err());
    }

    #[test]
    fn profiles_are_read_from_ini_sections() {
        let text = "[default]\naws_access_key_id = A\n# c\n[profile x]\nregion=eu\n";
        assert_eq!(
            ini_section(text, "default")
                .get("aws_access_key_id")
                .unwrap(),
            "A"
        );
        assert_eq!(ini_section(text, "profile x").get("region").unwrap(), "eu");
        assert!(ini_section(text, "nope").is_empty());
    }
}
