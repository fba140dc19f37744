//! The `snapgraph` binary: parses the command line, runs the command, prints
//! `error: ...` (with causes) and exits 1 on failure; clap exits 2 on usage errors;
//! a closed stdout ends it quietly with 141.
#![forbid(unsafe_code)]

use clap::Parser;

fn main() {
    let cli = snapgraph_cli::cli::Cli::parse();
    if let Err(e) = snapgraph_cli::commands::run(cli) {
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
        std::process::exit(1);
    }
}
