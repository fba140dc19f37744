//! What `diff`, `show` and `status` print about changed files: name lists with
//! renames, `--name-status`, `--stat` and unified patches (`-p`).
//!
//! Renames: a removed and an added file with the same content (the same content
//! id, or the same inline bytes, and the same kind) are one rename `R old -> new`,
//! found from the trees alone (content ids make it free). With `-M`, the removed and
//! added files left over are also paired when their lines are at least the
//! threshold similar (`similar`'s ratio), best pair first; only files up to
//! [`SIMILAR_MAX_BYTES`] and at most [`SIMILAR_MAX_PAIRS`] pairs are compared (git
//! has a like limit), so `-M` costs at most that.
//!
//! Patches are git's extended unified format (`diff --git a/P b/P`, mode and
//! rename headers, 3 lines of context), so `git apply` takes them. Content with a
//! NUL byte in its first 8000 bytes is binary (git's rule): "Binary files ...
//! differ". So is a file over [`TEXT_DIFF_MAX_BYTES`] (16 MiB; git's
//! `core.bigFileThreshold` does the same at 512 MiB), whose bytes are then never
//! read: a patch of a commit holds at most two files' bytes at a time, each read a
//! window of chunks at a time.

use std::collections::HashMap;
use std::io::Write;

use serde_json::{json, Value};
use snapgraph::graph::diff::{Change, ChangeEntry, ChangeKind};
use snapgraph::{Diff, EntryKind, ObjectId, ObjectSource, Workspace};

use super::lazy;
use crate::error::Result;
use crate::output::quote;

/// Largest file `-M` compares by content.
pub const SIMILAR_MAX_BYTES: u64 = 1 << 20;
/// Most removed x added pairs `-M` compares.
pub const SIMILAR_MAX_PAIRS: usize = 10_000;
/// Largest file diffed line by line (`-p`, `--stat`); a larger one is reported as
/// binary without being read. Two of them and the line diff's tables stay well
/// within the CLI's 256 MiB memory budget. It is the size past which a commit
/// streams a file in ([`crate::batches::STREAM_MIN`]): the working directory's side
/// of a diff holds no bytes of such a file ([`crate::batches::Hashed`]).
pub const TEXT_DIFF_MAX_BYTES: u64 = crate::batches::STREAM_MIN;

/// One side of a diff: a commit's trees, read only where something needs them
/// (inline content, patches, `-M`): the root first, then the directories on the way
/// to each path asked about, so that a diff costs the directories it shows, not the
/// tree. File bytes are fetched on demand.
pub(super) struct Side<'a> {
    id: Option<ObjectId>,
    ws: Option<Workspace>,
    source: &'a dyn ObjectSource,
}

impl<'a> Side<'a> {
    /// Commit `id` (or nothing) over `source`; nothing is read yet.
    pub(super) fn open(id: Option<ObjectId>, source: &'a dyn ObjectSource) -> Self {
        Self {
            id,
            ws: None,
            source,
        }
    }

    /// The side's workspace with the directories on the way to `path` read (`None`
    /// for no commit). A path the commit does not hold is read as far as it goes.
    fn at(&mut self, path: &str) -> Result<Option<&mut Workspace>> {
        if self.ws.is_none() {
            if let Some(id) = self.id {
                self.ws = Some(lazy(id, self.source)?);
            }
        }
        let source = self.source;
        match self.ws.as_mut() {
            Some(ws) => {
                ws.load_dir(crate::scan::parent_of(path), source)?;
                Ok(Some(ws))
            }
            None => Ok(None),
        }
    }

    fn meta(&mut self, path: &str) -> Result<Option<snapgraph::Metadata>> {
        Ok(self.at(path)?.and_then(|ws| ws.metadata(path).ok()))
    }

