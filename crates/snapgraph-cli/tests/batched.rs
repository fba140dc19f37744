//! Commits and imports in bounded batches (`--batch-bytes`): a tree larger than the
//! budget restores byte for byte, writes exactly what an unbatched commit writes, and
//! an import that fails part way moves no ref and leaves only garbage a collection
//! removes. (An interrupted `commit` needs an unreadable file: `tests/unprivileged.rs`.)

mod common;

use std::path::Path;

use common::{fails, json, ok, ok_within, pseudo_random, rich_tree, snapshot_of, write};

/// A budget far below the tree: many batches.
const SMALL: &str = "65536";

/// `rich_tree` plus 40 files of 20 to 400 KB (about 8 MB), some of them equal.
fn big_tree(root: &Path) {
    rich_tree(root);
    for i in 0..40u64 {
        let len = 20_000 + (i as usize * 9_973) % 380_000;
        write(
            root,
            &format!("blobs/{}/f{i:02}.bin", i % 4),
            &pseudo_random(len, i % 30),
        );
    }
}

/// The content id a whole write of `data` makes (cut in memory by the core).
fn whole_content_id(data: &[u8]) -> snapgraph::ObjectId {
    let mut ws = snapgraph::Workspace::new();
    ws.write("/f", data).unwrap();
    let _ = ws.commit(snapgraph::CommitOptions::new()).unwrap();
    ws.file_content_id("/f").unwrap()
}

/// The content id of the file at `path` on branch main of the repository in `dir`.
fn stored_content_id(dir: &Path, path: &str) -> snapgraph::ObjectId {
    let store = snapgraph_store::open(&format!(
        "sqlite:{}",
        dir.join(".snapgraph/store.db").display()
    ))
    .unwrap();
    snapgraph_store::Repo::new(store)
        .checkout_shallow("main")
        .unwrap()
        .file_content_id(path)
        .unwrap()
}

fn tip(dir: &Path, branch: &str) -> Option<String> {
    json(dir, &["branch"])
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == branch)
        .map(|b| b["id"].as_str().unwrap().to_string())
}

#[test]
fn a_batched_commit_restores_byte_identical_and_writes_what_one_commit_writes() {
    let batched = tempfile::tempdir().unwrap();
    let whole = tempfile::tempdir().unwrap();
    for t in [&batched, &whole] {
        ok(t.path(), &["init"]);
        big_tree(t.path());
    }
    let b = json(
        batched.path(),
        &["commit", "-m", "big", "--batch-bytes", SMALL],
    );
    let w = json(whole.path(), &["commit", "-m", "big"]);
    // The same objects (the commit objects differ only in their metadata).
    assert_eq!(b["new_objects"], w["new_objects"], "{b} / {w}");
    assert_eq!(b["files_added"], w["files_added"]);
    ok(batched.path(), &["verify", "--read-data"]);
    ok(batched.path(), &["checkout", "main", "--to", "out"]);
    let mut expected = snapshot_of(batched.path());
    expected.retain(|p, _| !p.starts_with(".snapgraph") && !p.starts_with("out"));
    let restored = snapshot_of(&batched.path().join("out"));
    assert_eq!(restored, expected);

    // A second turn, batched again: edits, a new big file, a removal.
    std::fs::remove_dir_all(batched.path().join("out")).unwrap();
    write(
        batched.path(),
        "blobs/0/f00.bin",
        &pseudo_random(300_000, 99),
    );
    write(batched.path(), "blobs/new.bin", &pseudo_random(500_000, 98));
    std::fs::remove_file(batched.path().join("blobs/1/f01.bin")).unwrap();
    let c = json(
        batched.path(),
        &["commit", "-m", "edit", "--batch-bytes", SMALL],
    );
    assert_eq!(c["files_added"], 1, "{c}");
    assert_eq!(c["files_modified"], 1, "{c}");
    assert_eq!(c["files_removed"], 1, "{c}");
    ok(batched.path(), &["verify", "--read-data"]);
    ok(batched.path(), &["checkout", "main", "--to", "out"]);
    let mut expected = snapshot_of(batched.path());
    expected.retain(|p, _| !p.starts_with(".snapgraph") && !p.starts_with("out"));
    assert_eq!(snapshot_of(&batched.path().join("out")), expected);
    std::fs::remove_dir_all(batched.path().join("out")).unwrap();
    // Nothing changed since: nothing to commit, and the stat cache knew the
    // handed-over files' content ids.
    let again = json(batched.path(), &["commit", "--batch-bytes", SMALL]);
    assert_eq!(again["nothing_to_commit"], true, "{again}");
}

