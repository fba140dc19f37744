//! The optional file-system watcher (`snapgraph watch`): its protocol, the token a
//! commit keeps beside the index, and (Linux) the daemon's state.
//!
//! The daemon watches every directory of the working tree the scan would walk (not
//! `.snapgraph/`, not ignored directories, not nested repositories) with inotify and
//! keeps, for every workspace path an event named, the sequence number of its last
//! change. A commit asks over `.snapgraph/watch.sock` "what changed since token T";
//! the daemon first creates a cookie file in `.snapgraph/watch-cookies/` (watched
//! too, by the same inotify instance) and answers only once it has read that file's
//! event: an inotify instance has one queue, so every event of a change finished
//! before the question was asked has been read by then (watchman's cookies). The
//! answer is the paths changed after T (each standing for itself and everything
//! below it) and a new token, the daemon's state at the cookie.
//!
//! A token is usable only for the index state it was stored with
//! ([`TOKEN_FILE`] records the index file's identity, and every index save removes
//! it, see [`crate::index`]) and only from the daemon that issued it, after its last
//! reset: a restarted daemon, an `IN_Q_OVERFLOW`, a watch that could not be added
//! (`ENOSPC` on `max_user_watches`), a moved-away or deleted root, a cookie not seen
//! in time, or any protocol error make the answer "unknown", and the commit scans
//! the whole tree as without a watcher. No daemon is exactly the behaviour without
//! one. See ARCHITECTURE.md "The CLI's stat cache" for the invalidation rules.
//!
//! Protocol (one request per connection, a line; the daemon answers and closes):
//! `since TOKEN` or `since -` → `changed TOKEN N\n` then N paths each ended by a NUL,
//! or `unknown TOKEN\n` (`-`: no token); `ping` → `watching PID DIRS\n`; `stop` →
//! `stopping\n`.

use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// The daemon's socket, in `.snapgraph/`.
pub const SOCKET: &str = "watch.sock";
/// The token kept beside the index, in `.snapgraph/`.
pub use crate::index::WATCH_TOKEN_FILE as TOKEN_FILE;
/// The directory of cookie files, in `.snapgraph/`.
pub const COOKIE_DIR: &str = "watch-cookies";
/// More changed paths than this and the commit scans the whole tree (the walk's
/// scope test is linear in the paths; at that count a full scan costs as much).
pub const MAX_PATHS: usize = 256;
/// How long a client waits for the daemon's answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
const TOKEN_MAGIC: &str = "snapgraph-watch-token 1";

/// What the watcher said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The paths changed since the stored token, sorted, none below another (each
    /// stands for itself and everything below it); `None`: unknown (scan all).
    pub changed: Option<Vec<String>>,
    /// The token to store once this command's index is saved (the daemon's state
    /// when it read the cookie); `None` when there is none to trust.
    pub token: Option<String>,
}

impl Answer {
    fn unknown() -> Self {
        Self {
            changed: None,
            token: None,
        }
    }
}

/// The identity of the index file at `index_path` (device, inode, size, mtime and
/// ctime in ns): another write of the file changes it.
fn identity(index_path: &Path) -> Option<String> {
    let m = std::fs::symlink_metadata(index_path).ok()?;
    Some(format!(
        "{} {} {} {}.{} {}.{}",
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec()
    ))
}

/// The stored token, if it was stored with the index file as it is now.
pub fn stored_token(dot: &Path, index_path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dot.join(TOKEN_FILE)).ok()?;
    let mut lines = text.split('\n');
    if lines.next()? != TOKEN_MAGIC {
        return None;
    }
    let token = lines.next()?;
    let ident = lines.next()?;
    if lines.next()? != "end" || token.is_empty() || token.contains(' ') {
        return None;
    }
    (identity(index_path)?.as_str() == ident).then(|| token.to_string())
}

/// Stores `token` for the index file as it now is (after this command saved it).
/// Not atomic and not synced: a torn or stale file does not parse or does not match
/// the index, and only costs a full scan.
pub fn store_token(dot: &Path, index_path: &Path, token: &str) {
    let Some(ident) = identity(index_path) else {
        return;
    };
    let _ = std::fs::write(
        dot.join(TOKEN_FILE),
        format!("{TOKEN_MAGIC}\n{token}\n{ident}\nend\n"),
    );
}

/// Removes the stored token (the index is about to change under another command).
pub fn forget_token(dot: &Path) {
    let _ = std::fs::remove_file(dot.join(TOKEN_FILE));
}