    /// What makes content equal without reading it: kind, size and content id
    /// (from the diff), else the inline bytes or a symlink's target.
    fn key(
        &mut self,
        path: &str,
        entry: Option<&ChangeEntry>,
    ) -> Result<Option<(EntryKind, u64, String)>> {
        if let Some(ChangeEntry {
            kind: EntryKind::File,
            size,
            id: Some(id),
            ..
        }) = entry
        {
            return Ok(Some((EntryKind::File, *size, format!("c:{id}"))));
        }
        let Some(ws) = self.at(path)? else {
            return Ok(None);
        };
        let Ok(m) = ws.metadata(path) else {
            return Ok(None);
        };
        let k = match m.kind {
            EntryKind::Symlink => ws.read_link(path)?.to_string(),
            EntryKind::File => match crate::index::digest_of(ws, path) {
                Some(crate::index::Digest::Chunk(id) | crate::index::Digest::Manifest(id)) => {
                    format!("c:{id}")
                }
                Some(crate::index::Digest::Inline(bytes)) => format!("i:{}", hex::encode(bytes)),
                None => return Ok(None),
            },
            EntryKind::Dir => return Ok(None),
        };
        Ok(Some((m.kind, m.size, k)))
    }

    /// The file's bytes (a symlink's target); empty when absent; `None` for a file
    /// over [`TEXT_DIFF_MAX_BYTES`], which is not read. The bytes are read a window
    /// of chunks at a time (each verified) into the one buffer returned: the side's
    /// workspace does not keep them, so a diff of many files holds one at a time.
    pub(super) fn bytes(&mut self, path: &str) -> Result<Option<Vec<u8>>> {
        let source = self.source;
        let Some(ws) = self.at(path)? else {
            return Ok(Some(Vec::new()));
        };
        match ws.metadata(path) {
            Ok(m) if m.kind == EntryKind::Symlink => {
                Ok(Some(ws.read_link(path)?.as_bytes().to_vec()))
            }
            Ok(m) if m.kind == EntryKind::File => {
                if m.size > TEXT_DIFF_MAX_BYTES {
                    return Ok(None);
                }
                let mut out = Vec::with_capacity(m.size as usize);
                for piece in ws.content_pieces(path, source)? {
                    out.extend_from_slice(&piece?);
                }
                Ok(Some(out))
            }
            _ => Ok(Some(Vec::new())),
        }
    }
}

/// One changed path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    /// `A`, `M`, `D`, `R` or `T` (file <-> symlink).
    pub status: char,
    /// The path (the new one for a rename), absolute.
    pub path: String,
    /// The old path of a rename.
    pub from: Option<String>,
    /// Similarity of a rename, in percent.
    pub score: u8,
}

/// How to list changes.
#[derive(Debug, Clone, Default)]
pub(super) struct Options {
    /// Only paths equal to or below these (absolute workspace paths).
    pub paths: Vec<String>,
    /// `-M`: pair similar files at or above this many percent.
    pub similar: Option<u8>,
}

/// Whether `path` is one of `limits` or below one (no limits: everything).
pub(super) fn within(path: &str, limits: &[String]) -> bool {
    limits.is_empty()
        || limits
            .iter()
            .any(|l| l == "/" || path == l || path.starts_with(&format!("{l}/")))
}

