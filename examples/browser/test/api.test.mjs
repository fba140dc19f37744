// The wasm binding's API under Node's test runner, from the same build the page loads
// (examples/browser/pkg, made by scripts/build-wasm). Every call, the error codes,
// hostile inputs (corrupt, truncated and swapped objects, bad paths, wrong keys: a
// typed error and nothing changed) and a randomized round trip.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

import init, {
  Workspace,
  SnapshotGraph,
  CheckoutPlan,
  HaveSet,
  formatVersion,
  verifyObject,
  snapshotAncestry,
  snapshotCapabilities,
  snapshotDiff,
  snapshotPlanCheckout,
  snapshotReachable,
} from "../pkg/snapgraph_wasm.js";

const wasm = readFileSync(fileURLToPath(new URL("../pkg/snapgraph_wasm_bg.wasm", import.meta.url)));
await init({ module_or_path: wasm });

const enc = new TextEncoder();
const dec = new TextDecoder();
const text = (ws, p) => dec.decode(ws.read(p));

function persist(store, commit) {
  for (const [id, bytes] of Object.entries(commit.objects)) store.set(id, bytes);
  return commit.id;
}

/** Asserts `fn` throws an Error with `code` (and the given properties). */
function throwsCode(fn, code, props = {}) {
  assert.throws(fn, (e) => {
    assert.ok(e instanceof Error, "an Error");
    assert.equal(e.code, code, `code of ${e.message}`);
    for (const [k, v] of Object.entries(props)) assert.equal(e[k], v, k);
    return true;
  });
}

test("write, read, list, metadata, rename, remove, symlink, modes", () => {
  const ws = new Workspace();
  ws.write("/a/b.txt", "hello");
  ws.write("/a/c.bin", new Uint8Array([0, 1, 2]));
  ws.mkdir("/empty");
  ws.symlink("/link", "a/b.txt");
  ws.setMode("/a/b.txt", 0o600);
  assert.equal(text(ws, "/a/b.txt"), "hello");
  assert.deepEqual([...ws.read("/a/c.bin")], [0, 1, 2]);
  assert.equal(ws.readLink("/link"), "a/b.txt");
  assert.deepEqual(ws.metadata("/a/b.txt"), { kind: "file", mode: 0o600, size: 5 });
  assert.deepEqual(ws.list("/a").map((e) => e.name), ["b.txt", "c.bin"]);
  assert.deepEqual(ws.walk().map((e) => `${e.kind} ${e.path}`), [
    "dir /a",
    "file /a/b.txt",
    "file /a/c.bin",
    "dir /empty",
    "symlink /link",
  ]);
  ws.rename("/a/c.bin", "/empty/c.bin");
  assert.ok(!ws.exists("/a/c.bin") && ws.exists("/empty/c.bin"));
  ws.remove("/empty");
  assert.ok(!ws.exists("/empty/c.bin"));
  ws.free();
});

test("file-system errors are typed and name the path", () => {
  const ws = new Workspace();
  ws.write("/f", "x");
  throwsCode(() => ws.write("relative", "x"), "INVALID_PATH", { path: "relative" });
  throwsCode(() => ws.read("/missing"), "NOT_FOUND", { path: "/missing" });
  throwsCode(() => ws.write("/f/g", "x"), "NOT_A_DIRECTORY");
  throwsCode(() => ws.read("/"), "IS_A_DIRECTORY");
  throwsCode(() => ws.readLink("/f"), "NOT_A_SYMLINK", { path: "/f" });
  throwsCode(() => ws.setMode("/f", 0o10000), "INVALID_ARGUMENT", { path: "/f" });
  // Numbers a u32 argument would have wrapped or truncated to a valid mode.
  throwsCode(() => ws.setMode("/f", 2 ** 40), "INVALID_ARGUMENT", { path: "/f" });
  for (const bad of [NaN, -1, 0.5, Infinity]) throwsCode(() => ws.setMode("/f", bad), "INVALID_ARGUMENT");
  throwsCode(() => ws.write("/x", 42), "INVALID_ARGUMENT");
  throwsCode(() => ws.write("/a\0b", "x"), "INVALID_PATH");
  assert.equal(text(ws, "/f"), "x");
});

