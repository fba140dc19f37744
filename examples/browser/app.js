// The page: an in-page workspace whose history lives in IndexedDB.
//
// Every engine call is synchronous and reads objects from an `ObjectCache` (a Map the
// page fills from IndexedDB before the call: a CheckoutPlan loop for checkouts, a
// level-by-level walk for history, a fetch-on-miss loop for diffs). Writes go to
// IndexedDB objects first, then the branch ref moves by compare-and-swap, so the
// store always holds everything a ref points to.

import init, { Workspace, SnapshotGraph, CheckoutPlan, HaveSet, formatVersion } from "./pkg/snapgraph_wasm.js";
import { IdbStore } from "./idb-store.js";

const DB_NAME = "snapgraph-browser";
const BRANCH_KEY = "snapgraph.branch";
const HISTORY_LIMIT = 500;
/** Limits for snapshots opened from a file (bytes from outside a trust boundary). */
const PACK_LIMITS = { maxFiles: 1_000_000, maxBytes: 1 << 30, maxUnpackedBytes: 1 << 30 };

/** The module's exports (its `memory`), once `init` has run. */
let wasmExports = null;

const $ = (id) => document.getElementById(id);
const utf8 = new TextDecoder("utf-8", { fatal: true });
const short = (id) => id.slice(0, 12);

/**
 * The engine's synchronous object source, filled from IndexedDB on demand. `held`
 * mirrors its ids in wasm memory: a commit's `have`, asked inside the module.
 */
class ObjectCache {
  constructor(store) {
    this.store = store;
    this.map = new Map();
    this.held = new HaveSet();
  }
  get(id) {
    return this.map.get(id);
  }
  has(id) {
    return this.map.has(id);
  }
  addAll(objects) {
    for (const id in objects) this.map.set(id, objects[id]);
    this.held.addAll(objects);
  }
  /** Loads `ids` from IndexedDB; throws NOT_FOUND for one the store lacks. */
  async load(ids) {
    const want = ids.filter((id) => !this.map.has(id));
    const got = await this.store.getMany(want);
    want.forEach((id, i) => {
      if (got[i] === undefined) {
        const e = new Error(`object ${id} not found in this browser's store`);
        e.code = "NOT_FOUND";
        e.id = id;
        throw e;
      }
      this.map.set(id, got[i]);
    });
    this.held.addAll(want);
  }
  /** Runs `fn(this)`, fetching each object it misses, until it needs nothing more. */
  async withObjects(fn) {
    for (let round = 0; ; round++) {
      try {
        return fn(this);
      } catch (e) {
        if (e.code !== "NOT_FOUND" || !e.id || this.map.has(e.id) || round > 100_000) throw e;
        await this.load([e.id]);
      }
    }
  }
  /** Checks out `id` into `ws`: fetch what a CheckoutPlan asks for, round by round. */
  async checkout(ws, id) {
    const plan = new CheckoutPlan(id);
    try {
      for (;;) {
        const missing = plan.missing(this);
        if (missing.length === 0) break;
        await this.load(missing);
      }
    } finally {
      plan.free();
    }
    return ws.checkout(id, this, { policy: "force" });
  }
  /** `tip` and its ancestors, newest first, with their decoded commits. */
  async history(tip, limit) {
    const info = new Map();
    let frontier = [tip];
    while (frontier.length > 0 && info.size < limit) {
      await this.load(frontier);
      const next = [];
      for (const id of frontier) {
        const c = SnapshotGraph.commit(id, this);
        info.set(id, c);
        for (const p of c.parents) if (!info.has(p) && !next.includes(p)) next.push(p);
      }
      frontier = next;
    }
    // The order (topological, generation checks) is the engine's.
    return SnapshotGraph.ancestry(tip, this, limit).map((id) => info.get(id));
  }
}

