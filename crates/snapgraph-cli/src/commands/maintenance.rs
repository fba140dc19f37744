//! `gc`, `verify` and `reindex`: keeping a store clean, checking and repairing it.

use std::collections::HashSet;

use serde_json::{json, Value};
use snapgraph::ObjectId;
use snapgraph_store::VerifyReport;

use super::Ctx;
use crate::error::{CliError, Result};
use crate::output::quote;
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
    /// How to repack after collecting (`None`: not at all).
    pub repack: Option<snapgraph_store::RepackOptions>,
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
    // A signal stops the collection at its next safe point, its sweep ended
    // (killed in the sweep, it left the marker every writer then waited for, until
    // `gc --clear-marker`): `crate::interrupt`.
    crate::interrupt::arm();
    crate::interrupt::test_point("gc");
    let options = snapgraph_store::GcOptions {
        lease_wait: std::time::Duration::from_secs(args.wait),
        cancel: crate::interrupt::cancel(),
        ..Default::default()
    };
    let r = match snapgraph_store::gc::collect_with(wd.store(), &options) {
        Err(snapgraph_store::GcError::Cancelled { deleted }) => {
            return Err(crate::interrupt::received(|| {
                format!("the collection stopped after deleting {deleted} objects and ended its sweep; the next gc deletes the rest")
            })
            .unwrap_or(CliError::Gc(snapgraph_store::GcError::Cancelled { deleted })));
        }
        r => r?,
    };
    if let Some(e) = crate::interrupt::received(|| {
        format!(
            "the collection finished ({} objects deleted); the repack did not run",
            r.deleted.len()
        )
    }) {
        return Err(e);
    }
    // A repack is SQLite transactions: safe to kill, and a signal does again.
    crate::interrupt::disarm();
    // After the sweep (which holds no lock while this runs): a repack adds and
    // deletes no object, so writers may run beside it.
    let packed = match &args.repack {
        Some(how) => wd.store().repack(how)?,
        None => None,
    };
    pb.finish_and_clear();
    let repack_json = packed.as_ref().map(|p| {
        json!({"rewritten": p.rewritten, "recompressed": p.recompressed, "skipped": p.skipped,
               "record_bytes_saved": p.record_bytes_saved, "packs_written": p.packs_written,
               "packs_removed": p.packs_removed, "segments_removed": p.segments_removed,
               "file_bytes_before": p.file_bytes_before,
               "file_bytes_after": p.file_bytes_after, "vacuumed": p.vacuumed})
    });
    ctx.print(
        json!({"deleted": r.deleted.len(), "kept": r.kept, "refs": r.refs, "expired": expired_json, "problems": r.problems.iter().map(|p| format!("{p:?}")).collect::<Vec<_>>(), "repack": repack_json}),
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
            if let Some(p) = &packed {
                writeln!(
                    w,
                    "repack: {} records rewritten ({} smaller, {} bytes saved), {} packs written, {} removed{}; file {} -> {} bytes{}",
                    p.rewritten,
                    p.recompressed,
                    p.record_bytes_saved,
                    p.packs_written,
                    p.packs_removed,
                    match p.segments_removed {
                        0 => String::new(),
                        n => format!(", {n} segment files removed"),
                    },
                    p.file_bytes_before,
                    p.file_bytes_after,
                    if p.vacuumed { " (vacuumed)" } else { "" }
                )?;
            }
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
    let roots: Vec<ObjectId> = store
        .list_refs("")?
        .into_iter()
        .filter(|(name, _)| {
            !name.starts_with(snapgraph_store::gc::RESERVED) && !gone.contains(name.as_str())
        })
        .map(|(_, id)| id)
        .collect();
    // The collector's own marking: hollow commits' snapshots are not kept.
    let live = snapgraph_store::gc::live_set(store, &roots)?;
    let mut doomed = 0usize;
    store.for_each_id(&mut |id| {
        if !live.contains(&id) {
            doomed += 1;
        }
        Ok(())
    })?;
    Ok(doomed)
}