test("commit, have, meta, ancestry, diff, reachable, checkout", () => {
  const store = new Map();
  const ws = new Workspace();
  ws.write("/log.txt", "one\n");
  ws.write("/keep.bin", new Uint8Array(20_000).map((_, i) => (i * 31) % 251));
  ws.setState(enc.encode("state-1"));
  const c1 = ws.commit({ meta: { message: "first" } });
  assert.equal(c1.generation, 1);
  assert.ok(c1.isComplete);
  assert.equal(Object.keys(c1.objects).length, c1.objectCount);
  assert.ok(c1.packed instanceof Uint8Array);
  const first = persist(store, c1);
  assert.equal(ws.head(), first);

  ws.write("/log.txt", "one\ntwo\n");
  ws.write("/new.txt", "new");
  const c2 = ws.commit({ parents: [first], have: store, meta: { message: "second" } });
  assert.equal(c2.generation, 2);
  assert.ok(!c2.isComplete, "objects the store holds are left out");
  assert.equal(c2.packed, null);
  assert.ok(Object.keys(c2.objects).every((id) => !store.has(id)));
  const second = persist(store, c2);

  // `have` as an array of ids prunes the same way.
  const again = ws.copy();
  again.write("/log.txt", "three");
  const c3 = again.commit({ parents: [second], have: [...store.keys()] });
  assert.ok(Object.keys(c3.objects).every((id) => !store.has(id)));

  assert.deepEqual(SnapshotGraph.ancestry(second, store), [second, first]);
  assert.deepEqual(SnapshotGraph.ancestry(second, store, 1), [second]);
  const info = SnapshotGraph.commit(second, store);
  assert.deepEqual(info.parents, [first]);
  assert.equal(info.generation, 2);
  assert.equal(info.meta.message, "second");

  const d = SnapshotGraph.diff(first, second, store);
  assert.deepEqual(d.filesAdded, ["/new.txt"]);
  assert.deepEqual(d.filesModified, ["/log.txt"]);
  assert.deepEqual(d.filesRemoved, []);
  assert.equal(d.stateChanged, false);

  const reach = SnapshotGraph.reachable(second, store);
  assert.equal(reach.at(-1), second);
  assert.ok(reach.every((id) => store.has(id)));
  assert.ok(SnapshotGraph.reachableHistory(second, store).length >= reach.length);

  const back = new Workspace();
  const r = back.checkout(first, store);
  assert.equal(r.commit, first);
  assert.deepEqual(r.pins(), []);
  assert.equal(r.needsDriftCheck(), false);
  r.finish();
  assert.equal(text(back, "/log.txt"), "one\n");
  assert.ok(!back.exists("/new.txt"));
  assert.equal(dec.decode(back.state()), "state-1");
  assert.equal(back.head(), first);

  // A record and an object with get() are sources too.
  const record = Object.fromEntries(store);
  assert.deepEqual(SnapshotGraph.ancestry(second, record), [second, first]);
  const getter = { get: (id) => store.get(id) };
  assert.deepEqual(SnapshotGraph.diff(first, second, getter).filesAdded, ["/new.txt"]);
  assert.deepEqual(SnapshotGraph.ancestry(second, (id) => store.get(id)), [second, first]);
  assert.deepEqual(snapshotAncestry(second, store), [second, first]);
  assert.deepEqual(snapshotDiff(first, second, store).filesModified, ["/log.txt"]);
  assert.deepEqual(snapshotReachable(second, store), reach);
  assert.deepEqual(snapshotPlanCheckout(second, store), []);
  assert.equal(snapshotCapabilities(second, store), null);
});

test("a fork and a merge", () => {
  const store = new Map();
  const ws = new Workspace();
  ws.write("/a", "a");
  const base = persist(store, ws.commit({}));
  const fork = ws.copy();
  ws.write("/main", "m");
  const main = persist(store, ws.commit({ parents: [base], have: store }));
  fork.write("/fork", "f");
  const side = persist(store, fork.commit({ parents: [base], have: store }));
  assert.equal(ws.exists("/fork"), false, "a copy is independent");
  ws.write("/fork", "f");
  // `side` was made by the other workspace: the `have` source answers its lookup.
  const merge = persist(store, ws.commit({ parents: [main, side], have: store }));
  assert.equal(SnapshotGraph.commit(merge, store).generation, 3);
  const order = SnapshotGraph.ancestry(merge, store);
  assert.equal(order[0], merge);
  assert.equal(order.at(-1), base);
  assert.equal(order.length, 4);
  throwsCode(() => ws.copy().commit({ parents: [main, main] }), "INVALID_ARGUMENT", { id: main });
  const unknown = "ab".repeat(32);
  throwsCode(() => new Workspace().commit({ parents: [unknown] }), "UNKNOWN_PARENT", { id: unknown });
  // A parent this workspace did not make is read from parentSource.
  const other = new Workspace();
  other.write("/x", "x");
  throwsCode(() => other.copy().commit({ parents: [merge] }), "UNKNOWN_PARENT", { id: merge });
  const c = other.copy().commit({ parents: [merge], parentSource: store });
  assert.equal(c.generation, 4);
  // ... or from a `have` source, which answers parent lookups too.
  const h = other.copy().commit({ parents: [merge], have: store });
  assert.equal(h.generation, 4);
  assert.equal(h.id, c.id);
});

