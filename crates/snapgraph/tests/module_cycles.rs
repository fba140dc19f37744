//! No module imports in circles: in the core, the store crate and the CLI library, the
//! top-level modules (`src/NAME.rs` or `src/NAME/`) must form a graph without cycles,
//! so that each layer depends only downward (ARCHITECTURE.md, "Module layering").
//!
//! A module depends on another when its code (comments and `#[cfg(test)]` modules left
//! out) names a `crate::OTHER` path, directly, in a `crate::{...}` group or through an
//! item the crate root re-exports (`crate::Workspace` is `workspace`'s). Run it alone:
//! `cargo test -p snapgraph --test module_cycles`; a failure lists each cycle with the
//! file and line of every import on it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Where one module names another: file and line.
type Evidence = BTreeMap<(String, String), Vec<String>>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a source file belongs to (`lib` for the crate root).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("file under src");
    let first = rel
        .components()
        .next()
        .expect("a component")
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    first.trim_end_matches(".rs").to_string()
}

/// The file's code lines (numbered from 1) without comments and without
/// `#[cfg(test)]` items (counted by braces from the attribute on).
fn code_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut skipping = false;
    let mut depth = 0i64;
    let mut opened = false;
    for (n, line) in text.lines().enumerate() {
        let code = match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        };
        if !skipping && code.trim() == "#[cfg(test)]" {
            skipping = true;
            depth = 0;
            opened = false;
            continue;
        }
        if skipping {
            for c in code.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            // An item without a body (`#[cfg(test)] use ...;`) ends at its semicolon.
            if (opened && depth <= 0) || (!opened && code.trim_end().ends_with(';')) {
                skipping = false;
            }
            continue;
        }
        out.push((n + 1, code.to_string()));
    }
    out
}

/// The names the crate root re-exports, each with the module it comes from
/// (`pub use workspace::{Workspace, ...}` makes `Workspace` name `workspace`).
fn reexports(root: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let joined: String = code_lines(root)
        .into_iter()
        .map(|(_, l)| l)
        .collect::<Vec<_>>()
        .join("\n");
    for stmt in joined.split(';') {
        let stmt = stmt.trim();
        let Some(rest) = stmt.strip_prefix("pub use ") else {
            continue;
        };
        let rest = rest.trim_start_matches("crate::");
        let Some((module, tail)) = rest.split_once("::") else {
            continue;
        };
        let names = tail.trim_start_matches('{').trim_end_matches('}');
        for name in names.split(',') {
            let name = name.trim();
            let last = name.rsplit("::").next().unwrap_or(name);
            let last = last.split(" as ").last().unwrap_or(last).trim();
            if !last.is_empty() {
                map.insert(last.to_string(), module.to_string());
            }
        }
    }
    map
}

/// The first path segment after each `crate::` in `code`, expanding
/// `crate::{a::X, b::{Y, Z}}` to `a` and `b`, each with its byte offset.
fn crate_paths(code: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = code[from..].find("crate::") {
        let at = from + found;
        from = at + "crate::".len();
        // `snapgraph_crate::` and the like are not this crate.
        if code[..at]
            .chars()
            .last()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
        {
            continue;
        }
        let rest = &code[from..];
        let ident = |s: &str| -> String {
            s.trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect()
        };
        if let Some(group) = rest.strip_prefix('{') {
            // The group's items at depth 0, each one's first segment.
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        out.push((at, ident(&group[start..i])));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push((at, ident(&group[start..i])));
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            continue;
        }
        out.push((at, ident(rest)));
    }
    out.retain(|(_, head)| !head.is_empty());
    out
}

