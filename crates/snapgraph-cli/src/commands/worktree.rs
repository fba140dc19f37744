//! `commit`, `status`, `checkout` and `restore`: the working directory.
//!
//! ## Checkout into the working directory
//!
//! The commit is written into a staging directory inside `.snapgraph/` (so on the
//! same file system), then swapped in: every top-level entry of the working
//! directory is renamed into a second directory inside `.snapgraph/`, every entry
//! of the staging directory renamed into place, and the old entries deleted. A
//! failure during the swap renames everything back. Entries the scan does not record
//! (ignored by a `.snapgraphignore`, anywhere in the tree, and nested repositories)
//! are first moved into the staging directory at the same path, so they stay where
//! they are. Where the commit has an entry at that path: a directory in both keeps
//! what the commit lacks (its entries judged in turn); otherwise the commit's entry
//! replaces it only where that loses nothing (the same bytes or link, an empty
//! directory, a socket: [`crate::guard::replaced_losslessly`]), else the checkout
//! is refused without `--force` ([`CliError::UnrecordedInTheWay`], stop 57; git
//! lets the commit win). One that cannot stay because the commit has a file where
//! its directory would be makes the checkout refuse without `--force` too. Without `--force`, a working directory that differs from the
//! current branch's tip is refused (so is any untracked, not ignored file). Checking out a branch by name makes it current;
//! checking out anything else detaches HEAD at that commit ([`crate::rev::Head`]):
//! `status` says so and `commit` there needs `--branch NAME`. Restoring paths is
//! [`super::restore`].
//!
//! With `--to DIR`, the staging directory is a sibling of DIR and is renamed to DIR
//! in one step: DIR appears complete or not at all.
//!
//! A checkout that was killed leaves `.snapgraph/staging-PID-N`; the next checkout
//! or `gc` removes those whose process is gone, and `status` mentions them
//! ([`crate::repo::stale_work`]).

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use snapgraph::{CommitOptions, EntryKind, ObjectId, ObjectSource, SnapshotGraph, Workspace};
use snapgraph_store::RepoCommitOptions;

use super::{
    changed, diff_json, diff_of, index_after_checkout, lazy, parse_pairs, resolve_path, shallow,
    unique_name, working_commit, Ctx,
};
use crate::cli::{CheckoutArgs, CommitArgs};
use crate::error::{CliError, IoContext, Result};
use crate::guard::Theirs;
use crate::index::{Delta, FileStat, Index, IndexEntry, Listing, SkeletonSource};
use crate::output::quote;
use crate::repo::{self, Workdir};
use crate::scan::{self, ScanOptions};

/// The workspace path (`/a/b`, `/` for the root) of `p`, which must lie in the
/// working directory (it need not exist: committing a removed path records the
/// removal).
///
/// The directories leading to `p` are resolved (a symlink among them is followed,
/// and where it leads must be inside the working directory); `p`'s own last
/// component is not: a symlink named there is the entry meant, as in git, so
/// `commit LINK` records the link and `restore LINK` puts the link back, never the
/// file it points to (which the user did not name, and whose edits `restore` would
/// discard). A last component of `.` or `..`, or a trailing `/`, names the
/// directory reached, resolved whole (`LINK/` is the directory the link points to).
pub(super) fn path_in_workdir(ctx: &Ctx, root: &Path, p: &Path) -> Result<String> {
    let full = resolve_path(ctx, p);
    let resolved_whole = || std::fs::canonicalize(&full).map_err(|e| CliError::io(&full, e));
    // The argument as typed: `Path` drops a trailing `/` or `/.`, which name the
    // directory reached.
    let last = p
        .as_os_str()
        .as_encoded_bytes()
        .rsplit(|b| *b == b'/')
        .next();
    let names_entry = !matches!(last, None | Some(b"" | b"." | b".."));
    let canonical = match full.components().next_back() {
        Some(std::path::Component::Normal(name)) if names_entry => {
            let parent = full.parent().unwrap_or(Path::new("/"));
            let entry = std::fs::canonicalize(parent)
                .map_err(|e| CliError::io(&full, e))?
                .join(name);
            // The working directory itself, named through a symlink to it: the
            // root, which is no entry of its own.
            if !entry.starts_with(root) && resolved_whole().is_ok_and(|c| c == root) {
                root.to_path_buf()
            } else {
                entry
            }
        }
        _ => resolved_whole()?,
    };
    let rel = canonical.strip_prefix(root).map_err(|_| {
        CliError::bad_path(
            &full,
            format!("outside the working directory {}", root.display()),
        )
    })?;
    if rel.starts_with(repo::DOT_DIR) {
        return Err(CliError::bad_path(&full, "inside the repository directory"));
    }
    let path = scan::workspace_path(&canonical, rel)?;
    Ok(if path.is_empty() {
        "/".to_string()
    } else {
        path
    })
}

