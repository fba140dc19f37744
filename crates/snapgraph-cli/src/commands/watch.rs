//! `watch` and `watch --stop`: the optional file-system watcher ([`crate::watch`]).

use serde_json::json;

use super::Ctx;
#[cfg(not(target_os = "linux"))]
use crate::error::CliError;
use crate::error::Result;

/// `watch [--stop]`.
pub(super) fn watch(ctx: &Ctx, stop: bool) -> Result<()> {
    let wd = ctx.open()?;
    let (root, dot) = (wd.root.clone(), wd.dot.clone());
    // The daemon needs no store.
    drop(wd);
    if stop {
        let running = crate::watch::ping(&dot);
        let stopped = crate::watch::stop(&dot);
        return ctx.print(
            json!({"root": root, "stopped": stopped, "pid": running.map(|r| r.pid)}),
            |w| {
                if stopped {
                    writeln!(w, "stopped the watcher of {}", root.display())
                } else {
                    writeln!(w, "no watcher runs in {}", root.display())
                }
            },
        );
    }
    run(ctx, &root, &dot)
}

#[cfg(target_os = "linux")]
fn run(ctx: &Ctx, root: &std::path::Path, dot: &std::path::Path) -> Result<()> {
    let mut printed = Ok(());
    crate::watch::run(root, dot, &mut |dirs| {
        printed = ctx.print(
            json!({"root": root, "watching": dirs, "pid": std::process::id()}),
            |w| {
                writeln!(
                    w,
                    "watching {} ({dirs} directories); stop with `snapgraph watch --stop`",
                    root.display()
                )?;
                w.flush()
            },
        );
    })?;
    printed
}

#[cfg(not(target_os = "linux"))]
fn run(_: &Ctx, _: &std::path::Path, _: &std::path::Path) -> Result<()> {
    Err(CliError::WatchUnsupported {
        platform: std::env::consts::OS,
    })
}