/// Module dependencies of the library whose sources are under `src`, with evidence.
fn graph(src: &Path) -> (BTreeSet<String>, Evidence) {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let root = fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let reexported = reexports(&root);
    let mut modules = BTreeSet::new();
    for f in &files {
        let m = module_of(src, f);
        if m != "main" {
            modules.insert(m);
        }
    }
    let mut edges: Evidence = BTreeMap::new();
    for f in &files {
        let from = module_of(src, f);
        if from == "main" {
            continue; // the binary, a crate of its own over the library
        }
        let text = fs::read_to_string(f).expect("source file");
        // The code without comments and tests, and the line each byte is on.
        let (mut code, mut line_of) = (String::new(), Vec::new());
        for (line, l) in code_lines(&text) {
            code.push_str(&l);
            code.push('\n');
            line_of.resize(code.len(), line);
        }
        for (offset, head) in crate_paths(&code) {
            let to = if modules.contains(&head) {
                head
            } else if let Some(m) = reexported.get(&head) {
                m.clone()
            } else {
                "lib".to_string()
            };
            // The root's re-exports are the crate's face, not a layer.
            if to == from || from == "lib" {
                continue;
            }
            let at = format!(
                "{}:{}",
                f.strip_prefix(src.parent().expect("crate dir"))
                    .expect("under the crate")
                    .display(),
                line_of[offset]
            );
            edges.entry((from.clone(), to)).or_default().push(at);
        }
    }
    (modules, edges)
}

/// The strongly connected components with more than one module (Tarjan).
fn cycles(modules: &BTreeSet<String>, edges: &Evidence) -> Vec<Vec<String>> {
    struct State<'a> {
        succ: BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.succ.get(v).cloned().unwrap_or_default() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        succ: BTreeMap::new(),
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for (from, to) in edges.keys() {
        s.succ.entry(from).or_default().push(to);
    }
    let mut all: BTreeSet<&str> = modules.iter().map(String::as_str).collect();
    all.insert("lib");
    for v in all {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

fn assert_acyclic(krate: &str) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(krate)
        .join("src");
    let (modules, edges) = graph(&src);
    assert!(modules.len() > 3, "{krate}: no modules found under {src:?}");
    let found = cycles(&modules, &edges);
    let mut report = String::new();
    for component in &found {
        report.push_str(&format!("cycle among {component:?}:\n"));
        for ((from, to), at) in &edges {
            if component.contains(from) && component.contains(to) {
                report.push_str(&format!("  {from} -> {to}: {}\n", at.join(", ")));
            }
        }
    }
    assert!(
        found.is_empty(),
        "{krate}: modules import in circles\n{report}"
    );
}

#[test]
fn core_modules_import_in_no_circle() {
    assert_acyclic("snapgraph");
}

#[test]
fn store_modules_import_in_no_circle() {
    assert_acyclic("snapgraph-store");
}

#[test]
fn cli_modules_import_in_no_circle() {
    assert_acyclic("snapgraph-cli");
}

#[test]
fn the_checker_finds_a_cycle() {
    let mut modules = BTreeSet::new();
    let mut edges: Evidence = BTreeMap::new();
    for (a, b) in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")] {
        modules.insert(a.to_string());
        modules.insert(b.to_string());
        edges.insert((a.into(), b.into()), vec!["x.rs:1".into()]);
    }
    assert_eq!(
        cycles(&modules, &edges),
        vec![vec!["a".to_string(), "b".into(), "c".into()]]
    );
    let heads =
        |code: &str| -> Vec<String> { crate_paths(code).into_iter().map(|(_, h)| h).collect() };
    assert_eq!(
        heads("use crate::{\n    id::ObjectId,\n    object::{load, ObjectKind},\n};"),
        vec!["id".to_string(), "object".into()]
    );
    assert_eq!(
        heads("let x = crate::workspace::path::parse(p); snapgraph_crate::y"),
        vec!["workspace".to_string()]
    );
    let lines =
        code_lines("use a;\n#[cfg(test)]\nmod tests {\n    use crate::b;\n}\nuse c; // crate::d\n");
    assert_eq!(
        lines
            .iter()
            .map(|(n, l)| (*n, l.trim()))
            .collect::<Vec<_>>(),
        vec![(1, "use a;"), (6, "use c;")]
    );
}
