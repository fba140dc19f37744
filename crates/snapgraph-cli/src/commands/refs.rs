//! `branch`, `reflog`, `tag`, `fork`, `snapshots`: naming commits.

use serde_json::{json, Value};

use super::{parse_pairs, Ctx};
use crate::cli::SnapshotsAction;
use crate::error::{CliError, Result};
use crate::output::quote;

/// `branch [NAME [--at REV] [-d|-D]]`.
pub(super) fn branch(
    ctx: &Ctx,
    name: Option<String>,
    at: Option<String>,
    delete: bool,
    force_delete: bool,
) -> Result<()> {
    let wd = ctx.open()?;
    let Some(name) = name else {
        let current = wd.head_branch()?;
        let branches = wd.repo.branches()?;
        let value: Vec<Value> = branches
            .iter()
            .map(|(n, id)| json!({"name": n, "id": id.to_string(), "current": *n == current}))
            .collect();
        return ctx.print(Value::Array(value), |w| {
            for (n, id) in &branches {
                let mark = if *n == current { '*' } else { ' ' };
                writeln!(w, "{mark} {n} {id}")?;
            }
            if !branches.iter().any(|(n, _)| *n == current) {
                writeln!(w, "* {current} (no commits yet)")?;
            }
            Ok(())
        });
    };
    if delete || force_delete {
        let tip = wd.repo.branch(&name)?.ok_or_else(|| {
            CliError::Repo(snapgraph_store::RepoError::UnknownRevision { rev: name.clone() })
        })?;
        if name == wd.head_branch()? {
            return Err(CliError::Usage(format!(
                "cannot delete the current branch {name}; check out another one first"
            )));
        }
        let ref_name = format!("heads/{name}");
        if !force_delete && !crate::trash::reached_elsewhere(wd.store(), tip, &ref_name)? {
            return Err(CliError::Unmerged { branch: name, tip });
        }
        let kept = crate::trash::keep(wd.store(), &ref_name, tip, crate::trash::now())?;
        wd.repo.delete_branch(&name, tip)?;
        return ctx.print(
            json!({"deleted": name, "id": tip.to_string(), "kept_as": kept}),
            |w| {
                writeln!(w, "deleted branch {name} (was {tip})")?;
                writeln!(
                    w,
                    "recoverable until gc's grace period ends: snapgraph branch {name} --at {tip}"
                )
            },
        );
    }
    super::check_new_name(&name)?;
    let at = wd.resolve(at.as_deref().unwrap_or("HEAD"))?;
    let id = wd.repo.fork(&name, &at.to_string())?;
    ctx.print(json!({"branch": name, "id": id.to_string()}), |w| {
        writeln!(w, "created branch {name} at {id}")
    })
}

/// `reflog [REF]`: the moves of a ref, newest first.
pub(super) fn reflog(ctx: &Ctx, reference: Option<&str>) -> Result<()> {
    let wd = ctx.open()?;
    let name = match reference {
        Some(r) if r.contains('/') => r.to_string(),
        Some(r) => format!("heads/{r}"),
        None => format!("heads/{}", wd.head_branch()?),
    };
    snapgraph_store::validate_ref_name(&name)?;
    let mut entries = wd.store().reflog(&name)?;
    entries.reverse();
    let show = |id: Option<snapgraph::ObjectId>| id.map_or("-".to_string(), |i| i.to_string());
    let value: Vec<Value> = entries
        .iter()
        .map(|e| json!({"old": e.old.map(|i| i.to_string()), "new": e.new.map(|i| i.to_string()), "message": e.message}))
        .collect();
    ctx.print(Value::Array(value), |w| {
        for e in &entries {
            writeln!(
                w,
                "{} -> {} {}",
                show(e.old),
                show(e.new),
                crate::output::sanitize(&e.message).replace('\n', " ")
            )?;
        }
        if entries.is_empty() {
            writeln!(w, "no moves recorded for {name}")?;
        }
        Ok(())
    })
}

/// `tag NAME [--at REV] [--label K=V...]`.
pub(super) fn tag(ctx: &Ctx, name: &str, at: Option<&str>, labels: &[String]) -> Result<()> {
    let labels = parse_pairs(labels, "--label")?;
    super::check_new_name(name)?;
    let wd = ctx.open()?;
    let at = wd.resolve(at.unwrap_or("HEAD"))?;
    let info = wd.repo.tag(name, &at.to_string(), labels)?;
    ctx.print(snapshot_json(&info), |w| {
        writeln!(
            w,
            "snapshot {} = {} (of {})",
            info.name, info.id, info.target
        )
    })
}

/// `fork NEW --at REV`.
pub(super) fn fork(ctx: &Ctx, new: &str, at: &str) -> Result<()> {
    super::check_new_name(new)?;
    let wd = ctx.open()?;
    let at = wd.resolve(at)?;
    let id = wd.repo.fork(new, &at.to_string())?;
    ctx.print(json!({"branch": new, "id": id.to_string()}), |w| {
        writeln!(w, "created branch {new} at {id}")
    })
}

fn snapshot_json(s: &snapgraph_store::SnapshotInfo) -> Value {
    json!({"name": s.name, "id": s.id.to_string(), "target": s.target.to_string(), "labels": s.labels})
}

/// `snapshots [list|inspect|remove]`.
pub(super) fn snapshots(ctx: &Ctx, action: SnapshotsAction) -> Result<()> {
    let wd = ctx.open()?;
    match action {
        SnapshotsAction::List => {
            let all = wd.repo.snapshots()?;
            ctx.print(Value::Array(all.iter().map(snapshot_json).collect()), |w| {
                for s in &all {
                    let labels: Vec<String> = s
                        .labels
                        .iter()
                        .map(|(k, v)| format!("{}={}", quote(k), quote(v)))
                        .collect();
                    writeln!(w, "{} {} {}", s.name, s.target, labels.join(" "))?;
                }
                Ok(())
            })
        }
        SnapshotsAction::Inspect {
            name,
            verify,
            read_data,
        } => {
            let s = wd.repo.inspect(&name)?;
            let report = if verify {
                let pb = ctx.bar(None, "verify");
                let r = snapgraph_store::verify_one(
                    wd.store(),
                    &format!("tags/{}", s.name),
                    s.id,
                    read_data,
                )?;
                pb.finish_and_clear();
                Some(r)
            } else {
                None
            };
            let mut value = snapshot_json(&s);
            if let Some(r) = &report {
                value["verify"] = super::maintenance::verify_json(r, read_data, Some(&s.name));
            }
            ctx.print(value, |w| {
                writeln!(w, "snapshot {}", s.name)?;
                writeln!(w, "id {}", s.id)?;
                writeln!(w, "target {}", s.target)?;
                for (k, v) in &s.labels {
                    writeln!(w, "{}: {}", quote(k), quote(v))?;
                }
                if let Some(r) = &report {
                    super::maintenance::verify_text(w, r, read_data, Some(&s.name))?;
                }
                Ok(())
            })?;
            match &report {
                Some(r) => super::maintenance::verify_outcome(r),
                None => Ok(()),
            }
        }
        SnapshotsAction::Remove { name, force } => {
            let s = wd.repo.remove_snapshot(&name, force)?;
            ctx.print(snapshot_json(&s), |w| {
                writeln!(w, "removed snapshot {} (was {})", s.name, s.id)
            })
        }
    }
}
