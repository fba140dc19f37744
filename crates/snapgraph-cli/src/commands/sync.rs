//! `sync`: copying refs between stores.
//!
//! The source must be an existing repository or store (see
//! [`crate::repo::open_existing_store`]); a destination URL may name a new store,
//! which the sync creates and marks. A `--force` that moves a destination ref to a
//! commit not descending from its old value keeps the old value for the gc grace
//! period ([`crate::trash`]).

use std::path::Path;

use serde_json::{json, Value};
use snapgraph_store::{Store, SyncOptions};

use super::{resolve_path, Ctx};
use crate::error::Result;
use crate::repo;

/// Opens a store named by URL, or the store of the repository at a directory;
/// `create` lets a URL name a store that does not exist yet.
fn open_any(ctx: &Ctx, spec: &str, create: bool) -> Result<Box<dyn Store>> {
    let p = resolve_path(ctx, Path::new(spec));
    if !spec.contains(':') && p.join(repo::DOT_DIR).join("config").is_file() {
        let wd = repo::discover(&p)?;
        return Ok(wd.repo.into_store());
    }
    let url = repo::absolutize_url(spec, &ctx.cwd);
    if create {
        let store = repo::open_store(&url)?;
        repo::mark_store(store.as_ref())?;
        Ok(store)
    } else {
        repo::open_existing_store(&url)
    }
}

/// The store of a source (a repository directory or a store URL) and, for a
/// directory, its current branch.
pub(super) fn open_source(ctx: &Ctx, spec: &str) -> Result<(Box<dyn Store>, Option<String>)> {
    let p = resolve_path(ctx, Path::new(spec));
    if !spec.contains(':') && p.join(repo::DOT_DIR).join("config").is_file() {
        let wd = repo::discover(&p)?;
        let head = wd.head_branch()?;
        return Ok((wd.repo.into_store(), Some(head)));
    }
    Ok((open_any(ctx, spec, false)?, None))
}

/// A sync stopped by a signal ([`snapgraph_store::SyncError::Cancelled`]) as
/// [`crate::error::CliError::Interrupted`], naming the refs `done` before it; any
/// other error as it is.
pub(super) fn stopped(
    e: snapgraph_store::SyncError,
    done: &[(String, snapgraph_store::SyncReport)],
) -> crate::error::CliError {
    let snapgraph_store::SyncError::Cancelled { name } = &e else {
        return e.into();
    };
    crate::interrupt::received(|| {
        let synced = match done.len() {
            0 => "no ref was synced".to_string(),
            _ => format!(
                "{} synced before it ({})",
                done.len(),
                done.iter()
                    .map(|(r, _)| r.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        format!("{name} did not move on the destination, and no lease of it is left; {synced}")
    })
    .unwrap_or_else(|| e.into())
}

/// `sync SRC DST [REF] [--force]`.
pub(super) fn sync(
    ctx: &Ctx,
    src: &str,
    dst: &str,
    reference: Option<&str>,
    force: bool,
    depth: Option<std::num::NonZeroU64>,
) -> Result<()> {
    let s = open_any(ctx, src, false)?;
    let d = open_any(ctx, dst, true)?;
    let refs: Vec<String> = match reference {
        Some(r) if r.contains('/') => vec![r.to_string()],
        Some(r) => {
            let branch = format!("heads/{r}");
            let tag = format!("tags/{r}");
            if s.get_ref(&branch)?.is_some() || s.get_ref(&tag)?.is_none() {
                vec![branch]
            } else {
                vec![tag]
            }
        }
        None => {
            let mut v: Vec<String> = s.list_refs("heads/")?.into_iter().map(|r| r.0).collect();
            v.extend(s.list_refs("tags/")?.into_iter().map(|r| r.0));
            v
        }
    };
    let pb = ctx.bar(Some(refs.len() as u64), "sync");
    // A signal stops the sync at its next safe point, its writer's lease released
    // (killed, it left the lease every `gc` then stopped on): `crate::interrupt`.
    crate::interrupt::arm();
    crate::interrupt::test_point("sync");
    let options = SyncOptions {
        force,
        depth,
        cancel: crate::interrupt::cancel(),
        ..SyncOptions::default()
    };
    let mut reports = Vec::new();
    for r in &refs {
        pb.set_message(r.clone());
        let before = d.get_ref(r)?;
        let report = snapgraph_store::sync_with(s.as_ref(), d.as_ref(), r, &options)
            .map_err(|e| stopped(e, &reports))?;
        if let (Some(old), Some(new)) = (before, report.to) {
            if force && !snapgraph::SnapshotGraph::is_ancestor(old, [new], d.as_ref())? {
                let kept = crate::trash::keep(d.as_ref(), r, old, crate::trash::now())?;
                eprintln!("{r} was at {old}: kept as {kept} for the gc grace period");
            }
        }
        reports.push((r.clone(), report));
        pb.inc(1);
    }
    pb.finish_and_clear();
    let value: Vec<Value> = reports
        .iter()
        .map(|(r, rep)| {
            json!({
                "ref": r, "from": rep.from.map(|i| i.to_string()), "to": rep.to.map(|i| i.to_string()),
                "objects": rep.objects, "bytes": rep.bytes, "examined": rep.examined, "queries": rep.queries,
                "hollow": rep.hollow, "filled": rep.filled,
            })
        })
        .collect();
    ctx.print(Value::Array(value), |w| {
        for (r, rep) in &reports {
            writeln!(
                w,
                "{r}: {} -> {}: {} objects, {} bytes sent",
                rep.from.map_or("nothing".to_string(), |i| i.to_string()),
                rep.to.map_or("nothing".to_string(), |i| i.to_string()),
                rep.objects,
                rep.bytes
            )?;
        }
        if reports.is_empty() {
            writeln!(w, "nothing to sync")?;
        }
        Ok(())
    })
}
