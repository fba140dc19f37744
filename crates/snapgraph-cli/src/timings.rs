//! `SNAPGRAPH_TIMINGS=1`: a command's timeline on standard error, one line per
//! phase, as git's `GIT_TRACE_PERFORMANCE` does: where a per-turn commit's two or
//! three milliseconds go (the survey's stats, the index, the store's open on its
//! own thread, the write transactions) without a profiler or a rebuild.
//!
//! Each line is the time since the process's first look at the variable, the thread
//! when it is not the main one, and the phase that just ended:
//!
//! ```text
//! timings: +0.132 ms  arguments parsed
//! timings: +0.604 ms  [snapgraph-open] store opened
//! timings: +0.611 ms  index loaded (2001 entries)
//! ```
//!
//! Off (the variable unset, empty or `0`), a phase costs one load of a set-once
//! value: no clock is read and nothing is formatted.
//!
//! Send the lines to a file (`2>timeline`), not down a pipe read as they come: each
//! line then wakes its reader, which on a 2-core machine takes a core from the
//! command (measured: a per-turn commit's start went from 0.3 ms to 1.2-2.7 ms in
//! about a third of the runs, its whole timeline from 2.2-2.9 ms to 3.6-8.6 ms).

use std::sync::OnceLock;
use std::time::Instant;

/// When the process started looking (`None`: timings are off).
static START: OnceLock<Option<Instant>> = OnceLock::new();

fn start() -> Option<Instant> {
    *START.get_or_init(|| {
        let on = std::env::var_os("SNAPGRAPH_TIMINGS").is_some_and(|v| !v.is_empty() && v != "0");
        on.then(Instant::now)
    })
}

/// Starts the clock (the first call decides whether timings are on): call it first
/// thing, so that the lines measure from the process's start.
pub fn begin() {
    let _ = start();
}

/// Whether timings are on.
pub fn on() -> bool {
    start().is_some()
}

/// Reports that `phase` just ended (nothing when timings are off).
pub fn phase(phase: &str) {
    if let Some(t0) = start() {
        line(t0, phase);
    }
}

/// [`phase`] with a detail computed only when timings are on.
pub fn phase_with(phase: &str, detail: impl FnOnce() -> String) {
    if let Some(t0) = start() {
        line(t0, &format!("{phase} ({})", detail()));
    }
}

fn line(t0: Instant, phase: &str) {
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    let thread = std::thread::current();
    match thread.name() {
        Some("main") | None => eprintln!("timings: +{ms:.3} ms  {phase}"),
        Some(name) => eprintln!("timings: +{ms:.3} ms  [{name}] {phase}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_phase_with_timings_off_computes_no_detail() {
        // The test process does not set the variable (the CLI's tests that do run
        // the binary).
        if super::on() {
            return;
        }
        super::phase_with("never", || unreachable!("detail computed with timings off"));
    }
}
