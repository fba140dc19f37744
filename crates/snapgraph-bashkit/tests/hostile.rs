//! Paths and arguments the workspace refuses come back as Bashkit errors (never a
//! panic), leave the file system as it was, and scripts that climb above `/` behave
//! as on Bashkit's own file system.

mod common;

use std::ffi::OsStr;
use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use bashkit::{FileSystem, FileSystemExt, FsLimits};
use common::{rt, snapgraph_tree};
use snapgraph_bashkit::SnapgraphFs;

/// Paths a script cannot normally produce but a direct caller (or a hostile embedder
/// layer) can pass.
fn hostile_paths() -> Vec<PathBuf> {
    vec![
        PathBuf::from(""),
        PathBuf::from("relative/path"),
        PathBuf::from("/.."),
        PathBuf::from("/../etc/passwd"),
        PathBuf::from("/tmp/../../../x"),
        PathBuf::from("/tmp/a\0b"),
        PathBuf::from(OsStr::from_bytes(b"/tmp/\xff\xfe")),
        PathBuf::from(format!("/tmp/{}", "n".repeat(300))),
        PathBuf::from(format!("/{}", "d/".repeat(300))),
        PathBuf::from(format!("/tmp/{}", "x".repeat(5000))),
    ]
}

fn io_kind(e: &bashkit::Error) -> Option<ErrorKind> {
    match e {
        bashkit::Error::Io(io) => Some(io.kind()),
        _ => None,
    }
}

#[test]
fn hostile_paths_are_errors_on_every_method() {
    let rt = rt();
    // Unlimited Bashkit limits, so the workspace's own checks are the ones tested.
    let fs = SnapgraphFs::with_limits(FsLimits::unlimited());
    let good = Path::new("/tmp/good");
    rt.block_on(fs.write_file(good, b"kept")).unwrap();
    let before = snapgraph_tree(&fs);
    let before_usage = fs.usage();
    for p in hostile_paths() {
        let p = p.as_path();
        let results: Vec<(&str, bashkit::Result<()>)> = rt.block_on(async {
            vec![
                ("read_file", fs.read_file(p).await.map(drop)),
                ("write_file", fs.write_file(p, b"x").await),
                ("append_file", fs.append_file(p, b"x").await),
                ("mkdir", fs.mkdir(p, false).await),
                ("mkdir -p", fs.mkdir(p, true).await),
                ("remove", fs.remove(p, false).await),
                ("remove -r", fs.remove(p, true).await),
                ("stat", fs.stat(p).await.map(drop)),
                ("lstat", fs.lstat(p).await.map(drop)),
                ("read_dir", fs.read_dir(p).await.map(drop)),
                ("exists", fs.exists(p).await.map(drop)),
                ("rename from", fs.rename(p, good).await),
                ("rename to", fs.rename(good, p).await),
                ("copy from", fs.copy(p, good).await),
                ("copy to", fs.copy(good, p).await),
                ("symlink at", fs.symlink(good, p).await),
                ("read_link", fs.read_link(p).await.map(drop)),
                ("chmod", fs.chmod(p, 0o600).await),
                (
                    "set_modified_time",
                    fs.set_modified_time(p, SystemTime::UNIX_EPOCH).await,
                ),
            ]
        });
        for (op, r) in results {
            let e = r.expect_err(&format!("{op} {p:?} succeeded"));
            assert_eq!(
                io_kind(&e),
                Some(ErrorKind::InvalidInput),
                "{op} {p:?}: {e}"
            );
        }
    }
    assert_eq!(rt.block_on(fs.read_file(good)).unwrap(), b"kept");
    assert_eq!(
        snapgraph_tree(&fs),
        before,
        "a refused call changed the tree"
    );
    assert_eq!(fs.usage().total_bytes, before_usage.total_bytes);
    assert_eq!(fs.usage().file_count, before_usage.file_count);
}