/// A tar of `big_tree` plus a hard link to its first big file.
fn tar_of(root: &Path) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    b.follow_symlinks(false);
    b.append_dir_all(".", root).unwrap();
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Link);
    h.set_size(0);
    h.set_mode(0o644);
    b.append_link(&mut h, "hard-link.bin", "blobs/0/f00.bin")
        .unwrap();
    b.into_inner().unwrap()
}

#[test]
fn a_batched_import_restores_byte_identical() {
    let src = tempfile::tempdir().unwrap();
    big_tree(src.path());
    let t = tempfile::tempdir().unwrap();
    ok(t.path(), &["init"]);
    let tar = t.path().join("tree.tar");
    std::fs::write(&tar, tar_of(src.path())).unwrap();
    let out = json(
        t.path(),
        &[
            "import",
            "tree.tar",
            "-m",
            "imported",
            "--batch-bytes",
            SMALL,
        ],
    );
    assert!(out["new_objects"].as_u64().unwrap() > 40, "{out}");
    ok(t.path(), &["verify", "--read-data"]);
    ok(t.path(), &["checkout", "main", "--to", "out"]);
    let mut expected = snapshot_of(src.path());
    expected.insert("hard-link.bin".into(), expected["blobs/0/f00.bin"].clone());
    assert_eq!(snapshot_of(&t.path().join("out")), expected);
}

#[test]
fn an_import_failing_part_way_moves_no_ref_and_leaves_only_garbage() {
    let t = tempfile::tempdir().unwrap();
    ok(t.path(), &["init"]);
    write(t.path(), "kept.txt", b"the first commit");
    let first = json(t.path(), &["commit", "-m", "first"]);
    let first = first["id"].as_str().unwrap().to_string();

    // Many batches of content, then an entry cut short.
    let mut b = tar::Builder::new(Vec::new());
    for i in 0..20u64 {
        let data = pseudo_random(100_000, 500 + i);
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        b.append_data(&mut h, format!("f{i:02}.bin"), &data[..])
            .unwrap();
    }
    let data = pseudo_random(200_000, 7);
    let mut h = tar::Header::new_gnu();
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    b.append_data(&mut h, "cut.bin", &data[..]).unwrap();
    let mut bytes = b.into_inner().unwrap();
    bytes.truncate(bytes.len() - 150_000);
    std::fs::write(t.path().join("cut.tar"), &bytes).unwrap();

    let err = fails(t.path(), &["import", "cut.tar", "--batch-bytes", SMALL]);
    assert!(
        err.contains("cut.bin") && err.contains("truncated"),
        "{err}"
    );
    // No ref moved, the store is whole, the first commit restores.
    assert_eq!(tip(t.path(), "main").as_deref(), Some(first.as_str()));
    ok(t.path(), &["verify", "--read-data"]);
    ok(t.path(), &["checkout", "main", "--to", "out"]);
    assert_eq!(
        std::fs::read(t.path().join("out/kept.txt")).unwrap(),
        b"the first commit"
    );
    // The batches written before the failure are garbage, and the lease was given
    // back: a collection runs and removes them.
    let gc = json(t.path(), &["gc"]);
    assert!(gc["deleted"].as_u64().unwrap() >= 20, "{gc}");
    ok(t.path(), &["verify", "--read-data"]);
    assert_eq!(tip(t.path(), "main").as_deref(), Some(first.as_str()));
}