test("diff changes as values: kind, both sides, content ids", () => {
  const store = new Map();
  const ws = new Workspace();
  const big = new Uint8Array(20_000).map((_, i) => (i * 7) % 253);
  ws.write("/small", "hi");
  ws.write("/big.bin", big);
  ws.write("/mode.sh", "echo");
  ws.write("/gone", "bye");
  ws.write("/swap", "file first");
  ws.symlink("/link", "/small");
  const first = persist(store, ws.commit({}));
  big[0] ^= 1;
  ws.write("/big.bin", big);
  ws.setMode("/mode.sh", 0o755);
  ws.remove("/gone");
  ws.write("/added", "new");
  ws.remove("/swap");
  ws.symlink("/swap", "/small");
  const second = persist(store, ws.commit({ parents: [first], have: store }));

  const d = SnapshotGraph.diff(first, second, store);
  assert.deepEqual(
    d.changes.map((c) => [c.path, c.kind]),
    [
      ["/added", "added"],
      ["/big.bin", "modified"],
      ["/gone", "removed"],
      ["/mode.sh", "modeChanged"],
      ["/swap", "typeChanged"],
    ],
  );
  const by = Object.fromEntries(d.changes.map((c) => [c.path, c]));
  assert.equal(by["/added"].old, null);
  assert.deepEqual(by["/added"].new, { kind: "file", mode: by["/added"].new.mode, size: 3 });
  assert.ok(!("id" in by["/added"].new), "inline content has no id");
  const { old: o, new: n } = by["/big.bin"];
  assert.equal(o.kind, "file");
  assert.equal(o.size, 20_000);
  assert.equal(n.size, 20_000);
  assert.ok(typeof o.id === "string" && typeof n.id === "string" && o.id !== n.id);
  assert.ok(store.has(o.id) && store.has(n.id), "the ids name stored content");
  assert.equal(n.id, ws.fileContentId("/big.bin"));
  assert.equal(by["/gone"].new, null);
  assert.equal(by["/gone"].old.size, 3);
  assert.equal(by["/mode.sh"].new.mode, 0o755);
  assert.notEqual(by["/mode.sh"].old.mode, 0o755);
  assert.equal(by["/swap"].old.kind, "file");
  assert.equal(by["/swap"].new.kind, "symlink");
  assert.equal(by["/swap"].new.size, "/small".length);
  assert.ok(!("id" in by["/swap"].new), "a symlink has no content id");
  // The path lists are views of the changes.
  assert.deepEqual(d.filesAdded, ["/added"]);
  assert.deepEqual(d.filesModified, ["/big.bin", "/mode.sh", "/swap"]);
  assert.deepEqual(d.filesRemoved, ["/gone"]);
  assert.deepEqual(snapshotDiff(first, second, store).changes, d.changes);
  assert.deepEqual(SnapshotGraph.diff(second, second, store).changes, []);
  const back = SnapshotGraph.diff(second, first, store);
  assert.equal(back.changes.find((c) => c.path === "/added").kind, "removed");
});

test("commit excludeFiles and excludeState: empty side recorded, workspace kept", () => {
  const store = new Map();
  const ws = new Workspace();
  ws.write("/a.txt", "a");
  ws.setState(enc.encode("state"));
  const noFiles = ws.commit({ excludeFiles: true });
  const id1 = persist(store, noFiles);
  assert.equal(ws.head(), id1, "the head moves to the new commit");
  assert.equal(text(ws, "/a.txt"), "a", "the workspace keeps its files");
  const back = new Workspace();
  back.checkout(id1, store).free();
  assert.deepEqual(back.walk(), []);
  assert.equal(dec.decode(back.state()), "state");

  const id2 = persist(store, ws.commit({ parents: [id1], have: store, excludeState: true }));
  assert.equal(dec.decode(ws.state()), "state", "the workspace keeps its state");
  const back2 = new Workspace();
  back2.checkout(id2, store).free();
  assert.equal(text(back2, "/a.txt"), "a");
  assert.equal(back2.state().length, 0);
  const d = SnapshotGraph.diff(id1, id2, store);
  assert.deepEqual(d.filesAdded, ["/a.txt"]);
  assert.equal(d.stateChanged, true);

  const plain = persist(store, ws.copy().commit({}));
  assert.notEqual(plain, id1);
  assert.notEqual(plain, id2);
  throwsCode(() => ws.commit({ excludeFiles: "yes" }), "INVALID_ARGUMENT");
  throwsCode(() => ws.commit({ excludeState: 1 }), "INVALID_ARGUMENT");
  assert.equal(ws.head(), id2, "a refused commit changes nothing");
});