const app = {
  store: null,
  cache: null,
  ws: null,
  branch: "main",
  selected: null,
  history: [],
  pickA: null,
  pickB: null,
  pack: null,
  busy: false,
};

// ----- feedback -----

function showError(e) {
  console.error(e);
  $("error-code").textContent = e?.code ?? "ERROR";
  $("error-message").textContent = e?.message ?? String(e);
  $("error").hidden = false;
}

function clearError() {
  $("error").hidden = true;
}

function notice(text) {
  $("notice").textContent = text;
  $("notice").hidden = !text;
}

/** Runs an action with errors shown on the page and actions serialized. */
async function act(fn) {
  if (app.busy) return;
  app.busy = true;
  document.body.dataset.busy = "1";
  clearError();
  notice("");
  try {
    await fn();
  } catch (e) {
    showError(e);
  } finally {
    app.busy = false;
    delete document.body.dataset.busy;
  }
}

// ----- rendering -----

function files(ws) {
  return ws.walk().filter((e) => e.kind !== "dir");
}

function renderFiles() {
  const ul = $("file-list");
  ul.replaceChildren();
  for (const f of files(app.ws)) {
    const li = document.createElement("li");
    li.textContent = f.path;
    li.title = `${f.kind}, ${f.size} bytes, mode ${f.mode.toString(8)}`;
    li.dataset.path = f.path;
    if (f.path === app.selected) li.classList.add("selected");
    li.onclick = () => select(f.path);
    ul.append(li);
  }
  const has = app.selected !== null && app.ws.exists(app.selected);
  if (!has) app.selected = null;
  $("editing").textContent = app.selected ?? "";
  $("content").disabled = !has;
  $("save").disabled = !has;
  $("delete").disabled = !has;
}

function select(path) {
  // Switching files keeps what was typed: the edit is written to the workspace.
  if (app.selected !== null && app.ws.exists(app.selected)) saveEditor();
  app.selected = path;
  const meta = app.ws.metadata(path);
  let text;
  if (meta.kind === "symlink") {
    text = `→ ${app.ws.readLink(path)}`;
  } else {
    const bytes = app.ws.read(path);
    try {
      text = utf8.decode(bytes);
    } catch {
      text = `(binary, ${bytes.length} bytes: editing replaces it with text)`;
    }
  }
  $("content").value = text;
  $("content").dataset.original = text;
  $("dirty").textContent = "";
  renderFiles();
}

function renderHead() {
  $("head").textContent = app.ws.head() ? `head ${short(app.ws.head())}` : "no commit yet";
  $("head").dataset.id = app.ws.head() ?? "";
}

async function renderBranches() {
  const sel = $("branch");
  const refs = await app.store.listRefs("heads/");
  const names = refs.map(([n]) => n.slice("heads/".length));
  if (!names.includes(app.branch)) names.push(app.branch);
  names.sort();
  sel.replaceChildren(
    ...names.map((n) => {
      const o = document.createElement("option");
      o.value = n;
      o.textContent = n;
      o.selected = n === app.branch;
      return o;
    }),
  );
}