/// The changes of `d` (from side `a` to side `b`), renames paired, sorted by path.
pub(super) fn entries(
    d: &Diff,
    a: &mut Side<'_>,
    b: &mut Side<'_>,
    opts: &Options,
) -> Result<Vec<Entry>> {
    let keep = |p: &String| within(p, &opts.paths);
    let by_path: HashMap<&str, &Change> = d.changes.iter().map(|c| (c.path.as_str(), c)).collect();
    let mut out: Vec<Entry> = Vec::new();
    for p in d.files_modified.iter().filter(|p| keep(p)) {
        let typed = by_path
            .get(p.as_str())
            .is_some_and(|c| c.kind == ChangeKind::TypeChanged);
        out.push(Entry {
            status: if typed { 'T' } else { 'M' },
            path: p.clone(),
            from: None,
            score: 0,
        });
    }
    let mut removed: Vec<&String> = d.files_removed.iter().filter(|p| keep(p)).collect();
    let added: Vec<&String> = d.files_added.iter().filter(|p| keep(p)).collect();
    // Exact renames by content key (no tree is read unless content is inline).
    let mut by_key: HashMap<(EntryKind, u64, String), Vec<&String>> = HashMap::new();
    if !added.is_empty() {
        for p in &removed {
            let entry = by_path.get(p.as_str()).and_then(|c| c.old.as_ref());
            if let Some(k) = a.key(p, entry)? {
                by_key.entry(k).or_default().push(p);
            }
        }
    }
    let mut paired_old = std::collections::HashSet::new();
    let mut unpaired = Vec::new();
    for p in added {
        let entry = by_path.get(p.as_str()).and_then(|c| c.new.as_ref());
        let k = if by_key.is_empty() {
            None
        } else {
            b.key(p, entry)?
        };
        let old = k
            .and_then(|k| by_key.get_mut(&k))
            .and_then(|v| (!v.is_empty()).then(|| v.remove(0)));
        match old {
            Some(old) => {
                paired_old.insert(old.clone());
                out.push(Entry {
                    status: 'R',
                    path: p.clone(),
                    from: Some(old.clone()),
                    score: 100,
                });
            }
            None => unpaired.push(p),
        }
    }
    let mut added = unpaired;
    removed.retain(|p| !paired_old.contains(*p));
    if let Some(threshold) = opts.similar {
        similar_renames(&mut removed, &mut added, a, b, threshold, &mut out)?;
    }
    out.extend(removed.into_iter().map(|p| Entry {
        status: 'D',
        path: p.clone(),
        from: None,
        score: 0,
    }));
    out.extend(added.into_iter().map(|p| Entry {
        status: 'A',
        path: p.clone(),
        from: None,
        score: 0,
    }));
    out.sort_by(|x, y| x.path.cmp(&y.path).then(x.from.cmp(&y.from)));
    Ok(out)
}

fn small(s: &mut Side<'_>, p: &str) -> Result<bool> {
    Ok(s.meta(p)?
        .is_some_and(|m| m.kind == EntryKind::File && m.size <= SIMILAR_MAX_BYTES))
}

fn similar_renames(
    removed: &mut Vec<&String>,
    added: &mut Vec<&String>,
    a: &mut Side<'_>,
    b: &mut Side<'_>,
    threshold: u8,
    out: &mut Vec<Entry>,
) -> Result<()> {
    let mut olds: Vec<String> = Vec::new();
    for p in removed.iter() {
        if small(a, p)? {
            olds.push((*p).clone());
        }
    }
    let mut news: Vec<String> = Vec::new();
    for p in added.iter() {
        if small(b, p)? {
            news.push((*p).clone());
        }
    }
    if olds.is_empty() || news.is_empty() || olds.len() * news.len() > SIMILAR_MAX_PAIRS {
        return Ok(());
    }
    // Both lists hold files of at most `SIMILAR_MAX_BYTES`, under the text limit.
    let text = |v: Option<Vec<u8>>| String::from_utf8_lossy(&v.unwrap_or_default()).into_owned();
    let old_bytes: Vec<String> = olds
        .iter()
        .map(|p| a.bytes(p).map(text))
        .collect::<Result<_>>()?;
    let new_bytes: Vec<String> = news
        .iter()
        .map(|p| b.bytes(p).map(text))
        .collect::<Result<_>>()?;
    let mut scored = Vec::new();
    for (i, ob) in old_bytes.iter().enumerate() {
        for (j, nb) in new_bytes.iter().enumerate() {
            let ratio = similar::TextDiff::from_lines(ob.as_str(), nb.as_str()).ratio();
            // Truncated, so a pair is never reported above what it is.
            let score = (ratio * 100.0).floor() as u8;
            if score >= threshold {
                scored.push((score, i, j));
            }
        }
    }
    scored.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)).then(x.2.cmp(&y.2)));
    let (mut used_old, mut used_new) = (vec![false; olds.len()], vec![false; news.len()]);
    for (score, i, j) in scored {
        if used_old[i] || used_new[j] {
            continue;
        }
        used_old[i] = true;
        used_new[j] = true;
        out.push(Entry {
            status: 'R',
            path: news[j].clone(),
            from: Some(olds[i].clone()),
            score,
        });
    }
    removed.retain(|p| !olds.iter().zip(&used_old).any(|(o, u)| *u && o == *p));
    added.retain(|p| !news.iter().zip(&used_new).any(|(n, u)| *u && n == *p));
    Ok(())
}

