//! The stat cache (`.snapgraph/index`): what the working directory held when it was
//! last committed or checked out, so that the next commit reads only what changed.
//!
//! It records, for each entry the scan recorded, its kind; for files the `lstat`
//! fields that change when a file is written (size, mtime and ctime in nanoseconds,
//! inode, device, mode) and the digest of what was recorded (the content's root
//! object id, or the bytes themselves for content small enough to live inline in its
//! tree entry); for symlinks their `lstat` fields. Beside the entries it keeps the
//! **workspace skeleton**: the stored bytes of the commit and tree nodes that the last
//! shallow checkout of the branch tip read, so that the next one reads them from here
//! instead of the store.
//!
//! ## When it is trusted
//!
//! - **A file is unchanged**, and not read, when its stat equals the recorded one,
//!   is not racy (below), *and* the branch tip holds a file at that path with the
//!   recorded digest. Everything else is read ("re-hash on doubt").
//! - **Nothing changed at all**, and no tree is loaded, when the index is
//!   *complete* for the branch tip ([`Index::tip`] is the tip's id: the entries are
//!   exactly that commit's tree) and the walk finds exactly the recorded entries,
//!   each of the recorded kind, every file and symlink with its recorded, non-racy
//!   stat ([`crate::scan::unchanged`]). Any difference, even one that would not change
//!   the tree, sends the commit down the full path above.
//! - **Skeleton objects** are content-addressed: the engine re-hashes each one it
//!   reads, so an object of another commit or branch, one the store no longer holds
//!   or one corrupted on disk is never taken for another; one missing is read from
//!   the store.
//!
//! **Racy files** (git's racy-git rule). The index records `probe_ns`, the file
//! system's clock (the mtime of a probe file) taken *before* the stats were. A file
//! whose recorded mtime is not older than `probe_ns` could have been changed again
//! within the same timestamp tick without its stat changing, so it is re-read next
//! time. A file older than the probe cannot: a later write would give it an mtime of
//! at least the probe's tick.
//!
//! **Other processes.** The branch tip is read from the store on every command, so
//! a commit made by another process (another working directory on the same store, a
//! `sync`) makes the tip differ from [`Index::tip`] and the fast path is not taken;
//! the per-file rule still holds because it compares digests with the tree of the
//! tip actually read. Another branch (`checkout`, `-b`) is the same case. The ignore
//! rules are applied by every walk, so an edited `.snapgraphignore` (itself a
//! recorded file, whose stat changes) or a file that became ignored changes the
//! walk's entries, which the fast path compares.
//!
//! ## Bytes
//!
//! `SGINDEX\0`, the version ([`INDEX_VERSION`], u32 little-endian), the BLAKE3 hash
//! of the rest, then the postcard encoding of the entries. The skeleton lives in
//! `.snapgraph/index.skeleton` (`SGSKEL\0\0`, version, hash, postcard of the
//! objects), read only when a tree must be loaded. Written
//! atomically (temporary file, fsync, rename) and only ever a cache: a missing,
//! unreadable, corrupted, older (version 1 was JSON) or foreign one (another root)
//! means every file is read.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use snapgraph::{BoxError, ObjectId, ObjectSource, Workspace};

use crate::error::{IoContext, Result};

/// The file system's clock now, in nanoseconds since the epoch: the modification
/// time of a file created in `dir` (the racy-file rule compares file times with it,
/// so it must come from the same clock and have the same granularity).
pub fn fs_now(dir: &Path) -> Result<i64> {
    let probe = dir.join(format!(".probe-{}", std::process::id()));
    let f = std::fs::File::create(&probe).at(&probe)?;
    let m = f.metadata().at(&probe)?;
    drop(f);
    let _ = std::fs::remove_file(&probe);
    Ok(FileStat::of(&m).mtime_ns)
}

/// The mode recorded for a file with `st_mode` `mode`.
pub fn file_mode(mode: u32) -> u32 {
    if mode & 0o111 != 0 {
        0o755
    } else {
        0o644
    }
}

/// The digest the index records for the file at `path` in `ws` (see
/// the module docs); `None` if there is no file there or its bytes are neither
/// stored as an object nor loaded.
pub fn digest_of(ws: &Workspace, path: &str) -> Option<Digest> {
    if let Some(id) = ws.file_content_id(path) {
        return Some(Digest::Content(id));
    }
    if ws.is_loaded(path) {
        let data = ws.read(path).ok()?;
        if data.len() <= snapgraph::limits::INLINE_MAX {
            return Some(Digest::Inline(data.to_vec()));
        }
    }
    None
}