async function renderHistory() {
  const tip = await app.store.getRef(`heads/${app.branch}`);
  app.history = tip ? await app.cache.history(tip, HISTORY_LIMIT) : [];
  const ids = new Set(app.history.map((c) => c.id));
  if (!ids.has(app.pickA)) app.pickA = null;
  if (!ids.has(app.pickB)) app.pickB = null;
  const ol = $("history");
  ol.replaceChildren();
  for (const c of app.history) {
    const li = document.createElement("li");
    li.dataset.id = c.id;
    if (c.id === app.ws.head()) li.classList.add("head");
    const picks = document.createElement("div");
    picks.className = "picks";
    for (const which of ["A", "B"]) {
      const label = document.createElement("label");
      const r = document.createElement("input");
      r.type = "radio";
      r.name = `pick${which}`;
      r.dataset.testid = `pick-${which}`;
      r.checked = app[`pick${which}`] === c.id;
      r.onchange = () => {
        app[`pick${which}`] = c.id;
        $("diff").disabled = !(app.pickA && app.pickB);
      };
      label.append(r, which);
      picks.append(label);
    }
    const msg = document.createElement("div");
    msg.className = "msg";
    msg.textContent = c.meta.message ?? "(no message)";
    const meta = document.createElement("div");
    meta.className = "meta";
    const id = document.createElement("span");
    id.className = "mono";
    id.textContent = short(c.id);
    id.title = c.id;
    const gen = document.createElement("span");
    gen.textContent = `gen ${c.generation}`;
    gen.className = "gen";
    const when = document.createElement("span");
    when.textContent = c.meta.time ? new Date(c.meta.time).toLocaleString() : "";
    const rewind = button("Rewind", "rewind", () => act(() => rewindTo(c.id)));
    const fork = button("Fork", "fork", () => act(() => forkAt(c.id)));
    meta.append(id, gen, when, rewind, fork);
    li.append(picks, msg, meta);
    ol.append(li);
  }
  $("diff").disabled = !(app.pickA && app.pickB);
}

function button(text, testid, onclick) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = "plain";
  b.textContent = text;
  b.dataset.testid = testid;
  b.onclick = onclick;
  return b;
}

async function renderAll() {
  renderHead();
  renderFiles();
  await renderBranches();
  await renderHistory();
}

// ----- actions -----

/** Replaces the workspace (freeing the old one's wasm memory). */
function adopt(ws) {
  if (app.ws && app.ws !== ws) app.ws.free();
  app.ws = ws;
}

/** Checks `id` out into a new workspace (freed again if the checkout fails). */
async function checkedOut(id) {
  const ws = new Workspace();
  try {
    if (id) (await app.cache.checkout(ws, id)).free();
    return ws;
  } catch (e) {
    ws.free();
    throw e;
  }
}

async function openBranch(name) {
  const tip = await app.store.getRef(`heads/${name}`);
  // Nothing changes on the page unless the checkout succeeds.
  const ws = await checkedOut(tip);
  app.branch = name;
  localStorage.setItem(BRANCH_KEY, name);
  adopt(ws);
  app.selected = null;
  $("content").value = "";
  $("diff-out").replaceChildren();
  await renderAll();
}

function saveEditor() {
  if (app.selected === null) return false;
  const text = $("content").value;
  if (text === $("content").dataset.original) return false;
  app.ws.write(app.selected, text);
  $("content").dataset.original = text;
  $("dirty").textContent = "";
  return true;
}

async function commitTurn(message) {
  saveEditor();
  const ref = `heads/${app.branch}`;
  const expected = app.ws.head() ?? null;
  // Commit on a copy: if storing or the ref update fails, the workspace is unchanged.
  const next = app.ws.copy();
  const c = next.commit({
    parents: expected ? [expected] : [],
    have: app.cache.held,
    meta: { message, time: new Date().toISOString() },
  });
  try {
    const objects = c.objects;
    await app.store.putMany(objects);
    app.cache.addAll(objects);
    await app.store.updateRefs([{ name: ref, expected, new: c.id }], `commit: ${message}`);
    notice(`committed ${short(c.id)} (${c.objectCount} new objects, ${c.storedBytes} bytes)`);
  } catch (e) {
    next.free();
    throw e;
  }
  adopt(next);
  await renderAll();
}

async function rewindTo(id) {
  const ref = `heads/${app.branch}`;
  const tip = await app.store.getRef(ref);
  const ws = await checkedOut(id);
  try {
    await app.store.updateRefs([{ name: ref, expected: tip, new: id }], `rewind to ${id}`);
  } catch (e) {
    ws.free();
    throw e;
  }
  adopt(ws);
  app.selected = null;
  $("content").value = "";
  notice(`rewound ${app.branch} to ${short(id)}`);
  await renderAll();
}

