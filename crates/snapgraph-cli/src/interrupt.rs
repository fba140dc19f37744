//! Ctrl-C (and `SIGTERM`, `SIGHUP`) while a commit or an import writes in batches.
//!
//! A batched commit holds a writer's lease in the store and appends to segment
//! files from its first batch until it publishes (`snapgraph_store::Batched`).
//! Killed there, by the default action of a signal, it left the lease (every later
//! `gc` stopped with "writer lease(s) still held" until `gc --break-leases`) and the
//! batch's segment bytes. So the first hand-over of a batch [`arm`]s this module: a
//! thread of ours receives those signals from then on ([`signal_hook::iterator`],
//! a safe API). The first one is recorded; the scan sees it at its next file or
//! block ([`check`]) and returns [`CliError::Interrupted`], which unwinds the commit
//! (the lease released, the segment bytes taken back, no ref moved). A second one
//! ends the process at once, as the signal's default action would. When the
//! command is done, [`finish`] ends the process by the recorded signal's default
//! action, so a shell sees a command killed by it (a loop of commits stops).
//!
//! Commands that never hand a batch over (every per-turn commit) install nothing:
//! a signal ends them as it always did, with nothing held.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use crate::error::{CliError, Result};

/// Whether the receiving thread was started.
static ARMED: AtomicBool = AtomicBool::new(false);
/// The first signal received since, or 0.
static PENDING: AtomicI32 = AtomicI32::new(0);

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
            for signal in signals.forever() {
                if PENDING
                    .compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst)
                    .is_err()
                {
                    die(signal);
                }
            }
        });
    if started.is_err() {
        // The registration stays, with nobody to act on it: act now instead.
        ARMED.store(false, Ordering::SeqCst);
    }
    // Test hook: a signal at the first batch, as if the user pressed Ctrl-C then
    // (`SIGTERM`, which a background job does not ignore).
    if started.is_ok()
        && wanted.contains(&SIGTERM)
        && std::env::var_os("SNAPGRAPH_TEST_INTERRUPT").is_some()
    {
        let _ = signal_hook::low_level::raise(SIGTERM);
        while PENDING.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
    }
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

/// [`CliError::Interrupted`] once a signal was received.
pub fn check() -> Result<()> {
    match PENDING.load(Ordering::Relaxed) {
        0 => Ok(()),
        signal => Err(CliError::Interrupted {
            signal: name(signal),
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