/// Format version of the index file.
pub const INDEX_VERSION: u32 = 2;

const MAGIC: &[u8; 8] = b"SGINDEX\0";

/// The `lstat` fields compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStat {
    /// Length in bytes.
    pub size: u64,
    /// Modification time, ns since the epoch.
    pub mtime_ns: i64,
    /// Status change time, ns since the epoch.
    pub ctime_ns: i64,
    /// Inode number.
    pub ino: u64,
    /// Device.
    pub dev: u64,
    /// Full `st_mode`.
    pub mode: u32,
}

impl FileStat {
    /// The fields of `s`, as [`FileStat::of`] reads them from a `Metadata`.
    #[allow(clippy::unnecessary_cast)] // the field types differ between targets
    pub fn of_stat(s: &rustix::fs::Stat) -> Self {
        Self {
            size: s.st_size as u64,
            mtime_ns: (s.st_mtime as i64).saturating_mul(1_000_000_000) + s.st_mtime_nsec as i64,
            ctime_ns: (s.st_ctime as i64).saturating_mul(1_000_000_000) + s.st_ctime_nsec as i64,
            ino: s.st_ino as u64,
            dev: s.st_dev as u64,
            mode: s.st_mode as u32,
        }
    }

    /// The `lstat` of `path` (never following a symlink).
    pub fn lstat(path: &Path) -> std::io::Result<Self> {
        Ok(Self::of_stat(&rustix::fs::lstat(path)?))
    }

    /// The fields of `m`.
    pub fn of(m: &std::fs::Metadata) -> Self {
        Self {
            size: m.size(),
            mtime_ns: m.mtime().saturating_mul(1_000_000_000) + m.mtime_nsec(),
            ctime_ns: m.ctime().saturating_mul(1_000_000_000) + m.ctime_nsec(),
            ino: m.ino(),
            dev: m.dev(),
            mode: m.mode(),
        }
    }
}

/// What a file's entry recorded: how its bytes are stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Digest {
    /// The root object id of its content.
    Content(ObjectId),
    /// The bytes themselves (content inline in its tree entry).
    Inline(Vec<u8>),
}

/// One recorded entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum IndexEntry {
    /// A regular file: its stat when recorded and what was recorded.
    File {
        /// Its stat.
        stat: FileStat,
        /// What was recorded.
        digest: Digest,
    },
    /// A symlink and its stat (a new target means a new symlink: a new stat).
    Symlink {
        /// Its stat.
        stat: FileStat,
    },
    /// A directory.
    Dir,
}

/// The stat cache.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Index {
    /// The directory the paths are relative to.
    pub root: Vec<u8>,
    /// The file system's clock before the stats were taken (ns).
    pub probe_ns: i64,
    /// The commit whose whole tree the entries are, if they are one (a full scan
    /// that committed or found nothing to commit, a checkout into the working
    /// directory); `None` after `commit PATH...`.
    pub tip: Option<ObjectId>,
    /// Entries by workspace path (`/a/b`): every one the scan recorded when
    /// [`Index::tip`] is set, files only otherwise.
    pub entries: BTreeMap<String, IndexEntry>,
    /// Stored bytes of the commit and tree nodes a shallow checkout of the branch
    /// tip read (see the module docs).
    pub skeleton: HashMap<ObjectId, Vec<u8>>,
}

#[derive(Serialize, Deserialize)]
struct Body {
    root: Vec<u8>,
    probe_ns: i64,
    tip: Option<ObjectId>,
    entries: Vec<(String, IndexEntry)>,
}

/// `magic || version || BLAKE3(body) || body`.
fn frame(magic: &[u8; 8], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 44);
    out.extend_from_slice(magic);
    out.extend_from_slice(&INDEX_VERSION.to_le_bytes());
    out.extend_from_slice(blake3::hash(body).as_bytes());
    out.extend_from_slice(body);
    out
}

/// The body of a [`frame`] if magic, version and checksum hold.
fn unframe<'a>(magic: &[u8; 8], bytes: &'a [u8]) -> Option<&'a [u8]> {
    let rest = bytes.strip_prefix(magic.as_slice())?;
    let (version, rest) = rest.split_first_chunk::<4>()?;
    if u32::from_le_bytes(*version) != INDEX_VERSION {
        return None;
    }
    let (sum, body) = rest.split_first_chunk::<32>()?;
    (blake3::hash(body).as_bytes() == sum).then_some(body)
}