/// `commit [PATH...]`.
pub(super) fn commit(ctx: &Ctx, args: &CommitArgs) -> Result<()> {
    let CommitArgs {
        paths,
        message,
        branch,
        meta,
        allow_empty,
        batch_bytes,
        force,
    } = args;
    let (message, branch, allow_empty, batch_bytes) =
        (message.clone(), branch.clone(), *allow_empty, *batch_bytes);
    // The store opens on a second thread while this one reads the index, HEAD and
    // a watcher's answer and, for a per-turn commit, surveys the working directory:
    // the survey needs the index only, and what it found is used only if the tip
    // (read once the store is open) is the one the index is complete for.
    let found = repo::find_root(&ctx.cwd)?;
    // One command at a time changes the working directory (`crate::lock`).
    let _lock = crate::lock::acquire(
        &found.join(repo::DOT_DIR),
        crate::lock::Mode::Exclusive,
        "commit",
    )?;
    let opening = repo::Opening::of(&ctx.cwd, found.clone());
    let root = found;
    let dot = root.join(repo::DOT_DIR);
    let index_path = dot.join("index");
    // The user's --meta, checked now; who and when are read only for a commit that
    // is made (below: nothing-to-commit turns read no config or host name).
    let user_meta = parse_pairs(meta, "--meta")?;
    let only = if paths.is_empty() {
        None
    } else {
        let only = paths
            .iter()
            .map(|p| path_in_workdir(ctx, &root, p))
            .collect::<Result<Vec<_>>>()?;
        // A PATH named that the scan would leave out is refused: "nothing to
        // commit" would hide that it was not looked at (and a file the tip holds
        // that became ignored would be committed as removed). What is not there is
        // a removal to record.
        for (path, named) in only.iter().zip(paths).filter(|(p, _)| *p != "/") {
            match scan::unrecorded(&root, path)? {
                None | Some(crate::error::Unrecorded::Absent) => {}
                Some(why) => {
                    return Err(CliError::NotRecorded {
                        path: resolve_path(ctx, named),
                        why,
                    })
                }
            }
        }
        Some(only)
    };
    // A detached HEAD commits only with --branch: onto that branch, which a new
    // name starts at the detached commit; HEAD then follows the branch.
    let head = repo::head_at(&dot)?;
    let head_branch = match &head {
        repo::Head::Branch(b) => Some(b.clone()),
        repo::Head::Detached(_) => None,
    };
    let detached = match head {
        repo::Head::Detached(id) => Some(id),
        repo::Head::Branch(_) => None,
    };
    let branch = match (branch, head) {
        (Some(b), _) => b,
        (None, repo::Head::Branch(b)) => b,
        (None, repo::Head::Detached(commit)) => return Err(CliError::Detached { commit }),
    };
    // A watcher, if one runs (`crate::watch`), is asked before anything of the
    // directory is looked at: its token then marks a point before this command's
    // scan, and is stored with the index this commit saves. Its list of changes is
    // trusted only with an index complete for the tip (the per-turn path below).
    // The question is sent first and its answer read after the index: the daemon
    // makes and reads its cookie while this thread decodes.
    let asked = match only {
        None => crate::watch::ask(&dot, &index_path),
        Some(_) => None,
    };
    // With a watcher asked, the index is opened for a partial read (its block
    // table, the base's head and the journal: see `crate::index`) while the daemon
    // answers; a list of changed paths then reads just the entries at, above and
    // below them, and anything else the whole index.
    let opened = asked
        .as_ref()
        .and_then(|_| Index::open_part(&index_path, &root));
    let watch = asked.map(crate::watch::Asked::answer);
    if let Some(answer) = &watch {
        crate::timings::phase_with("watcher answered", || match &answer.changed {
            Some(paths) => format!("{} paths", paths.len()),
            None => "unknown".into(),
        });
    }
    let listed = watch
        .as_ref()
        .and_then(|a| a.changed.clone())
        .map(scan::minimal)
        .filter(|p| p.len() <= crate::watch::MAX_PATHS);
    let index = match (opened, &listed) {
        (Some(opened), Some(paths)) => opened
            .read(paths)
            .or_else(|| Index::load(&index_path, &root)),
        _ => Index::load(&index_path, &root),
    };
    crate::timings::phase_with("index loaded", || match &index {
        Some(ix) if ix.is_part() => format!("{} of {} entries", ix.entries.len(), ix.entry_count()),
        Some(ix) => format!("{} entries", ix.entries.len()),
        None => "none usable".into(),
    });
    // The per-turn survey (see the fast path below), taken before the tip is known
    // when the index is complete for some commit and no watcher's list may stand in
    // for it: after this command's clock probe, as the fast path would take it.
    let mut early = None;
    if let (false, None, Some(ix)) = (allow_empty, &only, &index) {
        let answered = watch.as_ref().is_some_and(|a| a.changed.is_some());
        if ix.tip.is_some() && !answered {
            let probe_ns = crate::index::fs_now(&dot)?;
            early = Some((
                probe_ns,
                scan::survey(&root, ix, &dot, crate::watch::MAX_PATHS)?,
            ));
            crate::timings::phase("survey done");
        }
    }
    let wd = opening.finish()?;
    let store: &dyn ObjectSource = wd.repo.store();
    let tip = wd.repo.branch(&branch)?.or(detached);
    if tip.is_none() {
        super::check_new_name(&branch)?;
    }
    crate::timings::phase("branch tip read");
    // The directory goes onto its own branch only from the commit it holds: where
    // another working directory (or a sync) moved the branch since, a commit of what
    // differs from the new tip would undo those commits' changes (checked once the
    // scan has found what differs: a directory that holds the tip, its stat cache
    // stale after a crash, is not behind).
    let behind = index
        .as_ref()
        .and_then(Index::base)
        .filter(|base| !*force && tip != Some(*base))
        .filter(|_| head_branch.as_deref() == Some(branch.as_str()));
    // The scan's reads (the directories holding a change, the chunk lists it compares
    // files against) share one snapshot until the commit writes.
    let shared = super::SharedReads::new(&**wd.repo.store());
    let complete_for_tip = tip.is_some() && index.as_ref().is_some_and(|ix| ix.tip == tip);
    let reported = listed.filter(|_| only.is_none() && complete_for_tip);
    // A partly read index serves a scan narrowed to the watcher's report only.
    let index = match index {
        Some(ix) if ix.is_part() && reported.is_none() => Index::load(&index_path, &root),
        other => other,
    };
    // How many paths the watcher reported, when its report was used (JSON output).
    let watched = reported.as_ref().map(Vec::len);
    let store_token = |index_path: &Path| {
        if let Some(token) = watch.as_ref().and_then(|a| a.token.as_deref()) {
            crate::watch::store_token(&wd.dot, index_path, token);
        }
    };
    // The fast path: an index complete for the tip and a walk that finds exactly
    // what it recorded (see `crate::index`), or a watcher that saw nothing change
    // since the index was saved (no walk). No tree is read.
    // Without a watcher's report the walk is a whole survey, taken after this
    // command's clock probe: what it found different narrows the scan below as a
    // watcher's report would, and the listings it took are recorded. Past
    // `MAX_PATHS` paths it stops, and the scan walks the whole tree, taking the
    // survey's stats where the index vouches for them.
    let mut probe = None;
    let mut kept = None;
    let mut surveyed: Option<(Vec<String>, HashMap<String, Listing>)> = None;
    // The files the survey saw as recorded (not walked again by the narrowed scan).
    let mut surveyed_files = 0;
    if let (false, None, Some(t), Some(ix)) = (allow_empty, &only, tip, &index) {
        if ix.tip == Some(t) {
            let found = match &reported {
                Some(paths) if paths.is_empty() => Some((ix.file_count(), Vec::new())),
                // Changes reported: the lazy scan below looks at just those.
                Some(_) => None,
                None => {
                    let (probe_ns, survey) = match early.take() {
                        Some(taken) => taken,
                        None => (
                            crate::index::fs_now(&dot)?,
                            scan::survey(&root, ix, &dot, crate::watch::MAX_PATHS)?,
                        ),
                    };
                    probe = Some(probe_ns);
                    // Taken after this command's clock probe, which the index it
                    // saves records: each stands for a stat taken now.
                    kept = survey.kept.map(crate::ahead::Kept::after_probe);
                    match survey.changed {
                        Some(changed) if changed.is_empty() => {
                            // Nothing to commit; listings that no longer held are
                            // recorded now, so that the next walk reuses them.
                            if !survey.listings.is_empty() {
                                let upserts = survey
                                    .listings
                                    .into_iter()
                                    .map(|(p, l)| (p, IndexEntry::Dir { listing: Some(l) }))
                                    .collect();
                                let delta = Delta {
                                    probe_ns,
                                    tip: Some(t),
                                    removed: Vec::new(),
                                    upserts,
                                };
                                ix.save_delta(&index_path, delta)?;
                            }
                            Some((survey.files, survey.nested))
                        }
                        Some(changed) => {
                            warn_nested(&survey.nested);
                            surveyed_files = survey.files;
                            surveyed = Some((changed, survey.listings));
                            None
                        }
                        None => None,
                    }
                }
            };
            if let Some((files, nested)) = found {
                warn_nested(&nested);
                // The walk (or the watcher) found the index true after the token's
                // point; the index file is as it was, or holds just new listings.
                if reported.is_none() {
                    store_token(&index_path);
                }
                crate::timings::phase("nothing changed (the index holds)");
                let printed = nothing_to_commit(ctx, &branch, tip, 0, 0, files, watched);
                // Not freed entry by entry: the process ends (see below).
                std::mem::forget(index);
                // Nothing was written to the store: a SQLite one is left to the
                // process's exit, whose kernel drops its locks (its read snapshot
                // included). SQLite's close would only unlink the empty WAL and the
                // shared-memory file, which the next command creates again: 0.06 ms
                // of a 2.2 ms turn. Any other store (a connection to a server, a cache
                // in front of one) is closed as usual.
                if wd.store_url.starts_with("sqlite:") {
                    std::mem::forget(shared);
                    std::mem::forget(wd);
                }
                return printed;
            }
        }
    }
    // Per-turn: an index complete for the tip vouches for every directory it
    // lists, so the tip is checked out lazily (its root directory only) and the scan
    // reads from the store just the directories holding a change; the skeleton is
    // neither read nor written. Otherwise: a shallow checkout of every tree, from the
    // skeleton first.
    let lazy_turn =
        only.is_none() && tip.is_some() && index.as_ref().is_some_and(|ix| ix.tip == tip);
    let mut index = index;
    if let (false, Some(ix)) = (lazy_turn, &mut index) {
        ix.load_skeleton(&index_path);
    }
    let empty = HashMap::new();
    let skeleton = SkeletonSource::new(index.as_ref().map_or(&empty, |ix| &ix.skeleton), store);
    let mut ws = match tip {
        Some(t) if lazy_turn => lazy(t, store)?,
        Some(t) => shallow(t, &skeleton)?,
        None => Workspace::new(),
    };
    let skeleton = skeleton.into_read();
    crate::timings::phase(if lazy_turn {
        "tip checked out (lazily)"
    } else {
        "tip checked out (shallow)"
    });
    let probe_ns = match probe {
        Some(p) => p,
        None => crate::index::fs_now(&wd.dot)?,
    };
    let pb = ctx.bar(None, "scanning");
    // Bounded memory: whenever the bytes read reach the budget, their content is
    // handed over and written (under the commit's lease), keeping only references.
    // Each batch is written on a writer thread while the next is read
    // (`super::pipelined`): two batches may be in memory, so each is half the budget.
    let mut batched = wd.repo.batched();
    let report = super::pipelined(&mut batched, batch_bytes, |batches| {
        scan::scan_batched(
            &root,
            &mut ws,
            ScanOptions {
                index: index.as_ref(),
                skip: &wd.dot,
                only: only.as_deref(),
                lazy: lazy_turn.then_some(store),
                watched: reported
                    .as_deref()
                    .or(surveyed.as_ref().map(|(paths, _)| paths.as_slice()))
                    .filter(|_| lazy_turn),
                kept: kept.as_ref(),
                listings: surveyed.as_ref().map(|(_, listings)| listings),
            },
            &pb,
            batches,
        )
    })?;
    pb.finish_and_clear();
    // After a survey the narrowed walk saw only part of the tree; the survey warned,
    // and vouched for the files outside it.
    crate::timings::phase_with("scan done", || {
        format!(
            "{} files read, {} bytes",
            report.files_read, report.bytes_read
        )
    });
    let mut report = report;
    if surveyed.is_none() {
        warn_nested(&report.nested);
    }
    report.files_skipped += surveyed_files;
    // The stat cache for the next commit: entries outside the committed paths are
    // kept from the last one; only a whole-tree scan makes it complete for `at`.
    let index_entries = |ws: &Workspace, at: Option<ObjectId>| {
        let mut next = Index::new(&root, probe_ns);
        // Two sorted runs (the kept entries, then the scan's): sorted once.
        let mut recorded = Vec::with_capacity(report.stats.len());
        if let (Some(only), Some(old)) = (&only, &index) {
            for (p, e) in &old.entries {
                if matches!(e, IndexEntry::File { .. })
                    && !only
                        .iter()
                        .any(|o| o == "/" || p == o || p.starts_with(&format!("{o}/")))
                {
                    recorded.push((p.to_string(), e.clone()));
                }
            }
        }
        let mut complete = only.is_none();
        for (path, seen) in &report.stats {
            match scan::index_entry(ws, path, seen) {
                Some(e) => recorded.push((path.clone(), e)),
                None => complete = false,
            }
        }
        next.entries = crate::index::Entries::from_unsorted(recorded);
        next.tip = at.filter(|_| complete);
        next.skeleton = skeleton.clone();
        next
    };
    // After a lazy scan the next index is the old one with the scan's changes (it
    // recorded nothing else): one journal record built from them alone; the
    // skeleton file is left as it is.
    let delta_of = |ws: &Workspace, at: Option<ObjectId>, old: &Index| {
        let mut delta = Delta {
            probe_ns,
            tip: None,
            removed: report.removed.clone(),
            upserts: Vec::new(),
        };
        let mut complete = true;
        for (path, seen) in &report.stats {
            match scan::index_entry(ws, path, seen) {
                Some(e) if old.entries.get(path) != Some(&e) => {
                    delta.upserts.push((path.clone(), e))
                }
                Some(_) => {}
                None => {
                    complete = false;
                    if old.entries.contains_key(path) {
                        delta.removed.push(path.clone());
                    }
                }
            }
        }
        delta.tip = at.filter(|_| complete);
        delta
    };
    let save = |ws: &Workspace, at: Option<ObjectId>, read: HashMap<ObjectId, Vec<u8>>| {
        match (report.partial, &index) {
            (true, Some(old)) => old.save_delta(&index_path, delta_of(ws, at, old)),
            _ => {
                let mut next = index_entries(ws, at);
                next.skeleton.extend(read);
                let saved = next.save_after(&index_path, index.as_ref());
                // Not freed entry by entry: the process ends (see below).
                std::mem::forget(next);
                saved
            }
        }
    };
    if !allow_empty || behind.is_some() {
        let unchanged = nothing_changed(&ws, tip, &report, store)?;
        if let (Some(probe), false) = (&unchanged, allow_empty) {
            save(probe, tip, HashMap::new())?;
            store_token(&index_path);
            return nothing_to_commit(
                ctx,
                &branch,
                tip,
                report.files_read,
                report.bytes_read,
                report.files_skipped,
                watched,
            );
        }
        // Behind only where the branch moved on from the commit held (below its
        // tip): not after `commit --branch OTHER`, whose commit the branch never
        // had (see `Early::behind`).
        if let (Some(base), None, Some(t)) = (behind, &unchanged, tip) {
            if SnapshotGraph::commit(base, wd.repo.store()).is_ok()
                && SnapshotGraph::is_ancestor(base, [t], wd.store())?
            {
                return Err(CliError::Behind {
                    branch,
                    base,
                    tip: t,
                });
            }
        }
    }
    // The write phase: hashing what was read (a spinner: the core reports nothing
    // while it hashes), then storing the commit's objects, a bar of their bytes fed
    // by `Repo::commit`'s progress hook (drawn on a terminal only).
    let pb = ctx.bar(None, "hashing");
    pb.set_message(format!("{} read", indicatif::HumanBytes(report.bytes_read)));
    let bar = pb.clone();
    // Who and when (the core stays clock-free: the CLI reads the clock), then the
    // user's --meta, which may override them.
    let mut meta = crate::meta::commit_meta(&wd.dot)?;
    meta.extend(user_meta);
    let options = RepoCommitOptions {
        message,
        meta,
        ..RepoCommitOptions::default()
    }
    .on_progress(move |p| {
        if p.objects_done == 0 {
            crate::progress::phase(&bar, "writing", p.bytes_total);
        }
        bar.set_position(p.bytes_done);
    });
    drop(shared);
    let committed = batched.commit(&mut ws, &branch, options);
    pb.finish_and_clear();
    let committed = committed?;
    crate::timings::phase_with("commit written", || {
        format!(
            "{} new objects, {} bytes",
            committed.objects_written, committed.bytes_written
        )
    });
    // The previous tip's trees are in the skeleton: only the new ones come from the
    // store, and they join the next skeleton, so that the next command reads none of
    // the new tip's trees from the store. The index is saved even if the diff fails
    // (the commit is made).
    let diff_source = SkeletonSource::new(&skeleton, store);
    let shared = super::SharedReads::new(&**wd.repo.store());
    let d = diff_of(committed.previous, committed.id, &diff_source);
    drop(shared);
    save(&ws, Some(committed.id), diff_source.into_read())?;
    store_token(&index_path);
    crate::timings::phase("diffed, index saved");
    let d = d?;
    if detached.is_some() {
        wd.set_head_branch(&branch)?;
    }
    let printed = ctx.print(
        json!({
            "id": committed.id.to_string(),
            "branch": branch,
            "previous": committed.previous.map(|p| p.to_string()),
            "files_read": report.files_read,
            "bytes_read": report.bytes_read,
            "files_skipped": report.files_skipped,
            "files_compared": report.files_compared,
            "files_changed": changed(&d),
            "files_added": d.files_added.len(),
            "files_modified": d.files_modified.len(),
            "files_removed": d.files_removed.len(),
            "new_objects": committed.objects_written,
            "new_bytes": committed.bytes_written,
            "watched_paths": watched,
        }),
        |w| {
            writeln!(w, "[{branch} {}] committed", committed.id)?;
            writeln!(
                w,
                "files read: {}, files changed: {} (+{} ~{} -{}), new objects: {}, new bytes: {}",
                report.files_read,
                changed(&d),
                d.files_added.len(),
                d.files_modified.len(),
                d.files_removed.len(),
                committed.objects_written,
                committed.bytes_written
            )
        },
    );
    // The process ends with the command: freeing the tree node by node costs time
    // in proportion to the whole tree (about 2 % of a one-file commit on 1,800
    // files), not to the change; so does freeing the indexes and the scan's
    // record of every entry (about 15 % of a lazy one-file commit).
    std::mem::forget(ws);
    std::mem::forget(index);
    std::mem::forget(report);
    printed
}