async function freeBranchName(base) {
  const taken = new Set((await app.store.listRefs("heads/")).map(([n]) => n.slice(6)));
  for (let i = 1; ; i++) if (!taken.has(`${base}-${i}`)) return `${base}-${i}`;
}

async function forkAt(id) {
  const name = await freeBranchName("fork");
  await app.store.updateRefs([{ name: `heads/${name}`, expected: null, new: id }], `fork at ${id}`);
  await openBranch(name);
  notice(`forked ${name} at ${short(id)}`);
}

const SIGILS = { added: "+", removed: "-", modified: "~", typeChanged: "T", modeChanged: "M" };

function side(e) {
  return e.kind === "symlink" ? `symlink, ${e.size} B` : `${e.size} B`;
}

function changeLine(c) {
  const sigil = SIGILS[c.kind] ?? "?";
  const cls = c.kind === "added" ? "added" : c.kind === "removed" ? "removed" : "modified";
  let what;
  switch (c.kind) {
    case "added":
      what = `(${side(c.new)})`;
      break;
    case "removed":
      what = `(${side(c.old)})`;
      break;
    case "modeChanged":
      what = `(mode ${c.old.mode.toString(8)} → ${c.new.mode.toString(8)})`;
      break;
    case "typeChanged":
      what = `(${c.old.kind} → ${c.new.kind})`;
      break;
    default:
      what = `(${side(c.old)} → ${side(c.new)})`;
  }
  return [cls, `${sigil} ${c.path} ${what}`];
}

async function diff() {
  const a = app.pickA;
  const b = app.pickB;
  const d = await app.cache.withObjects((src) => SnapshotGraph.diff(a, b, src));
  const out = $("diff-out");
  out.replaceChildren();
  const head = document.createElement("div");
  head.textContent = `${short(a)} → ${short(b)}`;
  out.append(head);
  // One line per change, in path order, from the diff's values: what kind of entry
  // each side was, its size, and its mode where that is what changed.
  const lines = d.changes.map(changeLine);
  if (d.stateChanged) lines.push(["modified", "~ (state)"]);
  if (lines.length === 0) lines.push(["", "no changes"]);
  for (const [cls, text] of lines) {
    const div = document.createElement("div");
    div.className = cls;
    div.dataset.testid = "diff-line";
    div.textContent = text;
    out.append(div);
  }
}

function parseKey(text) {
  const t = text.trim();
  if (t === "") return null;
  if (!/^[0-9a-fA-F]{64}$/.test(t)) {
    const e = new Error("a snapshot key is 64 hex digits (32 bytes)");
    e.code = "INVALID_ARGUMENT";
    throw e;
  }
  return Uint8Array.from(t.match(/../g), (h) => parseInt(h, 16));
}

async function openPack(file) {
  const bytes = new Uint8Array(await file.arrayBuffer());
  const key = parseKey($("pack-key").value);
  // Verified whole before anything is shown: on error the page stays as it was.
  const ws = key ? Workspace.fromSnapshotKeyed(bytes, key, PACK_LIMITS) : Workspace.fromSnapshot(bytes, PACK_LIMITS);
  if (app.pack) app.pack.ws.free();
  app.pack = { ws, name: file.name };
  const ul = $("pack-list");
  ul.replaceChildren();
  for (const f of files(ws)) {
    const li = document.createElement("li");
    li.textContent = `${f.path}  (${f.size} B)`;
    li.dataset.path = f.path;
    li.onclick = () => {
      for (const x of ul.children) x.classList.toggle("selected", x === li);
      $("pack-view").textContent = preview(ws, f.path);
    };
    ul.append(li);
  }
  $("pack-view").textContent = `${file.name}: ${files(ws).length} files, state ${ws.state().length} bytes`;
  $("pack-import").disabled = false;
  notice(`opened ${file.name}: verified`);
}