/// `verify [SNAPSHOT] [--read-data]`: exits non-zero on any problem; says what was
/// checked. With SNAPSHOT (a snapshot, branch or commit), only its closure.
pub(super) fn verify(ctx: &Ctx, snapshot: Option<&str>, read_data: bool) -> Result<()> {
    let wd = ctx.open()?;
    let pb = ctx.bar(None, "verify");
    let r = match snapshot {
        None => snapgraph_store::verify(wd.store(), read_data)?,
        Some(rev) => {
            let id = wd.resolve(rev)?;
            snapgraph_store::verify_one(wd.store(), rev, id, read_data)?
        }
    };
    pb.finish_and_clear();
    ctx.print(verify_json(&r, read_data, snapshot), |w| {
        verify_text(w, &r, read_data, snapshot)
    })?;
    verify_outcome(&r)
}

/// The error a report with problems ends the command with.
pub(super) fn verify_outcome(r: &VerifyReport) -> Result<()> {
    if r.is_clean() {
        Ok(())
    } else {
        Err(CliError::VerifyFailed {
            count: r.problems.len(),
        })
    }
}

fn verify_scope(read_data: bool) -> &'static str {
    if read_data {
        "every object re-hashed"
    } else {
        "structure only; chunk bytes not re-hashed: --read-data"
    }
}

/// A verify report as JSON (`of`: the one snapshot verified, if only one).
pub(super) fn verify_json(r: &VerifyReport, read_data: bool, of: Option<&str>) -> Value {
    let problems: Vec<String> = r.problems.iter().map(|p| format!("{p:?}")).collect();
    json!({
        "clean": r.is_clean(), "refs": r.refs, "objects": r.objects,
        "reachable": r.reachable, "rehashed": r.rehashed, "bytes": r.bytes,
        "unreachable": r.unreachable, "problems": problems, "broken_refs": r.broken_refs,
        "hollow": r.hollow, "read_data": read_data, "checked": verify_scope(read_data),
        "snapshot": of,
    })
}

/// A verify report as text.
pub(super) fn verify_text(
    w: &mut dyn std::io::Write,
    r: &VerifyReport,
    read_data: bool,
    of: Option<&str>,
) -> std::io::Result<()> {
    let scope = verify_scope(read_data);
    let verdict = if r.is_clean() { "ok" } else { "PROBLEMS" };
    let hollow = if r.hollow > 0 {
        format!(", {} hollow commits (history only)", r.hollow)
    } else {
        String::new()
    };
    match of {
        None => writeln!(
            w,
            "verify ({scope}): {} refs, {} objects ({} reachable, {} unreachable){hollow}, {} re-hashed ({} bytes): {verdict}",
            r.refs, r.objects, r.reachable, r.unreachable, r.rehashed, r.bytes,
        )?,
        Some(name) => writeln!(
            w,
            "verify {} ({scope}): {} objects reachable{hollow}, {} re-hashed ({} bytes): {verdict}",
            quote(name),
            r.reachable,
            r.rehashed,
            r.bytes,
        )?,
    }
    for p in &r.problems {
        writeln!(w, "problem: {p:?}")?;
    }
    for b in &r.broken_refs {
        writeln!(w, "broken ref: {b}")?;
    }
    Ok(())
}

/// `reindex`: rebuild refs from the objects present.
pub(super) fn reindex(ctx: &Ctx) -> Result<()> {
    let wd = ctx.open()?;
    let pb = ctx.bar(None, "reindex");
    let r = wd.repo.reindex()?;
    pb.finish_and_clear();
    let tags: Vec<Value> = r
        .tags_restored
        .iter()
        .map(|(n, id)| json!({"name": n, "id": id.to_string()}))
        .collect();
    let lost: Vec<String> = r.lost_found.iter().map(|id| id.to_string()).collect();
    ctx.print(
        json!({"commits": r.commits, "tags_restored": tags, "lost_found": lost}),
        |w| {
            writeln!(
                w,
                "reindex: {} commits, {} snapshots restored, {} unreferenced commits under lost-found/",
                r.commits,
                r.tags_restored.len(),
                r.lost_found.len()
            )?;
            for (n, id) in &r.tags_restored {
                writeln!(w, "restored snapshot {} at {id}", quote(n))?;
            }
            for id in &r.lost_found {
                writeln!(w, "lost-found/{id}")?;
            }
            Ok(())
        },
    )
}