fn warn_nested(nested: &[PathBuf]) {
    for n in nested {
        eprintln!(
            "warning: {}: holds another repository (.snapgraph); skipped",
            crate::output::quote_path(n)
        );
    }
}

fn nothing_to_commit(
    ctx: &Ctx,
    branch: &str,
    tip: Option<ObjectId>,
    files_read: u64,
    bytes_read: u64,
    files_skipped: u64,
    watched_paths: Option<usize>,
) -> Result<()> {
    ctx.print(
        json!({
            "id": null, "branch": branch, "previous": tip.map(|t| t.to_string()),
            "nothing_to_commit": true, "files_read": files_read,
            "bytes_read": bytes_read, "files_skipped": files_skipped,
            "files_changed": 0, "watched_paths": watched_paths,
        }),
        |w| {
            writeln!(
                w,
                "nothing to commit on {branch} (use --allow-empty to commit anyway)"
            )
        },
    )
}

/// `Some(workspace with content ids)` when the scanned workspace records exactly
/// the tip's tree (an empty tree when there is no tip). Hashes only when the scan
/// re-read files of unchanged size and saw nothing else change.
fn nothing_changed(
    ws: &Workspace,
    tip: Option<ObjectId>,
    report: &scan::ScanReport,
    store: &dyn ObjectSource,
) -> Result<Option<Workspace>> {
    if report.changed {
        return Ok(None);
    }
    let Some(tip) = tip else {
        return Ok((report.entries == 0).then(|| ws.clone()));
    };
    if report.reread == 0 {
        return Ok(Some(ws.clone()));
    }
    let mut probe = ws.clone();
    let c = probe.commit(
        CommitOptions::new()
            .parent(tip)
            .have_in(store)
            .parent_source(store),
    )?;
    let objects = c.into_objects();
    let tree_of = |id: ObjectId| -> Result<ObjectId> {
        let overlay = super::Overlay {
            base: store,
            extra: objects.iter().map(|(i, b)| (*i, b.to_vec())).collect(),
        };
        Ok(SnapshotGraph::commit(id, &overlay)?.tree)
    };
    let new_tree = tree_of(probe.head().unwrap_or(tip))?;
    Ok((new_tree == SnapshotGraph::commit(tip, store)?.tree).then_some(probe))
}