/// A tar holding one regular file `name` (mode 0644) with `data`.
fn tar_of_one(name: &str, data: &[u8]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    b.append_data(&mut h, name, data).unwrap();
    b.into_inner().unwrap()
}

/// Files over `batches::STREAM_MIN` are cut into their objects as they are read
/// (never whole in memory): a commit and an import of one make the objects a whole
/// write makes (the same content id as the engine's own commit of those bytes),
/// restore byte for byte, and the stat cache records them (nothing to commit
/// after). A streamed tar entry cut short fails the import, naming it, with no ref
/// moved and only garbage left.
#[test]
fn files_over_the_stream_size_commit_and_import_as_a_whole_write_does() {
    use snapgraph_cli::batches::STREAM_MIN;
    let big = pseudo_random(STREAM_MIN as usize + 3_000_001, 4242);
    let expected_id = whole_content_id(&big);

    let t = tempfile::tempdir().unwrap();
    ok(t.path(), &["init"]);
    write(t.path(), "data/big.bin", &big);
    write(t.path(), "small.txt", b"small");
    let c = json(t.path(), &["commit", "-m", "big"]);
    assert_eq!(c["files_added"], 2, "{c}");
    assert_eq!(stored_content_id(t.path(), "/data/big.bin"), expected_id);
    let again = json(t.path(), &["commit"]);
    assert_eq!(again["nothing_to_commit"], true, "{again}");
    ok(t.path(), &["verify", "--read-data"]);
    ok(t.path(), &["checkout", "main", "--to", "out"]);
    assert_eq!(
        std::fs::read(t.path().join("out/data/big.bin")).unwrap(),
        big
    );
    std::fs::remove_dir_all(t.path().join("out")).unwrap();

    // The same file through `import`, in a tar.
    let whole_tar = tar_of_one("big.bin", &big);
    let i = tempfile::tempdir().unwrap();
    ok(i.path(), &["init"]);
    std::fs::write(i.path().join("a.tar"), &whole_tar).unwrap();
    ok(i.path(), &["import", "a.tar", "-m", "imported"]);
    assert_eq!(stored_content_id(i.path(), "/big.bin"), expected_id);
    ok(i.path(), &["verify", "--read-data"]);
    ok(i.path(), &["checkout", "main", "--to", "out"]);
    assert_eq!(std::fs::read(i.path().join("out/big.bin")).unwrap(), big);

    // Cut short past the stream size: refused, no ref moved, garbage collected.
    let before = tip(i.path(), "main");
    let other = pseudo_random(big.len(), 4343);
    let other_tar = tar_of_one("big.bin", &other);
    let cut = &other_tar[..512 + STREAM_MIN as usize + 1_000_000];
    std::fs::write(i.path().join("cut.tar"), cut).unwrap();
    let err = fails(i.path(), &["import", "cut.tar", "-m", "cut"]);
    assert!(
        err.contains("big.bin") && err.contains("truncated"),
        "{err}"
    );
    assert_eq!(tip(i.path(), "main"), before);
    let gc = json(i.path(), &["gc"]);
    assert!(gc["deleted"].as_u64().unwrap() > 100, "{gc}");
    ok(i.path(), &["verify", "--read-data"]);
}