#[test]
fn bad_symlink_targets_and_modes_are_errors_that_change_nothing() {
    let rt = rt();
    let fs = SnapgraphFs::with_limits(FsLimits::unlimited());
    rt.block_on(async {
        fs.symlink(Path::new("/tmp"), Path::new("/tmp/l"))
            .await
            .unwrap();
        let before = snapgraph_tree(&fs);
        for target in [
            PathBuf::from(""),
            PathBuf::from("a\0b"),
            PathBuf::from(OsStr::from_bytes(b"\xff")),
            PathBuf::from("t".repeat(5000)),
        ] {
            // Over an existing link: the old one must survive a refused target.
            let e = fs.symlink(&target, Path::new("/tmp/l")).await.unwrap_err();
            assert_eq!(
                io_kind(&e),
                Some(ErrorKind::InvalidInput),
                "{target:?}: {e}"
            );
        }
        for mode in [0o10000, 0o177777, u32::MAX] {
            let e = fs.chmod(Path::new("/tmp"), mode).await.unwrap_err();
            assert_eq!(io_kind(&e), Some(ErrorKind::InvalidInput), "{mode:o}: {e}");
        }
        // The root's mode is not the workspace's to change: an error, not a no-op.
        assert!(fs.chmod(Path::new("/"), 0o700).await.is_err());
        assert!(fs.remove(Path::new("/"), false).await.is_err());
        assert!(fs
            .rename(Path::new("/"), Path::new("/tmp/root"))
            .await
            .is_err());
        assert!(fs.mkfifo(Path::new("/tmp/fifo"), 0o644).await.is_err());
        assert_eq!(snapgraph_tree(&fs), before);
        assert_eq!(
            fs.read_link(Path::new("/tmp/l")).await.unwrap(),
            Path::new("/tmp")
        );
    });
}

/// Bashkit's limits hold on this file system as on its own: a script cannot fill
/// memory by writing, appending, creating files or directories.
#[test]
fn bashkit_limits_are_enforced() {
    let rt = rt();
    let limits = FsLimits::new()
        .max_total_bytes(10_000)
        .max_file_size(4_000)
        .max_file_count(20)
        .max_dir_count(12);
    let fs = SnapgraphFs::with_limits(limits);
    rt.block_on(async {
        let big = vec![b'x'; 4_001];
        assert!(fs.write_file(Path::new("/tmp/big"), &big).await.is_err());
        fs.write_file(Path::new("/tmp/a"), &big[..4_000])
            .await
            .unwrap();
        assert!(fs.append_file(Path::new("/tmp/a"), b"y").await.is_err());
        fs.write_file(Path::new("/tmp/b"), &big[..4_000])
            .await
            .unwrap();
        // 8,000 of 10,000 bytes used: a third 4,000-byte file does not fit.
        let e = fs
            .write_file(Path::new("/tmp/c"), &big[..4_000])
            .await
            .unwrap_err();
        assert!(e.to_string().contains("filesystem full"), "{e}");
        // Overwriting counts the difference only.
        fs.write_file(Path::new("/tmp/a"), &big[..3_000])
            .await
            .unwrap();
        let mut made = 0;
        for i in 0..40 {
            if fs
                .write_file(Path::new(&format!("/tmp/n{i}")), b"")
                .await
                .is_ok()
            {
                made += 1;
            }
        }
        // 3 device files and 2 files were there; 20 is the most.
        assert_eq!(made, 15);
        assert_eq!(fs.usage().file_count, 20);
        let mut dirs = 0;
        for i in 0..40 {
            if fs.mkdir(Path::new(&format!("/d{i}")), false).await.is_ok() {
                dirs += 1;
            }
        }
        // The root and 5 directories of the default layout were there; 12 is the most.
        assert_eq!(dirs, 6);
        assert!(fs.mkdir(Path::new("/x/y/z"), true).await.is_err());
        assert_eq!(fs.usage().dir_count, 12);
    });
    // The same through a script: the loop stops at the limit, the interpreter lives.
    let fs = SnapgraphFs::with_limits(FsLimits::new().max_total_bytes(50_000));
    let mut bash = bashkit::Bash::builder()
        .fs(std::sync::Arc::new(fs.clone()))
        .build();
    let out = rt.block_on(common::exec(
        &mut bash,
        "for i in $(seq 1 100); do printf '%01000d' 0 > /tmp/f$i || break; done; ls /tmp | wc -l",
    ));
    let common::Outcome::Ran { stdout, .. } = out else {
        panic!("{out:?}");
    };
    assert_eq!(stdout.trim(), "50");
    assert!(fs.usage().total_bytes <= 50_000);
}

#[test]
fn scripts_that_climb_above_the_root_stay_inside() {
    let rt = rt();
    let fs = SnapgraphFs::new();
    let mut bash = bashkit::Bash::builder()
        .fs(std::sync::Arc::new(fs.clone()))
        .build();
    let out = rt.block_on(common::exec(
        &mut bash,
        "cd /tmp; echo x > ../../../../escape; cat /escape; cat /tmp/../../../../escape
         ln -s ../../../../../.. /tmp/up; ls /tmp/up/tmp; echo y > /tmp/up/through; cat /through",
    ));
    let common::Outcome::Ran { stdout, code, .. } = out else {
        panic!("{out:?}");
    };
    assert_eq!(stdout, "x\nx\nup\ny\n");
    assert_eq!(code, 0);
    let ws = fs.workspace();
    assert_eq!(ws.read("/escape").unwrap(), b"x\n");
    assert_eq!(ws.read("/through").unwrap(), b"y\n");
}
