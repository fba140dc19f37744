//! `forget`: retention policies (restic's `forget`), the rules in
//! `snapgraph_store::retention`.
//!
//! Snapshots not kept lose their names (`tags/NAME`); with `--branch`, commits of
//! the branch not kept become hollow: their history stays (`log`), their files go
//! at the next `gc`, and checking one out says it was pruned. Commit times are the
//! commits' `time` metadata; a commit or snapshot without one is always kept.

use serde_json::{json, Value};
use snapgraph_store::retention::{Decision, KeepPolicy, Span};

use super::Ctx;
use crate::cli::ForgetArgs;
use crate::error::{CliError, Result};
use crate::output::quote;

fn reasons(d: &Decision) -> Vec<&'static str> {
    d.reasons.iter().map(|r| r.as_str()).collect()
}

fn decision_json(d: &Decision) -> Value {
    json!({"id": d.id.to_string(), "time": d.time, "keep": d.keep, "reasons": reasons(d)})
}

/// `forget --keep-... [--tag NAME]... [--branch NAME]... [--dry-run]`.
pub(super) fn forget(ctx: &Ctx, args: &ForgetArgs) -> Result<()> {
    let within = match &args.keep_within {
        Some(text) => Some(
            text.parse::<Span>()
                .map_err(|e| CliError::Usage(format!("--keep-within: {e}")))?,
        ),
        None => None,
    };
    let policy = KeepPolicy {
        last: args.keep_last,
        daily: args.keep_daily,
        weekly: args.keep_weekly,
        monthly: args.keep_monthly,
        within,
    };
    if policy.is_empty() {
        return Err(CliError::Usage(
            "forget: give at least one of --keep-last, --keep-daily, --keep-weekly, --keep-monthly, --keep-within (nothing would be kept)".into(),
        ));
    }
    let wd = ctx.open()?;
    let snapshots = if args.branch.is_empty() || !args.tag.is_empty() {
        Some(wd.repo.forget_snapshots(&args.tag, &policy, args.dry_run)?)
    } else {
        None
    };
    let mut branches = Vec::new();
    for b in &args.branch {
        branches.push(wd.repo.retain_history(b, &policy, args.dry_run)?);
    }
    let value = json!({
        "dry_run": args.dry_run,
        "snapshots": snapshots.as_ref().map(|s| s.iter().map(|s| {
            let mut v = decision_json(&s.decision);
            v["name"] = json!(s.name);
            v
        }).collect::<Vec<_>>()),
        "branches": branches.iter().map(|h| json!({
            "branch": h.branch,
            "kept": h.decisions.iter().filter(|d| d.keep).count(),
            "hollowed": h.hollowed.iter().map(|i| i.to_string()).collect::<Vec<_>>(),
            "already_hollow": h.already_hollow,
            "decisions": h.decisions.iter().map(decision_json).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    });
    let would = if args.dry_run { "would " } else { "" };
    ctx.print(value, |w| {
        if let Some(snapshots) = &snapshots {
            let (keep, drop): (Vec<_>, Vec<_>) = snapshots.iter().partition(|s| s.decision.keep);
            writeln!(w, "keep {} snapshots:", keep.len())?;
            for s in &keep {
                writeln!(
                    w,
                    "  {} {} {} ({})",
                    quote(&s.name),
                    s.decision.id,
                    s.decision.time.as_deref().unwrap_or("-"),
                    reasons(&s.decision).join(", ")
                )?;
            }
            writeln!(w, "{would}remove {} snapshots:", drop.len())?;
            for s in &drop {
                writeln!(
                    w,
                    "  {} {} {}",
                    quote(&s.name),
                    s.decision.id,
                    s.decision.time.as_deref().unwrap_or("-")
                )?;
            }
        }
        for h in &branches {
            writeln!(
                w,
                "{}: keep {} commits, {would}hollow {} ({} hollow already){}",
                h.branch,
                h.decisions.iter().filter(|d| d.keep).count(),
                h.hollowed.len(),
                h.already_hollow,
                if h.hollowed.is_empty() || args.dry_run {
                    ""
                } else {
                    "; `snapgraph gc` drops their files"
                }
            )?;
            for d in h.decisions.iter().filter(|d| !d.keep) {
                writeln!(w, "  hollow {} {}", d.id, d.time.as_deref().unwrap_or("-"))?;
            }
        }
        Ok(())
    })
}
