//! `clone`: a new working directory from another repository or store.
//!
//! The new repository gets its own store (a SQLite file in `.snapgraph/` unless
//! `--store`), every branch and snapshot of the source is synced into it (with
//! `--depth N`, only the last N commits of each with their files: older ones
//! arrive hollow, see `snapgraph_store::hollow`), and the default branch (the
//! source repository's current one, else `main`, else the first) is checked out.

use std::num::NonZeroU64;
use std::path::Path;

use serde_json::{json, Value};
use snapgraph_store::SyncOptions;

use super::{resolve_path, worktree, Ctx};
use crate::cli::CheckoutArgs;
use crate::error::{CliError, IoContext, Result};
use crate::repo;

/// `clone SRC DIR [--depth N] [--store URL]`.
pub(super) fn clone(
    ctx: &Ctx,
    src: &str,
    dir: &Path,
    depth: Option<NonZeroU64>,
    store: Option<&str>,
) -> Result<()> {
    let dir = resolve_path(ctx, dir);
    let existed = match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.is_dir() => {
            if std::fs::read_dir(&dir).at(&dir)?.next().is_some() {
                return Err(CliError::bad_path(&dir, "exists and is not empty"));
            }
            true
        }
        Ok(_) => return Err(CliError::bad_path(&dir, "exists and is not a directory")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(CliError::io(&dir, e)),
    };
    let cloned = clone_into(ctx, src, &dir, depth, store);
    let made = match existed {
        true => std::fs::read_dir(&dir).is_ok_and(|mut d| d.next().is_some()),
        false => std::fs::symlink_metadata(&dir).is_ok(),
    };
    if cloned.is_err() && made {
        // What the clone made goes, as git's does: a half-made repository would
        // refuse the next clone into DIR ("not empty"). A store elsewhere
        // (`--store`) keeps what was synced, unreferenced until its next gc.
        let removed = match existed {
            true => std::fs::read_dir(&dir).and_then(|entries| {
                entries.into_iter().try_for_each(|e| {
                    let p = e?.path();
                    match std::fs::symlink_metadata(&p)?.is_dir() {
                        true => std::fs::remove_dir_all(&p),
                        false => std::fs::remove_file(&p),
                    }
                })
            }),
            false => std::fs::remove_dir_all(&dir),
        };
        match removed {
            Ok(()) => eprintln!("removed what the clone made in {}", dir.display()),
            Err(e) => eprintln!(
                "warning: {} holds an unfinished clone ({e}); delete it by hand",
                dir.display()
            ),
        }
    }
    cloned
}

/// [`clone`] into `dir`, which is empty or absent.
fn clone_into(
    ctx: &Ctx,
    src: &str,
    dir: &Path,
    depth: Option<NonZeroU64>,
    store: Option<&str>,
) -> Result<()> {
    let dir = dir.to_path_buf();
    let (source, source_head) = super::sync::open_source(ctx, src)?;
    let mut refs: Vec<(String, snapgraph::ObjectId)> = source.list_refs("heads/")?;
    refs.extend(source.list_refs("tags/")?);
    let branches: Vec<&str> = refs
        .iter()
        .filter_map(|(n, _)| n.strip_prefix("heads/"))
        .collect();
    let default = source_head
        .filter(|b| branches.contains(&b.as_str()))
        .or_else(|| {
            branches
                .iter()
                .find(|b| **b == repo::DEFAULT_BRANCH)
                .or(branches.first())
                .map(|b| b.to_string())
        });

    std::fs::create_dir_all(&dir).at(&dir)?;
    let created = repo::init(&dir, store, false)?;
    let wd = created.workdir;
    // A signal stops the syncs at their next safe point (`crate::interrupt`).
    crate::interrupt::arm();
    crate::interrupt::test_point("sync");
    let options = SyncOptions {
        depth,
        cancel: crate::interrupt::cancel(),
        ..SyncOptions::default()
    };
    let pb = ctx.bar(Some(refs.len() as u64), "clone");
    let mut synced = Vec::new();
    for (name, _) in &refs {
        pb.set_message(name.clone());
        let report = snapgraph_store::sync_with(source.as_ref(), wd.store(), name, &options)
            .map_err(|e| super::sync::stopped(e, &synced))?;
        synced.push((name.clone(), report));
        pb.inc(1);
    }
    pb.finish_and_clear();
    let objects: usize = synced.iter().map(|(_, r)| r.objects).sum();
    let bytes: u64 = synced.iter().map(|(_, r)| r.bytes).sum();
    // Hollow now (a commit sent hollow for one ref may be filled in for another).
    let hollow = snapgraph_store::hollow::hollow_commits(wd.store())?.len();

    if let Some(branch) = &default {
        wd.set_head_branch(branch)?;
        let quiet = Ctx {
            cwd: dir.clone(),
            silent: true,
            ..ctx.clone()
        };
        worktree::checkout(
            &quiet,
            &CheckoutArgs {
                rev: branch.clone(),
                to: None,
                force: true,
                paths: Vec::new(),
            },
            true,
        )?;
    }
    let refs_json: Vec<Value> = synced
        .iter()
        .map(|(n, r)| {
            json!({"ref": n, "to": r.to.map(|i| i.to_string()), "objects": r.objects,
                   "bytes": r.bytes, "hollow": r.hollow, "filled": r.filled})
        })
        .collect();
    ctx.print(
        json!({
            "root": wd.root, "store": crate::secrets::redact(&wd.store_url),
            "branch": default, "depth": depth, "refs": refs_json,
            "objects": objects, "bytes": bytes, "hollow": hollow,
        }),
        |w| {
            writeln!(
                w,
                "cloned {} refs into {}: {objects} objects, {bytes} bytes",
                synced.len(),
                wd.root.display()
            )?;
            if hollow > 0 {
                writeln!(
                    w,
                    "{hollow} older commits are history only (--depth {}): log shows them, checkout refuses them",
                    depth.map_or(0, |d| d.get())
                )?;
            }
            match &default {
                Some(b) => writeln!(w, "checked out branch {b}"),
                None => writeln!(w, "the source has no branch: nothing checked out"),
            }
        },
    )
}
