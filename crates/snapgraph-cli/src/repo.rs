//! Finding and opening a repository: `.snapgraph/` in the current directory or a
//! parent, holding
//!
//! - `config`: `store = URL` (default `sqlite:store.db`; relative `sqlite:`/`dir:`
//!   paths are relative to `.snapgraph/`);
//! - `HEAD`: the current branch's name (default `main`);
//! - `index`: the stat cache (see [`crate::index`]);
//! - `credentials`: the store password, when `init` was given one (mode 0600, see
//!   [`crate::secrets`]).
//!
//! The directory holding `.snapgraph/` is the working directory; `.snapgraph/` itself
//! is never committed. A store of files (`sqlite:`, `dir:`) lies in `.snapgraph/` or
//! outside the working directory: one inside it is refused by `init` and on every
//! open ([`check_store_outside`]).
//!
//! **Only `init` creates a store.** `init` writes the ref [`STORE_MARKER`] into the
//! store; opening a repository whose store lacks it (and has no branch or snapshot
//! either) fails naming the store: a missing, emptied or foreign store is never taken
//! for a new empty repository. SQLite files and store directories are checked before
//! they are opened, so a missing one is not created. A store written before markers
//! existed gets one on its first open if it has refs.

use std::path::{Path, PathBuf};

use snapgraph::ObjectId;
use snapgraph_store::{Repo, Store};

use crate::error::{CliError, IoContext, Result};
pub use crate::rev::Head;

/// Name of the repository directory.
pub const DOT_DIR: &str = ".snapgraph";
/// The default store URL, relative to `.snapgraph/`.
pub const DEFAULT_STORE: &str = "sqlite:store.db";
/// The default branch.
pub const DEFAULT_BRANCH: &str = "main";
/// The ref `init` writes into a new store (reserved: never synced, collected from or
/// listed as a branch). Its value is the all-zero id.
pub const STORE_MARKER: &str = "snapgraph/repository";
/// How `.snapgraph/HEAD` starts when the head is detached (followed by the id; a
/// space never occurs in a branch name).
pub const DETACHED: &str = "detached ";

/// What [`init`] made.
#[derive(Debug)]
pub struct Initialized {
    /// The opened repository.
    pub workdir: Workdir,
    /// Where the store password went, if the URL had one.
    pub credentials: Option<PathBuf>,
}

/// An opened repository.
pub struct Workdir {
    /// The working directory (holds `.snapgraph/`).
    pub root: PathBuf,
    /// The `.snapgraph/` directory.
    pub dot: PathBuf,
    /// The store URL, resolved (never with a password: see [`crate::secrets`]).
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

/// Makes a relative `sqlite:`/`dir:` path absolute against `base` (in both parts of
/// a `cache:LOCAL|REMOTE` URL).
pub fn absolutize_url(url: &str, base: &Path) -> String {
    if let Some((local, remote)) = url.strip_prefix("cache:").and_then(|r| r.split_once('|')) {
        // One level: `open` refuses nested cache URLs.
        return format!(
            "cache:{}|{}",
            absolutize_path(local, base),
            absolutize_path(remote, base)
        );
    }
    absolutize_path(url, base)
}

/// [`absolutize_url`] for a URL that is not a `cache:` URL.
fn absolutize_path(url: &str, base: &Path) -> String {
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

/// The local paths a store URL names: a `sqlite:` file (its `-wal`, `-shm` and
/// `-segments` beside it) or a `dir:` directory, in either part of a `cache:` URL.
fn local_store_paths(url: &str) -> Vec<&str> {
    let parts = match url.strip_prefix("cache:").and_then(|r| r.split_once('|')) {
        Some((local, remote)) => vec![local, remote],
        None => vec![url],
    };
    parts
        .into_iter()
        .filter_map(|u| u.strip_prefix("sqlite:").or_else(|| u.strip_prefix("dir:")))
        .filter(|p| *p != ":memory:")
        .collect()
}

/// `path` with its longest existing ancestor canonical (symlinks resolved), the
/// rest taken lexically (`..` removes the component before it: nothing there exists
/// to be a symlink).
fn resolve_existing(path: &Path) -> PathBuf {
    let parts: Vec<std::path::Component<'_>> = path.components().collect();
    for split in (1..=parts.len()).rev() {
        let head: PathBuf = parts[..split].iter().collect();
        let Ok(mut out) = std::fs::canonicalize(&head) else {
            continue;
        };
        for c in &parts[split..] {
            match c {
                std::path::Component::ParentDir => {
                    out.pop();
                }
                std::path::Component::CurDir => {}
                c => out.push(c),
            }
        }
        return out;
    }
    path.to_path_buf()
}

/// Refuses a store (`url`, absolute) inside the working directory `root`
/// (canonical) other than in `.snapgraph/`: every commit would snapshot the store
/// into itself, and a checkout would write an old copy of it over the live one. The
/// default store, lexically in `.snapgraph/`, costs no system call.
pub fn check_store_outside(root: &Path, url: &str) -> Result<()> {
    let dot = root.join(DOT_DIR);
    for p in local_store_paths(url) {
        let path = Path::new(p);
        let plain = !path
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir));
        if plain && path.starts_with(&dot) {
            continue;
        }
        let resolved = resolve_existing(path);
        if resolved.starts_with(root) && !resolved.starts_with(&dot) {
            return Err(CliError::StoreInWorkdir {
                store: resolved,
                root: root.to_path_buf(),
            });
        }
    }
    Ok(())
}

