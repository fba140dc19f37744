//! `gc` and `verify`: keeping a store clean and checking it.

use std::collections::HashSet;

use serde_json::json;
use snapgraph::{ObjectId, SnapshotGraph};

use super::Ctx;
use crate::error::{CliError, Result};
use crate::repo;
use crate::trash;

/// `gc`'s options.
#[derive(Debug)]
pub(super) struct GcArgs {
    pub break_leases: bool,
    pub clear_marker: bool,
    pub wait: u64,
    pub prune: Option<String>,
    pub dry_run: bool,
}

/// `gc`: drops trash refs past the grace period ([`crate::trash`]), removes stale
/// staging directories, then collects.
pub(super) fn gc(ctx: &Ctx, args: GcArgs) -> Result<()> {
    let wd = ctx.open()?;
    let grace = match &args.prune {
        Some(p) => trash::parse_grace(p)?,
        None => match repo::config_value(&wd.dot, "gc.grace")? {
            Some(v) => trash::parse_grace(&v)?,
            None => Some(trash::DEFAULT_GRACE),
        },
    };
    let kept = trash::list(wd.store())?;
    let expired = trash::expired(&kept, grace, trash::now());
    let expired_json: Vec<_> = expired
        .iter()
        .map(|t| json!({"ref": t.original, "id": t.id.to_string(), "dropped_at": t.dropped_at}))
        .collect();
    if args.dry_run {
        let doomed = unreachable_after(wd.store(), &expired)?;
        let stale: Vec<_> = repo::stale_work(&wd.dot)
            .into_iter()
            .filter(|s| s.kind == "staging")
            .collect();
        return ctx.print(
            json!({"dry_run": true, "expired": expired_json, "objects": doomed, "kept": kept.len() - expired.len(), "stale_staging": stale}),
            |w| {
                for t in &expired {
                    writeln!(w, "would drop {} (was {}, dropped at {})", t.original, t.id, t.dropped_at)?;
                }
                for s in &stale {
                    writeln!(w, "would remove {}", s.path.display())?;
                }
                writeln!(
                    w,
                    "gc --dry-run: would delete {doomed} objects; {} dropped tip(s) stay within the grace period",
                    kept.len() - expired.len()
                )
            },
        );
    }
    for p in repo::remove_stale_staging(&wd.dot) {
        eprintln!(
            "removed {}, left by a checkout that did not finish",
            p.display()
        );
    }
    if args.break_leases {
        let n = snapgraph_store::gc::break_leases(wd.store())?;
        eprintln!("removed {n} writer lease(s)");
    }
    if args.clear_marker && snapgraph_store::gc::clear_marker(wd.store())? {
        eprintln!("removed a sweep marker");
    }
    trash::drop_refs(wd.store(), &expired)?;
    let pb = ctx.bar(None, "gc");
    let options = snapgraph_store::GcOptions {
        lease_wait: std::time::Duration::from_secs(args.wait),
        ..Default::default()
    };
    let r = snapgraph_store::gc::collect_with(wd.store(), &options)?;
    pb.finish_and_clear();
    ctx.print(
        json!({"deleted": r.deleted.len(), "kept": r.kept, "refs": r.refs, "expired": expired_json, "problems": r.problems.iter().map(|p| format!("{p:?}")).collect::<Vec<_>>()}),
        |w| {
            for t in &expired {
                writeln!(w, "dropped {} (was {})", t.original, t.id)?;
            }
            writeln!(
                w,
                "gc: deleted {} objects, kept {}, marked from {} refs",
                r.deleted.len(),
                r.kept,
                r.refs
            )?;
            for p in &r.problems {
                writeln!(w, "problem: {p:?}")?;
            }
            Ok(())
        },
    )
}

/// How many objects a collection would delete once `expired` trash refs are gone:
/// everything no other ref's history reaches (reserved refs excluded, as gc does).
fn unreachable_after(
    store: &dyn snapgraph_store::Store,
    expired: &[trash::Trashed],
) -> Result<usize> {
    let gone: HashSet<&str> = expired.iter().map(|t| t.trash_ref.as_str()).collect();
    let mut live: HashSet<ObjectId> = HashSet::new();
    for (name, id) in store.list_refs("")? {
        if name.starts_with(snapgraph_store::gc::RESERVED) || gone.contains(name.as_str()) {
            continue;
        }
        if live.contains(&id) {
            continue;
        }
        live.extend(SnapshotGraph::reachable_history(id, store)?);
    }
    let mut doomed = 0usize;
    store.for_each_id(&mut |id| {
        if !live.contains(&id) {
            doomed += 1;
        }
        Ok(())
    })?;
    Ok(doomed)
}

/// `verify [--read-data]`: exits non-zero on any problem; says what was checked.
pub(super) fn verify(ctx: &Ctx, read_data: bool) -> Result<()> {
    let wd = ctx.open()?;
    let pb = ctx.bar(None, "verify");
    let r = snapgraph_store::verify(wd.store(), read_data)?;
    pb.finish_and_clear();
    let problems: Vec<String> = r.problems.iter().map(|p| format!("{p:?}")).collect();
    let scope = if read_data {
        "every object re-hashed"
    } else {
        "structure only; chunk bytes not re-hashed: --read-data"
    };
    ctx.print(
        json!({
            "clean": r.is_clean(), "refs": r.refs, "objects": r.objects,
            "reachable": r.reachable, "rehashed": r.rehashed, "bytes": r.bytes,
            "unreachable": r.unreachable, "problems": problems, "broken_refs": r.broken_refs,
            "read_data": read_data, "checked": scope,
        }),
        |w| {
            writeln!(
                w,
                "verify ({scope}): {} refs, {} objects ({} reachable, {} unreachable), {} re-hashed ({} bytes): {}",
                r.refs,
                r.objects,
                r.reachable,
                r.unreachable,
                r.rehashed,
                r.bytes,
                if r.is_clean() { "ok" } else { "PROBLEMS" }
            )?;
            for p in &problems {
                writeln!(w, "problem: {p}")?;
            }
            for b in &r.broken_refs {
                writeln!(w, "broken ref: {b}")?;
            }
            Ok(())
        },
    )?;
    if r.is_clean() {
        Ok(())
    } else {
        Err(CliError::VerifyFailed {
            count: r.problems.len(),
        })
    }
}