/// Sends one request to the daemon of `dot`; `None` when no daemon listens (no
/// socket, or a socket nobody accepts on).
fn send(dot: &Path, line: &str) -> Option<std::io::Result<UnixStream>> {
    let mut s = UnixStream::connect(dot.join(SOCKET)).ok()?;
    Some((|| {
        s.set_read_timeout(Some(CLIENT_TIMEOUT))?;
        s.set_write_timeout(Some(CLIENT_TIMEOUT))?;
        s.write_all(format!("{line}\n").as_bytes())?;
        Ok(s)
    })())
}

/// The daemon's whole answer on `sent`, once it closes the connection.
fn receive(sent: std::io::Result<UnixStream>) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    sent?.read_to_end(&mut out)?;
    Ok(out)
}

/// One request to the daemon of `dot`, its whole answer; `None` when no daemon
/// listens.
fn request(dot: &Path, line: &str) -> Option<std::io::Result<Vec<u8>>> {
    send(dot, line).map(receive)
}

/// A question sent to the daemon ([`ask`]) whose answer is not read yet: the
/// daemon makes and reads its cookie while the command reads its index.
#[derive(Debug)]
pub struct Asked {
    sent: std::io::Result<UnixStream>,
    with_token: bool,
}

impl Asked {
    /// The daemon's answer (waiting for it); one that fails or does not parse is
    /// "unknown".
    pub fn answer(self) -> Answer {
        receive(self.sent)
            .ok()
            .and_then(|r| parse_answer(&r, self.with_token))
            .unwrap_or_else(Answer::unknown)
    }
}

/// Asks the daemon of `dot` what changed since the token stored with the index at
/// `index_path`, without waiting for the answer ([`Asked::answer`]). `None`: no
/// daemon runs (the command goes on as without one).
pub fn ask(dot: &Path, index_path: &Path) -> Option<Asked> {
    let token = stored_token(dot, index_path);
    let sent = send(dot, &format!("since {}", token.as_deref().unwrap_or("-")))?;
    Some(Asked {
        sent,
        with_token: token.is_some(),
    })
}

/// The answer in `reply`; `None` if it does not parse. A list of changes is
/// accepted only for a question that carried a token.
pub fn parse_answer(reply: &[u8], asked_with_token: bool) -> Option<Answer> {
    let nl = reply.iter().position(|&b| b == b'\n')?;
    let head = std::str::from_utf8(&reply[..nl]).ok()?;
    let rest = &reply[nl + 1..];
    let mut words = head.split(' ');
    let kind = words.next()?;
    let token = words.next()?;
    let token = (token != "-" && !token.is_empty()).then(|| token.to_string());
    match kind {
        "unknown" if words.next().is_none() && rest.is_empty() => Some(Answer {
            changed: None,
            token,
        }),
        "changed" if asked_with_token => {
            let n: usize = words.next()?.parse().ok()?;
            if words.next().is_some() || token.is_none() {
                return None;
            }
            let mut paths = Vec::with_capacity(n.min(MAX_PATHS));
            if !rest.is_empty() {
                if rest.last() != Some(&0) {
                    return None;
                }
                for p in rest[..rest.len() - 1].split(|&b| b == 0) {
                    let p = std::str::from_utf8(p).ok()?;
                    if !p.starts_with('/') {
                        return None;
                    }
                    paths.push(p.to_string());
                }
            }
            if paths.len() != n {
                return None;
            }
            Some(Answer {
                changed: Some(paths),
                token,
            })
        }
        _ => None,
    }
}

/// A running watcher, as `ping` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Running {
    /// Its process id.
    pub pid: u32,
    /// The directories it watches.
    pub dirs: u64,
    /// Whether its history can be trusted (no watch failed to add).
    pub trusted: bool,
}

/// Whether a daemon answers in `dot`, and how it stands.
pub fn ping(dot: &Path) -> Option<Running> {
    let reply = request(dot, "ping")?.ok()?;
    let text = std::str::from_utf8(&reply).ok()?;
    let mut w = text.trim_end().split(' ');
    if w.next()? != "watching" {
        return None;
    }
    Some(Running {
        pid: w.next()?.parse().ok()?,
        dirs: w.next()?.parse().ok()?,
        trusted: w.next()? == "ok",
    })
}

/// Asks the daemon of `dot` to stop; `false` when none answered.
pub fn stop(dot: &Path) -> bool {
    matches!(request(dot, "stop"), Some(Ok(r)) if r == b"stopping\n")
}

