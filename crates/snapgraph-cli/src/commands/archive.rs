//! `pack`, `unpack`, `export`, `import`: commits in files.
//!
//! A pack holds one snapshot, not history: `pack X` writes a root commit with X's
//! tree, state and metadata plus `snapgraph.packed_from = X`, and `unpack` stores
//! exactly that commit (same id as the pack's root) on a new branch, saying it is a
//! new root and which commit it came from. X's own id cannot come back without its
//! parents, which a pack does not carry.

use std::io::Read;
use std::path::Path;

use serde_json::json;
use snapgraph::{CheckoutPolicy, CommitOptions, ObjectSource, SnapshotGraph, Workspace};
use snapgraph_store::RepoCommitOptions;

use super::{read_key, resolve_path, shallow, unique_name, Ctx};
use crate::error::{CliError, IoContext, Result};
use crate::repo;

/// The metadata key naming the commit a pack was made from.
pub const PACKED_FROM: &str = "snapgraph.packed_from";

/// `pack REV -o FILE`.
pub(super) fn pack(
    ctx: &Ctx,
    rev: &str,
    output: &Path,
    key: Option<&Path>,
    compress: bool,
) -> Result<()> {
    let key = read_key(key)?;
    let wd = ctx.open()?;
    let id = wd.resolve(rev)?;
    let store: &dyn ObjectSource = wd.repo.store();
    let mut ws = Workspace::new();
    let _ = ws.checkout(id, store, CheckoutPolicy::Force)?;
    let original = SnapshotGraph::commit(id, store)?;
    let mut opts = CommitOptions::new();
    for (k, v) in &original.meta {
        if k != PACKED_FROM {
            opts = opts.meta(k.clone(), v.clone());
        }
    }
    let root = ws.commit(opts.meta(PACKED_FROM, id.to_string()))?;
    let flags = if compress {
        snapgraph::pack::FLAG_ZSTD
    } else {
        0
    };
    let output = resolve_path(ctx, output);
    let mut bytes = Vec::new();
    snapgraph::pack::write_packed(root.id(), root.objects(), flags, key.as_ref(), &mut bytes)
        .at(&output)?;
    repo::write_atomic(&output, &bytes)?;
    let root_id = root.id();
    ctx.print(
        json!({"id": id.to_string(), "root": root_id.to_string(), "file": output, "bytes": bytes.len(), "keyed": key.is_some()}),
        |w| {
            writeln!(
                w,
                "packed the snapshot of {id} into {} ({} bytes{}); unpacking gives root commit {root_id}",
                output.display(),
                bytes.len(),
                if key.is_some() { ", keyed" } else { "" }
            )
        },
    )
}

/// `unpack FILE [--branch B]`.
pub(super) fn unpack(
    ctx: &Ctx,
    file: &Path,
    key: Option<&Path>,
    branch: Option<String>,
) -> Result<()> {
    let key = read_key(key)?;
    let wd = ctx.open()?;
    let file = resolve_path(ctx, file);
    let bytes = std::fs::read(&file).at(&file)?;
    let mut ws = match &key {
        Some(k) => Workspace::from_snapshot_keyed(&bytes, k),
        None => Workspace::from_snapshot(&bytes),
    }
    .map_err(|e| CliError::Usage(format!("{}: {e}", file.display())))?;
    // The pack's root commit again: same tree, state and metadata, no parents.
    let parsed = snapgraph::pack::parse_packed(&bytes, key.as_ref())?;
    let meta = SnapshotGraph::commit(parsed.root, &parsed)?.meta;
    let pack_root = parsed.root;
    drop(parsed);
    let mut opts = CommitOptions::new();
    for (k, v) in &meta {
        opts = opts.meta(k.clone(), v.clone());
    }
    let c = ws.commit(opts)?;
    if c.id() != pack_root {
        return Err(CliError::Usage(format!(
            "{}: the pack's root {pack_root} is not a parentless commit of its own contents (re-committed as {})",
            file.display(),
            c.id()
        )));
    }
    let id = c.id();
    let branch = branch.unwrap_or_else(|| format!("unpacked-{}", &id.to_string()[..12]));
    super::check_new_name(&branch)?;
    // Objects and branch under a writer's lease, so a concurrent `gc` cannot sweep
    // what the commit reuses before the branch exists. (The workspace keeps the
    // objects it just built: this commit reuses them and gives the same id.)
    let options = RepoCommitOptions {
        meta: meta.clone(),
        ..RepoCommitOptions::default()
    };
    let committed = wd.repo.commit_new_branch(&mut ws, &branch, options)?;
    debug_assert_eq!(committed.id, id);
    let from = meta.get(PACKED_FROM).cloned();
    ctx.print(
        json!({"id": id.to_string(), "branch": branch, "packed_from": from, "new_root": true}),
        |w| {
            writeln!(w, "unpacked {id} onto new branch {branch}")?;
            match &from {
                Some(x) => writeln!(
                    w,
                    "{id} is a new root commit with the contents and metadata of {x} (a pack holds one snapshot, not its parents)"
                ),
                None => writeln!(w, "{id} is a new root commit (a pack holds one snapshot, not history)"),
            }
        },
    )
}