/// Where the skeleton of the index at `path` lives.
fn skeleton_path(path: &Path) -> std::path::PathBuf {
    path.with_extension("skeleton")
}

impl Index {
    /// An empty index of `root` with clock probe `probe_ns`.
    pub fn new(root: &Path, probe_ns: i64) -> Self {
        Self {
            root: root.as_os_str().as_bytes().to_vec(),
            probe_ns,
            ..Self::default()
        }
    }

    /// Loads the index at `path` if it exists, is readable and describes `root`,
    /// without its skeleton (see [`Index::load_skeleton`]).
    pub fn load(path: &Path, root: &Path) -> Option<Index> {
        let bytes = std::fs::read(path).ok()?;
        Self::parse(&bytes, root)
    }

    /// Reads the skeleton saved beside the index at `path` (the fast path does not
    /// need it); a missing or damaged one leaves it empty.
    pub fn load_skeleton(&mut self, path: &Path) {
        self.skeleton = std::fs::read(skeleton_path(path))
            .ok()
            .and_then(|b| parse_skeleton(&b))
            .unwrap_or_default();
    }

    /// The index in `bytes` (an index file's contents) if they parse, have this
    /// version, hash to their checksum and describe `root`; anything else is `None`
    /// (a cache, never an error).
    pub fn parse(bytes: &[u8], root: &Path) -> Option<Index> {
        let body: Body = postcard::from_bytes(unframe(MAGIC, bytes)?).ok()?;
        if body.root != root.as_os_str().as_bytes() {
            return None;
        }
        Some(Index {
            root: body.root,
            probe_ns: body.probe_ns,
            tip: body.tip,
            entries: body.entries.into_iter().collect(),
            skeleton: HashMap::new(),
        })
    }

    /// The index file's bytes (see the module docs; the skeleton is saved apart).
    pub fn to_bytes(&self) -> Vec<u8> {
        let body = Body {
            root: self.root.clone(),
            probe_ns: self.probe_ns,
            tip: self.tip,
            entries: self
                .entries
                .iter()
                .map(|(p, e)| (p.clone(), e.clone()))
                .collect(),
        };
        // Encoding into a Vec fails only for types postcard cannot express.
        frame(MAGIC, &postcard::to_allocvec(&body).unwrap_or_default())
    }

    /// The file entry for `path` if it can be trusted for a file whose stat is now
    /// `stat`: equal stats and not racy. Returns its digest.
    pub fn clean(&self, path: &str, stat: &FileStat) -> Option<&Digest> {
        match self.entries.get(path)? {
            IndexEntry::File { stat: s, digest } if self.trusted(s, stat) => Some(digest),
            _ => None,
        }
    }

    /// Whether a recorded stat `recorded` vouches for an entry whose stat is now
    /// `now`: equal, and older than the clock probe (not racy).
    pub fn trusted(&self, recorded: &FileStat, now: &FileStat) -> bool {
        recorded == now && recorded.mtime_ns < self.probe_ns
    }

    /// Writes the index and its skeleton atomically (each file; they need not
    /// agree: skeleton objects are content-addressed).
    pub fn save(&self, path: &Path) -> Result<()> {
        crate::repo::write_atomic(&skeleton_path(path), &skeleton_bytes(&self.skeleton))?;
        crate::repo::write_atomic(path, &self.to_bytes())
    }
}

const SKELETON_MAGIC: &[u8; 8] = b"SGSKEL\0\0";

/// A skeleton file's bytes: objects sorted by id.
pub fn skeleton_bytes(skeleton: &HashMap<ObjectId, Vec<u8>>) -> Vec<u8> {
    let mut objects: Vec<(&ObjectId, &Vec<u8>)> = skeleton.iter().collect();
    objects.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    frame(
        SKELETON_MAGIC,
        &postcard::to_allocvec(&objects).unwrap_or_default(),
    )
}

/// The objects of a skeleton file, if it is one.
pub fn parse_skeleton(bytes: &[u8]) -> Option<HashMap<ObjectId, Vec<u8>>> {
    let objects: Vec<(ObjectId, Vec<u8>)> =
        postcard::from_bytes(unframe(SKELETON_MAGIC, bytes)?).ok()?;
    Some(objects.into_iter().collect())
}

