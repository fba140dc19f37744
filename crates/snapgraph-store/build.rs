//! `SNAPGRAPH_SKIP_PG=1` when the tests are built marks every test that needs a
//! PostgreSQL server as ignored, with the reason: a skip is reported as a skip, never as
//! a pass. Unset (or empty), those tests run and fail without `SNAPGRAPH_PG_URL`. Any
//! other value is refused, so the variable has one meaning everywhere.
//!
//! `SNAPGRAPH_SKIP_S3=1` does the same for the tests that need an S3 server, and
//! `SNAPGRAPH_S3_ATOMIC_CAS=1` says the server's conditional writes are atomic (AWS S3,
//! MinIO; not the test server `s3s-fs`), enabling the contention tests of refs kept in
//! the bucket.
fn main() {
    for (var, cfg) in [
        ("SNAPGRAPH_SKIP_S3", "snapgraph_skip_s3"),
        ("SNAPGRAPH_S3_ATOMIC_CAS", "snapgraph_s3_atomic_cas"),
    ] {
        println!("cargo::rerun-if-env-changed={var}");
        println!("cargo::rustc-check-cfg=cfg({cfg})");
        match std::env::var(var).as_deref() {
            Ok("1") => println!("cargo::rustc-cfg={cfg}"),
            Ok("") | Err(_) => {}
            Ok(other) => panic!("{var} must be 1 or unset, not {other:?}"),
        }
    }
    println!("cargo::rerun-if-env-changed=SNAPGRAPH_SKIP_PG");
    println!("cargo::rustc-check-cfg=cfg(snapgraph_skip_pg)");
    match std::env::var("SNAPGRAPH_SKIP_PG").as_deref() {
        Ok("1") => println!("cargo::rustc-cfg=snapgraph_skip_pg"),
        Ok("") | Err(_) => {}
        Ok(other) => panic!("SNAPGRAPH_SKIP_PG must be 1 or unset, not {other:?}"),
    }
}