#[cfg(target_os = "linux")]
pub use daemon::run;

#[cfg(target_os = "linux")]
mod daemon {
    use std::collections::{BTreeMap, BTreeSet, HashMap};
    use std::io::{BufRead, BufReader, Read, Write};
    use std::mem::MaybeUninit;
    use std::os::unix::net::{UnixListener, UnixStream};
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Condvar, Mutex};
    use std::time::{Duration, Instant};

    use rustix::fd::OwnedFd;
    use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
    use rustix::io::Errno;

    use super::{COOKIE_DIR, SOCKET};
    use crate::error::{CliError, IoContext, Result};
    use crate::repo::DOT_DIR;
    use crate::scan::{self, Found, Scope, IGNORE_FILE};

    /// How long the daemon waits for a cookie's event before answering "unknown".
    const COOKIE_TIMEOUT: Duration = Duration::from_secs(5);

    /// The events watched on every directory of the tree.
    fn dir_mask() -> WatchFlags {
        WatchFlags::CREATE
            | WatchFlags::DELETE
            | WatchFlags::MODIFY
            | WatchFlags::ATTRIB
            | WatchFlags::CLOSE_WRITE
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVED_TO
            | WatchFlags::DELETE_SELF
            | WatchFlags::MOVE_SELF
            | WatchFlags::DONT_FOLLOW
            | WatchFlags::ONLYDIR
            | WatchFlags::EXCL_UNLINK
    }

    /// File systems whose changes may come from elsewhere (another host, a FUSE
    /// server's own view), which inotify does not report: refused.
    const REMOTE_FS: &[(u64, &str)] = &[
        (0x6969, "NFS"),
        (0x517B, "SMB"),
        (0xFF53_4D42, "CIFS"),
        (0xFE53_4D42, "SMB2"),
        (0x6573_5546, "FUSE"),
        (0x0102_1997, "9P"),
        (0x0000_5346_414F, "AFS"),
        (0x6B41_4653, "AFS"),
        (0x0047_5046_5300, "CEPH"),
    ];

    /// The daemon's state, shared by the inotify reader and the socket server.
    struct Core {
        root: PathBuf,
        dot: PathBuf,
        fd: Arc<OwnedFd>,
        /// Watch descriptor → workspace path of the directory (`""`: the root).
        dirs: HashMap<i32, String>,
        /// Workspace path of a watched directory → its watch (sorted: subtrees are
        /// ranges).
        wd_of: BTreeMap<String, i32>,
        root_wd: i32,
        cookie_wd: i32,
        /// Changes recorded so far (the token's number).
        seq: u64,
        /// Tokens below this are from before the last reset (an overflow).
        valid_from: u64,
        /// Why no answer can be trusted any more (a watch that failed, the root gone).
        broken: Option<String>,
        /// Workspace path → the number of its last change.
        changed: HashMap<String, u64>,
        /// Cookies whose events were read.
        cookies_seen: BTreeSet<u64>,
        /// Resets so far (a waiting cookie is lost with the queue).
        resets: u64,
        /// This daemon's name in its tokens.
        id: String,
        /// The root or the repository is gone: the daemon ends.
        exit: bool,
    }

    impl Core {
        fn record(&mut self, path: String) {
            self.seq += 1;
            self.changed.insert(path, self.seq);
        }

        fn broke(&mut self, why: String) {
            if self.broken.is_none() {
                eprintln!(
                    "snapgraph watch: {}: {why}; commits scan the whole tree",
                    self.root.display()
                );
                self.broken = Some(why);
            }
        }

        /// Adds watches for every directory the scan would walk at or below the
        /// workspace path `under` (`/`: all), until a walk finds none unwatched: a
        /// directory made between its parent's listing and its parent's watch is
        /// found by the next walk, so at the end every directory has a watch that
        /// was added before its listing.
        fn watch_below(&mut self, under: &str) {
            let mut attempts = 0;
            loop {
                let mut found: Vec<(PathBuf, String)> = Vec::new();
                let only = [under.to_string()];
                let only = (under != "/").then_some(&only[..]);
                let walked = scan::walk(&self.root, &self.dot, only, None, &mut |w| {
                    if w.found == Found::Dir
                        && w.scope == Scope::Inside
                        && !self.wd_of.contains_key(w.path)
                    {
                        found.push((w.full.to_path_buf(), w.path.to_string()));
                    }
                    Ok(true)
                });
                if let Err(e) = walked {
                    // A directory removed during the walk: its removal is an event;
                    // walk again. Anything else the scan would refuse too.
                    attempts += 1;
                    if attempts > 5 {
                        self.broke(format!("cannot walk {under}: {e}"));
                        return;
                    }
                    continue;
                }
                if found.is_empty() {
                    return;
                }
                for (full, path) in found {
                    match inotify::add_watch(&*self.fd, full.as_path(), dir_mask()) {
                        Ok(wd) => {
                            if let Some(old) = self.dirs.insert(wd, path.clone()) {
                                self.wd_of.remove(&old);
                            }
                            self.wd_of.insert(path, wd);
                        }
                        // Gone (or now a file) since the walk: its parent's event says so.
                        Err(Errno::NOENT) | Err(Errno::NOTDIR) => {}
                        Err(e) => {
                            self.broke(format!(
                                "cannot watch {}: {e}{}",
                                full.display(),
                                if e == Errno::NOSPC {
                                    " (raise fs.inotify.max_user_watches)"
                                } else {
                                    ""
                                }
                            ));
                            return;
                        }
                    }
                }
            }
        }

        /// Forgets the watches of `path` and below (a directory moved or removed).
        fn unwatch_below(&mut self, path: &str, remove: bool) {
            let prefix = format!("{path}/");
            let mut gone: Vec<(String, i32)> = self
                .wd_of
                .range(prefix.clone()..)
                .take_while(|(p, _)| p.starts_with(&prefix))
                .map(|(p, wd)| (p.clone(), *wd))
                .collect();
            if let Some(wd) = self.wd_of.get(path) {
                gone.push((path.to_string(), *wd));
            }
            for (p, wd) in gone {
                self.wd_of.remove(&p);
                self.dirs.remove(&wd);
                if remove {
                    let _ = inotify::remove_watch(&*self.fd, wd);
                }
            }
        }

        /// Starts the history again: every watch dropped and added anew (events were
        /// lost, so moves may have left watches at stale paths), the changes
        /// forgotten, and tokens from before refused.
        fn reset(&mut self) {
            for wd in self.dirs.keys() {
                if *wd != self.root_wd {
                    let _ = inotify::remove_watch(&*self.fd, *wd);
                }
            }
            self.dirs.clear();
            self.wd_of.clear();
            self.dirs.insert(self.root_wd, String::new());
            self.watch_below("/");
            self.changed.clear();
            self.seq += 1;
            self.valid_from = self.seq;
            self.resets += 1;
        }

        fn token(&self) -> String {
            format!("{}.{}", self.id, self.seq)
        }

        /// Handles one event.
        fn handle(&mut self, wd: i32, flags: ReadFlags, name: Option<&[u8]>) {
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                eprintln!("snapgraph watch: event queue overflowed; starting over");
                self.reset();
                return;
            }
            if wd == self.cookie_wd {
                if let Some(n) = name
                    .and_then(|n| std::str::from_utf8(n).ok())
                    .and_then(|n| n.parse().ok())
                {
                    if flags.contains(ReadFlags::CREATE) {
                        self.cookies_seen.insert(n);
                    }
                }
                return;
            }
            if wd == self.root_wd
                && (flags.intersects(
                    ReadFlags::DELETE_SELF
                        | ReadFlags::MOVE_SELF
                        | ReadFlags::UNMOUNT
                        | ReadFlags::IGNORED,
                ))
            {
                self.broke("the working directory was moved, removed or unmounted".into());
                self.exit = true;
                return;
            }
            if flags.contains(ReadFlags::IGNORED) {
                if let Some(p) = self.dirs.remove(&wd) {
                    if self.wd_of.get(&p) == Some(&wd) {
                        self.wd_of.remove(&p);
                    }
                }
                return;
            }
            let Some(dir) = self.dirs.get(&wd).cloned() else {
                // A watch already dropped (a directory moved away or removed).
                return;
            };
            let Some(name) = name else {
                // Events about a directory itself are also reported by its parent.
                return;
            };
            if dir.is_empty() && name == DOT_DIR.as_bytes() {
                if flags.intersects(ReadFlags::DELETE | ReadFlags::MOVED_FROM) {
                    self.broke("the repository directory was removed".into());
                    self.exit = true;
                }
                return;
            }
            let whole_dir = if dir.is_empty() {
                "/".to_string()
            } else {
                dir.clone()
            };
            // An ignore file or a nested repository's `.snapgraph` changes what the
            // scan records in the whole directory; a name that is not UTF-8 is
            // refused by the scan of its directory.
            let (path, special) = match std::str::from_utf8(name) {
                Ok(n) if n == IGNORE_FILE || n == DOT_DIR => (whole_dir.clone(), true),
                Ok(n) => (format!("{dir}/{n}"), false),
                Err(_) => (whole_dir.clone(), false),
            };
            let is_dir = flags.contains(ReadFlags::ISDIR);
            if is_dir && flags.intersects(ReadFlags::DELETE | ReadFlags::MOVED_FROM) {
                self.unwatch_below(&path, flags.contains(ReadFlags::MOVED_FROM));
            }
            if is_dir && flags.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO) && !special {
                self.watch_below(&path);
            }
            if special {
                self.watch_below(&whole_dir);
            }
            self.record(path);
        }

        /// The answer to `since TOKEN` (after the cookie's event).
        fn since(&self, token: &str) -> String {
            if self.broken.is_some() {
                return "unknown -\n".into();
            }
            let usable = token
                .rsplit_once('.')
                .filter(|(id, _)| *id == self.id)
                .and_then(|(_, n)| n.parse::<u64>().ok())
                .filter(|n| *n >= self.valid_from && *n <= self.seq);
            let Some(after) = usable else {
                return format!("unknown {}\n", self.token());
            };
            let paths = scan::minimal(
                self.changed
                    .iter()
                    .filter(|(_, s)| **s > after)
                    .map(|(p, _)| p.clone())
                    .collect(),
            );
            let mut out = format!("changed {} {}\n", self.token(), paths.len());
            for p in paths {
                out.push_str(&p);
                out.push('\0');
            }
            out
        }
    }

    struct Shared {
        core: Mutex<Core>,
        read: Condvar,
    }

    /// Runs the watcher of the working directory `root` (repository directory `dot`)
    /// in the foreground until `snapgraph watch --stop`; `ready` is called once the
    /// socket answers, with the number of directories watched.
    pub fn run(root: &Path, dot: &Path, ready: &mut dyn FnMut(usize)) -> Result<()> {
        let fail = |reason: String| CliError::Watch {
            root: root.to_path_buf(),
            reason,
        };
        let fs = rustix::fs::statfs(root).map_err(|e| CliError::io(root, e.into()))?;
        #[allow(clippy::unnecessary_cast)]
        let magic = fs.f_type as u64;
        if let Some((_, name)) = REMOTE_FS.iter().find(|(m, _)| *m == magic) {
            return Err(fail(format!(
                "on a {name} file system changes made elsewhere raise no inotify events"
            )));
        }
        let sock = dot.join(SOCKET);
        if super::ping(dot).is_some() {
            return Err(fail("a watcher already runs here".into()));
        }
        let _ = std::fs::remove_file(&sock);
        let cookies = dot.join(COOKIE_DIR);
        let _ = std::fs::remove_dir_all(&cookies);
        std::fs::create_dir(&cookies).at(&cookies)?;
        let fd = inotify::init(CreateFlags::CLOEXEC).map_err(|e| fail(format!("inotify: {e}")))?;
        let fd = Arc::new(fd);
        let add = |p: &Path, mask: WatchFlags| {
            inotify::add_watch(&*fd, p, mask)
                .map_err(|e| fail(format!("cannot watch {}: {e}", p.display())))
        };
        let root_wd = add(root, dir_mask())?;
        let cookie_wd = add(&cookies, WatchFlags::CREATE | WatchFlags::ONLYDIR)?;
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let mut core = Core {
            root: root.to_path_buf(),
            dot: dot.to_path_buf(),
            fd: fd.clone(),
            dirs: HashMap::from([(root_wd, String::new())]),
            wd_of: BTreeMap::new(),
            root_wd,
            cookie_wd,
            seq: 1,
            valid_from: 1,
            broken: None,
            changed: HashMap::new(),
            cookies_seen: BTreeSet::new(),
            resets: 0,
            id: format!("{:x}-{started:x}", std::process::id()),
            exit: false,
        };
        core.watch_below("/");
        if let Some(why) = core.broken.take() {
            let _ = std::fs::remove_dir_all(&cookies);
            return Err(fail(why));
        }
        let dirs = core.dirs.len();
        let shared = Arc::new(Shared {
            core: Mutex::new(core),
            read: Condvar::new(),
        });
        let listener =
            UnixListener::bind(&sock).map_err(|e| fail(format!("{}: {e}", sock.display())))?;
        {
            let shared = shared.clone();
            std::thread::spawn(move || read_events(&fd, &shared));
        }
        ready(dirs);
        let test_hooks = std::env::var_os("SNAPGRAPH_WATCH_TEST_HOOKS").is_some();
        let mut next_cookie = 0u64;
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            if let Ok(false) = serve(conn, &shared, &cookies, &mut next_cookie, test_hooks) {
                break;
            }
        }
        let _ = std::fs::remove_file(&sock);
        let _ = std::fs::remove_dir_all(&cookies);
        Ok(())
    }

    /// Reads inotify events into the state until the descriptor fails.
    fn read_events(fd: &OwnedFd, shared: &Shared) {
        let mut buf = vec![MaybeUninit::<u8>::uninit(); 64 * 1024];
        let mut reader = inotify::Reader::new(fd, &mut buf[..]);
        loop {
            let (wd, flags, name) = match reader.next() {
                Ok(e) => (
                    e.wd(),
                    e.events(),
                    e.file_name().map(|n| n.to_bytes().to_vec()),
                ),
                Err(Errno::INTR) => continue,
                Err(e) => {
                    let mut core = shared.core.lock().unwrap_or_else(|p| p.into_inner());
                    core.broke(format!("reading inotify events: {e}"));
                    shared.read.notify_all();
                    return;
                }
            };
            let mut core = shared.core.lock().unwrap_or_else(|p| p.into_inner());
            core.handle(wd, flags, name.as_deref());
            shared.read.notify_all();
            if core.exit {
                let _ = std::fs::remove_file(core.dot.join(SOCKET));
                let _ = std::fs::remove_dir_all(core.dot.join(COOKIE_DIR));
                std::process::exit(1);
            }
        }
    }

    /// Serves one connection; `false` to stop.
    fn serve(
        conn: UnixStream,
        shared: &Shared,
        cookies: &Path,
        next_cookie: &mut u64,
        test_hooks: bool,
    ) -> std::io::Result<bool> {
        conn.set_read_timeout(Some(Duration::from_secs(5)))?;
        conn.set_write_timeout(Some(Duration::from_secs(5)))?;
        let mut line = String::new();
        BufReader::new(&conn).take(4096).read_line(&mut line)?;
        let line = line.trim_end_matches('\n');
        let mut conn = conn;
        let lock = || shared.core.lock().unwrap_or_else(|p| p.into_inner());
        match line.split_once(' ').unwrap_or((line, "")) {
            ("since", token) => {
                let n = *next_cookie;
                *next_cookie += 1;
                let resets = lock().resets;
                let file = cookies.join(n.to_string());
                let answer = match std::fs::File::create(&file) {
                    Err(_) => "unknown -\n".to_string(),
                    Ok(_) => {
                        let deadline = Instant::now() + COOKIE_TIMEOUT;
                        let mut core = lock();
                        loop {
                            if core.cookies_seen.remove(&n) {
                                break core.since(token);
                            }
                            let now = Instant::now();
                            if core.resets != resets || core.broken.is_some() || now >= deadline {
                                break "unknown -\n".to_string();
                            }
                            core = shared
                                .read
                                .wait_timeout(core, deadline - now)
                                .unwrap_or_else(|p| p.into_inner())
                                .0;
                        }
                    }
                };
                let _ = std::fs::remove_file(&file);
                conn.write_all(answer.as_bytes())?;
                Ok(true)
            }
            ("ping", "") => {
                let core = lock();
                let state = if core.broken.is_some() {
                    "untrusted"
                } else {
                    "ok"
                };
                let dirs = core.dirs.len();
                drop(core);
                writeln!(conn, "watching {} {dirs} {state}", std::process::id())?;
                Ok(true)
            }
            ("stop", "") => {
                conn.write_all(b"stopping\n")?;
                Ok(false)
            }
            ("test-overflow", "") if test_hooks => {
                // The path an `IN_Q_OVERFLOW` takes (a real one needs more events
                // than `max_queued_events` unread).
                lock().handle(-1, ReadFlags::QUEUE_OVERFLOW, None);
                conn.write_all(b"ok\n")?;
                Ok(true)
            }
            _ => {
                conn.write_all(b"error unknown request\n")?;
                Ok(true)
            }
        }
    }
}