/// `status`.
pub(super) fn status(ctx: &Ctx, similar: Option<u8>) -> Result<()> {
    // The store opens on its own thread while this one reads the index and looks at
    // the directory (as a commit does; see `Early`).
    let root = repo::find_root(&ctx.cwd)?;
    // Never a checkout or commit half done (`crate::lock`).
    let _lock = crate::lock::acquire(
        &root.join(repo::DOT_DIR),
        crate::lock::Mode::Shared,
        "status",
    )?;
    let opening = repo::Opening::of(&ctx.cwd, root.clone());
    let mut early = super::Early::read(&root)?;
    let wd = opening.finish()?;
    let _shared = super::SharedReads::new(&**wd.repo.store());
    // Behind its branch, the directory's own changes are those against the commit
    // it holds (the branch's new commits are not undone by it).
    let mut behind = early.behind(&wd)?;
    let super::Working {
        id,
        mut tip,
        overlay,
        report,
        ..
    } = working_commit(ctx, &wd, early)?;
    if let Some(b) = behind.filter(|b| b.holds_tip(id, &overlay).unwrap_or(false)) {
        (tip, behind) = (b.tip, None);
    }
    let d = diff_of(tip, id, &overlay)?;
    let entries = {
        let mut a = super::patch::Side::open(tip, &overlay);
        let mut b = super::patch::Side::open(Some(id), &overlay);
        let opts = super::patch::Options {
            paths: Vec::new(),
            similar,
        };
        super::patch::entries(&d, &mut a, &mut b, &opts)?
    };
    let stale = repo::stale_work(&wd.dot);
    let watcher = crate::watch::ping(&wd.dot);
    let head = wd.head()?;
    let mut value = diff_json(&d);
    value["stale"] = json!(stale);
    value["nested"] = json!(report.nested);
    value["watcher"] = match &watcher {
        Some(r) => json!({"pid": r.pid, "directories": r.dirs, "trusted": r.trusted}),
        None => json!(null),
    };
    value["behind"] = match behind {
        Some(b) => json!({"base": b.base.to_string(), "tip": b.tip.map(|t| t.to_string())}),
        None => json!(null),
    };
    value["changes"] = json!(entries
        .iter()
        .map(super::patch::entry_json)
        .collect::<Vec<_>>());
    let (on, since) = match &head {
        repo::Head::Branch(b) => {
            value["branch"] = json!(b);
            value["detached"] = json!(null);
            (format!("on branch {b}"), b.clone())
        }
        repo::Head::Detached(id) => {
            value["branch"] = json!(null);
            value["detached"] = json!(id.to_string());
            (
                format!("HEAD detached at {id} (commit needs --branch NAME)"),
                id.to_string(),
            )
        }
    };
    let head_name = since.clone();
    let since = behind.map_or(since, |b| b.base.to_string());
    ctx.print(value, |w| {
        writeln!(w, "{on}")?;
        if let Some(b) = behind {
            let tip = b.tip.map_or("nothing".to_string(), |t| t.to_string());
            writeln!(
                w,
                "behind: the branch moved to {tip} since this working directory was at {}; changes below are against that commit (`snapgraph checkout {head_name}` brings the branch here)",
                b.base
            )?;
        }
        if changed(&d) == 0 {
            writeln!(w, "nothing changed since {since}")?;
        } else {
            super::patch::print_names(w, &entries)?;
        }
        for n in &report.nested {
            writeln!(
                w,
                "nested repository (not recorded): {}",
                quote(&n.to_string_lossy())
            )?;
        }
        for s in &stale {
            writeln!(w, "{}", s.describe())?;
        }
        if let Some(r) = &watcher {
            writeln!(
                w,
                "watcher: running (pid {}, {} directories{})",
                r.pid,
                r.dirs,
                if r.trusted {
                    ""
                } else {
                    "; a watch failed, commits scan the whole tree"
                }
            )?;
        }
        Ok(())
    })
}