test("a checkout plan fetches everything in rounds, each object once", () => {
  const remote = new Map();
  const ws = new Workspace();
  for (let i = 0; i < 300; i++) ws.write(`/d${i % 7}/f${i}.txt`, `file ${i}\n`.repeat(i % 50));
  ws.write("/big.bin", new Uint8Array(300_000).map((_, i) => (i * 7919) % 251));
  const id = persist(remote, ws.commit({}));
  const local = new Map();
  const plan = new CheckoutPlan(id);
  let fetched = 0;
  for (let rounds = 0; ; rounds++) {
    assert.ok(rounds < 20);
    const missing = plan.missing(local);
    if (missing.length === 0) break;
    for (const m of missing) {
      assert.ok(!local.has(m), "asked once");
      local.set(m, remote.get(m));
      fetched++;
    }
  }
  assert.ok(plan.isDone());
  assert.equal(fetched, remote.size);
  assert.deepEqual(SnapshotGraph.planCheckout(id, local), []);
  const back = new Workspace();
  back.checkout(id, local).free();
  assert.deepEqual(back.walk(), ws.walk());
});

test("corrupt, truncated and swapped objects: typed errors naming the id, workspace unchanged", () => {
  const store = new Map();
  const ws = new Workspace();
  ws.write("/a.txt", "alpha");
  ws.write("/b.txt", "beta".repeat(2000));
  const id = persist(store, ws.commit({}));
  const target = new Workspace();
  target.write("/keep.txt", "keep");
  const before = JSON.stringify(target.walk());
  const victim = SnapshotGraph.reachable(id, store).find((x) => x !== id);

  const flipped = new Map(store);
  const bad = store.get(victim).slice();
  bad[bad.length - 1] ^= 1;
  flipped.set(victim, bad);
  throwsCode(() => target.checkout(id, flipped), "CORRUPT", { id: victim });

  const truncated = new Map(store);
  truncated.set(victim, store.get(victim).slice(0, 3));
  throwsCode(() => target.checkout(id, truncated), "CORRUPT", { id: victim });

  const swapped = new Map(store);
  swapped.set(victim, store.get(id));
  throwsCode(() => target.checkout(id, swapped), "CORRUPT", { id: victim });

  const missing = new Map(store);
  missing.delete(victim);
  throwsCode(() => target.checkout(id, missing), "NOT_FOUND", { id: victim });
  throwsCode(() => SnapshotGraph.diff(id, id.replace(/^./, "0"), store), "NOT_FOUND");

  // A chunk (kind byte 1) named as a commit.
  const chunkId = [...store.keys()].find((k) => store.get(k)[0] === 1);
  assert.ok(chunkId, "the 8 KB file is stored as a chunk");
  throwsCode(() => target.checkout(chunkId, store), "WRONG_KIND", { id: chunkId });

  const throwing = { get: () => { throw new Error("disk on fire"); } };
  throwsCode(() => target.checkout(id, throwing), "BACKEND", { id });
  const lying = { get: () => "not bytes" };
  throwsCode(() => target.checkout(id, lying), "BACKEND", { id });
  throwsCode(() => target.checkout(id, 17), "INVALID_ARGUMENT");
  throwsCode(() => target.checkout("nope", store), "INVALID_ID");
  throwsCode(() => target.checkout(id, store, { policy: "sometimes" }), "INVALID_ARGUMENT");

  assert.equal(JSON.stringify(target.walk()), before);
  assert.equal(text(target, "/keep.txt"), "keep");
  assert.equal(target.head(), null);

  assert.equal(verifyObject(id, store.get(id)), "commit");
  throwsCode(() => verifyObject(victim, bad), "CORRUPT", { id: victim });
});