/// Bytes of an SQLite store's file that the CLI's reads map into memory
/// ([`snapgraph_store::OpenOptions::sqlite_mmap_bytes`]): a read that walks a pack's
/// overflow chain touches its pages in place instead of copying each in with a
/// `pread` (a switch between releases 30.3 -> 22.7 ms, a restore after `gc` 5 %
/// faster, a commit the same). The price, a `SIGBUS` when another program truncates
/// the file beneath a command, and why it loses nothing, are in SECURITY.md. At most
/// this much of the file counts in the process's resident set.
pub const SQLITE_MMAP_BYTES: u64 = 64 << 20;

/// Opens a store by URL, with the URL (password withheld) in the error.
pub fn open_store(url: &str) -> Result<Box<dyn Store>> {
    let options = snapgraph_store::OpenOptions::new().sqlite_mmap_bytes(SQLITE_MMAP_BYTES);
    snapgraph_store::open_with(url, &options).map_err(|e| CliError::OpenStore {
        url: crate::secrets::redact(url),
        reason: e.to_string(),
    })
}

/// Opens the existing store `url`: a SQLite file or store directory must exist (and
/// the file must not be empty) before it is opened, and the store must hold
/// [`STORE_MARKER`] or at least one ref (then the marker is added).
pub fn open_existing_store(url: &str) -> Result<Box<dyn Store>> {
    let missing = |reason: &str| CliError::NoRepositoryInStore {
        url: crate::secrets::redact(url),
        reason: reason.to_string(),
    };
    if let Some(path) = url.strip_prefix("sqlite:").filter(|p| *p != ":memory:") {
        match std::fs::metadata(path) {
            Ok(m) if m.len() == 0 => {
                return Err(missing("the database file is empty (truncated?)"))
            }
            Ok(_) => {}
            Err(_) => return Err(missing("the database file does not exist")),
        }
    }
    if let Some(path) = url.strip_prefix("dir:") {
        let p = Path::new(path);
        if !p.join("objects").is_dir() || !p.join("refs").is_dir() {
            return Err(missing("not a store directory (no objects/ and refs/)"));
        }
    }
    let store = open_store(url)?;
    let marked = store.get_ref(STORE_MARKER)?.is_some();
    if !marked {
        let has_refs =
            !store.list_refs("heads/")?.is_empty() || !store.list_refs("tags/")?.is_empty();
        if !has_refs {
            return Err(missing(
                "no repository marker and no refs (an empty or unrelated store)",
            ));
        }
        mark_store(store.as_ref())?;
    }
    Ok(store)
}