pub(super) fn checkout(ctx: &Ctx, args: &CheckoutArgs, move_head: bool) -> Result<()> {
    let wd = ctx.open()?;
    // In place, one command at a time changes the working directory
    // (`crate::lock`); `--to` writes elsewhere and reads the store only.
    let _lock = match args.to {
        Some(_) => None,
        None => Some(crate::lock::acquire(
            &wd.dot,
            crate::lock::Mode::Exclusive,
            "checkout",
        )?),
    };
    let id = wd.resolve(&args.rev)?;
    for p in repo::remove_stale_staging(&wd.dot) {
        eprintln!(
            "removed {}, left by a checkout that did not finish",
            p.display()
        );
    }
    // The core re-hashes every object a checkout reads: the store leaves the hash
    // to it (each object hashed once; a tampered one is still refused by id).
    let verifying = snapgraph_store::CallerVerifies(&**wd.repo.store());
    let store: &dyn ObjectSource = &verifying;
    // The trees and the files are read in one snapshot: no read transaction (a lock
    // and an unlock of the WAL's read mark, an `fstat`) per batch. Nothing below
    // writes through the store before the files are written.
    let _shared = super::SharedReads::new(&**wd.repo.store());
    // A hollow commit (retention, shallow clone) has no files to check out.
    let hollow = |e: CliError| {
        if snapgraph_store::hollow::is_hollow(wd.store(), id).unwrap_or(false) {
            CliError::Repo(snapgraph_store::RepoError::Pruned { commit: id })
        } else {
            e
        }
    };
    // The whole tree is read where the whole commit is written; a switch reads what
    // differs.
    let whole = || {
        let ws = shallow(id, store).map_err(hollow);
        crate::timings::phase("trees read (shallow checkout)");
        ws
    };
    let pb = ctx.bar(Some(0), "checkout");
    // The directory's own changes a checkout of its moved branch keeps.
    let mut carried = Vec::new();
    let (target, done) = match &args.to {
        Some(to) => {
            let to = resolve_path(ctx, to);
            match std::fs::symlink_metadata(&to) {
                Ok(m) if m.is_dir() => {
                    if std::fs::read_dir(&to).at(&to)?.next().is_some() {
                        return Err(CliError::bad_path(&to, "exists and is not empty"));
                    }
                }
                Ok(_) => return Err(CliError::bad_path(&to, "exists and is not a directory")),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(CliError::io(&to, e)),
            }
            let name = to
                .file_name()
                .and_then(|n| n.to_str())
                .ok_or_else(|| CliError::bad_path(&to, "needs a final UTF-8 name"))?;
            let parent = to.parent().unwrap_or(Path::new("."));
            let staging = parent.join(unique_name(&format!(".{name}.snapgraph-staging")));
            let ws = whole()?;
            let root_mode = ws.metadata("/")?.mode & 0o777;
            // A signal from here stops the writing and removes the staging
            // directory (`crate::interrupt`).
            crate::interrupt::arm();
            crate::interrupt::test_point("write");
            let done = materialize_or_clean(&wd, &ws, id, &staging, &pb)?;
            if let Err(e) = crate::interrupt::check(crate::interrupt::NOTHING_CHECKED_OUT) {
                let _ = std::fs::remove_dir_all(&staging);
                return Err(e);
            }
            let swap = std::fs::rename(&staging, &to).and_then(|()| {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&to, std::fs::Permissions::from_mode(root_mode))
            });
            if let Err(e) = swap {
                let _ = std::fs::remove_dir_all(&staging);
                return Err(CliError::io(&to, e));
            }
            std::mem::forget(ws);
            (to, done)
        }
        None => {
            // The tip the working directory holds, when the dirty check says so, and
            // the watcher's token it was asked for first.
            let mut clean = None;
            let mut token = None;
            if !args.force {
                // Behind its branch, the directory holds the commit its stat cache
                // is complete for: that is what it is compared with, and switched
                // from.
                let mut early = super::Early::read(&wd.root)?;
                let mut behind = early.behind(&wd)?;
                let super::Working {
                    id: wid,
                    mut tip,
                    overlay,
                    report,
                    index,
                    token: asked,
                } = working_commit(ctx, &wd, early)?;
                token = asked;
                if let Some(b) = behind.filter(|b| b.holds_tip(wid, &overlay).unwrap_or(false)) {
                    (tip, behind) = (b.tip, None);
                }
                let dirty = match tip {
                    // A directory never checked out or committed here (no stat
                    // cache) that holds nothing the scan records has nothing to
                    // lose: one just made by `init` on a store holding the branch.
                    Some(_) if index.is_none() && report.entries == 0 => false,
                    Some(t) => {
                        SnapshotGraph::commit(wid, &overlay)?.tree
                            != SnapshotGraph::commit(t, &overlay)?.tree
                    }
                    None => report.entries > 0,
                };
                // Checking out the moved branch's tip brings its commits in: the
                // directory's own changes come along where those commits do not
                // touch the same paths (git's checkout with local changes).
                if let (true, Some(b), Some(t)) = (dirty, behind, tip) {
                    if b.tip == Some(id) {
                        carried = carry(&wd, t, wid, id, &overlay)?;
                    }
                }
                if dirty && carried.is_empty() {
                    let summary = match tip {
                        Some(t) => {
                            let d = SnapshotGraph::diff(t, wid, &overlay)?;
                            if changed(&d) == 0 {
                                "directories added or removed (a directory holding only ignored files counts)".to_string()
                            } else {
                                format!(
                                    "{} added, {} modified, {} removed",
                                    d.files_added.len(),
                                    d.files_modified.len(),
                                    d.files_removed.len()
                                )
                            }
                        }
                        None => "files present and nothing committed".to_string(),
                    };
                    return Err(CliError::Dirty {
                        path: wd.root.clone(),
                        summary,
                    });
                }
                clean = tip.map(|t| (t, index));
                crate::timings::phase("dirty check done");
            }
            // A clean working directory moves by what differs (`crate::switch`),
            // unless most of the tree changes.
            // Its stat cache must hold the tip's whole tree: the entries the switch
            // leaves alone keep their recorded stats (see `index_after_switch`).
            let index_path = wd.dot.join("index");
            // The one the dirty check read serves, whole or the part a watcher's
            // report needed: the switch records what it changed as one journal
            // record, and counts the tree from the index's own totals.
            // What the dirty check saw, for the guard of a full checkout: the tip,
            // and its stat cache where it is one for that tip.
            let checked = !args.force;
            let (cached, mut seen) = match clean {
                Some((t, Some(ix))) if ix.tip == Some(t) => (Some((t, ix)), Some((t, None))),
                Some((t, _)) => (None, Some((t, None))),
                None => (None, None),
            };
            let switched = match cached {
                Some((t, ix)) => {
                    crate::timings::phase_with("index loaded", || match ix.is_part() {
                        true => format!("{} of {} entries", ix.entries.len(), ix.entry_count()),
                        false => format!("{} entries", ix.entries.len()),
                    });
                    let mut to = lazy(id, store).map_err(hollow)?;
                    let mut tip = tip_of(t, &ix);
                    tip.keeps_changes = !carried.is_empty();
                    let guard = crate::guard::Guard::new(&wd.root, Some(t), Some(&ix));
                    // A signal while the switch stages stops it (nothing changed);
                    // from its apply until HEAD and the stat cache name the commit,
                    // it waits for the end (`crate::interrupt`): half a switch would
                    // be taken for the directory's own changes.
                    crate::interrupt::arm();
                    crate::interrupt::test_point("write");
                    match crate::switch::switch(
                        &wd.root, &wd.dot, &tip, &mut to, id, store, &guard,
                    )? {
                        Some(s) => Some((s, ix, to)),
                        // The whole commit written would overwrite the changes kept.
                        None if tip.keeps_changes => {
                            return Err(CliError::Dirty {
                                path: wd.root.clone(),
                                summary: format!(
                                    "{} path(s) changed, which this checkout cannot keep: a directory it changes lacks its owner's rights",
                                    carried.len()
                                ),
                            })
                        }
                        None => {
                            seen = Some((t, Some(ix)));
                            None
                        }
                    }
                }
                None => None,
            };
            crate::timings::phase_with("switched", || match &switched {
                Some((s, ..)) => {
                    format!("{} entries put, {} removed", s.put.len(), s.removed.len())
                }
                None => "declined: the whole tree is written".into(),
            });
            // A branch by name becomes current; anything else detaches HEAD. Once
            // the stat cache names the commit (a process killed between the two
            // finds the directory behind its branch, and `status` says so).
            let set_head = || -> Result<()> {
                if move_head {
                    match wd.repo.branch(&args.rev).ok().flatten() {
                        Some(tip) if tip == id => wd.set_head_branch(&args.rev)?,
                        _ => wd.set_head_detached(id)?,
                    }
                }
                Ok(())
            };
            let done = match switched {
                Some((s, ix, to)) => {
                    let delta = index_after_switch(&wd, &ix, id, &to, &s.put, &s.removed)?;
                    ix.save_delta(&index_path, delta)?;
                    // What the watcher saw since it was asked (the switch's own
                    // writes among it) is what the next command asks it for: each
                    // entry kept was seen unchanged after that point. Not so for the
                    // directory's own changes kept, made before it was asked: the
                    // next command scans the whole directory (the token stored
                    // before no longer matches the index).
                    if let (Some(token), true) = (&token, carried.is_empty()) {
                        crate::watch::store_token(&wd.dot, &index_path, token);
                    }
                    crate::timings::phase("index saved");
                    set_head()?;
                    std::mem::forget(to);
                    s.done
                }
                None => {
                    let ws = whole()?;
                    let staging = wd.dot.join(unique_name("staging"));
                    // A signal while the staging directory is written stops the
                    // checkout there (the directory untouched); from the swap until
                    // HEAD and the stat cache name the commit, it waits for the end
                    // (`crate::interrupt`).
                    crate::interrupt::arm();
                    crate::interrupt::test_point("write");
                    let done = materialize_or_clean(&wd, &ws, id, &staging, &pb)?;
                    // The guard vouches by a stat cache whole for the tip (a part
                    // read for a watcher's report is read whole: the old tree is
                    // walked whole anyway).
                    let seen = checked.then(|| match seen {
                        Some((t, ix)) => {
                            let ix = match ix {
                                Some(ix) if !ix.is_part() => Some(ix),
                                _ => Index::load(&index_path, &wd.root),
                            };
                            (Some(t), ix)
                        }
                        None => (None, None),
                    });
                    let guard = seen
                        .as_ref()
                        .map(|(t, ix)| crate::guard::Guard::new(&wd.root, *t, ix.as_ref()));
                    // The replaced tree is checked while the index is built (each
                    // costs what the tree holds), then deleted while the index is
                    // saved and HEAD moved.
                    let r = crate::interrupt::check(crate::interrupt::NOTHING_CHECKED_OUT)
                        .and_then(|()| {
                            crate::interrupt::test_point("swap");
                            swap_checked(
                                &wd.root,
                                &wd.dot,
                                &staging,
                                args.force,
                                guard.as_ref(),
                                store,
                                || index_after_checkout(&wd, id, &done.entries),
                            )
                        });
                    crate::timings::phase("the old tree checked");
                    let _ = std::fs::remove_dir_all(&staging);
                    let (old, index) = r?;
                    // The stat cache, then HEAD, name the commit while the replaced
                    // tree is deleted (checked by the guard, or given up with
                    // `--force`): a process killed meanwhile leaves a consistent
                    // directory, the rest of that tree listed by `status` as stale.
                    // HEAD moves even where the stat cache could not be saved (the
                    // old one then names another commit: the next command reads
                    // the tree whole), and that error is reported after.
                    let publish = |index: Result<Index>| -> Result<()> {
                        let saved = index.and_then(|ix| ix.save(&wd.dot.join("index")));
                        set_head()?;
                        crate::interrupt::test_point("published");
                        saved
                    };
                    let (removed, published) = match index {
                        Some(index) => remove_tree_beside(&old, || publish(index)),
                        None => remove_tree_beside(&old, || {
                            publish(index_after_checkout(&wd, id, &done.entries))
                        }),
                    };
                    published?;
                    if let Err(e) = removed {
                        eprintln!(
                            "warning: the replaced tree in {} could not be deleted ({e}); the checkout is done, delete it by hand",
                            old.display()
                        );
                    }
                    std::mem::forget(ws);
                    done
                }
            };
            (wd.root.clone(), done)
        }
    };
    pb.finish_and_clear();
    let printed = ctx.print(
        json!({
            "id": id.to_string(),
            "to": target,
            "files": done.files,
            "dirs": done.dirs,
            "symlinks": done.symlinks,
            "bytes": done.bytes,
            "kept": carried,
        }),
        |w| {
            writeln!(
                w,
                "checked out {id} into {}: {} files, {} directories, {} symlinks, {} bytes",
                target.display(),
                done.files,
                done.dirs,
                done.symlinks,
                done.bytes
            )?;
            if !carried.is_empty() {
                writeln!(
                    w,
                    "kept this working directory's own changes to {} path(s)",
                    carried.len()
                )?;
            }
            Ok(())
        },
    );
    // The process ends with the command: the plan's tree and the list of what was
    // written are not freed entry by entry (about 1 % of a checkout of 1,800 files).
    std::mem::forget(done);
    printed
}