test("packed snapshots: plain, compressed, keyed; wrong keys and tampering refused", () => {
  const ws = new Workspace();
  ws.write("/doc.md", "# title\n".repeat(100));
  ws.setState(enc.encode("opaque"));
  const plain = ws.snapshot();
  const zstd = ws.snapshot({ compress: true });
  assert.ok(zstd.length < plain.length);
  for (const bytes of [plain, zstd]) {
    const back = Workspace.fromSnapshot(bytes);
    assert.equal(text(back, "/doc.md"), "# title\n".repeat(100));
    assert.equal(dec.decode(back.state()), "opaque");
  }
  const noState = Workspace.fromSnapshot(ws.snapshot({ excludeState: true }));
  assert.equal(noState.state().length, 0);

  const key = new Uint8Array(32).fill(7);
  const keyed = ws.snapshotKeyed(key);
  assert.equal(text(Workspace.fromSnapshotKeyed(keyed, key), "/doc.md"), "# title\n".repeat(100));
  throwsCode(() => Workspace.fromSnapshotKeyed(keyed, new Uint8Array(32)), "NOT_AUTHENTIC");
  throwsCode(() => Workspace.fromSnapshot(keyed), "KEY_REQUIRED");
  throwsCode(() => Workspace.fromSnapshotKeyed(plain, key), "NOT_KEYED");
  throwsCode(() => ws.snapshotKeyed(new Uint8Array(31)), "INVALID_ARGUMENT");
  throwsCode(() => Workspace.fromSnapshot(new Uint8Array([1, 2, 3])), "CORRUPT");
  throwsCode(() => Workspace.fromSnapshot(plain.slice(0, plain.length - 9)), "CORRUPT");
  const tampered = plain.slice();
  tampered[plain.length >> 1] ^= 0x10;
  throwsCode(() => Workspace.fromSnapshot(tampered), "CORRUPT");
  throwsCode(() => Workspace.fromSnapshot(plain, { maxFiles: 0 }), "LIMIT");

  const target = new Workspace();
  target.write("/mine", "mine");
  throwsCode(() => target.restoreSnapshot(tampered), "CORRUPT");
  throwsCode(() => target.restoreSnapshotKeyed(keyed, new Uint8Array(32).fill(1)), "NOT_AUTHENTIC");
  assert.equal(text(target, "/mine"), "mine");
  target.restoreSnapshot(plain).free();
  assert.ok(!target.exists("/mine"));
  target.restoreSnapshotKeyed(keyed, key).free();
  assert.equal(text(target, "/doc.md"), "# title\n".repeat(100));
});

test("snapgraph pack files from the corpus restore", () => {
  const corpus = new URL("../../../corpus/v1/", import.meta.url);
  const snap = readFileSync(fileURLToPath(new URL("snapshot.snap", corpus)));
  const zstd = readFileSync(fileURLToPath(new URL("snapshot-zstd.snap", corpus)));
  const keyed = readFileSync(fileURLToPath(new URL("snapshot-keyed.snap", corpus)));
  const a = Workspace.fromSnapshot(snap);
  const b = Workspace.fromSnapshot(zstd);
  const c = Workspace.fromSnapshotKeyed(keyed, new Uint8Array(32).fill(0x42));
  assert.ok(a.walk().length > 400);
  assert.deepEqual(b.walk(), a.walk());
  assert.deepEqual(c.walk(), a.walk());
  for (const f of a.walk().filter((e) => e.kind === "file")) {
    assert.deepEqual(b.read(f.path), a.read(f.path));
  }
  assert.equal(formatVersion(), 2);
});

test("capabilities, content rules, recorded reads and drift checks", () => {
  const store = new Map();
  const ws = new Workspace();
  ws.setCapabilities({ builtins: ["ls"], features: ["sqlite"], fsBackend: "mem", engineVersion: "1" });
  ws.write("/db", "SQLite format 3\0...");
  ws.recordRead({ source: "s3://b/k", fingerprint: "etag-1", size: 5, cachedAt: "/cache/k" });
  ws.recordRead({ source: "git://r", fingerprint: "f", revision: "abc", size: 1 });
  assert.deepEqual(ws.externalReads().map((r) => r.source), ["git://r", "s3://b/k"]);
  const id = persist(store, ws.commit({}));
  assert.deepEqual(SnapshotGraph.capabilities(id, store).features, ["sqlite"]);
  assert.equal(SnapshotGraph.externalReads(id, store)[1].cachedAt, "/cache/k");

  const bare = new Workspace();
  throwsCode(() => bare.checkout(id, store), "CAPABILITY", { commit: id });
  const strict = new Workspace();
  strict.setCapabilities({ builtins: ["ls", "cat"], features: ["sqlite"], fsBackend: "mem" });
  throwsCode(() => strict.checkout(id, store, { policy: "strict" }), "CAPABILITY");
  const ruled = new Workspace();
  ruled.requireFeatureForPrefix(enc.encode("SQLite format 3\0"), "sqlite");
  throwsCode(() => ruled.checkout(id, store, { policy: "force" }), "CAPABILITY", { path: "/db" });

  const ok = new Workspace();
  ok.setCapabilities({ builtins: ["ls", "cat"], features: ["sqlite"], fsBackend: "mem" });
  const r = ok.checkout(id, store);
  assert.equal(r.pins()[0].revision, "abc");
  assert.equal(r.revisionFor("git://r"), "abc");
  assert.ok(r.needsDriftCheck());
  assert.deepEqual(r.pending(), ["s3://b/k"]);
  assert.deepEqual(r.expected(), { "s3://b/k": "etag-1" });
  throwsCode(() => r.finish(), "DRIFT", { commit: id });
  assert.equal(r.supply("s3://other", "x"), false);
  assert.equal(r.supply("s3://b/k", "etag-2"), true);
  throwsCode(() => r.finish(), "DRIFT");
  r.supply("s3://b/k", "etag-1");
  r.finish();

  const off = new Workspace();
  off.setCapabilities({ builtins: ["ls"], features: ["sqlite"], fsBackend: "mem" });
  const r2 = off.checkout(id, store, { drift: "off" });
  assert.deepEqual(r2.stale(), ["/cache/k"]);
  assert.ok(off.isStale("/cache/k"));
  assert.deepEqual(off.stalePaths(), ["/cache/k"]);
  assert.equal(off.forgetRead("s3://b/k").fingerprint, "etag-1");
  assert.equal(off.forgetRead("s3://b/k"), null);
});

