//! What a handle shares: the workspace, the times beside it, and the usage counters
//! Bashkit's limits are checked against.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::time::SystemTime;

use bashkit::FsLimits;
use snapgraph::{EntryKind, FsError, Workspace};

/// Modification and creation time of one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub modified: SystemTime,
    pub created: SystemTime,
}

/// Times of the paths, kept beside the workspace (they are not content: commit ids
/// never depend on them). A path written since the last checkout has its own stamp;
/// every other path reports `base`, the moment of that checkout (or of creation), as
/// git's checkout does. So a checkout resets the times in O(1), and the map holds only
/// what was touched since.
#[derive(Debug, Clone)]
pub(crate) struct Times {
    base: SystemTime,
    stamps: BTreeMap<String, Stamp>,
}

impl Times {
    pub fn new(base: SystemTime) -> Self {
        Self {
            base,
            stamps: BTreeMap::new(),
        }
    }

    pub fn get(&self, path: &str) -> Stamp {
        self.stamps.get(path).copied().unwrap_or(Stamp {
            modified: self.base,
            created: self.base,
        })
    }

    /// A path was created (or replaced) now.
    pub fn created(&mut self, path: &str, now: SystemTime) {
        self.stamps.insert(
            path.to_owned(),
            Stamp {
                modified: now,
                created: now,
            },
        );
    }

    pub fn set(&mut self, path: &str, stamp: Stamp) {
        self.stamps.insert(path.to_owned(), stamp);
    }

    pub fn set_modified(&mut self, path: &str, modified: SystemTime) {
        let created = self.get(path).created;
        self.set(path, Stamp { modified, created });
    }

    /// Forgets `path` and everything below it.
    pub fn remove_tree(&mut self, path: &str) {
        for key in self.tree_keys(path) {
            self.stamps.remove(&key);
        }
    }

    /// Moves the stamps of `from` and everything below it to `to`, after forgetting
    /// what `to` had.
    pub fn rename_tree(&mut self, from: &str, to: &str) {
        self.remove_tree(to);
        for key in self.tree_keys(from) {
            if let Some(stamp) = self.stamps.remove(&key) {
                let moved = format!("{to}{}", &key[from.len()..]);
                self.stamps.insert(moved, stamp);
            }
        }
    }

    /// `path` itself and the keys below it (`path/...`), in order.
    fn tree_keys(&self, path: &str) -> Vec<String> {
        let mut keys = Vec::new();
        if self.stamps.contains_key(path) {
            keys.push(path.to_owned());
        }
        // "/" sorts just below "0": everything in [path/, path0) is below path.
        let below = if path == "/" {
            "/".to_owned()
        } else {
            format!("{path}/")
        };
        let end = format!("{}0", below.trim_end_matches('/'));
        for key in self
            .stamps
            .range::<str, _>((
                Bound::Included(below.as_str()),
                Bound::Excluded(end.as_str()),
            ))
            .map(|(k, _)| k)
        {
            if key != path {
                keys.push(key.clone());
            }
        }
        keys
    }
}

/// What Bashkit's `FsUsage` reports and its limits count, kept up to date by every
/// operation (recomputed only after a checkout or restore), so checking a limit never
/// walks the tree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    /// Bytes of regular files.
    pub file_bytes: u64,
    /// Bytes of symlink targets (Bashkit counts them toward the total).
    pub link_bytes: u64,
    /// Files and symlinks.
    pub files: u64,
    /// Directories, the root included.
    pub dirs: u64,
}

impl Usage {
    /// Counts everything at and below `path` (a directory), itself included.
    pub fn of_tree(ws: &Workspace, path: &str) -> Result<Self, FsError> {
        let mut usage = Usage {
            dirs: 1,
            ..Usage::default()
        };
        let mut stack = vec![path.to_owned()];
        while let Some(dir) = stack.pop() {
            for entry in ws.list(&dir)? {
                let child = child_path(&dir, &entry.name);
                usage.add(entry.metadata.kind, entry.metadata.size);
                if entry.metadata.kind == EntryKind::Dir {
                    stack.push(child);
                }
            }
        }
        Ok(usage)
    }

