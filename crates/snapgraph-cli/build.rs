//! `SNAPGRAPH_SKIP_PG=1` when the tests are built marks every test that needs a
//! PostgreSQL server as ignored, with the reason: a skip is reported as a skip, never as
//! a pass. Unset (or empty), those tests run and fail without `SNAPGRAPH_PG_URL`. Any
//! other value is refused, so the variable has one meaning everywhere.
//! `SNAPGRAPH_SKIP_S3=1` does the same for the tests that need an S3 server
//! (`SNAPGRAPH_S3_URL`, from `scripts/s3`).
//!
//! On Linux the `snapgraph` binary is linked position-dependent and, on glibc,
//! statically where glibc's archives are installed (`SNAPGRAPH_LINK`: `static`,
//! `dynamic` or unset; see `link_statically`), with a per-turn command's functions
//! side by side where the linker is lld (see `order_hot_symbols`).
fn main() {
    // The `snapgraph` binary is linked as a position-dependent executable on Linux:
    // a PIE's 23,000 relative relocations were applied by the dynamic loader at
    // every start (dirtying about 84 pages of `.data.rel.ro` and reading 138 pages
    // of `.rela.dyn`), a fifth of a no-change commit's page faults. Our code is
    // compiled position-independent as usual; only the final link differs, so the
    // library crates and the bindings' shared objects are unaffected.
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        // On glibc only: a musl target links a static PIE by default (its start-up
        // object relocates itself), and `-no-pie` beside it made a binary that
        // crashed before `main` (stop 49).
        if std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu") {
            println!("cargo::rustc-link-arg-bins=-no-pie");
        }
        link_statically();
        order_hot_symbols();
    }
    println!("cargo::rerun-if-env-changed=SNAPGRAPH_SKIP_S3");
    println!("cargo::rustc-check-cfg=cfg(snapgraph_skip_s3)");
    match std::env::var("SNAPGRAPH_SKIP_S3").as_deref() {
        Ok("1") => println!("cargo::rustc-cfg=snapgraph_skip_s3"),
        Ok("") | Err(_) => {}
        Ok(other) => panic!("SNAPGRAPH_SKIP_S3 must be 1 or unset, not {other:?}"),
    }
    println!("cargo::rerun-if-env-changed=SNAPGRAPH_SKIP_PG");
    println!("cargo::rustc-check-cfg=cfg(snapgraph_skip_pg)");
    match std::env::var("SNAPGRAPH_SKIP_PG").as_deref() {
        Ok("1") => println!("cargo::rustc-cfg=snapgraph_skip_pg"),
        Ok("") | Err(_) => {}
        Ok(other) => panic!("SNAPGRAPH_SKIP_PG must be 1 or unset, not {other:?}"),
    }
}

/// The libraries rustc names for the standard library on `*-linux-gnu` (`-lgcc_s
/// -lutil -lrt -lpthread -lm -ldl -lc`), each with the static archives it stands for.
/// libc's group holds libgcc's archives too, as gcc's own static link does
/// (`--start-group -lgcc -lgcc_eh -lc --end-group`): libc.a calls into them
/// (`__gcc_personality_v0`, the `__float128` helpers) and comes last, and GNU ld,
/// unlike lld, looks back only within a group.
const STATIC_LIBS: [(&str, &[&str]); 7] = [
    ("c", &["libc.a", "libgcc.a", "libgcc_eh.a"]),
    ("m", &["libm.a"]),
    ("pthread", &["libpthread.a"]),
    ("dl", &["libdl.a"]),
    ("rt", &["librt.a"]),
    ("util", &["libutil.a"]),
    ("gcc_s", &["libgcc_eh.a", "libgcc.a"]),
];

/// Links the `snapgraph` binary statically against glibc, when its static archives
/// are installed (`libc6-dev` has them): a command run once per agent turn spent a
/// tenth of a no-change commit (about 0.5 ms of 5.5) in the dynamic loader: mapping
/// `ld.so`, libc, libm and libgcc_s, binding their symbols and faulting their pages
/// in. ARCHITECTURE.md ("Stop 38") has the figures and the trade-off.
///
/// rustc links the standard library's C libraries dynamically unless the whole build
/// sets `-C target-feature=+crt-static`, which cargo cannot set for one binary (and
/// which proc macros and the bindings' shared objects refuse). So the link of our
/// binaries alone gets `-static` and a search directory, written here, in which
/// `libc.so` and its siblings are linker scripts naming the static archives (a
/// `GROUP`, which both GNU ld and lld read): the
/// linker then finds archives where rustc asked for shared libraries, and the result
/// has no interpreter and no dynamic section. Library crates, tests and the bindings
/// link as before.
///
/// `SNAPGRAPH_LINK=dynamic` keeps the binary dynamic (a host whose name service
/// needs modules of another glibc than the one linked in, say: see README);
/// `SNAPGRAPH_LINK=static` fails the build instead of falling back when the archives
/// are missing. Unset, the build links statically when it can and says so when it
/// cannot.
fn link_statically() {
    println!("cargo::rerun-if-env-changed=SNAPGRAPH_LINK");
    let required = match std::env::var("SNAPGRAPH_LINK").as_deref() {
        Ok("dynamic") => return,
        Ok("static") => true,
        Ok("") | Err(_) => false,
        Ok(other) => panic!("SNAPGRAPH_LINK must be static, dynamic or unset, not {other:?}"),
    };
    if std::env::var("CARGO_CFG_TARGET_ENV").as_deref() != Ok("gnu")
        || std::env::var("CARGO_CFG_TARGET_FEATURE")
            .is_ok_and(|f| f.split(',').any(|f| f == "crt-static"))
    {
        // musl links statically already; so does a build that sets crt-static.
        return;
    }
    // The archives are found with the host's C compiler: a cross build (which may
    // link through another compiler, for another libc) stays dynamic.
    if std::env::var("TARGET").ok() != std::env::var("HOST").ok() {
        let why = "cross-compiling (the static archives are looked up for the host)";
        if required {
            panic!("SNAPGRAPH_LINK=static: {why}");
        }
        println!("cargo::warning=linking the snapgraph binary dynamically: {why}");
        return;
    }
    match static_search_dir() {
        Ok(dir) => {
            println!("cargo::rustc-link-arg-bins=-L{}", dir.display());
            println!("cargo::rustc-link-arg-bins=-static");
        }
        Err(why) if required => panic!("SNAPGRAPH_LINK=static: {why}"),
        Err(why) => {
            println!("cargo::warning=linking the snapgraph binary dynamically: {why}");
        }
    }
}

