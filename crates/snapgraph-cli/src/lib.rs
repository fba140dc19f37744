//! `snapgraph`, the command-line tool: versioned, verifiable history of real
//! directories over any snapgraph store. See `README.md` for the commands and the
//! design (stat cache, modes, safe checkout, deterministic export).
#![forbid(unsafe_code)]

pub mod ahead;
pub mod batches;
pub mod cli;
pub mod commands;
pub use snapgraph_store::cpus;
pub mod error;
pub mod guard;
pub mod index;
pub mod interrupt;
pub mod lock;
pub mod materialize;
pub mod meta;
pub mod output;
pub mod progress;
pub mod quote;
pub mod recheck;
pub mod repo;
pub mod rev;
pub mod scan;
pub mod secrets;
pub mod switch;
pub mod tarball;
pub mod timings;
pub mod trash;
pub mod watch;

pub use error::CliError;