fn rel(p: &str) -> &str {
    p.trim_start_matches('/')
}

/// `A path`, `R old -> new`... one line each (the default listing).
pub(super) fn print_names(w: &mut dyn Write, entries: &[Entry]) -> std::io::Result<()> {
    for e in entries {
        let status = if e.status == 'T' { 'M' } else { e.status };
        match &e.from {
            Some(from) => writeln!(
                w,
                "{status} {} -> {}",
                quote(rel(from)),
                quote(rel(&e.path))
            )?,
            None => writeln!(w, "{status} {}", quote(rel(&e.path)))?,
        }
    }
    Ok(())
}

/// `--name-status`: git's tab-separated form (`R087\told\tnew`).
pub(super) fn print_name_status(w: &mut dyn Write, entries: &[Entry]) -> std::io::Result<()> {
    for e in entries {
        match &e.from {
            Some(from) => writeln!(
                w,
                "R{:03}\t{}\t{}",
                e.score,
                quote(rel(from)),
                quote(rel(&e.path))
            )?,
            None => writeln!(w, "{}\t{}", e.status, quote(rel(&e.path)))?,
        }
    }
    Ok(())
}

/// The JSON of one entry.
pub(super) fn entry_json(e: &Entry) -> Value {
    let status = match e.status {
        'A' => "added",
        'D' => "removed",
        'R' => "renamed",
        'T' => "type_changed",
        _ => "modified",
    };
    json!({"status": status, "path": e.path, "from": e.from, "similarity": (e.status == 'R').then_some(e.score)})
}

/// Whether `data` is binary (a NUL byte in its first 8000 bytes, git's rule).
pub(super) fn is_binary(data: &[u8]) -> bool {
    data.iter().take(8000).any(|b| *b == 0)
}

/// Line counts of one entry: insertions, deletions (`None` for binary content).
pub(super) struct Counts {
    /// Inserted lines.
    pub insertions: usize,
    /// Deleted lines.
    pub deletions: usize,
    /// Binary on either side.
    pub binary: bool,
}

fn old_path(e: &Entry) -> &str {
    e.from.as_deref().unwrap_or(&e.path)
}

/// The old and new bytes of `e`; `None` when either side is a file over
/// [`TEXT_DIFF_MAX_BYTES`] (then neither is read whole).
fn contents(e: &Entry, a: &mut Side<'_>, b: &mut Side<'_>) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
    let too_big = |m: Option<snapgraph::Metadata>| {
        m.is_some_and(|m| m.kind == EntryKind::File && m.size > TEXT_DIFF_MAX_BYTES)
    };
    if (e.status != 'A' && too_big(a.meta(old_path(e))?))
        || (e.status != 'D' && too_big(b.meta(&e.path)?))
    {
        return Ok(None);
    }
    let old = if e.status == 'A' {
        Some(Vec::new())
    } else {
        a.bytes(old_path(e))?
    };
    let new = if e.status == 'D' {
        Some(Vec::new())
    } else {
        b.bytes(&e.path)?
    };
    Ok(old.zip(new))
}

/// Counts insertions and deletions of each entry.
pub(super) fn counts(entries: &[Entry], a: &mut Side<'_>, b: &mut Side<'_>) -> Result<Vec<Counts>> {
    entries
        .iter()
        .map(|e| {
            let Some((old, new)) =
                contents(e, a, b)?.filter(|(o, n)| !is_binary(o) && !is_binary(n))
            else {
                return Ok(Counts {
                    insertions: 0,
                    deletions: 0,
                    binary: true,
                });
            };
            let (old, new) = (String::from_utf8_lossy(&old), String::from_utf8_lossy(&new));
            let diff = similar::TextDiff::from_lines(old.as_ref(), new.as_ref());
            let (mut insertions, mut deletions) = (0, 0);
            for op in diff.ops() {
                for change in diff.iter_changes(op) {
                    match change.tag() {
                        similar::ChangeTag::Insert => insertions += 1,
                        similar::ChangeTag::Delete => deletions += 1,
                        similar::ChangeTag::Equal => {}
                    }
                }
            }
            Ok(Counts {
                insertions,
                deletions,
                binary: false,
            })
        })
        .collect()
}