/// The files of the default store's segment directory (SQLite schema 4).
fn segment_files(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir.join(".snapgraph/store.db-segments")) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn large_chunks_of_a_big_commit_live_in_segment_files_that_gc_removes_with_them() {
    let t = tempfile::tempdir().unwrap();
    ok(t.path(), &["init"]);
    write(t.path(), "small.txt", b"stays in the database");
    let first = json(t.path(), &["commit", "-m", "small"]);
    assert!(
        segment_files(t.path()).is_empty(),
        "a small commit: no segment"
    );
    // A branch with 3 MB of incompressible files: its chunks go to a segment.
    ok(t.path(), &["fork", "big", "--at", "main"]);
    for i in 0..3u64 {
        write(
            t.path(),
            &format!("blobs/b{i}.bin"),
            &pseudo_random(1_000_000, 7 + i),
        );
    }
    ok(t.path(), &["commit", "-m", "big", "-b", "big"]);
    assert_eq!(segment_files(t.path()), ["1.seg"]);
    ok(t.path(), &["verify", "--read-data"]);
    ok(t.path(), &["checkout", "big", "--to", "out"]);
    for i in 0..3u64 {
        assert_eq!(
            std::fs::read(t.path().join(format!("out/blobs/b{i}.bin"))).unwrap(),
            pseudo_random(1_000_000, 7 + i)
        );
    }
    // A copy of the database without its segments: `verify` says so without
    // reading every chunk, naming the file.
    let segments = t.path().join(".snapgraph/store.db-segments");
    let aside = t.path().join("aside");
    std::fs::rename(&segments, &aside).unwrap();
    let out = common::run_in(t.path(), &["verify"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("1.seg is missing"), "{said}");
    std::fs::rename(&aside, &segments).unwrap();
    ok(t.path(), &["verify"]);
    // Once nothing reaches them, a collection deletes the objects and the file.
    std::fs::remove_dir_all(t.path().join("out")).unwrap();
    std::fs::remove_dir_all(t.path().join("blobs")).unwrap();
    ok(t.path(), &["branch", "-D", "big"]);
    let gc = json(t.path(), &["gc", "--prune=now"]);
    assert!(gc["deleted"].as_u64().unwrap() >= 40, "{gc}");
    assert!(segment_files(t.path()).is_empty(), "{gc}");
    ok(t.path(), &["verify", "--read-data"]);
    assert_eq!(
        tip(t.path(), "main"),
        first["id"].as_str().map(String::from)
    );
}

/// `cat` streams a file a window of chunks at a time: a 64 MiB file comes out whole
/// under a 40 MiB address-space limit (`ulimit -v`), where loading it would abort.
#[test]
fn cat_streams_a_file_larger_than_its_memory_limit() {
    let t = tempfile::tempdir().unwrap();
    ok(t.path(), &["init"]);
    let big = pseudo_random(64 << 20, 77);
    write(t.path(), "big.bin", &big);
    ok(t.path(), &["commit", "-m", "big"]);
    let out = ok_within(t.path(), 40960, &["cat", "main:big.bin"]);
    assert!(out == big, "{} bytes out", out.len());
}

/// `status` and `diff` against the working directory commit it in memory without its
/// large files' bytes (`batches::Hashed`): a new 64 MiB file and a 20 MiB one edited
/// are reported (as binary to `-p` and `--stat`, past the 16 MiB text limit) under a
/// 40 MiB address-space limit, where holding them would abort; a commit then records
/// exactly what `status` reported.
#[test]
fn status_and_diff_of_the_working_directory_hold_no_large_file() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path();
    ok(p, &["init"]);
    write(p, "small.txt", b"one\ntwo\n");
    write(p, "mid.bin", &pseudo_random(20 << 20, 5));
    // A text file of over a MiB and under STREAM_MIN: the diff reads its bytes for
    // a patch (a version that cut it over its committed version, as a commit cuts
    // larger files, left it as a reference only: "object not found").
    let text: String = (0..60_000).map(|i| format!("line {i} of text\n")).collect();
    assert!(text.len() > 1 << 20);
    write(p, "text.txt", text.as_bytes());
    ok(p, &["commit", "-m", "one"]);
    write(
        p,
        "text.txt",
        text.replace("line 100 of", "LINE 100 of").as_bytes(),
    );
    write(p, "big.bin", &pseudo_random(64 << 20, 78));
    let mut mid = pseudo_random(20 << 20, 5);
    mid[7] ^= 1;
    write(p, "mid.bin", &mid);
    write(p, "small.txt", b"one\n2\n");
    let limited = |args: &[&str]| String::from_utf8(ok_within(p, 40960, args)).unwrap();
    let status = limited(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(v["added"], serde_json::json!(["/big.bin"]), "{v}");
    let modified = v["modified"].as_array().unwrap();
    assert_eq!(modified.len(), 3, "{v}");
    let patch = limited(&["diff", "-p"]);
    assert!(
        patch.contains("Binary files /dev/null and b/big.bin differ\n"),
        "{patch}"
    );
    assert!(
        patch.contains("Binary files a/mid.bin and b/mid.bin differ\n"),
        "{patch}"
    );
    assert!(patch.contains("-two\n+2\n"), "{patch}");
    assert!(
        patch.contains("-line 100 of text\n+LINE 100 of text\n"),
        "{patch}"
    );
    let stat = limited(&["diff", "--stat"]);
    assert!(stat.contains(" big.bin   | Bin"), "{stat}");
    let c = json(p, &["commit", "-m", "two"]);
    assert_eq!(c["files_added"], 1, "{c}");
    assert_eq!(c["files_modified"], 3, "{c}");
    assert_eq!(
        ok(p, &["status"]).lines().nth(1),
        Some("nothing changed since main")
    );
}

/// A file streamed in (over `batches::STREAM_MIN`) and edited between commits is
/// read over its committed version (the chunks it still holds hashed, not cut):
/// every version commits to the content a whole write makes (an edit at a cut point
/// included, where a re-cut is most easily wrong), restores byte for byte and
/// verifies.
#[test]
fn a_large_file_edited_commits_as_a_whole_write_does() {
    use snapgraph_cli::batches::STREAM_MIN;
    let base = pseudo_random(STREAM_MIN as usize + 1_012_345, 77);
    let cut = snapgraph::chunk::cut_points(&base)[40];
    let flipped = |d: &[u8], at: usize| {
        let mut d = d.to_vec();
        d[at] ^= 0xFF;
        d
    };
    let mut versions = vec![base.clone()];
    type Edit = Box<dyn Fn(&[u8]) -> Vec<u8>>;
    let edits: Vec<Edit> = vec![
        Box::new(|d| [d, b"one more line\n"].concat()),
        Box::new(move |d| flipped(d, d.len() / 2)),
        Box::new(move |d| flipped(d, cut)),
        Box::new(move |d| [&d[..cut], b"x", &d[cut..]].concat()),
        Box::new(|d| [b"a new first line\n".as_slice(), d].concat()),
        Box::new(|d| d[..d.len() - 500_000].to_vec()),
        Box::new(|d| [d, &pseudo_random(700_000, 5)[..]].concat()),
    ];
    for edit in &edits {
        let next = edit(versions.last().unwrap());
        versions.push(next);
    }

    let t = tempfile::tempdir().unwrap();
    ok(t.path(), &["init"]);
    let mut commits = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        write(t.path(), "data/big.bin", v);
        let c = json(t.path(), &["commit", "-m", &format!("v{i}")]);
        assert_eq!(c["files_read"], 1, "version {i}: {c}");
        assert_eq!(
            stored_content_id(t.path(), "/data/big.bin"),
            whole_content_id(v),
            "version {i}"
        );
        commits.push(c["id"].as_str().unwrap().to_string());
    }
    ok(t.path(), &["verify", "--read-data"]);
    for (i, (c, v)) in commits.iter().zip(&versions).enumerate() {
        let out = format!("out{i}");
        ok(t.path(), &["checkout", c, "--to", &out]);
        assert!(
            std::fs::read(t.path().join(&out).join("data/big.bin")).unwrap() == *v,
            "version {i} restores"
        );
    }
}
