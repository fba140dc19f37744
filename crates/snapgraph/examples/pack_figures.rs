//! Figures for packed snapshots: size and pack/restore time for 2,000 files of 4 KB
//! and for one 64 MiB file, with and without compression, and the peak memory of
//! restoring a 1 GiB snapshot.
//!
//! `cargo run --release -p snapgraph --example pack_figures`
//!
//! The peak-memory figure runs this program again in a child process per mode, so each
//! measures its own peak resident set (VmHWM from /proc/self/status, Linux only).

use std::time::{Duration, Instant};

use snapgraph::{CheckoutPolicy, DriftPolicy, RestoreOptions, SnapshotOptions, Workspace};

fn random(len: usize, mut seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        out.extend_from_slice(&seed.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Text-like bytes: words from a small vocabulary, pseudo-randomly chosen.
fn text(len: usize, mut seed: u64) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "the",
        "snapshot",
        "of",
        "a",
        "workspace",
        "commit",
        "tree",
        "file",
        "and",
        "to",
        "history",
        "agent",
        "turn",
        "restore",
        "diff",
        "chunk",
        "is",
        "fn",
        "let",
        "mut",
        "return",
        "value",
        "error",
        "\n",
        "    ",
        "{",
        "}",
        "(",
        ")",
        ";",
    ];
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        out.extend_from_slice(WORDS[(seed % WORDS.len() as u64) as usize].as_bytes());
        out.push(b' ');
    }
    out.truncate(len);
    out
}

fn best<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut last = None;
    for _ in 0..runs {
        let t = Instant::now();
        let v = f();
        best = best.min(t.elapsed());
        last = Some(v);
    }
    (best, last.expect("runs > 0"))
}

fn figures(name: &str, ws: &Workspace) {
    for compress in [false, true] {
        let opts = SnapshotOptions {
            compress,
            ..Default::default()
        };
        let (pack, bytes) = best(5, || ws.snapshot_with_options(opts).expect("snapshot"));
        let (restore, _) = best(5, || Workspace::from_snapshot(&bytes).expect("restores"));
        println!(
            "| {name} | {} | {:.1} MiB | {:.1} ms | {:.1} ms |",
            if compress { "zstd" } else { "none" },
            bytes.len() as f64 / (1 << 20) as f64,
            pack.as_secs_f64() * 1e3,
            restore.as_secs_f64() * 1e3,
        );
    }
}

fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn gib_workspace() -> Workspace {
    let mut ws = Workspace::new();
    // 1 GiB: 256 files of 4 MiB, half random, half text-like.
    for i in 0..256u64 {
        let data = if i % 2 == 0 {
            random(4 << 20, i + 1)
        } else {
            text(4 << 20, i + 1)
        };
        ws.write(&format!("/big/{i:03}.bin"), data)
            .expect("valid path");
    }
    ws
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let path = std::env::temp_dir().join("snapgraph-1gib.snap");
    match args.get(1).map(String::as_str) {
        Some("write-gib") => {
            let ws = gib_workspace();
            let file = std::io::BufWriter::new(std::fs::File::create(&path)?);
            ws.write_snapshot(SnapshotOptions::default(), None, file)?;
            return Ok(());
        }
        Some("restore-bytes") => {
            let bytes = std::fs::read(&path)?;
            let before = peak_kib();
            let t = Instant::now();
            let ws = Workspace::from_snapshot(&bytes).expect("restores");
            let elapsed = t.elapsed();
            println!(
                "restore from bytes: snapshot {:.0} MiB, peak RSS {:.0} MiB (before restore {:.0} MiB), {:.2} s, {} files",
                bytes.len() as f64 / (1 << 20) as f64,
                peak_kib() as f64 / 1024.0,
                before as f64 / 1024.0,
                elapsed.as_secs_f64(),
                ws.walk().len()
            );
            return Ok(());
        }
        Some("restore-stream") => {
            let size = std::fs::metadata(&path)?.len();
            let file = std::io::BufReader::new(std::fs::File::open(&path)?);
            let t = Instant::now();
            let mut ws = Workspace::new();
            let _ = ws
                .restore_snapshot_from(
                    file,
                    RestoreOptions::new()
                        .policy(CheckoutPolicy::Force)
                        .drift(DriftPolicy::Off),
                )
                .expect("restores");
            println!(
                "restore from stream: snapshot {:.0} MiB, peak RSS {:.0} MiB, {:.2} s",
                size as f64 / (1 << 20) as f64,
                peak_kib() as f64 / 1024.0,
                t.elapsed().as_secs_f64()
            );
            return Ok(());
        }
        _ => {}
    }

    println!("| workload | compression | packed | pack | restore |");
    println!("|---|---|---|---|---|");
    let mut small = Workspace::new();
    for i in 0..2000u64 {
        small
            .write(
                &format!("/dir{:02}/file{i:04}", i % 20),
                random(4000, i + 1),
            )
            .expect("valid path");
    }
    figures("2,000 x 4 KB random", &small);
    let mut small_text = Workspace::new();
    for i in 0..2000u64 {
        small_text
            .write(&format!("/dir{:02}/file{i:04}", i % 20), text(4000, i + 1))
            .expect("valid path");
    }
    figures("2,000 x 4 KB text", &small_text);
    let mut big = Workspace::new();
    big.write("/big.bin", random(64 << 20, 7))
        .expect("valid path");
    figures("64 MiB random", &big);
    let mut big_text = Workspace::new();
    big_text
        .write("/big.txt", text(64 << 20, 7))
        .expect("valid path");
    figures("64 MiB text", &big_text);

    let exe = std::env::current_exe()?;
    let run = |mode: &str| -> std::io::Result<()> {
        let out = std::process::Command::new(&exe).arg(mode).output()?;
        print!("{}", String::from_utf8_lossy(&out.stdout));
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
        Ok(())
    };
    run("write-gib")?;
    run("restore-bytes")?;
    run("restore-stream")?;
    let _ = std::fs::remove_file(&path);
    Ok(())
}