    /// Counts one entry (a directory's `size` is ignored).
    pub fn add(&mut self, kind: EntryKind, size: u64) {
        match kind {
            EntryKind::File => {
                self.files += 1;
                self.file_bytes += size;
            }
            EntryKind::Symlink => {
                self.files += 1;
                self.link_bytes += size;
            }
            EntryKind::Dir => self.dirs += 1,
        }
    }

    /// Un-counts one entry.
    pub fn sub(&mut self, kind: EntryKind, size: u64) {
        match kind {
            EntryKind::File => {
                self.files = self.files.saturating_sub(1);
                self.file_bytes = self.file_bytes.saturating_sub(size);
            }
            EntryKind::Symlink => {
                self.files = self.files.saturating_sub(1);
                self.link_bytes = self.link_bytes.saturating_sub(size);
            }
            EntryKind::Dir => self.dirs = self.dirs.saturating_sub(1),
        }
    }

    /// Un-counts a whole tree.
    pub fn sub_tree(&mut self, tree: Usage) {
        self.file_bytes = self.file_bytes.saturating_sub(tree.file_bytes);
        self.link_bytes = self.link_bytes.saturating_sub(tree.link_bytes);
        self.files = self.files.saturating_sub(tree.files);
        self.dirs = self.dirs.saturating_sub(tree.dirs);
    }

    pub fn total_bytes(&self) -> u64 {
        self.file_bytes + self.link_bytes
    }
}

/// `dir/name` for a normalized directory path.
pub(crate) fn child_path(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// The parent of a normalized path other than `/`.
pub(crate) fn parent_path(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// Everything one handle (and its clones) shares.
#[derive(Debug, Clone)]
pub(crate) struct Inner {
    pub ws: Workspace,
    pub times: Times,
    pub usage: Usage,
    pub limits: FsLimits,
}

impl Inner {
    pub fn new(ws: Workspace, limits: FsLimits) -> Self {
        let mut inner = Self {
            ws,
            times: Times::new(SystemTime::now()),
            usage: Usage::default(),
            limits,
        };
        inner.recount();
        inner
    }

    /// Recounts usage from the tree (after a checkout or restore).
    pub fn recount(&mut self) {
        let mut usage = Usage {
            dirs: 1,
            ..Usage::default()
        };
        for (_, meta) in self.ws.walk() {
            usage.add(meta.kind, meta.size);
        }
        self.usage = usage;
    }

    /// Every time reads as `now` (after a checkout or restore).
    pub fn reset_times(&mut self) {
        self.times = Times::new(SystemTime::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn tree_moves_carry_only_the_subtree() {
        let t0 = SystemTime::UNIX_EPOCH;
        let t1 = t0 + Duration::from_secs(1);
        let mut times = Times::new(t0);
        for p in ["/a", "/a/x", "/a/x/y", "/ab", "/a0", "/b"] {
            times.created(p, t1);
        }
        times.rename_tree("/a", "/c");
        assert_eq!(times.get("/a").modified, t0);
        assert_eq!(times.get("/a/x/y").modified, t0);
        assert_eq!(times.get("/c/x/y").modified, t1);
        assert_eq!(times.get("/c").modified, t1);
        assert_eq!(times.get("/ab").modified, t1);
        assert_eq!(times.get("/a0").modified, t1);
        times.remove_tree("/c");
        assert_eq!(times.get("/c/x").modified, t0);
        assert_eq!(times.get("/b").modified, t1);
        times.remove_tree("/");
        assert_eq!(times.get("/b").modified, t0);
    }

    #[test]
    fn parents() {
        assert_eq!(parent_path("/a"), "/");
        assert_eq!(parent_path("/a/b"), "/a");
        assert_eq!(child_path("/", "a"), "/a");
        assert_eq!(child_path("/a", "b"), "/a/b");
    }
}
