//! `log`, `show`, `diff`, `ls`, `cat`: reading history. Names and commit text are
//! quoted in text output ([`crate::output`]).

use std::io::Write;

use serde_json::{json, Value};
use snapgraph::{EntryKind, ObjectId, ObjectSource, SnapshotGraph};

use super::{checked_out_at, diff_of, patch, working_commit, Below, Ctx};
use crate::cli::DiffFormat;
use crate::error::{CliError, Result};
use crate::output::{quote, sanitize};

/// Prints a commit message indented by four spaces, line by line.
pub(super) fn print_message(w: &mut dyn Write, message: &str) -> std::io::Result<()> {
    for line in sanitize(message).lines() {
        writeln!(w, "    {line}")?;
    }
    Ok(())
}

/// The first line of a commit's message.
fn subject(c: &snapgraph::CommitObject) -> String {
    c.meta
        .get(snapgraph_store::repo::MESSAGE_KEY)
        .and_then(|m| m.lines().next())
        .unwrap_or("")
        .to_string()
}

pub(super) fn log(
    ctx: &Ctx,
    rev: Option<&str>,
    limit: usize,
    oneline: bool,
    paths: &[String],
) -> Result<()> {
    let wd = ctx.open()?;
    let id = wd.resolve(rev.unwrap_or("HEAD"))?;
    let store: &dyn ObjectSource = wd.repo.store();
    let entries = if paths.is_empty() {
        wd.repo.log(&id.to_string(), limit)?
    } else {
        // Commits whose change from their first parent touches a path (a root
        // commit: that holds one).
        let limits = super::history_paths(ctx, &wd.root, paths)?;
        let mut out = Vec::new();
        for r in SnapshotGraph::ancestors(id, store) {
            if out.len() >= limit {
                break;
            }
            let (cid, c) = r?;
            let d = diff_of(c.parents.first().copied(), cid, store)?;
            let touches = d
                .files_added
                .iter()
                .chain(&d.files_modified)
                .chain(&d.files_removed)
                .any(|p| patch::within(p, &limits));
            if touches {
                out.push((cid, c));
            }
        }
        out
    };
    let value: Vec<Value> = entries
        .iter()
        .map(|(id, c)| {
            json!({
                "id": id.to_string(),
                "parents": c.parents.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "generation": c.generation,
                "subject": subject(c),
                "author": c.meta.get(crate::meta::AUTHOR),
                "time": c.meta.get(crate::meta::TIME),
                "meta": c.meta,
            })
        })
        .collect();
    ctx.print(Value::Array(value), |w| {
        for (id, c) in &entries {
            if oneline {
                writeln!(w, "{} {}", &id.to_hex()[..12], sanitize(&subject(c)))?;
                continue;
            }
            writeln!(w, "commit {id}")?;
            if c.parents.len() > 1 {
                let ps: Vec<String> = c.parents.iter().map(ToString::to_string).collect();
                writeln!(w, "merge: {}", ps.join(" "))?;
            }
            if let Some(a) = c.meta.get(crate::meta::AUTHOR) {
                writeln!(w, "Author: {}", quote(a))?;
            }
            if let Some(t) = c.meta.get(crate::meta::TIME) {
                writeln!(w, "Date:   {}", quote(t))?;
            }
            for (k, v) in &c.meta {
                if !["message", crate::meta::AUTHOR, crate::meta::TIME].contains(&k.as_str()) {
                    writeln!(w, "{}: {}", quote(k), quote(v))?;
                }
            }
            writeln!(w)?;
            print_message(w, c.meta.get("message").map_or("", String::as_str))?;
            writeln!(w)?;
        }
        Ok(())
    })
}

pub(super) fn show(ctx: &Ctx, rev: &str, format: &DiffFormat) -> Result<()> {
    let wd = ctx.open()?;
    let id = wd.resolve(rev)?;
    let store: &dyn ObjectSource = wd.repo.store();
    let c = SnapshotGraph::commit(id, store)?;
    let parent = c.parents.first().copied();
    let d = diff_of(parent, id, store)?;
    let mut a = patch::Side::open(parent, store);
    let mut b = patch::Side::open(Some(id), store);
    let (changes, text, _) = patch::render(&d, &mut a, &mut b, format, &[])?;
    ctx.print(
        json!({
            "id": id.to_string(),
            "tree": c.tree.to_string(),
            "parents": c.parents.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "generation": c.generation,
            "meta": c.meta,
            "diff": changes,
        }),
        |w| {
            writeln!(w, "commit {id}")?;
            writeln!(w, "tree {}", c.tree)?;
            for p in &c.parents {
                writeln!(w, "parent {p}")?;
            }
            writeln!(w, "generation {}", c.generation)?;
            for (k, v) in &c.meta {
                if k == "message" {
                    writeln!(w, "message:")?;
                    print_message(w, v)?;
                } else {
                    writeln!(w, "{}: {}", quote(k), quote(v))?;
                }
            }
            writeln!(w)?;
            w.write_all(text.as_bytes())
        },
    )
}