/// Writes the directory of linker scripts [`link_statically`] puts first on the
/// binary's library path, after finding each archive with the C compiler rustc
/// links through (`cc -print-file-name`, which answers the bare name when the file
/// is not installed).
fn static_search_dir() -> Result<std::path::PathBuf, String> {
    println!("cargo::rerun-if-env-changed=CC");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let dir = std::path::PathBuf::from(std::env::var("OUT_DIR").map_err(|e| e.to_string())?)
        .join("static-libs");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for (lib, archives) in STATIC_LIBS {
        let mut inputs = Vec::new();
        for archive in archives {
            let out = std::process::Command::new(&cc)
                .arg(format!("-print-file-name={archive}"))
                .output()
                .map_err(|e| format!("running {cc}: {e}"))?;
            let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            if !out.status.success() || !std::path::Path::new(&path).is_absolute() {
                return Err(format!("{cc} finds no {archive} (install libc6-dev)"));
            }
            let path = std::fs::canonicalize(&path).map_err(|e| format!("{path}: {e}"))?;
            if path.to_string_lossy().contains([' ', '(', ')', '"']) {
                return Err(format!(
                    "{} is not a path a linker script can name",
                    path.display()
                ));
            }
            inputs.push(path.display().to_string());
        }
        let script = dir.join(format!("lib{lib}.so"));
        std::fs::write(&script, format!("GROUP({})\n", inputs.join(" ")))
            .map_err(|e| format!("{}: {e}", script.display()))?;
    }
    Ok(dir)
}

/// Places the functions a per-turn command runs (`hot-symbols.txt`, written by
/// `benches/peers/hot_symbols.sh`) side by side in the binary's text: scattered
/// over 13 MB they took about 160 distinct 64 KiB windows, and the kernel maps one
/// window of a file per page fault, so a command took about 80 faults on its code
/// alone; gathered, about 30 windows and 50 faults fewer (ARCHITECTURE.md, "Stop
/// 45"). A name the binary no longer has is skipped without a warning, so a stale
/// list costs speed, never a build.
///
/// Only where the link is known to be lld's, which reads `--symbol-ordering-file`
/// (GNU ld would refuse the option): rustc 1.90 and later on
/// `x86_64-unknown-linux-gnu`, with no linker of the caller's (`RUSTC_LINKER`,
/// `-C linker` or linker flags in the build's flags). Elsewhere the binary links
/// as before.
fn order_hot_symbols() {
    println!("cargo::rerun-if-changed=hot-symbols.txt");
    if std::env::var("TARGET").as_deref() != Ok("x86_64-unknown-linux-gnu")
        || std::env::var_os("RUSTC_LINKER").is_some()
        || std::env::var("CARGO_ENCODED_RUSTFLAGS").is_ok_and(|f| {
            [
                "linker",
                "link-self-contained",
                "fuse-ld",
                "linker-features",
            ]
            .iter()
            .any(|k| f.contains(k))
        })
    {
        return;
    }
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let minor = std::process::Command::new(rustc)
        .arg("-V")
        .output()
        .ok()
        .and_then(|o| {
            // "rustc 1.95.0 (...)"
            let text = String::from_utf8(o.stdout).ok()?;
            let version = text.split_whitespace().nth(1)?;
            let mut parts = version.split('.');
            (parts.next()? == "1").then_some(())?;
            parts.next()?.parse::<u32>().ok()
        });
    if minor.is_none_or(|m| m < 90) {
        return;
    }
    let list = std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default())
        .join("hot-symbols.txt");
    // `-Wl,` splits at commas, and a space would end the argument.
    if list.is_file() && !list.to_string_lossy().contains([',', ' ', '\t', '\n']) {
        println!(
            "cargo::rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            list.display()
        );
        println!("cargo::rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}
