//! Ctrl-C (and `SIGTERM`, `SIGHUP`) while a command changes something that must
//! not be left half done.
//!
//! Killed by the default action of a signal, such a command used to leave:
//! - a batched commit or import: the store's writer lease (every later `gc`
//!   stopped with "writer lease(s) still held" until `gc --break-leases`) and the
//!   batch's segment bytes;
//! - a checkout: the working directory swapped to the new commit with HEAD and the
//!   stat cache still on the old one (the next commit recorded the new commit's
//!   files on the old branch), or a switch's files half written;
//! - a restore: a temporary file beside the file it was writing, which the next
//!   commit recorded.
//!
//! So these commands [`arm`] this module before their first such change: a thread
//! of ours receives those signals from then on ([`signal_hook::iterator`], a safe
//! API). The first one is recorded. Where stopping is safe, the work looks at it
//! ([`check`]: a commit's next file or block, a checkout's or restore's next file)
//! and returns [`CliError::Interrupted`], which unwinds (the lease released, the
//! segment bytes taken back, the staging directory removed, no ref moved). Where it
//! is not (a checkout from its swap or switch until HEAD and the stat cache name
//! the new commit), nothing looks, and the step runs to its end. A second signal
//! ends the process at once, as the signal's default action would, unless it comes
//! within [`SAME_EVENT`] of the first: `timeout` sends its signal to the command
//! and then to the command's process group, which would otherwise kill a checkout
//! in its swap one time in a few. When the
//! command is done, [`finish`] ends the process by the recorded signal's default
//! action, so a shell sees a command killed by it (a loop of commits stops).
//!
//! Commands that change nothing of the kind (every per-turn commit, which never
//! hands a batch over) install nothing: a signal ends them as it always did, with
//! nothing held.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use crate::error::{CliError, Result};

/// Whether the receiving thread was started.
static ARMED: AtomicBool = AtomicBool::new(false);
/// The first signal received since, or 0.
static PENDING: AtomicI32 = AtomicI32::new(0);
/// Set by the first signal: what store operations given it look at
/// ([`snapgraph_store::Cancel`]).
static CANCEL: std::sync::LazyLock<snapgraph_store::Cancel> =
    std::sync::LazyLock::new(snapgraph_store::Cancel::new);
/// A second signal this soon after the first is the same event delivered twice
/// (`timeout` signals the command, then its process group), not a second Ctrl-C.
pub const SAME_EVENT: std::time::Duration = std::time::Duration::from_millis(300);
/// Whether a signal ends the process at once again ([`disarm`]).
static DISARMED: AtomicBool = AtomicBool::new(false);

/// Starts receiving the signals (once per process), those the process does not
/// ignore: `nohup` (`SIGHUP`) and a shell's background job without job control
/// (`SIGINT`) keep ignoring theirs. Without a thread or the registration (an
/// error), signals keep their default action.
pub fn arm() {
    if ARMED.swap(true, Ordering::SeqCst) {
        return;
    }
    let ignored = ignored_signals();
    let wanted: Vec<i32> = [SIGINT, SIGTERM, SIGHUP]
        .into_iter()
        .filter(|s| ignored & (1u64 << (s - 1)) == 0)
        .collect();
    let Ok(mut signals) = signal_hook::iterator::Signals::new(&wanted) else {
        return;
    };
    let started = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut first: Option<std::time::Instant> = None;
            for signal in signals.forever() {
                if DISARMED.load(Ordering::SeqCst) {
                    die(signal);
                }
                match first {
                    None => {
                        first = Some(std::time::Instant::now());
                        PENDING.store(signal, Ordering::SeqCst);
                        CANCEL.cancel();
                    }
                    // One event delivered twice: `timeout` signals the command,
                    // then its whole process group, and a terminal may too.
                    Some(at) if at.elapsed() < SAME_EVENT => {}
                    Some(_) => die(signal),
                }
            }
        });
    if started.is_err() {
        // The registration stays, with nobody to act on it: act now instead.
        ARMED.store(false, Ordering::SeqCst);
    }
}

