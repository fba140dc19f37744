//! What only a user who is not root can see: a file the user may not read. Root reads
//! anything, and CI runs as root, so under root the CLI runs as `nobody` (from a copy of
//! the binary anyone can execute, in a repository `nobody` owns) instead of the test
//! being skipped.
#![cfg(unix)]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};

/// The uid and gid of `nobody`, from `/etc/passwd`.
fn nobody() -> (u32, u32) {
    let passwd = std::fs::read_to_string("/etc/passwd").expect("/etc/passwd is readable");
    passwd
        .lines()
        .map(|line| line.split(':').collect::<Vec<_>>())
        .find(|f| f.len() > 3 && f[0] == "nobody")
        .map(|f| (f[2].parse().unwrap(), f[3].parse().unwrap()))
        .expect("a `nobody` user in /etc/passwd: this test drops to it when run as root")
}

/// The CLI as an unprivileged user: this user, or `nobody` when this is root.
struct Cli {
    exe: std::path::PathBuf,
    user: Option<(u32, u32)>,
    _copy: tempfile::TempDir,
}

impl Cli {
    fn new(repo: &Path) -> Self {
        let exe = Path::new(env!("CARGO_BIN_EXE_snapgraph"));
        let copy = tempfile::tempdir().unwrap();
        let root = std::fs::metadata(repo).unwrap().uid() == 0;
        if !root {
            return Cli {
                exe: exe.to_path_buf(),
                user: None,
                _copy: copy,
            };
        }
        let (uid, gid) = nobody();
        std::fs::set_permissions(copy.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let bin = copy.path().join("snapgraph");
        std::fs::copy(exe, &bin).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::chown(repo, Some(uid), Some(gid)).unwrap();
        Cli {
            exe: bin,
            user: Some((uid, gid)),
            _copy: copy,
        }
    }

    fn run(&self, dir: &Path, args: &[&str]) -> Output {
        let mut cmd = Command::new(&self.exe);
        cmd.args(args).current_dir(dir).env("NO_COLOR", "1");
        if let Some((uid, gid)) = self.user {
            cmd.uid(uid).gid(gid).env("HOME", dir);
        }
        // The copy was just written: while another test of this process forks (its
        // child holding, until it execs, every descriptor open at the fork, our copy's
        // write descriptor too), exec can fail with ETXTBSY. Only a retry waits it out.
        let mut tries = 0;
        loop {
            match cmd.output() {
                Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 50 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                result => return result.unwrap(),
            }
        }
    }
}

#[test]
fn an_unreadable_file_fails_the_commit_naming_it() {
    let t = tempfile::tempdir().unwrap();
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let cli = Cli::new(t.path());
    let out = cli.run(t.path(), &["init"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(t.path().join("fine.txt"), b"readable").unwrap();
    let secret = t.path().join("secret.txt");
    std::fs::write(&secret, b"s").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o000)).unwrap();
    let out = cli.run(t.path(), &["commit", "-m", "x"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("secret.txt"), "{err}");
    // Readable again: the commit goes through and holds both files.
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = cli.run(t.path(), &["commit", "-m", "x"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = cli.run(t.path(), &["ls", "main"]);
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(
        listing.contains("secret.txt") && listing.contains("fine.txt"),
        "{listing}"
    );
}

/// A commit in bounded batches (`--batch-bytes`) that fails part way, after batches
/// were written, on a file it may not read: no ref moves, nothing committed before is
/// lost, the lease is given back (a collection runs and removes the batches), and once
/// the file is readable the commit goes through and restores byte for byte.
#[test]
fn a_batched_commit_failing_part_way_moves_no_ref() {
    let t = tempfile::tempdir().unwrap();
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let cli = Cli::new(t.path());
    let ok = |args: &[&str]| {
        let out = cli.run(t.path(), args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    ok(&["init"]);
    std::fs::write(t.path().join("first.txt"), b"committed first").unwrap();
    ok(&["commit", "-m", "first"]);
    let log_before = ok(&["log"]);
    // Read in name order: the big files (many 64 KiB batches) come first.
    for i in 0..12u8 {
        let data: Vec<u8> = (0..150_000u32)
            .map(|j| (j.wrapping_mul(2_654_435_761).rotate_left(u32::from(i)) >> 13) as u8)
            .collect();
        std::fs::write(t.path().join(format!("big-{i:02}.bin")), data).unwrap();
    }
    let secret = t.path().join("z-secret.txt");
    std::fs::write(&secret, b"s").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o000)).unwrap();
    let out = cli.run(t.path(), &["commit", "-m", "x", "--batch-bytes", "65536"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("z-secret.txt"), "{err}");
    assert_eq!(ok(&["log"]), log_before, "the branch moved");
    ok(&["verify", "--read-data"]);
    let gc = ok(&["gc", "--json"]);
    let gc: serde_json::Value = serde_json::from_str(&gc).unwrap();
    assert!(
        gc["deleted"].as_u64().unwrap() > 12,
        "the batches were written: {gc}"
    );
    assert_eq!(ok(&["log"]), log_before);

    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    ok(&["commit", "-m", "x", "--batch-bytes", "65536"]);
    ok(&["verify", "--read-data"]);
    ok(&["checkout", "main", "--to", "out"]);
    for i in 0..12u8 {
        let name = format!("big-{i:02}.bin");
        assert_eq!(
            std::fs::read(t.path().join("out").join(&name)).unwrap(),
            std::fs::read(t.path().join(&name)).unwrap(),
            "{name}"
        );
    }
    assert_eq!(
        std::fs::read(t.path().join("out/first.txt")).unwrap(),
        b"committed first"
    );
}