test("shallow checkout and loadContent", () => {
  const store = new Map();
  const ws = new Workspace();
  ws.write("/big.txt", "x".repeat(10_000));
  const id = persist(store, ws.commit({}));
  const s = new Workspace();
  s.checkout(id, store, { shallow: true }).free();
  assert.equal(s.isLoaded("/big.txt"), false);
  assert.match(s.fileContentId("/big.txt"), /^[0-9a-f]{64}$/);
  throwsCode(() => s.read("/big.txt"), "NOT_LOADED", { path: "/big.txt" });
  throwsCode(() => s.snapshot(), "NOT_LOADED", { path: "/big.txt" });
  s.loadContent("/big.txt", store);
  assert.equal(text(s, "/big.txt").length, 10_000);
});

test("arguments of the wrong type are INVALID_ARGUMENT and leave the object usable", () => {
  const ws = new Workspace();
  ws.write("/a", "a");
  throwsCode(() => ws.setState("text"), "INVALID_ARGUMENT");
  throwsCode(() => ws.setState(undefined), "INVALID_ARGUMENT");
  throwsCode(() => ws.requireFeatureForPrefix(7, "sqlite"), "INVALID_ARGUMENT");
  throwsCode(() => ws.snapshotKeyed("not a key"), "INVALID_ARGUMENT");
  throwsCode(() => ws.restoreSnapshot({ length: 3 }), "INVALID_ARGUMENT");
  throwsCode(() => ws.restoreSnapshotKeyed(ws.snapshot(), null), "INVALID_ARGUMENT");
  throwsCode(() => Workspace.fromSnapshot([1, 2, 3]), "INVALID_ARGUMENT");
  throwsCode(() => Workspace.fromSnapshotKeyed(ws.snapshot(), new Uint8Array(32), { maxFiles: "many" }), "INVALID_ARGUMENT");
  throwsCode(() => verifyObject("ab".repeat(32), "bytes"), "INVALID_ARGUMENT");
  throwsCode(() => ws.commit({ parents: "abc" }), "INVALID_ARGUMENT");
  throwsCode(() => ws.commit({ meta: { n: 1 } }), "INVALID_ARGUMENT");
  throwsCode(() => ws.commit("options"), "INVALID_ARGUMENT");
  throwsCode(() => ws.commit(() => ({})), "INVALID_ARGUMENT");
  throwsCode(() => ws.commit({ parents: [1] }), "INVALID_ARGUMENT");
  throwsCode(() => ws.commit({ parents: ["zz".repeat(32)] }), "INVALID_ID");
  throwsCode(() => ws.commit({ parents: "ab".repeat(32) }), "INVALID_ARGUMENT");
  throwsCode(() => ws.commit({ excludeState: 1 }), "INVALID_ARGUMENT");
  throwsCode(() => ws.commit({ have: 5 }), "INVALID_ARGUMENT");
  throwsCode(() => ws.commit({ parentSource: "store" }), "INVALID_ARGUMENT");
  throwsCode(() => ws.commit({ have: { __snapgraphHaveSet: 1e9 } }), "INVALID_ARGUMENT");
  throwsCode(() => ws.setCapabilities({ builtins: [1] }), "INVALID_ARGUMENT");
  throwsCode(() => ws.recordRead({ fingerprint: "f" }), "INVALID_ARGUMENT");
  throwsCode(() => SnapshotGraph.ancestry("ab".repeat(32), new Map(), -1), "INVALID_ARGUMENT");
  // Every failed call released the workspace: it still works.
  ws.setState(new Uint8Array([1]));
  assert.equal(text(ws, "/a"), "a");
  assert.equal(ws.commit({}).generation, 1);
});

