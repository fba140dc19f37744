//! The CLI's config file and store URLs: any bytes as `.snapgraph/config` text, each
//! value as a store URL. Never a panic; a password split out of a URL is gone from
//! what remains, the redacted form holds `***` instead, and it can be put back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use snapgraph_cli::repo::parse_config;
use snapgraph_cli::secrets::{redact, split_password, with_password};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for (key, value) in parse_config(text) {
        assert!(!key.contains('\n') && !value.contains('\n'));
        assert_eq!(key.trim(), key);
        let (bare, password) = split_password(&value);
        let Some(password) = password else {
            assert_eq!(bare, value);
            continue;
        };
        assert_eq!(split_password(&bare).1, None, "{value:?} -> {bare:?}");
        assert_eq!(redact(&bare), bare);
        assert_eq!(split_password(&redact(&value)).1.as_deref(), Some("***"));
        let back = with_password(&bare, &password);
        assert!(split_password(&back).1.is_some(), "{value:?} -> {back:?}");
    }
});
