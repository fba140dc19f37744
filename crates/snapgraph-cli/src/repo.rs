//! Finding and opening a repository: `.snapgraph/` in the current directory or a
//! parent, holding
//!
//! - `config`: `store = URL` (default `sqlite:store.db`; relative `sqlite:`/`dir:`
//!   paths are relative to `.snapgraph/`);
//! - `HEAD`: the current branch's name (default `main`);
//! - `index`: the stat cache (see [`crate::index`]).
//!
//! The directory holding `.snapgraph/` is the working directory; `.snapgraph/` itself
//! is never committed.

use std::path::{Path, PathBuf};

use snapgraph::ObjectId;
use snapgraph_store::{Repo, Store};

use crate::error::{CliError, IoContext, Result};

/// Name of the repository directory.
pub const DOT_DIR: &str = ".snapgraph";
/// The default store URL, relative to `.snapgraph/`.
pub const DEFAULT_STORE: &str = "sqlite:store.db";
/// The default branch.
pub const DEFAULT_BRANCH: &str = "main";

/// An opened repository.
pub struct Workdir {
    /// The working directory (holds `.snapgraph/`).
    pub root: PathBuf,
    /// The `.snapgraph/` directory.
    pub dot: PathBuf,
    /// The store URL, resolved.
    pub store_url: String,
    /// The repository over the store.
    pub repo: Repo<Box<dyn Store>>,
}

impl std::fmt::Debug for Workdir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workdir")
            .field("root", &self.root)
            .field("store_url", &self.store_url)
            .finish()
    }
}

/// Makes a relative `sqlite:`/`dir:` path absolute against `base`.
pub fn absolutize_url(url: &str, base: &Path) -> String {
    for prefix in ["sqlite:", "dir:"] {
        if let Some(p) = url.strip_prefix(prefix) {
            let path = Path::new(p);
            if path.is_relative() && p != ":memory:" {
                return format!("{prefix}{}", base.join(path).display());
            }
        }
    }
    url.to_string()
}

/// Opens a store by URL, with the URL in the error.
pub fn open_store(url: &str) -> Result<Box<dyn Store>> {
    snapgraph_store::open(url).map_err(|e| CliError::Usage(format!("cannot open store {url}: {e}")))
}

/// Creates `.snapgraph/` in `dir` with `store_url` (given relative to the current
/// directory) or the default store.
pub fn init(dir: &Path, store_url: Option<&str>) -> Result<Workdir> {
    let dot = dir.join(DOT_DIR);
    if dot.exists() {
        return Err(CliError::AlreadyInitialized { path: dot });
    }
    let cwd = std::env::current_dir().at(".")?;
    let configured = match store_url {
        Some(url) => absolutize_url(url, &cwd),
        None => DEFAULT_STORE.to_string(),
    };
    // Check the URL before creating anything.
    if !(configured.starts_with("sqlite:")
        || configured.starts_with("dir:")
        || configured.starts_with("postgres://")
        || configured.starts_with("postgresql://")
        || configured == "memory:")
    {
        return Err(CliError::Usage(format!(
            "bad store URL {configured:?}: expected sqlite:PATH, dir:PATH or postgres://..."
        )));
    }
    std::fs::create_dir_all(&dot).at(&dot)?;
    let result = (|| {
        write_atomic(
            &dot.join("config"),
            format!("store = {configured}\n").as_bytes(),
        )?;
        write_atomic(&dot.join("HEAD"), format!("{DEFAULT_BRANCH}\n").as_bytes())?;
        open_at(dir.to_path_buf())
    })();
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&dot);
    }
    result
}

/// Finds the repository holding `start` (or a parent) and opens its store.
pub fn discover(start: &Path) -> Result<Workdir> {
    let start = std::fs::canonicalize(start).at(start)?;
    let mut dir: Option<&Path> = Some(&start);
    while let Some(d) = dir {
        if d.join(DOT_DIR).join("config").is_file() {
            return open_at(d.to_path_buf());
        }
        dir = d.parent();
    }
    Err(CliError::NotARepo { start })
}

fn open_at(root: PathBuf) -> Result<Workdir> {
    let root = std::fs::canonicalize(&root).at(&root)?;
    let dot = root.join(DOT_DIR);
    let config_path = dot.join("config");
    let config = std::fs::read_to_string(&config_path).at(&config_path)?;
    let mut url = None;
    for line in config.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match line.split_once('=') {
            Some((k, v)) if k.trim() == "store" => url = Some(v.trim().to_string()),
            _ => {}
        }
    }
    let url = url.unwrap_or_else(|| DEFAULT_STORE.to_string());
    let store_url = absolutize_url(&url, &dot);
    let store = open_store(&store_url)?;
    Ok(Workdir {
        root,
        dot,
        store_url,
        repo: Repo::new(store),
    })
}

impl Workdir {
    /// The current branch (`.snapgraph/HEAD`).
    pub fn head_branch(&self) -> Result<String> {
        let p = self.dot.join("HEAD");
        match std::fs::read_to_string(&p) {
            Ok(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
            Ok(_) => Ok(DEFAULT_BRANCH.to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(DEFAULT_BRANCH.to_string()),
            Err(e) => Err(CliError::io(p, e)),
        }
    }

    /// Makes `branch` current.
    pub fn set_head_branch(&self, branch: &str) -> Result<()> {
        write_atomic(&self.dot.join("HEAD"), format!("{branch}\n").as_bytes())
    }

    /// The store.
    pub fn store(&self) -> &dyn Store {
        self.repo.store().as_ref()
    }

    /// Resolves a revision; `HEAD` (or `@`) is the current branch.
    pub fn resolve(&self, rev: &str) -> Result<ObjectId> {
        if rev == "HEAD" || rev == "@" {
            let branch = self.head_branch()?;
            return self.repo.branch(&branch)?.ok_or_else(|| {
                CliError::Repo(snapgraph_store::RepoError::UnknownRevision {
                    rev: format!("HEAD (branch {branch} has no commits yet)"),
                })
            });
        }
        Ok(self.repo.resolve(rev)?)
    }
}

/// Writes `bytes` to `path` atomically: a temporary file beside it, synced, then
/// renamed over it.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
        std::process::id()
    ));
    let mut f = std::fs::File::create(&tmp).at(&tmp)?;
    let r = f
        .write_all(bytes)
        .and_then(|()| f.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = r {
        let _ = std::fs::remove_file(&tmp);
        return Err(CliError::io(path, e));
    }
    Ok(())
}

/// The file system's clock now, in nanoseconds since the epoch: the modification
/// time of a file created in `dir` (the racy-file rule compares file times with it,
/// so it must come from the same clock and have the same granularity).
pub fn fs_now(dir: &Path) -> Result<i64> {
    let probe = dir.join(format!(".probe-{}", std::process::id()));
    let f = std::fs::File::create(&probe).at(&probe)?;
    let m = f.metadata().at(&probe)?;
    drop(f);
    let _ = std::fs::remove_file(&probe);
    Ok(crate::index::FileStat::of(&m).mtime_ns)
}
