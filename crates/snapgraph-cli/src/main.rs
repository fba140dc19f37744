//! The `snapgraph` binary: parses the command line, runs the command, prints
//! `error: ...` (with causes) and exits 1 on failure; clap exits 2 on usage errors;
//! a closed stdout ends it quietly with 141; a signal that stopped a batched commit
//! (`interrupt`) ends it as that signal does.
#![forbid(unsafe_code)]

use clap::{CommandFactory, FromArgMatches};
use snapgraph_cli::cli::Cli;

fn main() {
    snapgraph_cli::timings::begin();
    // A per-turn command's store opens while its arguments are parsed.
    let args: Vec<_> = std::env::args_os().collect();
    snapgraph_cli::repo::Opening::ahead(&args);
    // As `Cli::parse()`, but the command tree (every verb's arguments and help) is
    // not freed node by node: the process ends with the command, and the drop was
    // a fifth of clap's instructions in a per-turn commit.
    let mut command = Cli::command();
    let mut matches = command
        .try_get_matches_from_mut(args)
        .unwrap_or_else(|e| e.exit());
    let cli = Cli::from_arg_matches_mut(&mut matches)
        .map_err(|e| e.format(&mut command))
        .unwrap_or_else(|e| e.exit());
    snapgraph_cli::timings::phase("arguments parsed");
    std::mem::forget(matches);
    std::mem::forget(command);
    let result = snapgraph_cli::commands::run(cli);
    snapgraph_cli::timings::phase("command done");
    if result.is_ok() {
        // A signal received after a batched commit's last check: the command is
        // done, and ends as the signal would have ended it.
        snapgraph_cli::interrupt::finish();
    }
    if let Err(e) = result {
        if matches!(e, snapgraph_cli::CliError::ClosedPipe) {
            // The reader went away: end quietly, as git does (killed by SIGPIPE,
            // which a shell reports as 141).
            std::process::exit(141);
        }
        if matches!(e, snapgraph_cli::CliError::Differences { .. }) {
            // `diff --exit-code`: the diff was the output.
            std::process::exit(1);
        }
        let mut msg = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            let text = s.to_string();
            if !msg.contains(&text) {
                msg.push_str(": ");
                msg.push_str(&text);
            }
            source = s.source();
        }
        eprintln!("error: {msg}");
        // Stopped by a signal (`interrupt`): ended by it, as a shell expects.
        snapgraph_cli::interrupt::finish();
        std::process::exit(1);
    }
}
