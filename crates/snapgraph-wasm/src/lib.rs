//! # snapgraph-wasm
//!
//! The snapgraph core as WebAssembly, through `wasm-bindgen`: the same engine, the
//! Node package's names in camelCase, `Uint8Array` for bytes, object ids as hex
//! strings, and errors as `Error` objects with a stable `code` (see `README.md`).
//!
//! ```js
//! import init, { Workspace, SnapshotGraph } from "./pkg/snapgraph_wasm.js";
//! await init();
//! const store = new Map();              // hex id -> Uint8Array (or IndexedDB, cached)
//! const ws = new Workspace();
//! ws.write("/notes.md", "one\n");
//! const first = ws.commit({ meta: { message: "turn 1" } });
//! for (const [id, bytes] of Object.entries(first.objects)) store.set(id, bytes);
//! ws.write("/notes.md", "one\ntwo\n");
//! const second = ws.commit({ parents: [first.id], have: store });
//! for (const [id, bytes] of Object.entries(second.objects)) store.set(id, bytes);
//! SnapshotGraph.diff(first.id, second.id, store).filesModified; // ["/notes.md"]
//! ```
//!
//! Every call is synchronous and reads objects through the source it is given (a
//! `Map`, an object with `get(id)`, or a record of hex ids): a page that keeps its
//! objects in IndexedDB loads what a call needs first, with a [`graph::CheckoutPlan`]
//! for checkouts. The binding adds no logic of its own: each call converts its
//! arguments, calls the core, and converts the result or the error once.
//!
//! The crate also builds natively (its unit tests check the error mapping there);
//! calling the exported functions needs a JavaScript host.

#![deny(missing_docs)]

pub mod error;
pub mod graph;
pub mod held;
pub mod js;
pub mod workspace;

use wasm_bindgen::prelude::*;

pub use graph::{CheckoutPlan, SnapshotGraph};
pub use held::HaveSet;
pub use workspace::{Restore, Workspace};

#[wasm_bindgen(typescript_custom_section)]
const TS_TYPES: &'static str = r#"
/** Where objects are read from: a Map, any object with get(id) (and optionally has(id)), a function of an id, or a record of hex ids. */
export type ObjectSourceLike =
  | Map<string, Uint8Array>
  | { get(id: string): Uint8Array | undefined | null; has?(id: string): boolean }
  | ((id: string) => Uint8Array | undefined | null)
  | Record<string, Uint8Array>;
/** What a commit produced (the Node package's shape, with Uint8Array for Buffer). */
export interface CommitResult {
  id: string;
  generation: number;
  /** Hex id -> stored bytes, in dependency order: write them in this order. Views of one copy per commit, in a buffer shared with other small commits: store `bytes.slice()` in IndexedDB. */
  objects: Record<string, Uint8Array>;
  objectCount: number;
  storedBytes: number;
  /** The commit as a packed snapshot when it is complete, else null. */
  packed: Uint8Array | null;
  isComplete: boolean;
}
export interface CommitOptions {
  parents?: string[];
  /** Ids the destination holds (with their closures), or a HaveSet or source asked per object. */
  have?: string[] | HaveSet | ObjectSourceLike;
  meta?: Record<string, string>;
  /** Record an empty root directory (the workspace keeps its files). */
  excludeFiles?: boolean;
  /** Record empty state (the workspace keeps its state). */
  excludeState?: boolean;
  /** Where to read parents this workspace did not make or check out (asked before a `have` source, which answers them too). */
  parentSource?: ObjectSourceLike;
}
export interface CheckoutOptions {
  policy?: "superset" | "strict" | "force";
  drift?: "strict" | "off";
  shallow?: boolean;
}
export interface SnapshotOptions {
  excludeFiles?: boolean;
  excludeState?: boolean;
  compress?: boolean;
}
export interface Limits {
  maxFiles: number;
  maxBytes: number;
  maxUnpackedBytes: number;
}
/** One side of a change: what the entry was. */
export interface ChangeEntry {
  kind: "file" | "symlink";
  mode: number;
  size: number;
  /** The content object (chunk or manifest root); absent for inline content and symlinks. */
  id?: string;
}
/** A changed file or symlink. */
export interface Change {
  path: string;
  kind: "added" | "removed" | "modified" | "typeChanged" | "modeChanged";
  /** The entry before (null when added). */
  old: ChangeEntry | null;
  /** The entry after (null when removed). */
  new: ChangeEntry | null;
}
export interface Diff {
  /** Every change, as values, in path order. */
  changes: Change[];
  filesAdded: string[];
  filesModified: string[];
  filesRemoved: string[];
  stateChanged: boolean;
  readsAdded: string[];
  readsChanged: string[];
  readsRemoved: string[];
}
export interface CommitInfo {
  id: string;
  tree: string;
  parents: string[];
  generation: number;
  stateSize: number;
  meta: Record<string, string>;
  capabilities: string | null;
  reads: string | null;
}
export interface CapabilityFingerprint {
  builtins: string[];
  features: string[];
  fsBackend: string | null;
  engineVersion: string | null;
}
export interface ExternalRead {
  source: string;
  fingerprint: string;
  revision: string | null;
  size: number;
  cachedAt: string | null;
}
/** Every Error thrown by this module has a stable code (README.md lists them). */
export interface SnapgraphError extends Error {
  code: string;
  id?: string;
  path?: string;
  commit?: string;
}
"#;

/// The object format version this engine writes.
#[wasm_bindgen(js_name = formatVersion)]
pub fn format_version() -> u32 {
    u32::from(snapgraph::FORMAT_VERSION)
}

/// Checks stored object bytes against their id (hash, kind byte, version) and returns
/// the kind's name (`"chunk"`, `"tree"`, `"commit"`, ...); throws `CORRUPT` (or
/// another object code) naming the id otherwise. For a store that wants to refuse
/// bad bytes when they arrive instead of when they are read.
#[wasm_bindgen(js_name = verifyObject)]
pub fn verify_object(
    id: &str,
    #[wasm_bindgen(unchecked_param_type = "Uint8Array")] bytes: JsValue,
) -> Result<String, JsValue> {
    let id = js::id(id)?;
    let bytes = js::bytes(&bytes, "bytes", false)?;
    snapgraph::object::verify(&id, &bytes)
        .map(|(kind, _)| kind.name().to_owned())
        .map_err(|e| js::to_js(error::object(&e)))
}
