//! How the `snapgraph` binary is linked (see `build.rs`): statically against glibc
//! wherever its archives are installed, so that a per-turn command does not start by
//! loading shared libraries. Every other test runs that same binary.
#![cfg(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64"))]

/// The types of the ELF program headers of the file at `path` (64-bit little-endian
/// only: the targets this test runs on).
fn program_header_types(path: &str) -> Vec<u32> {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..4], b"\x7fELF", "{path} is not an ELF file");
    assert_eq!(bytes[4], 2, "{path} is not a 64-bit ELF file");
    let u16_at = |at: usize| u16::from_le_bytes(bytes[at..at + 2].try_into().unwrap()) as usize;
    let phoff = u64::from_le_bytes(bytes[0x20..0x28].try_into().unwrap()) as usize;
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    (0..phnum)
        .map(|i| {
            let at = phoff + i * phentsize;
            u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
        })
        .collect()
}

/// Whether the C compiler the build links through finds glibc's static archive (the
/// build links statically exactly then, unless told `SNAPGRAPH_LINK=dynamic`).
fn static_glibc_installed() -> bool {
    let cc = option_env!("CC").unwrap_or("cc");
    std::process::Command::new(cc)
        .arg("-print-file-name=libc.a")
        .output()
        .is_ok_and(|out| {
            let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            std::path::Path::new(&path).is_absolute() && std::path::Path::new(&path).exists()
        })
}

#[test]
fn the_binary_loads_no_shared_library_where_glibc_can_be_linked_statically() {
    const PT_DYNAMIC: u32 = 2;
    const PT_INTERP: u32 = 3;
    let bin = env!("CARGO_BIN_EXE_snapgraph");
    let types = program_header_types(bin);
    let dynamic = types.contains(&PT_INTERP) || types.contains(&PT_DYNAMIC);
    match option_env!("SNAPGRAPH_LINK") {
        Some("dynamic") => assert!(dynamic, "SNAPGRAPH_LINK=dynamic, yet {bin} is static"),
        Some("static") => assert!(!dynamic, "SNAPGRAPH_LINK=static, yet {bin} is dynamic"),
        _ if static_glibc_installed() => assert!(
            !dynamic,
            "{bin} has an interpreter or a dynamic section though libc.a is installed"
        ),
        _ => assert!(dynamic),
    }
    // And it runs: the standard library's start-up, threads and unwinding work in a
    // static glibc binary (every other test drives it further).
    let out = std::process::Command::new(bin)
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("snapgraph "));
}
