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
        cmd.output().unwrap()
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