/// Writes [`STORE_MARKER`] if it is absent.
pub fn mark_store(store: &dyn Store) -> Result<()> {
    if store.get_ref(STORE_MARKER)?.is_some() {
        return Ok(());
    }
    let update =
        snapgraph_store::RefUpdate::new(STORE_MARKER, None, Some(ObjectId::from_bytes([0; 32])));
    match store.update_refs(&[update], "snapgraph init") {
        Ok(()) => Ok(()),
        // Someone else marked it meanwhile.
        Err(snapgraph_store::StoreError::RefConflict { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Creates `.snapgraph/` in `dir` with `store_url` (given relative to the current
/// directory) or the default store, and marks the store ([`STORE_MARKER`]). Refuses
/// inside another repository unless `force`. A password in the URL goes to the
/// credentials file, not the config ([`crate::secrets`]).
pub fn init(dir: &Path, store_url: Option<&str>, force: bool) -> Result<Initialized> {
    let dot = dir.join(DOT_DIR);
    if dot.exists() {
        return Err(CliError::AlreadyInitialized { path: dot });
    }
    if !force {
        let canonical = std::fs::canonicalize(dir).at(dir)?;
        let mut up = canonical.parent();
        while let Some(d) = up {
            if d.join(DOT_DIR).join("config").is_file() {
                return Err(CliError::InsideRepository {
                    path: canonical.clone(),
                    outer: d.to_path_buf(),
                });
            }
            up = d.parent();
        }
    }
    let cwd = std::env::current_dir().at(".")?;
    let configured = match store_url {
        Some(url) => absolutize_url(url, &cwd),
        None => DEFAULT_STORE.to_string(),
    };
    let (configured, password) = crate::secrets::split_password(&configured);
    // Check the URL before creating anything.
    if !known_url(&configured) {
        return Err(CliError::Usage(format!(
            "bad store URL {:?}: expected sqlite:PATH, dir:PATH, postgres://..., \
             s3://BUCKET/PREFIX?endpoint=... or cache:LOCAL|REMOTE",
            crate::secrets::redact(&configured)
        )));
    }
    check_store_outside(&std::fs::canonicalize(dir).at(dir)?, &configured)?;
    std::fs::create_dir_all(&dot).at(&dot)?;
    let result = (|| {
        let credentials = match &password {
            Some(p) => {
                let path = crate::secrets::credentials_path(&dot);
                crate::secrets::write_credentials(&path, p)?;
                Some(path)
            }
            None => None,
        };
        write_atomic(
            &dot.join("config"),
            format!("store = {configured}\n").as_bytes(),
        )?;
        write_atomic(&dot.join("HEAD"), format!("{DEFAULT_BRANCH}\n").as_bytes())?;
        let url = absolutize_url(&configured, &dot);
        let url = match &password {
            Some(p) => crate::secrets::with_password(&url, p),
            None => url,
        };
        mark_store(open_store(&url)?.as_ref())?;
        Ok(Initialized {
            workdir: open_at(dir.to_path_buf())?,
            credentials,
        })
    })();
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&dot);
    }
    result
}

/// Whether `url` names a store kind `init` knows (both parts of a cache URL).
fn known_url(url: &str) -> bool {
    let plain = |u: &str| !u.starts_with("cache:") && known_url(u);
    if let Some(rest) = url.strip_prefix("cache:") {
        return rest
            .split_once('|')
            .is_some_and(|(local, remote)| plain(local) && plain(remote));
    }
    url.starts_with("sqlite:")
        || url.starts_with("dir:")
        || url.starts_with("postgres://")
        || url.starts_with("postgresql://")
        || url.starts_with("s3://")
        || url == "memory:"
}

/// Finds the repository holding `start` (or a parent) and opens its store.
pub fn discover(start: &Path) -> Result<Workdir> {
    open_at(find_root(start)?)
}

/// The working directory of the repository holding `start` (or a parent):
/// canonical, the directory holding `.snapgraph/config`.
pub fn find_root(start: &Path) -> Result<PathBuf> {
    let start = std::fs::canonicalize(start).at(start)?;
    let mut dir: Option<&Path> = Some(&start);
    while let Some(d) = dir {
        if d.join(DOT_DIR).join("config").is_file() {
            return Ok(d.to_path_buf());
        }
        dir = d.parent();
    }
    Err(CliError::NotARepo { start })
}

/// Opens the repository whose working directory is `root` (see [`find_root`]).
pub fn open_at(root: PathBuf) -> Result<Workdir> {
    let root = std::fs::canonicalize(&root).at(&root)?;
    let dot = root.join(DOT_DIR);
    let config_path = dot.join("config");
    let config = std::fs::read_to_string(&config_path).at(&config_path)?;
    let url = parse_config(&config)
        .into_iter()
        .rev()
        .find(|(k, _)| k == "store")
        .map(|(_, v)| v);
    let url = url.unwrap_or_else(|| DEFAULT_STORE.to_string());
    let store_url = absolutize_url(&url, &dot);
    check_store_outside(&root, &store_url)?;
    if crate::secrets::split_password(&store_url).1.is_some() {
        return Err(CliError::SecretInConfig { path: config_path });
    }
    let open_url = match crate::secrets::read_credentials(&crate::secrets::credentials_path(&dot))?
    {
        Some(p) => crate::secrets::with_password(&store_url, &p),
        None => store_url.clone(),
    };
    let store = open_existing_store(&open_url)?;
    crate::timings::phase("store opened");
    Ok(Workdir {
        root,
        dot,
        store_url,
        repo: Repo::new(store),
    })
}

/// [`open_at`] on a thread of its own, for a command that has work to do before it
/// needs the store (a per-turn commit surveys the working directory meanwhile:
/// opening SQLite and parsing its schema is about a third of a millisecond).
#[derive(Debug)]
pub struct Opening {
    root: PathBuf,
    thread: Option<std::thread::JoinHandle<Result<Workdir>>>,
}

/// The opening [`Opening::ahead`] started, with the directory it started from.
static AHEAD: std::sync::Mutex<Option<(PathBuf, Opening)>> = std::sync::Mutex::new(None);

impl Opening {
    /// Starts [`open_at`]`(root)` on a new thread, off this core (see
    /// [`crate::cpus`]); when no thread starts, [`Opening::finish`] opens it.
    pub fn start(root: PathBuf) -> Self {
        let r = root.clone();
        Opening {
            root,
            thread: Self::spawn(move || open_at(r)),
        }
    }

    fn spawn(
        open: impl FnOnce() -> Result<Workdir> + Send + 'static,
    ) -> Option<std::thread::JoinHandle<Result<Workdir>>> {
        let beside = crate::cpus::Beside::here();
        let thread = std::thread::Builder::new()
            .name("snapgraph-open".into())
            .spawn(move || {
                beside.leave();
                open()
            })
            .ok();
        beside.yield_to();
        thread
    }

    /// Called with the process's arguments before they are parsed: for a
    /// `commit` or `status`, starts finding and opening the repository of the
    /// directory they name (`-C DIR`, else the current one) while clap parses them
    /// (about a tenth of a millisecond, which a watched per-turn commit waits for
    /// the store). [`Opening::of`] takes it when the command runs from that
    /// directory; otherwise it is left unused. Nothing is started for arguments
    /// [`ahead_of`] cannot read with certainty.
    pub fn ahead(args: &[std::ffi::OsString]) {
        let Some(start) = ahead_of(args) else {
            return;
        };
        let start = match start {
            Some(dir) => dir,
            None => match std::env::current_dir() {
                Ok(d) => d,
                Err(_) => return,
            },
        };
        let from = start.clone();
        let thread = Self::spawn(move || open_at(find_root(&from)?));
        let opening = Opening {
            root: PathBuf::new(),
            thread,
        };
        *AHEAD.lock().unwrap_or_else(|p| p.into_inner()) = Some((start, opening));
    }

    /// The opening of `root`, the repository found from `start`: the one
    /// [`Opening::ahead`] started from `start` (the same search from the same
    /// directory), else a new one.
    pub fn of(start: &Path, root: PathBuf) -> Self {
        let ahead = AHEAD.lock().unwrap_or_else(|p| p.into_inner()).take();
        match ahead {
            Some((from, opening)) if from == start => Opening {
                root,
                thread: opening.thread,
            },
            _ => Self::start(root),
        }
    }

    /// The opened repository, or the error that opening it met. A thread that
    /// panicked leaves the open to this thread (where the panic, a bug, shows).
    pub fn finish(self) -> Result<Workdir> {
        match self.thread.map(std::thread::JoinHandle::join) {
            Some(Ok(opened)) => opened,
            _ => open_at(self.root),
        }
    }
}

/// For arguments whose verb is `commit` or `status`, the directory named by `-C`
/// (`Some(None)`: none, the current one); `None` for any other verb and for any
/// argument that might name another directory in a way this does not read (`--`,
/// `-C` twice, `-C` joined to its value or in a cluster of short flags): clap is
/// the judge of the arguments, this only guesses ahead of it, and a guess it cannot
/// be sure of is not made.
pub fn ahead_of(args: &[std::ffi::OsString]) -> Option<Option<PathBuf>> {
    let mut dir = None;
    let mut verb = None;
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        let b = a.as_encoded_bytes();
        if b == b"--" {
            return None;
        }
        if b == b"-C" {
            if dir.is_some() {
                return None;
            }
            dir = Some(PathBuf::from(it.next()?));
        } else if b.starts_with(b"-") {
            if !b.starts_with(b"--") && b.contains(&b'C') {
                return None;
            }
        } else if verb.is_none() {
            verb = Some(b);
        }
    }
    matches!(verb, Some(b"commit" | b"status")).then_some(dir)
}

/// Where `HEAD` points in the repository directory `dot` (see [`Workdir::head`]).
pub fn head_at(dot: &Path) -> Result<Head> {
    let p = dot.join("HEAD");
    let text = match std::fs::read_to_string(&p) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(CliError::io(p, e)),
    };
    let text = text.trim();
    if let Some(hex) = text.strip_prefix(DETACHED) {
        let id = ObjectId::from_hex(hex.trim())
            .map_err(|_| CliError::bad_path(&p, "`detached` is not followed by a commit id"))?;
        return Ok(Head::Detached(id));
    }
    Ok(Head::Branch(if text.is_empty() {
        DEFAULT_BRANCH.to_string()
    } else {
        text.to_string()
    }))
}

impl Workdir {
    /// Where `HEAD` points (`.snapgraph/HEAD`: a branch name, or `detached ID`).
    pub fn head(&self) -> Result<Head> {
        head_at(&self.dot)
    }

    /// The current branch; a detached head is [`CliError::Detached`].
    pub fn head_branch(&self) -> Result<String> {
        match self.head()? {
            Head::Branch(b) => Ok(b),
            Head::Detached(commit) => Err(CliError::Detached { commit }),
        }
    }

    /// The commit `HEAD` is at: the current branch's tip (`None` before its first
    /// commit) or the detached commit.
    pub fn head_commit(&self) -> Result<Option<ObjectId>> {
        match self.head()? {
            Head::Branch(b) => Ok(self.repo.branch(&b)?),
            Head::Detached(id) => Ok(Some(id)),
        }
    }

    /// Makes `branch` current.
    pub fn set_head_branch(&self, branch: &str) -> Result<()> {
        write_atomic(&self.dot.join("HEAD"), format!("{branch}\n").as_bytes())
    }

    /// Detaches `HEAD` at commit `id`.
    pub fn set_head_detached(&self, id: ObjectId) -> Result<()> {
        write_atomic(
            &self.dot.join("HEAD"),
            format!("{DETACHED}{id}\n").as_bytes(),
        )
    }

    /// The store.
    pub fn store(&self) -> &dyn Store {
        self.repo.store().as_ref()
    }

    /// Resolves a revision ([`crate::rev`]: `HEAD`, `@`, `REV~N`, `REV^N`, names,
    /// unique id prefixes) to a commit.
    pub fn resolve(&self, rev: &str) -> Result<ObjectId> {
        Ok(crate::rev::resolve(self.store(), &self.head()?, rev)?)
    }

    /// Resolves `REV:PATH` (with `need_path`, the path is required; else a bare
    /// `REV` means the root `/`).
    pub fn resolve_path(&self, spec: &str, need_path: bool) -> Result<(ObjectId, String)> {
        Ok(crate::rev::resolve_path(
            self.store(),
            &self.head()?,
            spec,
            need_path,
        )?)
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

/// Work a checkout left behind in `.snapgraph/` (see [`stale_work`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StaleWork {
    /// The directory.
    pub path: PathBuf,
    /// `staging` (a commit being written out: removable) or `old` (the working
    /// directory's previous entries, moved aside during a swap: the user's files).
    pub kind: &'static str,
}

impl StaleWork {
    /// One line for `status`.
    pub fn describe(&self) -> String {
        match self.kind {
            "staging" => format!(
                "stale staging directory {} (a checkout was interrupted; the next checkout or gc removes it)",
                self.path.display()
            ),
            _ => format!(
                "interrupted checkout: the previous working-directory entries are in {} (move back what you need, then delete it)",
                self.path.display()
            ),
        }
    }
}

/// Whether process `pid` of this host still runs (`/proc`); `true` when unsure.
pub(crate) fn process_alive(pid: u32) -> bool {
    if !Path::new("/proc/self").exists() {
        return true;
    }
    Path::new(&format!("/proc/{pid}")).exists()
}

/// `staging-PID-N` and `old-PID-N` directories in `dot` whose process is gone.
pub fn stale_work(dot: &Path) -> Vec<StaleWork> {
    let Ok(entries) = std::fs::read_dir(dot) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let (kind, rest) = if let Some(r) = name.strip_prefix("staging-") {
            ("staging", r)
        } else if let Some(r) = name.strip_prefix("old-") {
            ("old", r)
        } else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !process_alive(pid) {
            out.push(StaleWork {
                path: e.path(),
                kind,
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// `BASE-PID-N`: a name no other process's and no earlier call's can be (the
/// process id, then a counter), for the staging and `old-*` directories of a
/// checkout (which [`stale_work`] recognizes by it) and other temporary names.
pub fn unique_name(base: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{base}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Removes the stale `staging-*` directories of `dot` (never `old-*`: those hold
/// the user's files) and returns them.
pub fn remove_stale_staging(dot: &Path) -> Vec<PathBuf> {
    stale_work(dot)
        .into_iter()
        .filter(|s| s.kind == "staging")
        .filter(|s| std::fs::remove_dir_all(&s.path).is_ok())
        .map(|s| s.path)
        .collect()
}

/// Parses a config file's text: `(key, value)` pairs of its `key = value` lines
/// (blank lines and `#` comments skipped), in order.
pub fn parse_config(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// The value of `key` in the repository's config (the last one wins).
pub fn config_value(dot: &Path, key: &str) -> Result<Option<String>> {
    let p = dot.join("config");
    let text = std::fs::read_to_string(&p).at(&p)?;
    Ok(parse_config(&text)
        .into_iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v))
}

#[cfg(test)]
mod tests {
    use super::ahead_of;
    use std::path::PathBuf;

    fn guess(args: &[&str]) -> Option<Option<PathBuf>> {
        let args: Vec<std::ffi::OsString> = std::iter::once("snapgraph")
            .chain(args.iter().copied())
            .map(Into::into)
            .collect();
        ahead_of(&args)
    }

    #[test]
    fn a_commit_or_status_is_opened_ahead_from_the_directory_it_names() {
        assert_eq!(guess(&["commit", "-q", "-m", "t"]), Some(None));
        assert_eq!(guess(&["--json", "status"]), Some(None));
        assert_eq!(
            guess(&["-C", "/w", "commit", "-m", "C"]),
            Some(Some("/w".into()))
        );
        // A global flag after the verb, as clap accepts it.
        assert_eq!(
            guess(&["commit", "-m", "t", "-C", "w"]),
            Some(Some("w".into()))
        );
    }

    #[test]
    fn no_guess_is_made_that_clap_might_read_otherwise() {
        for args in [
            &["log"][..],
            &["init"],
            &[],
            &["-C"],
            &["commit", "--", "-C", "x"],
            &["-Cw", "commit"],
            &["-qC", "w", "commit"],
            &["-C", "a", "commit", "-C", "b"],
            &["commit", "-m", "-C"],
        ] {
            assert_eq!(guess(args), None, "{args:?}");
        }
        // A message that is the word "commit" is not the verb.
        assert_eq!(guess(&["log", "-m", "commit"]), None);
    }
}
