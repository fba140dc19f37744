//! One command at a time changes a working directory.
//!
//! Two snapgraph processes in one working directory (an agent's commit loop and a
//! person's checkout, two turns racing) used to interleave: a commit that scanned
//! the tree while a checkout swapped it recorded half of each commit on the branch
//! (55 files missing, in the test that found it), and moved the other branch's tip
//! to the same half tree. git refuses a second command with `index.lock`; a crash
//! leaves that file behind, to be deleted by hand.
//!
//! Here the lock is `flock(2)` on `.snapgraph/lock` (the standard library's
//! `File::lock`): the kernel releases it when the process ends, however it ends,
//! so nothing is ever left stale. Commands that change the working directory, its
//! stat cache or HEAD (`commit`, `checkout` in place, `restore`) hold it
//! exclusively; those that read the working directory (`status`, `diff` against
//! it) share it, so they never see a checkout half done. A command that finds it
//! held waits (saying for whom after a second) up to [`WAIT`], then fails with
//! [`CliError::WorkdirBusy`]. The holder writes its process id and command into
//! the file for that message (exclusive holders only). Commands that touch only
//! the store (`log`, `sync`, `gc`, `checkout --to`...) take no lock: the store has
//! its own (leases, transactions).

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{CliError, Result};

/// How long a command waits for another one in the same working directory.
pub const WAIT: Duration = Duration::from_secs(60);

/// Exclusive (the command changes the working directory) or shared (it reads it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `commit`, `checkout`, `restore`.
    Exclusive,
    /// `status`, `diff`.
    Shared,
}

/// The lock held; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct Held {
    _file: Option<File>,
}

/// Takes the lock of the working directory whose `.snapgraph/` is `dot` for
/// `command`, waiting up to [`WAIT`], or `SNAPGRAPH_LOCK_WAIT` seconds (0: fail at
/// once, as git does), see the module docs. Where the file cannot be opened (a
/// read-only `.snapgraph/`, which no command here could change), the command runs
/// unlocked.
pub fn acquire(dot: &Path, mode: Mode, command: &str) -> Result<Held> {
    let wait = std::env::var("SNAPGRAPH_LOCK_WAIT")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map_or(WAIT, Duration::from_secs);
    acquire_within(dot, mode, command, wait)
}

/// [`acquire`], waiting up to `wait`.
pub fn acquire_within(dot: &Path, mode: Mode, command: &str, wait: Duration) -> Result<Held> {
    let path = dot.join("lock");
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .or_else(|_| File::open(&path));
    let Ok(mut file) = file else {
        return Ok(Held { _file: None });
    };
    let try_once = |f: &File| match mode {
        Mode::Exclusive => f.try_lock(),
        Mode::Shared => f.try_lock_shared(),
    };
    let start = Instant::now();
    let mut told = false;
    let mut pause = Duration::from_millis(1);
    loop {
        match try_once(&file) {
            Ok(()) => break,
            Err(TryLockError::WouldBlock) => {}
            // No locks on this file system: run unlocked, as before.
            Err(TryLockError::Error(_)) => return Ok(Held { _file: None }),
        }
        let waited = start.elapsed();
        if waited >= wait {
            return Err(CliError::WorkdirBusy {
                root: dot.parent().unwrap_or(dot).to_path_buf(),
                holder: holder(&path),
                waited_s: waited.as_secs(),
            });
        }
        if !told && waited >= Duration::from_secs(1) {
            told = true;
            eprintln!(
                "waiting for {} in {} (up to {} s)",
                holder(&path),
                dot.parent().unwrap_or(dot).display(),
                wait.as_secs()
            );
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
    if mode == Mode::Exclusive {
        // Who holds it, for a waiting command's message (best effort; the file was
        // just opened, at offset 0): one `ftruncate`, one `write`.
        let who = format!("{} {command}", std::process::id());
        let _ = file
            .set_len(0)
            .and_then(|()| file.write_all(who.as_bytes()));
    }
    Ok(Held { _file: Some(file) })
}

/// Who holds the lock, as its holder wrote it: `process PID (snapgraph COMMAND)`
/// while that process lives (else a shared holder, which writes nothing, holds it
/// after an exclusive one that has ended).
fn holder(path: &Path) -> String {
    let mut text = String::new();
    let _ = File::open(path).and_then(|mut f| f.read_to_string(&mut text));
    match text.trim().split_once(' ') {
        Some((pid, command)) if pid.parse::<u32>().is_ok_and(crate::repo::process_alive) => {
            format!("process {pid} (snapgraph {command})")
        }
        _ => "another snapgraph process".to_string(),
    }
}