function preview(ws, path) {
  if (ws.metadata(path).kind === "symlink") return `→ ${ws.readLink(path)}`;
  const bytes = ws.read(path);
  try {
    return utf8.decode(bytes);
  } catch {
    const hex = Array.from(bytes.slice(0, 256), (b) => b.toString(16).padStart(2, "0")).join(" ");
    return `(binary, ${bytes.length} bytes)\n${hex}${bytes.length > 256 ? " …" : ""}`;
  }
}

async function importPack() {
  const ws = app.pack.ws.copy();
  const c = ws.commit({ have: app.cache.held, meta: { message: `unpacked ${app.pack.name}`, time: new Date().toISOString() } });
  ws.free();
  const objects = c.objects;
  await app.store.putMany(objects);
  app.cache.addAll(objects);
  const name = `unpacked-${short(c.id)}`;
  const ref = `heads/${name}`;
  const existing = await app.store.getRef(ref);
  if (existing !== c.id) await app.store.updateRefs([{ name: ref, expected: null, new: c.id }], `unpack ${app.pack.name}`);
  await openBranch(name);
  notice(`imported ${app.pack.name} as branch ${name}`);
}

// ----- benchmark -----

function fillRandom(buf) {
  for (let o = 0; o < buf.length; o += 65536) crypto.getRandomValues(buf.subarray(o, o + 65536));
  return buf;
}

/**
 * The benchmark's workspace: 2,000 files of 4,000 B in 20 directories, committed once;
 * then per turn one file rewritten and committed against an in-memory store, its new
 * objects added to the store: what `commitTurn` does short of IndexedDB (a `Map` of the
 * objects and a `HaveSet` of their ids as `have`, as `ObjectCache` keeps them).
 * `prepare(n)` makes the content of the next `n` turns, `run()` runs them (write +
 * commit + store insert, like `crates/snapgraph-wasm/examples/turns_native.rs`).
 */
export function turnLoop({ files = 2000, dirs = 20, size = 4000 } = {}) {
  const ws = new Workspace();
  const store = new Map();
  const held = new HaveSet();
  const keep = (objects) => {
    for (const id in objects) store.set(id, objects[id]);
    held.addAll(objects);
  };
  const path = (i) => `/d${String(i % dirs).padStart(4, "0")}/f${String(i).padStart(6, "0")}.bin`;
  const t0 = performance.now();
  for (let i = 0; i < files; i++) ws.write(path(i), fillRandom(new Uint8Array(size)));
  keep(ws.commit({}).objects);
  const firstMs = performance.now() - t0;
  let edit = 0;
  const turn = (data) => {
    const i = (edit++ * 7919) % files;
    ws.write(path(i), data);
    keep(ws.commit({ parents: [ws.head()], have: held }).objects);
  };
  let next = [];
  return {
    files,
    firstMs,
    get storeObjects() {
      return store.size;
    },
    prepare(n) {
      next = Array.from({ length: n }, () => fillRandom(new Uint8Array(size)));
    },
    run() {
      for (const d of next) turn(d);
      next = [];
    },
    free() {
      ws.free();
      held.free();
    },
  };
}

/**
 * The page's per-turn figure: `turnLoop()`, 1,000 warm-up turns, then `batches` batches
 * of `batch` timed turns (content made before each batch). Turns run in batches of 10
 * so the timer's resolution does not matter. The warm-up is long because Chromium
 * compiles a module's hot functions with its optimizing tier while they run (dynamic
 * tiering): after 50 turns, tier-ups still overlapped half of the timed batches
 * (`bench-trace.mjs`; BENCHMARKS.md, "The page's tail"). `marks`: a
 * `performance.measure("batch")` per batch (for a trace).
 */