test("limits are read and set", () => {
  const ws = new Workspace();
  const l = ws.limits();
  assert.equal(l.maxFiles, 10_000_000);
  ws.setLimits({ maxFiles: 1 });
  assert.equal(ws.limits().maxFiles, 1);
  assert.equal(ws.limits().maxBytes, l.maxBytes);
  throwsCode(() => ws.setLimits({ maxFiles: -1 }), "INVALID_ARGUMENT");
  const store = new Map();
  const src = new Workspace();
  src.write("/a", "a");
  src.write("/b", "b");
  const id = persist(store, src.commit({}));
  throwsCode(() => ws.checkout(id, store), "LIMIT", { commit: id });
});

test("randomized round trip: random edits, commits and checkouts agree with a model", () => {
  let seed = 0x5eed;
  const rand = (n) => {
    seed = (seed * 1103515245 + 12345) >>> 0;
    return seed % n;
  };
  const store = new Map();
  const ws = new Workspace();
  const model = new Map();
  const commits = [];
  for (let step = 0; step < 300; step++) {
    const op = rand(10);
    const path = `/d${rand(4)}/f${rand(12)}`;
    if (op < 5) {
      const bytes = new Uint8Array(rand(3) === 0 ? 9000 + rand(20000) : rand(100)).map(() => rand(256));
      ws.write(path, bytes);
      model.set(path, bytes);
    } else if (op < 7 && model.has(path)) {
      ws.remove(path);
      model.delete(path);
    } else if (op < 9) {
      const c = ws.commit({ parents: ws.head() ? [ws.head()] : [], have: store });
      commits.push([persist(store, c), new Map(model)]);
    } else if (commits.length > 0) {
      const [id, snap] = commits[rand(commits.length)];
      ws.checkout(id, store).free();
      model.clear();
      for (const [p, b] of snap) model.set(p, b);
    }
    // Directories emptied by removes stay: compare files only.
    const files = ws.walk().filter((e) => e.kind === "file").map((e) => e.path);
    assert.deepEqual(files, [...model.keys()].sort());
  }
  for (const [id, snap] of commits) {
    const back = new Workspace();
    back.checkout(id, store).free();
    for (const [p, b] of snap) assert.deepEqual(back.read(p), b);
    const packed = Workspace.fromSnapshot(back.snapshot());
    assert.deepEqual(packed.walk(), back.walk());
  }
});

test("have as a Map or a Set is asked in one batch, with the answers of a per-id has", () => {
  const ws = new Workspace();
  for (let i = 0; i < 300; i++) ws.write(`/d${i % 3}/f${i}`, `file ${i} `.repeat(50));
  const store = new Map();
  let head = persist(store, ws.commit({}));
  for (let turn = 1; turn <= 5; turn++) {
    ws.write(`/d${turn % 3}/f${turn * 7}`, `turn ${turn}`);
    let calls = 0;
    const counted = { get: (id) => store.get(id), has: (id) => (calls++, store.has(id)) };
    const viaSet = ws.copy();
    const viaIds = ws.copy();
    const viaHeld = ws.copy();
    const c = ws.commit({ parents: [head], have: counted });
    assert.ok(calls > 1, "every question answered");
    const s = viaSet.commit({ parents: [head], have: new Set(store.keys()) });
    const l = viaIds.commit({ parents: [head], have: [...store.keys()] });
    const held = new HaveSet();
    held.addAll(store);
    const h = viaHeld.commit({ parents: [head], have: held });
    held.free();
    assert.equal(s.id, c.id);
    assert.equal(h.id, c.id);
    assert.deepEqual(Object.keys(s.objects), Object.keys(c.objects));
    assert.deepEqual(Object.keys(l.objects), Object.keys(c.objects));
    assert.deepEqual(Object.keys(h.objects), Object.keys(c.objects));
    assert.ok(Object.keys(c.objects).every((id) => !store.has(id)));
    // The objects are views of one copy out of wasm memory (in a buffer shared with
    // other small commits, as Node's small Buffers share a pool), one after the
    // other, each exactly its stored bytes.
    const values = Object.values(c.objects);
    assert.equal(new Set(values.map((b) => b.buffer)).size, 1);
    values.slice(1).forEach((b, i) => assert.equal(b.byteOffset, values[i].byteOffset + values[i].length));
    assert.equal(values.reduce((n, b) => n + b.length, 0), c.storedBytes);
    for (const [id, b] of Object.entries(c.objects)) verifyObject(id, b);
    head = persist(store, c);
  }
  const out = new Workspace();
  out.checkout(head, store);
  assert.equal(text(out, "/d2/f35"), "turn 5");
});

