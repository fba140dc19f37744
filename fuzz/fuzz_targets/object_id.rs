//! Object id parsing: `from_hex` and `FromStr` agree, and what parses
//! prints back as its lowercase form.
#![no_main]

use libfuzzer_sys::fuzz_target;
use snapgraph::ObjectId;

fuzz_target!(|data: &[u8]| {
    let parsed = ObjectId::from_hex(data);
    if let Ok(id) = &parsed {
        assert_eq!(id.to_hex().as_bytes(), data.to_ascii_lowercase().as_slice());
        assert_eq!(ObjectId::from_hex(id.to_hex()).ok(), Some(*id));
    }
    if let Ok(s) = std::str::from_utf8(data) {
        let via_str: Result<ObjectId, _> = s.parse();
        assert_eq!(via_str.is_ok(), parsed.is_ok());
        if let (Ok(a), Ok(b)) = (&via_str, &parsed) {
            assert_eq!(a, b);
            assert_eq!(a.to_string(), s.to_ascii_lowercase());
        }
        let _ = format!("{:?}", via_str);
    }
    // Raw digests: any 32 bytes are an id; its hex form parses back.
    if data.len() >= 32 {
        let mut raw = [0u8; 32];
        raw.copy_from_slice(&data[..32]);
        let id = ObjectId::from_bytes(raw);
        assert_eq!(ObjectId::from_hex(id.to_hex()).ok(), Some(id));
        assert_eq!(id.as_bytes(), &raw);
    }
});