pub(super) fn diff(
    ctx: &Ctx,
    a: Option<&str>,
    b: Option<&str>,
    format: &DiffFormat,
    exit_code: bool,
    paths: &[String],
) -> Result<()> {
    let wd = ctx.open()?;
    let limits = super::history_paths(ctx, &wd.root, paths)?;
    let a = wd.resolve(a.unwrap_or("HEAD"))?;
    let store: &dyn ObjectSource = wd.repo.store();
    let working;
    let (b, b_source): (ObjectId, &dyn ObjectSource) = match b {
        Some(b) => (wd.resolve(b)?, store),
        None => {
            // Never a checkout or commit half done (`crate::lock`).
            let _lock = crate::lock::acquire(&wd.dot, crate::lock::Mode::Shared, "diff")?;
            let w = working_commit(ctx, &wd, super::Early::read(&wd.root)?)?;
            working = w.overlay;
            (w.id, &working)
        }
    };
    let d = SnapshotGraph::diff(a, b, b_source)?;
    let mut sa = patch::Side::open(Some(a), store);
    let mut sb = patch::Side::open(Some(b), b_source);
    let (value, text, n) = patch::render(&d, &mut sa, &mut sb, format, &limits)?;
    ctx.print(value, |w| w.write_all(text.as_bytes()))?;
    if exit_code && n > 0 {
        return Err(CliError::Differences { count: n });
    }
    Ok(())
}

fn entry_json(name: &str, m: &snapgraph::Metadata, target: Option<&str>) -> Value {
    let kind = match m.kind {
        EntryKind::File => "file",
        EntryKind::Dir => "dir",
        EntryKind::Symlink => "symlink",
    };
    json!({"name": name, "kind": kind, "mode": format!("{:04o}", m.mode), "size": m.size, "target": target})
}

/// `REV:PATH` resolved as git does: PATH from the root, unless it starts with
/// `./` or `../` (or is `.` or `..`): then from the current directory.
fn rev_path(
    ctx: &Ctx,
    wd: &crate::repo::Workdir,
    spec: &str,
    need_path: bool,
) -> Result<(ObjectId, String)> {
    let (id, path) = wd.resolve_path(spec, need_path)?;
    let given = &path[1..];
    if [".", ".."].contains(&given) || given.starts_with("./") || given.starts_with("../") {
        let path = super::history_paths(ctx, &wd.root, &[given.to_string()])?;
        return Ok((id, path.into_iter().next().unwrap_or_else(|| "/".into())));
    }
    Ok((id, path))
}

pub(super) fn ls(ctx: &Ctx, spec: &str, recursive: bool) -> Result<()> {
    let wd = ctx.open()?;
    let (id, path) = rev_path(ctx, &wd, spec, false)?;
    let below = if recursive {
        Below::All
    } else {
        Below::Children
    };
    let ws = checked_out_at(id, wd.repo.store(), &[&path], below)?;
    let meta = ws.metadata(&path).map_err(|_| CliError::NotInCommit {
        commit: id,
        path: path.clone(),
    })?;
    let mut rows: Vec<(String, snapgraph::Metadata)> = Vec::new();
    if meta.kind != EntryKind::Dir {
        rows.push((path.trim_start_matches('/').to_string(), meta.clone()));
    } else if recursive {
        let prefix = if path == "/" {
            "/".to_string()
        } else {
            format!("{path}/")
        };
        for (p, m) in ws.walk() {
            if let Some(rest) = p.strip_prefix(&prefix) {
                rows.push((rest.to_string(), m));
            }
        }
    } else {
        for e in ws.list(&path)? {
            rows.push((e.name, e.metadata));
        }
    }
    let full = |name: &str| {
        if meta.kind != EntryKind::Dir {
            path.clone()
        } else if path == "/" {
            format!("/{name}")
        } else {
            format!("{path}/{name}")
        }
    };
    let targets: Vec<Option<String>> = rows
        .iter()
        .map(|(n, m)| {
            (m.kind == EntryKind::Symlink)
                .then(|| ws.read_link(&full(n)).ok().map(str::to_string))
                .flatten()
        })
        .collect();
    let value: Vec<Value> = rows
        .iter()
        .zip(&targets)
        .map(|((n, m), t)| entry_json(n, m, t.as_deref()))
        .collect();
    ctx.print(Value::Array(value), |w| {
        for ((n, m), t) in rows.iter().zip(&targets) {
            let kind = match m.kind {
                EntryKind::File => "file",
                EntryKind::Dir => "dir",
                EntryKind::Symlink => "link",
            };
            let suffix = t
                .as_ref()
                .map(|t| format!(" -> {}", quote(t)))
                .unwrap_or_default();
            writeln!(
                w,
                "{:04o} {kind:4} {:>12} {}{suffix}",
                m.mode,
                m.size,
                quote(n)
            )?;
        }
        Ok(())
    })
}

pub(super) fn cat(ctx: &Ctx, spec: &str) -> Result<()> {
    let wd = ctx.open()?;
    let (id, path) = rev_path(ctx, &wd, spec, true)?;
    let store: &dyn ObjectSource = wd.repo.store();
    let ws = checked_out_at(id, store, &[&path], Below::Nothing)?;
    match ws.metadata(&path) {
        Ok(m) if m.kind == EntryKind::File => {}
        Ok(m) if m.kind == EntryKind::Symlink => {
            return Err(CliError::Usage(format!(
                "{path} in commit {id} is a symlink to {}",
                ws.read_link(&path)?
            )))
        }
        Ok(_) => {
            return Err(CliError::Usage(format!(
                "{path} in commit {id} is a directory (use ls)"
            )))
        }
        Err(_) => return Err(CliError::NotInCommit { commit: id, path }),
    }
    // Streamed a window of chunks at a time, each verified before it is written: a
    // file of any size in bounded memory. A chunk that is missing or damaged ends the
    // output there with an error naming it, so what was written is always a prefix of
    // the file's true bytes.
    let pieces = ws.content_pieces(&path, store)?;
    let mut failed = None;
    crate::output::with_stdout(|w| {
        for piece in pieces {
            match piece {
                Ok(bytes) => w.write_all(&bytes)?,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        Ok(())
    })?;
    match failed {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}