/// The paths the working directory changed against `base` (its commit `wid`, the
/// objects it lacks in `overlay`), which a switch from `base` to its branch's new
/// tip `id` keeps: none when it changed only directories (a switch cannot tell
/// those apart). Refused ([`CliError::Overlap`]) where a path it changed, or a
/// directory above or below it, changed between `base` and `id` too.
fn carry(
    wd: &Workdir,
    base: ObjectId,
    wid: ObjectId,
    id: ObjectId,
    overlay: &dyn ObjectSource,
) -> Result<Vec<String>> {
    let local = SnapshotGraph::diff(base, wid, overlay)?;
    let branch = SnapshotGraph::diff(base, id, overlay)?;
    let theirs: std::collections::BTreeSet<&str> = [
        &branch.files_added,
        &branch.files_modified,
        &branch.files_removed,
    ]
    .into_iter()
    .flatten()
    .map(String::as_str)
    .collect();
    let ours: Vec<String> = [local.files_added, local.files_modified, local.files_removed]
        .into_iter()
        .flatten()
        .collect();
    // `p` or a directory above it changed there, or something below it.
    let touched = |p: &str| {
        theirs.contains(p)
            || p.match_indices('/')
                .any(|(i, _)| i > 0 && theirs.contains(&p[..i]))
            || theirs
                .range(format!("{p}/").as_str()..)
                .next()
                .is_some_and(|t| t.starts_with(&format!("{p}/")))
    };
    let overlap: Vec<String> = ours.iter().filter(|p| touched(p)).cloned().collect();
    if !overlap.is_empty() {
        return Err(CliError::Overlap {
            path: wd.root.clone(),
            shown: crate::output::quote_list(&overlap),
            paths: overlap,
        });
    }
    Ok(ours)
}

/// Writes commit `id` (shallow in `ws`) into `staging`, removing it on failure.
fn materialize_or_clean(
    wd: &Workdir,
    ws: &Workspace,
    id: ObjectId,
    staging: &Path,
    pb: &indicatif::ProgressBar,
) -> Result<crate::materialize::Materialized> {
    // `load_content` re-hashes every object it reads: the store leaves it the hash.
    let source = snapgraph_store::CallerVerifies(&**wd.repo.store());
    crate::materialize::materialize(ws, &source, id, staging, pb).inspect_err(|_| {
        let _ = std::fs::remove_dir_all(staging);
    })
}

/// The top-most entries under `root` that a scan does not record (ignored, or
/// nested repositories), relative to `root`, parents before children.
fn unrecorded_entries(root: &Path, dot: &Path) -> Result<Vec<PathBuf>> {
    // Each recorded entry, and whether it is a directory (as the walk saw it: a
    // symlink to a directory is a symlink).
    let mut recorded: HashMap<PathBuf, bool> = HashMap::new();
    let dot = dot.to_path_buf();
    let walker = ignore::WalkBuilder::new(root)
        .standard_filters(false)
        .parents(false)
        .follow_links(false)
        .add_custom_ignore_filename(scan::IGNORE_FILE)
        .filter_entry(move |e| {
            let is_dir = e.file_type().is_some_and(|t| t.is_dir());
            e.path() != dot
                && !(e.depth() > 0
                    && is_dir
                    && e.path()
                        .join(repo::DOT_DIR)
                        .symlink_metadata()
                        .is_ok_and(|m| m.is_dir()))
        })
        .build();
    for entry in walker {
        let entry = entry.map_err(|e| CliError::bad_path(root, e.to_string()))?;
        if let Ok(rel) = entry.path().strip_prefix(root) {
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            recorded.insert(rel.to_path_buf(), is_dir);
        }
    }
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(dir) = stack.pop() {
        let full = root.join(&dir);
        let mut names: Vec<OsString> = std::fs::read_dir(&full)
            .at(&full)?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<std::io::Result<_>>()
            .at(&full)?;
        names.sort();
        for name in names {
            if dir.as_os_str().is_empty() && name == repo::DOT_DIR {
                continue;
            }
            let rel = dir.join(&name);
            match recorded.get(&rel) {
                None => out.push(rel),
                Some(true) => stack.push(rel),
                Some(false) => {}
            }
        }
    }
    out.sort();
    Ok(out)
}

/// What [`swap_into`] moved: checked and deleted by the caller, or undone.
struct Swapped {
    /// The directory in `.snapgraph/` holding the replaced entries.
    old: PathBuf,
    /// The names moved from the working directory into `old`, in order.
    moved_out: Vec<OsString>,
    /// The names moved from the staging directory into the working directory.
    moved_in: Vec<OsString>,
    /// Unrecorded entries kept: moved into the staging tree at the same path.
    kept: Vec<PathBuf>,
    /// Each entry moved into `old`: its `lstat` just before the move.
    tops: Vec<(OsString, FileStat)>,
    /// The workspace paths of unrecorded entries that the commit's replace (they
    /// went into `old` with their directories, to be deleted).
    expendable: HashSet<String>,
}

impl Swapped {
    /// Puts everything back as it was before the swap (`staging` gets its entries
    /// back), never over an entry made meanwhile: what cannot go back stays in
    /// `old`, which then stays too.
    fn undo(&self, root: &Path, staging: &Path) {
        for n in self.moved_in.iter().rev() {
            let _ = crate::guard::rename_new(&root.join(n), &staging.join(n));
        }
        for n in self.moved_out.iter().rev() {
            let _ = crate::guard::rename_new(&self.old.join(n), &root.join(n));
        }
        let _ = std::fs::remove_dir(&self.old);
        put_back(root, staging, &self.kept);
    }
}

/// The names in directory `dir`, sorted.
fn sorted_names(dir: &Path) -> Result<Vec<OsString>> {
    let mut names: Vec<OsString> = std::fs::read_dir(dir)
        .at(dir)?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<std::io::Result<_>>()
        .at(dir)?;
    names.sort();
    Ok(names)
}

/// `file`, `symlink` or `directory`, as an error names what a commit has.
fn kind_word(m: &std::fs::Metadata) -> &'static str {
    if m.is_dir() {
        "directory"
    } else if m.file_type().is_symlink() {
        "symlink"
    } else {
        "file"
    }
}

/// Moves the unrecorded entries `kept` (moved into `staging` at the same paths)
/// back into `root`, deepest last first.
fn put_back(root: &Path, staging: &Path, kept: &[PathBuf]) {
    for rel in kept.iter().rev() {
        let _ = crate::guard::rename_new(&staging.join(rel), &root.join(rel));
    }
}