/// `--stat`: ` path | N +++--` lines and a summary.
pub(super) fn print_stat(
    w: &mut dyn Write,
    entries: &[Entry],
    counts: &[Counts],
) -> std::io::Result<()> {
    let names: Vec<String> = entries
        .iter()
        .map(|e| match &e.from {
            Some(f) => format!("{} => {}", quote(rel(f)), quote(rel(&e.path))),
            None => quote(rel(&e.path)).into_owned(),
        })
        .collect();
    let width = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    let (mut ins, mut del) = (0, 0);
    for (n, c) in names.iter().zip(counts) {
        if c.binary {
            writeln!(w, " {n:width$} | Bin")?;
            continue;
        }
        ins += c.insertions;
        del += c.deletions;
        let total = c.insertions + c.deletions;
        // At most 50 marks, scaled.
        let scale = |x: usize| if total > 50 { x * 50 / total } else { x };
        writeln!(
            w,
            " {n:width$} | {total:>5} {}{}",
            "+".repeat(scale(c.insertions)),
            "-".repeat(scale(c.deletions))
        )?;
    }
    writeln!(
        w,
        " {} file{} changed, {ins} insertion{}(+), {del} deletion{}(-)",
        entries.len(),
        if entries.len() == 1 { "" } else { "s" },
        if ins == 1 { "" } else { "s" },
        if del == 1 { "" } else { "s" },
    )
}

/// `--stat` JSON.
pub(super) fn stat_json(entries: &[Entry], counts: &[Counts]) -> Value {
    let files: Vec<Value> = entries
        .iter()
        .zip(counts)
        .map(|(e, c)| {
            let mut v = entry_json(e);
            v["insertions"] = json!(c.insertions);
            v["deletions"] = json!(c.deletions);
            v["binary"] = json!(c.binary);
            v
        })
        .collect();
    json!({
        "files": files,
        "insertions": counts.iter().map(|c| c.insertions).sum::<usize>(),
        "deletions": counts.iter().map(|c| c.deletions).sum::<usize>(),
    })
}

fn git_mode(m: &snapgraph::Metadata) -> String {
    match m.kind {
        EntryKind::Symlink => "120000".to_string(),
        _ => format!("100{:03o}", m.mode & 0o777),
    }
}

/// The `a/` and `b/` names of a patch's sides (`/dev/null` for an absent one).
fn names(e: &Entry, oq: &str, nq: &str) -> (String, String) {
    let old_name = if e.status == 'A' {
        "/dev/null".to_string()
    } else {
        format!("a/{oq}")
    };
    let new_name = if e.status == 'D' {
        "/dev/null".to_string()
    } else {
        format!("b/{nq}")
    };
    (old_name, new_name)
}

