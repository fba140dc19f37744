//! `export` / `import`: commits as tar archives.
//!
//! Export is deterministic: the same commit always gives the same bytes. Entries
//! come in the workspace's sorted walk order (parents before children), every
//! header is a GNU header with mtime 0, uid/gid 0, empty user and group names and
//! the recorded mode; directories end in `/`. Long names and link targets use the
//! GNU long-name extension. A `.zst` file name compresses the archive with zstd
//! level 3 (single-threaded, so deterministic too).
//!
//! Import reads such an archive (or any tar of regular files, directories, symlinks
//! and hard links) into a fresh workspace, refusing absolute paths, `..`, names a
//! file system could fold into `.snapgraph`, paths below a symlink of the archive
//! and sizes beyond the workspace's limits (see [`import`]); directories get mode `0o755` and files `0o755` or
//! `0o644` as `commit` records them, so importing an export and committing it gives
//! the same tree.

use std::io::{Read, Write};
use std::path::Path;

use indicatif::ProgressBar;
use snapgraph::{EntryKind, ObjectId, ObjectSource, Workspace};

use crate::error::{CliError, IoContext, Result};
use crate::materialize::check_component;

/// Whether `path` names a zstd-compressed archive.
pub fn is_zstd(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "zst" || e == "tzst")
}

fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_mode(mode & 0o7777);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    h.set_size(size);
    // Empty user and group names.
    let _ = h.set_username("");
    let _ = h.set_groupname("");
    h
}

/// Writes the shallow workspace `ws` (at `commit`, bytes in `source`) as a tar
/// archive to `out`. Files are removed from `ws` as they are written.
pub fn export<W: Write>(
    ws: &mut Workspace,
    source: &dyn ObjectSource,
    commit: ObjectId,
    out: W,
    progress: &ProgressBar,
) -> Result<(W, u64)> {
    let planned = crate::materialize::plan(
        commit,
        ws.walk().into_iter().map(|(p, m)| (p, m.kind, m.mode)),
    )?;
    progress.set_length(planned.len() as u64);
    let mut b = tar::Builder::new(out);
    let mut count = 0u64;
    let err = |e: std::io::Error| CliError::Usage(format!("writing the archive: {e}"));
    for e in &planned {
        let rel = e.path.trim_start_matches('/');
        match e.kind {
            EntryKind::Dir => {
                let mut h = header(tar::EntryType::Directory, e.mode, 0);
                b.append_data(&mut h, format!("{rel}/"), std::io::empty())
                    .map_err(err)?;
            }
            EntryKind::Symlink => {
                let target = ws.read_link(&e.path)?.to_string();
                let mut h = header(tar::EntryType::Symlink, e.mode, 0);
                b.append_link(&mut h, rel, &target).map_err(err)?;
            }
            EntryKind::File => {
                ws.load_content(&e.path, source)?;
                let data = ws.read(&e.path)?;
                let mut h = header(tar::EntryType::Regular, e.mode, data.len() as u64);
                b.append_data(&mut h, rel, data).map_err(err)?;
                ws.remove(&e.path)?;
            }
        }
        count += 1;
        progress.inc(1);
    }
    let out = b.into_inner().map_err(err)?;
    Ok((out, count))
}

/// A normalised archive name (`./` and trailing `/` dropped) as a workspace path,
/// or `None` for the archive's root; refuses absolute paths and bad components.
fn entry_path(name: &str) -> std::result::Result<Option<String>, &'static str> {
    let trimmed = name.trim_end_matches('/');
    let trimmed = trimmed.strip_prefix("./").unwrap_or(trimmed);
    if trimmed.is_empty() || trimmed == "." {
        return Ok(None);
    }
    if trimmed.starts_with('/') {
        return Err("absolute path");
    }
    for c in trimmed.split('/') {
        check_component(c)?;
    }
    Ok(Some(format!("/{trimmed}")))
}