/// Replaces the working directory's entries (but `.snapgraph/` and what the scan
/// does not record) with the staging directory's, rolling back on failure. Returns
/// what it moved: the directory in `.snapgraph/` holding the replaced entries, for
/// the caller to check ([`crate::guard`]) and delete, and how to undo the swap.
/// `index`, the dirty check's stat cache whole for the tip, finds what the scan
/// does not record by listing the recorded directories
/// ([`scan::unrecorded_in`]); an entry it records that the cache lacks was made
/// after the dirty check, and is refused before anything moves.
fn swap_into(
    root: &Path,
    dot: &Path,
    staging: &Path,
    force: bool,
    index: Option<&Index>,
) -> Result<Swapped> {
    // Entries to keep: moved into the staging tree first, at the same path.
    let mut kept: Vec<PathBuf> = Vec::new();
    let mut expendable: HashSet<String> = HashSet::new();
    let workspace_path = |rel: &Path| format!("/{}", rel.to_string_lossy());
    let unrecorded = match index {
        Some(ix) => {
            let (unrecorded, made) = scan::unrecorded_in(root, ix)?;
            if let Some(p) = made.first() {
                return Err(CliError::ChangedMeanwhile {
                    path: root.join(p.trim_start_matches('/')),
                    what: "created while the checkout ran".into(),
                });
            }
            unrecorded
        }
        None => unrecorded_entries(root, dot)?,
    };
    let mut queue: std::collections::VecDeque<PathBuf> = unrecorded.into();
    while let Some(rel) = queue.pop_front() {
        if let Ok(theirs) = std::fs::symlink_metadata(staging.join(&rel)) {
            let ours = root.join(&rel);
            if theirs.is_dir() && std::fs::symlink_metadata(&ours).is_ok_and(|m| m.is_dir()) {
                // The commit has a directory here too: what this one holds stays
                // where the commit has nothing there (as in git), each entry judged
                // as this one is. The rest goes with the directory.
                match sorted_names(&ours) {
                    Ok(names) => queue.extend(names.into_iter().map(|n| rel.join(n))),
                    Err(e) => {
                        put_back(root, staging, &kept);
                        return Err(e);
                    }
                }
                expendable.insert(workspace_path(&rel));
                continue;
            }
            // The commit has an entry here: it wins where that loses nothing (the
            // same bytes, an empty directory), or with --force.
            if !force {
                let theirs_at = staging.join(&rel);
                match crate::guard::replaced_losslessly(&ours, Theirs::Written(&theirs_at)) {
                    Ok(true) => {}
                    Ok(false) => {
                        put_back(root, staging, &kept);
                        return Err(CliError::UnrecordedInTheWay {
                            path: ours,
                            theirs: kind_word(&theirs),
                        });
                    }
                    Err(e) => {
                        put_back(root, staging, &kept);
                        return Err(e);
                    }
                }
            }
            expendable.insert(workspace_path(&rel));
            continue;
        }
        let mut blocked = None;
        let mut at = staging.to_path_buf();
        let components: Vec<_> = rel.components().collect();
        for c in &components[..components.len().saturating_sub(1)] {
            at.push(c);
            match std::fs::symlink_metadata(&at) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    blocked = Some(at.clone());
                    break;
                }
                Err(_) => {
                    if let Err(e) = std::fs::create_dir(&at) {
                        put_back(root, staging, &kept);
                        return Err(CliError::io(&at, e));
                    }
                }
            }
        }
        if let Some(b) = blocked {
            if force {
                expendable.insert(workspace_path(&rel));
                continue;
            }
            put_back(root, staging, &kept);
            let shown = b.strip_prefix(staging).unwrap_or(&b).display().to_string();
            return Err(CliError::Dirty {
                path: root.join(&rel),
                summary: format!("an ignored entry that the commit's file {shown} would replace"),
            });
        }
        match std::fs::rename(root.join(&rel), staging.join(&rel)) {
            Ok(()) => kept.push(rel),
            // Deleted since it was found (a build's temporary file): nothing to keep.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                put_back(root, staging, &kept);
                return Err(CliError::io(root.join(&rel), e));
            }
        }
    }
    let mut incoming: Vec<OsString> = Vec::new();
    for e in std::fs::read_dir(staging).at(staging)? {
        incoming.push(e.at(staging)?.file_name());
    }
    let old = dot.join(unique_name("old"));
    std::fs::create_dir(&old).at(&old)?;
    let mut sw = Swapped {
        old,
        moved_out: Vec::new(),
        moved_in: Vec::new(),
        kept,
        tops: Vec::new(),
        expendable,
    };
    let entries: Vec<_> = std::fs::read_dir(root)
        .at(root)?
        .collect::<std::io::Result<Vec<_>>>()
        .at(root)?;
    for e in entries {
        let name = e.file_name();
        if name == repo::DOT_DIR {
            continue;
        }
        // Its stat before the move (which changes its change time), for the guard.
        let moved = FileStat::lstat(&e.path())
            .and_then(|stat| std::fs::rename(e.path(), sw.old.join(&name)).map(|()| stat));
        match moved {
            Ok(stat) => sw.tops.push((name.clone(), stat)),
            Err(err) => {
                sw.undo(root, staging);
                return Err(CliError::io(e.path(), err));
            }
        }
        sw.moved_out.push(name);
    }
    for name in &incoming {
        // Never over an entry made since the working directory was emptied.
        if let Err(err) = crate::guard::rename_new(&staging.join(name), &root.join(name)) {
            sw.undo(root, staging);
            return Err(match err.kind() {
                std::io::ErrorKind::AlreadyExists => CliError::ChangedMeanwhile {
                    path: root.join(name),
                    what: "created while the checkout ran".into(),
                },
                _ => CliError::io(root.join(name), err),
            });
        }
        sw.moved_in.push(name.clone());
    }
    Ok(sw)
}

/// [`swap_into`], then the guard's check of the replaced tree (none with `--force`,
/// `guard` `None`), undoing the swap when it fails; `beside` runs on this thread
/// while a helper (off this core) walks the replaced tree, which this thread then
/// helps to walk ([`crate::guard::Guard::walk_tree_beside`]). Returns the directory
/// holding the replaced tree, for the caller to delete, and what `beside` returned
/// (`None`, not run, without a guard: the caller runs it beside the deletion).
fn swap_checked<R>(
    root: &Path,
    dot: &Path,
    staging: &Path,
    force: bool,
    guard: Option<&crate::guard::Guard<'_>>,
    source: &dyn ObjectSource,
    beside: impl FnOnce() -> R,
) -> Result<(PathBuf, Option<R>)> {
    let sw = swap_into(
        root,
        dot,
        staging,
        force,
        guard.and_then(|g| g.whole_index()),
    )?;
    crate::timings::phase("swapped");
    let Some(guard) = guard else {
        // Nothing to check: the caller deletes the tree beside its work.
        return Ok((sw.old, None));
    };
    let (walked, out) = guard.walk_tree_beside(&sw.old, &sw.tops, &sw.expendable, beside);
    match walked.and_then(|doubts| guard.settle(doubts, source)) {
        Ok(()) => Ok((sw.old, Some(out))),
        Err(e) => {
            sw.undo(root, staging);
            Err(e)
        }
    }
}

/// The tip `id` as the stat cache `ix` (complete for it, whole or in part) counts
/// its tree.
fn tip_of(id: ObjectId, ix: &Index) -> crate::switch::Tip {
    crate::switch::Tip {
        id,
        files: ix.file_count(),
        entries: ix.entry_count() as u64,
        keeps_changes: false,
    }
}