test("a have whose has() throws counts as holding nothing", () => {
  const ws = new Workspace();
  ws.write("/a.txt", "alpha");
  ws.write("/dir/b.txt", "beta");
  const store = new Map();
  const first = persist(store, ws.commit({}));
  ws.write("/a.txt", "alpha 2");
  const full = ws.copy().commit({ parents: [first] });
  const throwing = { get: (id) => store.get(id), has: () => { throw new Error("offline"); } };
  const c = ws.copy().commit({ parents: [first], have: throwing });
  assert.deepEqual(Object.keys(c.objects).sort(), Object.keys(full.objects).sort());
  assert.ok(c.isComplete);
});

test("a HaveSet: ids in wasm memory, as a commit's have", () => {
  const ws = new Workspace();
  for (let i = 0; i < 50; i++) ws.write(`/d${i % 5}/f${i}`, `file ${i}`.repeat(20));
  const store = new Map();
  const held = new HaveSet();
  const keep = (c) => {
    persist(store, c);
    held.addAll(c.objects);
    return c.id;
  };
  let head = keep(ws.commit({}));
  assert.equal(held.size, store.size);
  assert.ok([...store.keys()].every((id) => held.has(id)));
  for (let turn = 0; turn < 4; turn++) {
    ws.write(`/d${turn}/f${turn * 5}`, `turn ${turn}`);
    const viaMap = ws.copy().commit({ parents: [head], have: store });
    const c = ws.commit({ parents: [head], have: held });
    assert.equal(c.id, viaMap.id);
    assert.deepEqual(Object.keys(c.objects), Object.keys(viaMap.objects));
    assert.ok(!c.isComplete);
    head = keep(c);
  }
  const out = new Workspace();
  out.checkout(head, store);
  assert.equal(text(out, "/d3/f15"), "turn 3");

  // Ids from a record, a Map, a Set, an array or any iterable; all or none.
  const other = new HaveSet();
  const [a, b, c] = [...store.keys()];
  other.addAll({ [a]: new Uint8Array() });
  other.addAll(new Map([[b, 1]]));
  other.addAll(new Set([c]));
  other.addAll([a, b]);
  other.addAll(new Set([a]).values());
  assert.equal(other.size, 3);
  throwsCode(() => other.addAll([a, "zz".repeat(32)]), "INVALID_ID");
  throwsCode(() => other.addAll([a.slice(0, 32), a.slice(32)]), "INVALID_ARGUMENT");
  throwsCode(() => other.addAll(["x"]), "INVALID_ARGUMENT");
  throwsCode(() => other.addAll(7), "INVALID_ARGUMENT");
  throwsCode(() => other.addAll("abc"), "INVALID_ARGUMENT");
  throwsCode(() => other.add("nope"), "INVALID_ID");
  assert.equal(other.size, 3, "a refused batch adds nothing");
  assert.equal(other.has("nope"), false);
  assert.equal(other.delete(a), true);
  assert.equal(other.delete(a), false);
  assert.equal(other.has(a), false);
  other.add(a);
  assert.equal(other.has(a), true);
  other.clear();
  assert.equal(other.size, 0);
  assert.equal(held.size, store.size, "sets are independent");

  // An empty set holds nothing: everything is emitted.
  const full = ws.copy().commit({ parents: [head], have: other });
  assert.ok(full.isComplete);
  // It holds ids, not bytes: a parent this workspace did not make needs parentSource.
  const stranger = new Workspace();
  stranger.write("/x", "x");
  throwsCode(() => stranger.copy().commit({ parents: [head], have: held }), "UNKNOWN_PARENT", { id: head });
  const merged = stranger.commit({ parents: [head], have: held, parentSource: store });
  assert.equal(merged.generation, 6);
  // A freed set is refused with a typed error, and the workspace is unchanged.
  other.free();
  const before = ws.head();
  throwsCode(() => ws.commit({ parents: [head], have: other }), "INVALID_ARGUMENT");
  assert.equal(ws.head(), before);
  held.free();
});