/// The patch of one entry, as text.
pub(super) fn patch(e: &Entry, a: &mut Side<'_>, b: &mut Side<'_>) -> Result<String> {
    use std::fmt::Write as _;
    let old_p = rel(old_path(e)).to_string();
    let new_p = rel(&e.path).to_string();
    let (oq, nq) = (quote(&old_p), quote(&new_p));
    let mut s = String::new();
    let _ = writeln!(s, "diff --git a/{oq} b/{nq}");
    let old_m = if e.status == 'A' {
        None
    } else {
        a.meta(old_path(e))?
    };
    let new_m = if e.status == 'D' {
        None
    } else {
        b.meta(&e.path)?
    };
    match (&old_m, &new_m) {
        (None, Some(n)) => {
            let _ = writeln!(s, "new file mode {}", git_mode(n));
        }
        (Some(o), None) => {
            let _ = writeln!(s, "deleted file mode {}", git_mode(o));
        }
        (Some(o), Some(n)) if git_mode(o) != git_mode(n) => {
            let _ = writeln!(s, "old mode {}\nnew mode {}", git_mode(o), git_mode(n));
        }
        _ => {}
    }
    if let Some(from) = &e.from {
        let _ = writeln!(
            s,
            "similarity index {}%\nrename from {}\nrename to {nq}",
            e.score,
            quote(rel(from))
        );
    }
    let Some((old, new)) = contents(e, a, b)? else {
        // Too large to diff by lines: binary, unless it is a rename of the same
        // content (a rename's entry says so without reading it).
        if e.status == 'R' && e.score == 100 {
            return Ok(s);
        }
        let (old_name, new_name) = names(e, &oq, &nq);
        let _ = writeln!(s, "Binary files {old_name} and {new_name} differ");
        return Ok(s);
    };
    if e.status == 'R' && old == new {
        return Ok(s);
    }
    let (old_name, new_name) = names(e, &oq, &nq);
    if is_binary(&old) || is_binary(&new) {
        let _ = writeln!(s, "Binary files {old_name} and {new_name} differ");
        return Ok(s);
    }
    if old == new {
        return Ok(s);
    }
    let (old, new) = (String::from_utf8_lossy(&old), String::from_utf8_lossy(&new));
    let diff = similar::TextDiff::from_lines(old.as_ref(), new.as_ref());
    let _ = write!(
        s,
        "{}",
        diff.unified_diff()
            .context_radius(3)
            .header(&old_name, &new_name)
    );
    Ok(s)
}

/// Prints the patches of `entries`.
pub(super) fn print_patches(w: &mut dyn Write, patches: &[String]) -> std::io::Result<()> {
    for p in patches {
        w.write_all(p.as_bytes())?;
        if !p.ends_with('\n') {
            writeln!(w)?;
        }
    }
    Ok(())
}

/// What `diff`/`show` print for `d` in format `fmt`: the JSON value and the text.
/// The JSON keeps the name lists (`added`, `modified`, `removed`) and adds
/// `changes` (renames paired), plus `stat` or `patches` when asked for.
pub(super) fn render(
    d: &Diff,
    a: &mut Side<'_>,
    b: &mut Side<'_>,
    fmt: &crate::cli::DiffFormat,
    limits: &[String],
) -> Result<(Value, String, usize)> {
    let opts = Options {
        paths: limits.to_vec(),
        similar: fmt.find_renames.then_some(fmt.threshold),
    };
    let list = entries(d, a, b, &opts)?;
    let keep = |v: &Vec<String>| -> Vec<String> {
        v.iter()
            .filter(|p| within(p, &opts.paths))
            .cloned()
            .collect()
    };
    let mut value = json!({
        "added": keep(&d.files_added),
        "modified": keep(&d.files_modified),
        "removed": keep(&d.files_removed),
        "changes": list.iter().map(entry_json).collect::<Vec<_>>(),
    });
    let mut text: Vec<u8> = Vec::new();
    let io = |e: std::io::Error| crate::error::CliError::io("<buffer>", e);
    if fmt.stat {
        let c = counts(&list, a, b)?;
        value["stat"] = stat_json(&list, &c);
        print_stat(&mut text, &list, &c).map_err(io)?;
    }
    if fmt.name_status {
        print_name_status(&mut text, &list).map_err(io)?;
    }
    if fmt.patch {
        let patches: Vec<String> = list.iter().map(|e| patch(e, a, b)).collect::<Result<_>>()?;
        value["patches"] = json!(patches);
        if fmt.stat || fmt.name_status {
            writeln!(text).map_err(io)?;
        }
        print_patches(&mut text, &patches).map_err(io)?;
    }
    if !(fmt.stat || fmt.name_status || fmt.patch) {
        print_names(&mut text, &list).map_err(io)?;
    }
    Ok((
        value,
        String::from_utf8_lossy(&text).into_owned(),
        list.len(),
    ))
}