/// What the stat cache `ix` (complete for the tip, whole or the part a watcher's
/// report needed: the working directory's before a [`crate::switch::switch`], or
/// before a `restore` from the tip) records anew after the switch to commit `id`
/// (its lazy checkout `to`, loaded where the switch wrote) put the entries `put`
/// and removed `removed`: the entries put recorded
/// anew (a file with the target's digest; a mode the scan would record otherwise
/// leaves the index incomplete, as after a full checkout), those removed dropped,
/// their directories' listings forgotten, and every other entry as it was. Saved
/// as a journal record ([`Index::save_delta`]), it costs what the switch changed.
///
/// The clock probe: a whole index takes a new one now, after the switch wrote and
/// before the stats of what it put are taken, as a full checkout does
/// ([`super::index_after_checkout`]): what was written is then trusted by the next
/// command, unless written in the probe's own tick. An entry kept that was racy
/// under the old probe must stay racy under the new one: it is recorded smudged
/// ([`FileStat::smudged`]: read again, its digest kept), and a directory's listing
/// taken in that tick is forgotten. A part of the index (a watcher's report) cannot
/// find every such entry, so it keeps the old probe: what was written now is newer
/// than it, and the next scan reads it again.
pub(super) fn index_after_switch(
    wd: &Workdir,
    ix: &Index,
    id: ObjectId,
    to: &Workspace,
    put: &[(String, EntryKind)],
    removed: &[String],
) -> Result<crate::index::Delta> {
    let probe_ns = match ix.is_part() {
        true => ix.probe_ns,
        false => crate::index::fs_now(&wd.dot)?,
    };
    let mut complete = true;
    let gone = removed;
    let mut removed: Vec<String> = gone.to_vec();
    let mut upserts: Vec<(String, IndexEntry)> = Vec::with_capacity(put.len());
    let mut parents: Vec<&str> = gone.iter().map(|p| crate::scan::parent_of(p)).collect();
    for (p, kind) in put {
        parents.push(crate::scan::parent_of(p));
        let full = wd.root.join(p.trim_start_matches('/'));
        let entry = match kind {
            EntryKind::Dir => Some(IndexEntry::Dir { listing: None }),
            EntryKind::File => {
                let mode = to.metadata(p).map_or(0, |m| m.mode);
                let digest = crate::index::digest_of(to, p)
                    .filter(|_| crate::index::file_mode(mode) == mode);
                match (digest, FileStat::lstat(&full)) {
                    (Some(digest), Ok(stat)) => Some(IndexEntry::File { stat, digest }),
                    _ => None,
                }
            }
            EntryKind::Symlink => FileStat::lstat(&full)
                .ok()
                .map(|stat| IndexEntry::Symlink { stat }),
        };
        match entry {
            Some(e) => upserts.push((p.clone(), e)),
            None => {
                removed.push(p.clone());
                complete = false;
            }
        }
    }
    // Each directory's listing forgotten once, where it stays (an upsert of a path
    // removed would win over its removal) and was not put anew.
    let mut forgotten: HashSet<&str> = put
        .iter()
        .map(|(p, _)| p.as_str())
        .chain(gone.iter().map(String::as_str))
        .collect();
    // Each parent is a directory of the tip (or one put, or one removed): the index,
    // complete for the tip, records it (whether this command read it or not).
    for d in parents {
        if d != "/" && forgotten.insert(d) {
            upserts.push((d.to_string(), IndexEntry::Dir { listing: None }));
        }
    }
    if probe_ns != ix.probe_ns {
        let racy = |stat: &FileStat| stat.mtime_ns >= ix.probe_ns;
        for (p, e) in ix.entries.iter() {
            let kept = match e {
                IndexEntry::File { stat, digest } if racy(stat) => IndexEntry::File {
                    stat: stat.smudged(),
                    digest: digest.clone(),
                },
                IndexEntry::Symlink { stat } if racy(stat) => IndexEntry::Symlink {
                    stat: stat.smudged(),
                },
                IndexEntry::Dir { listing: Some(l) } if racy(&l.stat) => {
                    IndexEntry::Dir { listing: None }
                }
                _ => continue,
            };
            if !forgotten.contains(p) {
                upserts.push((p.to_string(), kept));
            }
        }
    }
    Ok(crate::index::Delta {
        probe_ns,
        tip: Some(id).filter(|_| complete),
        removed,
        upserts,
    })
}

/// Deletes the directory `dir` and everything in it on this thread and a helper
/// (off this core, `crate::cpus`), running `first` on this thread before it joins
/// in; returns the deletion's outcome and `first`'s. The work is shared by entries:
/// those of `dir`, or a level deeper when it holds few (a tree under one
/// directory), each taken by whichever thread is free.
fn remove_tree_beside<R>(dir: &Path, first: impl FnOnce() -> R) -> (std::io::Result<()>, R) {
    let listed = |d: &Path| -> std::io::Result<Vec<(PathBuf, bool)>> {
        std::fs::read_dir(d)?
            .map(|e| {
                let e = e?;
                Ok((e.path(), e.file_type()?.is_dir()))
            })
            .collect()
    };
    let mut units = match listed(dir) {
        Ok(u) => u,
        Err(e) => return (Err(e), first()),
    };
    // Directories emptied a level down, removed once their entries are.
    let mut emptied = Vec::new();
    if units.len() < 8 {
        let mut deeper = Vec::new();
        for (p, is_dir) in units {
            if is_dir {
                match listed(&p) {
                    Ok(inner) => deeper.extend(inner),
                    Err(e) => return (Err(e), first()),
                }
                emptied.push(p);
            } else {
                deeper.push((p, false));
            }
        }
        units = deeper;
    }
    let next = AtomicUsize::new(0);
    let remove_some = || -> std::io::Result<()> {
        while let Some((p, is_dir)) = units.get(next.fetch_add(1, Ordering::Relaxed)) {
            if *is_dir {
                std::fs::remove_dir_all(p)?;
            } else {
                std::fs::remove_file(p)?;
            }
        }
        Ok(())
    };
    let (mine, theirs, out) = std::thread::scope(|s| {
        let beside = crate::cpus::Beside::here();
        let helper = s.spawn(move || {
            beside.leave();
            remove_some()
        });
        beside.yield_to();
        let out = first();
        let mine = remove_some();
        let theirs = helper
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("a deleting thread panicked")));
        (mine, theirs, out)
    });
    let done = mine.and(theirs).and_then(|()| {
        for d in &emptied {
            std::fs::remove_dir(d)?;
        }
        std::fs::remove_dir(dir)
    });
    (done, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full checkout's swap, checked: a file edited after the dirty check (while
    /// the commit was being written) undoes the swap, the edit in place and the
    /// staged tree whole; without the edit the swap goes through.
    #[test]
    fn an_edit_made_during_a_full_checkout_undoes_its_swap() {
        for edit in [true, false] {
            let h = crate::guard::tests::held();
            let staging = h.dot.join("staging");
            std::fs::create_dir_all(staging.join("dir")).unwrap();
            std::fs::write(staging.join("dir/new.txt"), b"target").unwrap();
            if edit {
                std::fs::write(h.root.join("dir/small"), b"mine").unwrap();
            }
            let guard = crate::guard::Guard::new(&h.root, Some(h.tip), Some(&h.index));
            let source = snapgraph_store::CallerVerifies(&h.store);
            let r = swap_checked(
                &h.root,
                &h.dot,
                &staging,
                false,
                Some(&guard),
                &source,
                || 7,
            );
            match (edit, r) {
                (true, Err(CliError::ChangedMeanwhile { path, .. })) => {
                    assert_eq!(path, h.root.join("dir/small"));
                    assert_eq!(std::fs::read(h.root.join("dir/small")).unwrap(), b"mine");
                    assert_eq!(std::fs::read(h.root.join("top.txt")).unwrap(), b"top");
                    assert!(!h.root.join("dir/new.txt").exists());
                    let staged = std::fs::read(staging.join("dir/new.txt")).unwrap();
                    assert_eq!(staged, b"target");
                    let left: Vec<_> = std::fs::read_dir(&h.dot)
                        .unwrap()
                        .map(|e| e.unwrap().file_name())
                        .collect();
                    assert_eq!(left, ["staging"]);
                }
                (false, Ok((old, Some(7)))) => {
                    let new = std::fs::read(h.root.join("dir/new.txt")).unwrap();
                    assert_eq!(new, b"target");
                    assert!(!h.root.join("top.txt").exists());
                    assert_eq!(std::fs::read(old.join("top.txt")).unwrap(), b"top");
                }
                (_, other) => panic!("edit {edit}: {other:?}"),
            }
        }
    }

    /// The whole tree goes, on both threads, whatever its shape; `first` runs once
    /// and its result comes back; a symlink is removed, never followed.
    #[test]
    fn a_replaced_tree_is_deleted_and_symlinks_are_not_followed() {
        let t = tempfile::tempdir().unwrap();
        let outside = t.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("keep.txt"), b"keep").unwrap();
        // One top-level directory (the work is shared a level down), and many.
        for (name, tops) in [("one", 1), ("many", 12)] {
            let dir = t.path().join(name);
            for i in 0..tops {
                let sub = dir.join(format!("d{i}/e/f"));
                std::fs::create_dir_all(&sub).unwrap();
                for j in 0..5 {
                    std::fs::write(sub.join(format!("x{j}")), b"x").unwrap();
                }
                std::fs::write(dir.join(format!("d{i}/top.txt")), b"t").unwrap();
                std::os::unix::fs::symlink(&outside, dir.join(format!("d{i}/link"))).unwrap();
            }
            std::os::unix::fs::symlink(&outside, dir.join("link")).unwrap();
            std::fs::write(dir.join("file.txt"), b"f").unwrap();
            let mut calls = 0;
            let (removed, out) = remove_tree_beside(&dir, || {
                calls += 1;
                42
            });
            removed.unwrap();
            assert_eq!((calls, out), (1, 42));
            assert!(!dir.exists(), "{name} left");
            assert_eq!(std::fs::read(outside.join("keep.txt")).unwrap(), b"keep");
        }
        // A directory that cannot be listed: the error comes back, `first` still ran.
        let (removed, out) = remove_tree_beside(&t.path().join("absent"), || 7);
        assert_eq!(removed.unwrap_err().kind(), std::io::ErrorKind::NotFound);
        assert_eq!(out, 7);
    }
}