/// `export REV -o FILE`.
pub(super) fn export(ctx: &Ctx, rev: &str, output: &Path) -> Result<()> {
    let wd = ctx.open()?;
    let id = wd.resolve(rev)?;
    let store: &dyn ObjectSource = wd.repo.store();
    let mut ws = shallow(id, store)?;
    let output = resolve_path(ctx, output);
    let dir = output.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(unique_name(".snapgraph-export"));
    let pb = ctx.bar(Some(0), "export");
    let result = (|| -> Result<u64> {
        let file = std::fs::File::create(&tmp).at(&tmp)?;
        let file = std::io::BufWriter::new(file);
        let (file, n) = if crate::tarball::is_zstd(&output) {
            let enc = zstd::Encoder::new(file, 3).at(&output)?;
            let (enc, n) = crate::tarball::export(&mut ws, store, id, enc, &pb)?;
            (enc.finish().at(&output)?, n)
        } else {
            crate::tarball::export(&mut ws, store, id, file, &pb)?
        };
        let file = file
            .into_inner()
            .map_err(|e| CliError::io(&tmp, e.into_error()))?;
        file.sync_all().at(&tmp)?;
        std::fs::rename(&tmp, &output).at(&output)?;
        Ok(n)
    })();
    pb.finish_and_clear();
    let n = match result {
        Ok(n) => n,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    ctx.print(
        json!({"id": id.to_string(), "file": output, "entries": n}),
        |w| writeln!(w, "exported {id} to {} ({n} entries)", output.display()),
    )
}

/// `import FILE`.
pub(super) fn import(
    ctx: &Ctx,
    file: &Path,
    message: Option<String>,
    branch: Option<String>,
    batch_bytes: u64,
) -> Result<()> {
    let wd = ctx.open()?;
    if let Some(b) = &branch {
        if wd.repo.branch(b)?.is_none() {
            super::check_new_name(b)?;
        }
    }
    let file = resolve_path(ctx, file);
    let f = std::fs::File::open(&file).at(&file)?;
    let reader: Box<dyn Read> = if crate::tarball::is_zstd(&file) {
        Box::new(zstd::Decoder::new(f).at(&file)?)
    } else {
        Box::new(std::io::BufReader::new(f))
    };
    let pb = ctx.bar(None, "import");
    // Bounded memory: content is written to the store (under the commit's lease)
    // whenever the bytes read reach the budget; the workspace keeps references.
    // Each batch is written on a writer thread while the next is read
    // (`super::pipelined`): two batches may be in memory, so each is half the budget.
    let mut batched = wd.repo.batched();
    let mut ws = super::pipelined(&mut batched, batch_bytes, |batches| {
        crate::tarball::import(reader, &file, &pb, batches)
    })?;
    pb.finish_and_clear();
    let branch = match branch {
        Some(b) => b,
        None => wd.head_branch()?,
    };
    let committed = batched.commit(
        &mut ws,
        &branch,
        RepoCommitOptions {
            message,
            meta: crate::meta::commit_meta(&wd.dot)?,
            // An archive replaces the branch's content as its next commit.
            onto_tip: true,
            ..RepoCommitOptions::default()
        },
    )?;
    ctx.print(
        json!({"id": committed.id.to_string(), "branch": branch, "new_objects": committed.objects_written, "new_bytes": committed.bytes_written}),
        |w| {
            writeln!(w, "[{branch} {}] imported {}", committed.id, file.display())?;
            writeln!(
                w,
                "new objects: {}, new bytes: {}",
                committed.objects_written, committed.bytes_written
            )
        },
    )
}
