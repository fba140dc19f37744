//! `SNAPGRAPH_SKIP_PG=1` when the tests are built marks every test that needs a
//! PostgreSQL server as ignored, with the reason: a skip is reported as a skip, never as
//! a pass. Unset (or empty), those tests run and fail without `SNAPGRAPH_PG_URL`. Any
//! other value is refused, so the variable has one meaning everywhere.
//! `SNAPGRAPH_SKIP_S3=1` does the same for the tests that need an S3 server
//! (`SNAPGRAPH_S3_URL`, from `scripts/s3`).
fn main() {
    // The `snapgraph` binary is linked as a position-dependent executable on Linux:
    // a PIE's 23,000 relative relocations were applied by the dynamic loader at
    // every start (dirtying about 84 pages of `.data.rel.ro` and reading 138 pages
    // of `.rela.dyn`), a fifth of a no-change commit's page faults. Our code is
    // compiled position-independent as usual; only the final link differs, so the
    // library crates and the bindings' shared objects are unaffected.
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo::rustc-link-arg-bins=-no-pie");
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