/// Test hook: with `SNAPGRAPH_TEST_INTERRUPT` set to `point`, and signals armed,
/// raises `SIGTERM` here (which a background job does not ignore) and returns once
/// it is recorded, as if the user had pressed Ctrl-C at that point. The points:
/// `batch` (a batched commit's first hand-over), `write` (a checkout's first write,
/// into its staging directory, or a restore's first file), `swap` (a full
/// checkout's swap begins), `apply` (a switch's apply begins).
///
/// Set to `kill:POINT`, it ends the process by `SIGKILL` at `POINT` instead, armed
/// or not, as a power cut or the OOM killer would: `published` (a full checkout's
/// stat cache and HEAD name the commit, the replaced tree not yet deleted).
pub fn test_point(point: &str) {
    if let Some(v) = std::env::var_os("SNAPGRAPH_TEST_INTERRUPT") {
        if v.to_str().and_then(|v| v.strip_prefix("kill:")) == Some(point) {
            let _ = signal_hook::low_level::raise(signal_hook::consts::SIGKILL);
        }
    }
    if !ARMED.load(Ordering::SeqCst)
        || PENDING.load(Ordering::SeqCst) != 0
        || std::env::var_os("SNAPGRAPH_TEST_INTERRUPT").is_none_or(|v| v != point)
        || ignored_signals() & (1u64 << (SIGTERM - 1)) != 0
    {
        return;
    }
    if signal_hook::low_level::raise(SIGTERM).is_ok() {
        while PENDING.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
    }
}

/// The flag the first signal sets, for store operations that take one
/// (`snapgraph_store::GcOptions::cancel`, `SyncOptions::cancel`): they stop at their
/// next safe point, taking back their lease or sweep marker.
pub fn cancel() -> snapgraph_store::Cancel {
    CANCEL.clone()
}

/// From here a signal ends the process at once, as its default action would (one
/// received already: now), for work that is safe to kill and too long to wait for
/// (a repack: SQLite's transactions).
pub fn disarm() {
    DISARMED.store(true, Ordering::SeqCst);
    finish();
}

/// The signals this process ignores, as a mask (bit `n - 1` for signal `n`), from
/// `/proc/self/status`; none where that cannot be read.
fn ignored_signals() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("SigIgn:"))?;
            u64::from_str_radix(line["SigIgn:".len()..].trim(), 16).ok()
        })
        .unwrap_or(0)
}

/// What a batched commit or import stopped by a signal leaves.
pub const NOTHING_COMMITTED: &str =
    "nothing was committed (what was written is unreferenced until the next gc)";
/// What a checkout stopped by a signal leaves (before its swap or rename).
pub const NOTHING_CHECKED_OUT: &str =
    "nothing was checked out (the partly written copy was removed; the working directory and HEAD are as they were)";
/// What a restore stopped by a signal leaves.
pub const RESTORE_PART: &str =
    "the paths restored so far are whole, the others untouched; run the restore again to finish";

/// [`CliError::Interrupted`], saying the command `left` this, once a signal was
/// received.
pub fn check(left: &'static str) -> Result<()> {
    match PENDING.load(Ordering::Relaxed) {
        0 => Ok(()),
        signal => Err(CliError::Interrupted {
            signal: name(signal),
            left: left.to_string(),
        }),
    }
}

/// The signal received, if one was: [`CliError::Interrupted`] saying the command
/// `left` this (for a store operation that stopped on [`cancel`], or work done
/// before the next step).
pub fn received(left: impl FnOnce() -> String) -> Option<CliError> {
    match PENDING.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(CliError::Interrupted {
            signal: name(signal),
            left: left(),
        }),
    }
}

/// Ends the process by the signal received, if one was (see the module docs).
pub fn finish() {
    match PENDING.load(Ordering::SeqCst) {
        0 => {}
        signal => die(signal),
    }
}

/// The signal's default action (for these: the end of the process, killed by it);
/// exit status 128 + the signal number if that fails.
fn die(signal: i32) -> ! {
    let _ = signal_hook::low_level::emulate_default_handler(signal);
    std::process::exit(128 + signal)
}

fn name(signal: i32) -> &'static str {
    match signal {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}
