//! Progress bars: drawn on stderr only when it is a terminal and `--quiet` is off.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar (with `len`) or spinner (without), hidden unless `enabled` and
/// stderr is a terminal.
pub fn bar(enabled: bool, len: Option<u64>, what: &str) -> ProgressBar {
    let visible = enabled && std::io::stderr().is_terminal();
    if !visible {
        // Never drawn: no template is parsed for it (a per-turn commit made two
        // bars, about 1 % of its instructions).
        return ProgressBar::with_draw_target(len, ProgressDrawTarget::hidden());
    }
    let pb = ProgressBar::with_draw_target(len, ProgressDrawTarget::stderr());
    let style = match len {
        Some(_) => ProgressStyle::with_template(
            "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} {msg}",
        ),
        None => ProgressStyle::with_template("{prefix} {spinner} [{elapsed_precise}] {pos} {msg}"),
    };
    if let Ok(style) = style {
        pb.set_style(style);
    }
    pb.set_prefix(what.to_string());
    pb.enable_steady_tick(std::time::Duration::from_millis(200));
    pb
}

/// Turns `pb` into a byte bar of `total` bytes for the next phase, named `what`
/// (a scan's spinner becomes the bar of the reads it counted).
pub fn phase(pb: &ProgressBar, what: &str, total: u64) {
    pb.set_length(total);
    pb.set_position(0);
    if pb.is_hidden() {
        return;
    }
    if let Ok(style) = ProgressStyle::with_template(
        "{prefix} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {msg}",
    ) {
        pb.set_style(style);
    }
    pb.set_prefix(what.to_string());
    pb.set_message("");
}