export function benchmark({ warmup = 1000, batches = 40, batch = 10, marks = false, ...shape } = {}) {
  const loop = turnLoop(shape);
  const memoryAt = () => wasmExports?.memory.buffer.byteLength ?? 0;
  loop.prepare(warmup);
  loop.run();
  const memoryBefore = memoryAt();
  const perTurn = [];
  for (let k = 0; k < batches; k++) {
    loop.prepare(batch);
    const s = performance.now();
    loop.run();
    const e = performance.now();
    perTurn.push((e - s) / batch);
    if (marks) performance.measure("batch", { start: s, end: e });
  }
  const storeObjects = loop.storeObjects;
  loop.free();
  perTurn.sort((x, y) => x - y);
  const median = perTurn[perTurn.length >> 1];
  const mean = perTurn.reduce((x, y) => x + y, 0) / perTurn.length;
  return {
    files: loop.files,
    turns: batches * batch,
    medianUs: Math.round(median * 1000),
    meanUs: Math.round(mean * 1000),
    minUs: Math.round(perTurn[0] * 1000),
    maxUs: Math.round(perTurn[perTurn.length - 1] * 1000),
    firstCommitMs: Math.round(loop.firstMs),
    storeObjects,
    memoryBefore,
    memoryAfter: memoryAt(),
  };
}

async function runBenchmark() {
  $("bench-out").textContent = "running…";
  await new Promise((r) => setTimeout(r, 20));
  const r = benchmark();
  window.__bench = r;
  $("bench-out").textContent =
    `per-turn commit at ${r.files} files: median ${r.medianUs} µs, mean ${r.meanUs} µs ` +
    `(batches of 10, ${r.turns} turns; ${r.minUs}..${r.maxUs} µs); first commit (write + commit) ${r.firstCommitMs} ms`;
  $("bench-out").dataset.median = String(r.medianUs);
}

// ----- wiring -----

async function main() {
  wasmExports = await init();
  $("engine").textContent = `engine format v${formatVersion()}`;
  app.store = await IdbStore.open(DB_NAME);
  app.cache = new ObjectCache(app.store);
  const heads = (await app.store.listRefs("heads/")).map(([n]) => n.slice(6));
  const saved = localStorage.getItem(BRANCH_KEY);
  const branch = heads.includes(saved) ? saved : heads.includes("main") || heads.length === 0 ? "main" : heads[0];
  await openBranch(branch);
  if (!app.ws.head() && files(app.ws).length === 0) {
    app.ws.write("/README.md", "# My workspace\n\nEdit files, then commit a turn.\n");
    renderFiles();
  }

  $("error-close").onclick = clearError;
  $("branch").onchange = (e) => act(() => openBranch(e.target.value));
  $("content").oninput = () => {
    $("dirty").textContent = $("content").value === $("content").dataset.original ? "" : "unsaved";
  };
  $("save").onclick = () =>
    act(async () => {
      saveEditor();
      renderFiles();
    });
  $("delete").onclick = () =>
    act(async () => {
      app.ws.remove(app.selected);
      app.selected = null;
      $("content").value = "";
      renderFiles();
    });
  $("new-file").onsubmit = (e) => {
    e.preventDefault();
    act(async () => {
      const path = $("new-path").value.trim();
      if (app.ws.exists(path)) {
        const err = new Error(`${path}: already exists`);
        err.code = "ALREADY_EXISTS";
        throw err;
      }
      app.ws.write(path, "");
      $("new-path").value = "";
      renderFiles();
      select(app.ws.walk().find((f) => f.path === path)?.path ?? path);
    });
  };
  $("commit-form").onsubmit = (e) => {
    e.preventDefault();
    act(async () => {
      await commitTurn($("message").value.trim());
      $("message").value = "";
    });
  };
  $("diff").onclick = () => act(diff);
  $("pack-file").onchange = (e) => {
    const f = e.target.files[0];
    if (f) act(() => openPack(f));
  };
  $("pack-import").onclick = () => act(importPack);
  $("bench").onclick = () => act(runBenchmark);
  document.body.dataset.ready = "1";
}

main().catch(showError);
