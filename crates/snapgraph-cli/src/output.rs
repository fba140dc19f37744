//! What commands print: text quoted like git's, and a stdout whose reader may go away.
//!
//! **Quoting.** A name printed in text output (by `ls`, `show`, `status`, `diff`,
//! `log`...) that holds a control character, a byte above 0x7f, `"` or `\` is printed
//! the way git prints paths with `core.quotePath` on (its default): in double quotes,
//! with C escapes (`\n`, `\t`, `\033`...) and every non-ASCII byte as a three-digit
//! octal escape. So a name can never move the cursor, clear the screen or fake a
//! second line, and the printed form names exactly one byte string. Other names are
//! printed as they are. JSON output carries the names unchanged (JSON escapes control
//! characters itself).
//!
//! **A closed pipe.** When the reader of stdout goes away (`snapgraph log | head -1`),
//! writing fails with `BrokenPipe`; commands turn that into
//! [`crate::CliError::ClosedPipe`], which the binary ends on
//! quietly with exit status 141 (128 + SIGPIPE, what a shell reports for git killed
//! by the signal), printing nothing.

use std::borrow::Cow;
use std::io::Write;

use crate::error::{CliError, Result};

/// Up to ten of `paths`, each [`quote`]d, joined by `, ` (and how many more).
pub fn quote_list(paths: &[String]) -> String {
    const SHOWN: usize = 10;
    let mut out = paths
        .iter()
        .take(SHOWN)
        .map(|p| quote(p).into_owned())
        .collect::<Vec<_>>()
        .join(", ");
    if paths.len() > SHOWN {
        out.push_str(&format!(" and {} more", paths.len() - SHOWN));
    }
    out
}

pub use crate::quote::{quote, quote_path};

/// Text that is not a name but comes from a commit (a message, a metadata value):
/// control characters other than newline and tab are shown as `\ooo`, so that it
/// cannot drive the terminal; everything else, UTF-8 included, is kept.
pub fn sanitize(text: &str) -> Cow<'_, str> {
    if !text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("\\{b:03o}"));
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Maps a failed write to stdout: a reader that went away is
/// [`CliError::ClosedPipe`], anything else an I/O error on `<stdout>`.
pub fn stdout_error(e: std::io::Error) -> CliError {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        CliError::ClosedPipe
    } else {
        CliError::io("<stdout>", e)
    }
}

/// Runs `f` with a locked, buffered stdout, then flushes it.
pub fn with_stdout(f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<()> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    f(&mut out).map_err(stdout_error)?;
    out.flush().map_err(stdout_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_like_git() {
        assert_eq!(quote("plain/name.txt"), "plain/name.txt");
        assert_eq!(quote("a\nb"), "\"a\\nb\"");
        assert_eq!(quote("esc\x1b[2J"), "\"esc\\033[2J\"");
        assert_eq!(quote("q\"b\\"), "\"q\\\"b\\\\\"");
        assert_eq!(quote("tab\there"), "\"tab\\there\"");
        assert_eq!(quote("\u{e9}"), "\"\\303\\251\"");
        assert_eq!(quote("del\x7f"), "\"del\\177\"");
    }

    #[test]
    fn sanitize_keeps_lines_and_utf8() {
        assert_eq!(sanitize("line 1\nline 2 \u{e9}"), "line 1\nline 2 \u{e9}");
        assert_eq!(sanitize("x\x1b]0;title\x07"), "x\\033]0;title\\007");
    }
}
