//! Who and when: the metadata the CLI records in each commit it makes (`commit`,
//! `import`). The core never reads a clock or the environment; the CLI does, here.
//!
//! - [`TIME`]: the commit's time, RFC 3339 in UTC to the second
//!   (`2026-12-01T13:40:05Z`); `SOURCE_DATE_EPOCH` (seconds, the reproducible-builds
//!   convention) pins it, so the same content, message and environment give the same
//!   commit id again;
//! - [`AUTHOR`]: the config's `author = ...`, else `SNAPGRAPH_AUTHOR`, else `USER`
//!   or `LOGNAME`; absent when none is set;
//! - [`HOST`]: `SNAPGRAPH_HOST`, else the kernel's host name
//!   (`/proc/sys/kernel/hostname`, `/etc/hostname`); absent when unknown.
//!
//! `--meta KEY=VALUE` overrides any of them.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::Result;

/// Metadata key of the commit time.
pub const TIME: &str = "time";
/// Metadata key of the author.
pub const AUTHOR: &str = "author";
/// Metadata key of the host.
pub const HOST: &str = "host";

/// `secs` since the Unix epoch as RFC 3339 in UTC (`YYYY-MM-DDTHH:MM:SSZ`).
pub fn rfc3339(secs: u64) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// The author: config `author`, `SNAPGRAPH_AUTHOR`, `USER`, `LOGNAME`.
pub fn author(dot: &Path) -> Result<Option<String>> {
    if let Some(a) = crate::repo::config_value(dot, "author")?.filter(|a| !a.is_empty()) {
        return Ok(Some(a));
    }
    Ok(["SNAPGRAPH_AUTHOR", "USER", "LOGNAME"]
        .into_iter()
        .find_map(env))
}

/// The host name: `SNAPGRAPH_HOST`, else the kernel's.
pub fn host() -> Option<String> {
    env("SNAPGRAPH_HOST").or_else(|| {
        ["/proc/sys/kernel/hostname", "/etc/hostname"]
            .into_iter()
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .map(|s| s.trim().to_string())
            .find(|s| !s.is_empty())
    })
}

/// `time`, `author` and `host` for a commit made now by the repository at `dot`.
pub fn commit_meta(dot: &Path) -> Result<BTreeMap<String, String>> {
    let mut m = BTreeMap::new();
    let secs = match env("SOURCE_DATE_EPOCH").and_then(|s| s.parse::<u64>().ok()) {
        Some(s) => s,
        None => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    };
    m.insert(TIME.to_string(), rfc3339(secs));
    if let Some(a) = author(dot)? {
        m.insert(AUTHOR.to_string(), a);
    }
    if let Some(h) = host() {
        m.insert(HOST.to_string(), h);
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::rfc3339;

    #[test]
    fn formats_utc_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_709_251_199), "2024-02-29T23:59:59Z");
        assert_eq!(rfc3339(4_102_444_800), "2100-01-01T00:00:00Z");
    }
}
