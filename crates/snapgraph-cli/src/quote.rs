//! Names as text output prints them (see [`crate::output`], "Quoting"): plain ones
//! unchanged, others in double quotes with C escapes and every byte outside
//! printable ASCII as a three-digit octal escape. Error messages quote the paths
//! they name the same way, so a file name can never drive the terminal, whether it
//! is listed or refused. A module of its own, used by `output` and `error` alike.

use std::borrow::Cow;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `name` as text output prints it: unchanged when it is plain, else in double
/// quotes with C escapes.
pub fn quote(name: &str) -> Cow<'_, str> {
    match quoted(name.as_bytes()) {
        Some(q) => Cow::Owned(q),
        None => Cow::Borrowed(name),
    }
}

/// A path of the local file system (any bytes, UTF-8 or not) as [`quote`] prints
/// a name: an invalid byte shows as its octal escape, not as U+FFFD.
pub fn quote_path(path: &Path) -> Cow<'_, str> {
    let bytes = path.as_os_str().as_bytes();
    match quoted(bytes) {
        Some(q) => Cow::Owned(q),
        // Plain bytes are printable ASCII, so UTF-8.
        None => String::from_utf8_lossy(bytes),
    }
}

/// The quoted form of `name`, or `None` when it is plain.
fn quoted(name: &[u8]) -> Option<String> {
    if !name
        .iter()
        .any(|&b| !(0x20..0x7f).contains(&b) || b == b'"' || b == b'\\')
    {
        return None;
    }
    let mut out = String::with_capacity(name.len() + 8);
    out.push('"');
    for &b in name {
        match b {
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            0x0b => out.push_str("\\v"),
            0x0c => out.push_str("\\f"),
            b'\r' => out.push_str("\\r"),
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b if !(0x20..0x7f).contains(&b) => out.push_str(&format!("\\{b:03o}")),
            b => out.push(b as char),
        }
    }
    out.push('"');
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn paths_quote_as_names_do_and_show_invalid_bytes() {
        assert_eq!(quote_path(Path::new("/tmp/a b.txt")), "/tmp/a b.txt");
        assert_eq!(quote_path(Path::new("/tmp/é")), quote("/tmp/é"));
        assert_eq!(quote("/tmp/é"), "\"/tmp/\\303\\251\"");
        let hostile = Path::new(OsStr::from_bytes(b"/w/bad\xff\x1b[31mname"));
        assert_eq!(quote_path(hostile), "\"/w/bad\\377\\033[31mname\"");
    }
}