/// An object source that answers from a skeleton first, then from a store, and
/// remembers what it answered (the next skeleton).
pub struct SkeletonSource<'a> {
    skeleton: &'a HashMap<ObjectId, Vec<u8>>,
    store: &'a dyn ObjectSource,
    read: RefCell<HashMap<ObjectId, Vec<u8>>>,
}

impl<'a> SkeletonSource<'a> {
    /// Reads `skeleton` before `store`.
    pub fn new(skeleton: &'a HashMap<ObjectId, Vec<u8>>, store: &'a dyn ObjectSource) -> Self {
        Self {
            skeleton,
            store,
            read: RefCell::new(HashMap::new()),
        }
    }

    /// Every object answered so far, by id.
    pub fn into_read(self) -> HashMap<ObjectId, Vec<u8>> {
        self.read.into_inner()
    }
}

impl ObjectSource for SkeletonSource<'_> {
    fn get(
        &self,
        id: &ObjectId,
    ) -> std::result::Result<Option<std::borrow::Cow<'_, [u8]>>, BoxError> {
        let bytes = match self.skeleton.get(id) {
            Some(b) => b.clone(),
            None => match self.store.get(id)? {
                Some(b) => b.into_owned(),
                None => return Ok(None),
            },
        };
        self.read.borrow_mut().insert(*id, bytes.clone());
        Ok(Some(std::borrow::Cow::Owned(bytes)))
    }

    fn contains(&self, id: &ObjectId) -> std::result::Result<bool, BoxError> {
        Ok(self.skeleton.contains_key(id) || self.store.contains(id)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(mtime_ns: i64) -> FileStat {
        FileStat {
            size: 3,
            mtime_ns,
            ctime_ns: mtime_ns,
            ino: 7,
            dev: 1,
            mode: 0o100644,
        }
    }

    fn sample() -> Index {
        let mut ix = Index::new(Path::new("/w"), 100);
        ix.tip = Some(ObjectId::from_bytes([1; 32]));
        ix.entries.insert(
            "/a".into(),
            IndexEntry::File {
                stat: stat(50),
                digest: Digest::Inline(b"abc".to_vec()),
            },
        );
        ix.entries.insert("/d".into(), IndexEntry::Dir);
        ix
    }

    #[test]
    fn skeletons_round_trip() {
        let mut objects = HashMap::new();
        objects.insert(ObjectId::from_bytes([2; 32]), b"node".to_vec());
        objects.insert(ObjectId::from_bytes([3; 32]), b"commit".to_vec());
        let bytes = skeleton_bytes(&objects);
        assert_eq!(parse_skeleton(&bytes), Some(objects));
        let mut b = bytes.clone();
        let last = b.len() - 1;
        b[last] ^= 1;
        assert_eq!(parse_skeleton(&b), None);
        assert_eq!(
            parse_skeleton(&sample().to_bytes()),
            None,
            "an index is no skeleton"
        );
    }

    #[test]
    fn round_trips_and_refuses_anything_else() {
        let ix = sample();
        let bytes = ix.to_bytes();
        assert_eq!(Index::parse(&bytes, Path::new("/w")), Some(ix));
        // Another root, a flipped byte anywhere, a truncation, another version, JSON.
        assert_eq!(Index::parse(&bytes, Path::new("/x")), None);
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x20;
            assert_eq!(Index::parse(&b, Path::new("/w")), None, "byte {i}");
        }
        assert_eq!(
            Index::parse(&bytes[..bytes.len() - 1], Path::new("/w")),
            None
        );
        let mut b = bytes.clone();
        b[8] = 1;
        assert_eq!(Index::parse(&b, Path::new("/w")), None);
        assert_eq!(
            Index::parse(br#"{"version":1,"root":"/w"}"#, Path::new("/w")),
            None
        );
    }

    #[test]
    fn racy_and_changed_stats_are_not_trusted() {
        let ix = sample();
        assert!(ix.clean("/a", &stat(50)).is_some());
        assert!(ix.clean("/a", &stat(51)).is_none(), "changed mtime");
        let mut racy = ix.clone();
        racy.probe_ns = 50;
        assert!(
            racy.clean("/a", &stat(50)).is_none(),
            "mtime not before the probe"
        );
        assert!(
            ix.clean("/d", &stat(50)).is_none(),
            "a directory is no file"
        );
        assert!(ix.clean("/missing", &stat(50)).is_none());
    }
}