/// The link target of a symlink or hard link entry.
fn link_target<R: Read>(entry: &tar::Entry<'_, R>) -> std::result::Result<String, &'static str> {
    let target = entry
        .link_name_bytes()
        .ok_or("without target")?
        .into_owned();
    String::from_utf8(target).map_err(|_| "target is not valid UTF-8")
}

/// Reads a tar archive into a fresh workspace.
///
/// Every entry is checked before it is stored: names as [`check_component`] requires
/// (so nothing that could become `.snapgraph`), no path below a symlink of the
/// archive, and a declared size within what the workspace may hold
/// ([`snapgraph::Limits::max_bytes`] in all); bytes are read as they arrive, never
/// allocated from the declared size. A hard link becomes a second file with the
/// content of the earlier entry it names; a link to a name that is not an earlier
/// file of the archive is refused. Other entry types (devices, FIFOs) are skipped
/// with a warning.
///
/// Each regular file goes through `batches` ([`crate::batches::read_into`]): read
/// whole, then [`Batches::file_read`](crate::batches::Batches::file_read) (a caller
/// committing in bounded batches hands the content over there:
/// [`snapgraph_store::Batched::write`]), or, past
/// [`STREAM_MIN`](crate::batches::STREAM_MIN) when `batches` stores objects,
/// streamed in. A hard link shares its target's content (also after a hand-over or
/// a stream) and adds no bytes.
pub fn import<R: Read>(
    input: R,
    file: &Path,
    progress: &ProgressBar,
    batches: &mut dyn crate::batches::Batches,
) -> Result<Workspace> {
    let bad = |p: &str, reason: &str| CliError::ArchiveEntry {
        file: file.to_path_buf(),
        entry: p.to_string(),
        reason: reason.to_string(),
    };
    let mut ws = Workspace::new();
    let budget = ws.limits().max_bytes;
    let mut total = 0u64;
    let mut archive = tar::Archive::new(input);
    let entries = archive.entries().at(file)?;
    for entry in entries {
        let mut entry = entry.at(file)?;
        let raw = entry.path_bytes().into_owned();
        let name = String::from_utf8(raw).map_err(|_| bad("?", "name is not valid UTF-8"))?;
        let Some(path) = entry_path(&name).map_err(|r| bad(&name, r))? else {
            continue;
        };
        // The workspace's own path rules (depth, name and path length).
        snapgraph::path::parse(&path).map_err(|e| bad(&name, e.reason))?;
        // Refuse paths through a symlink or a file of the archive.
        let mut prefix = String::new();
        let components: Vec<&str> = path[1..].split('/').collect();
        for c in &components[..components.len() - 1] {
            prefix.push('/');
            prefix.push_str(c);
            match ws.metadata(&prefix).map(|m| m.kind) {
                Ok(EntryKind::Symlink) => return Err(bad(&name, "lies below a symlink")),
                Ok(EntryKind::File) => {
                    return Err(bad(
                        &name,
                        &format!("lies below {:?}, a file of the archive", &prefix[1..]),
                    ))
                }
                _ => {}
            }
        }
        // What the workspace refuses names the archive and the entry too.
        let fs = |e: snapgraph::FsError| bad(&name, &e.to_string());
        // A missing mode (some writers leave it empty for links) counts as 0o644.
        let mode = entry.header().mode().unwrap_or(0o644);
        match entry.header().entry_type() {
            tar::EntryType::Directory => {
                // A later entry replaces an earlier one of the same name, as tar
                // extracts them.
                if ws.metadata(&path).is_ok_and(|m| m.kind != EntryKind::Dir) {
                    ws.remove(&path).map_err(fs)?;
                }
                ws.mkdir(&path).map_err(fs)?
            }
            tar::EntryType::Symlink => {
                let target =
                    link_target(&entry).map_err(|r| bad(&name, &format!("symlink {r}")))?;
                if ws.exists(&path) {
                    ws.remove(&path).map_err(fs)?;
                }
                ws.symlink(&path, &target).map_err(fs)?;
            }
            tar::EntryType::Link => {
                let target =
                    link_target(&entry).map_err(|r| bad(&name, &format!("hard link {r}")))?;
                let from = entry_path(&target)
                    .map_err(|r| bad(&name, &format!("hard link target {target:?}: {r}")))?
                    .ok_or_else(|| bad(&name, "hard link to the archive's root"))?;
                let is_file = ws.metadata(&from).is_ok_and(|m| m.kind == EntryKind::File);
                if !is_file {
                    return Err(bad(
                        &name,
                        &format!(
                            "hard link to {target:?}, which is not an earlier file of the archive"
                        ),
                    ));
                }
                total += ws.metadata(&from).map_err(fs)?.size;
                if total > budget {
                    return Err(bad(
                        &name,
                        &format!(
                            "the archive holds more than the workspace limit of {budget} bytes"
                        ),
                    ));
                }
                if ws.metadata(&path).is_ok_and(|m| m.kind != EntryKind::File) {
                    ws.remove(&path).map_err(fs)?;
                }
                ws.copy_file(&from, &path).map_err(fs)?;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let size = entry.size();
                if size > budget.saturating_sub(total) {
                    return Err(bad(
                        &name,
                        &format!("declares {size} bytes, more than the workspace limit of {budget} bytes (with the {total} bytes before it)"),
                    ));
                }
                if ws.metadata(&path).is_ok_and(|m| m.kind != EntryKind::File) {
                    ws.remove(&path).map_err(fs)?;
                }
                // Whole, or streamed in past `batches::STREAM_MIN` (a header's size
                // is only a claim: what arrives is what counts).
                let read = crate::batches::read_into(
                    &mut ws,
                    &path,
                    (&mut entry).take(size),
                    file,
                    size,
                    batches,
                )?;
                if read != size {
                    return Err(bad(&name, &format!("truncated: {read} of {size} bytes")));
                }
                total += size;
                ws.set_mode(&path, crate::index::file_mode(mode))
                    .map_err(fs)?;
            }
            other => {
                eprintln!(
                    "warning: {}: skipping tar entry of type {other:?}",
                    crate::output::quote(&name)
                );
            }
        }
        progress.inc(1);
    }
    Ok(ws)
}
