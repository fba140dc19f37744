// An object store for the browser: snapgraph objects and refs in IndexedDB.
//
// The same contract as the Rust `Store` trait (crates/snapgraph-store/src/store.rs):
// objects are the engine's stored bytes keyed by hex id, written in batches, held
// objects left as they are; refs are names for commits changed only by
// compare-and-swap, atomically in batches (all or none), each change appended to the
// ref's reflog. Names follow `validate_ref_name`. Errors are `Error`s with a `code`
// (`REF_CONFLICT`, `INVALID_REF`, `INVALID_ID`, `BACKEND`), like the engine's.
//
// Every call is asynchronous (IndexedDB is); the engine's calls are synchronous, so a
// page loads what a call needs into a `Map` first (see `ObjectCache` in app.js).
// The store does not verify bytes on read: the engine re-hashes every object it
// reads, and `verifyObject` from the wasm module checks bytes where they arrive.

const OBJECTS = "objects";
const REFS = "refs";
const REFLOG = "reflog";
const LEASES = "snapgraph/lease/";
const MAX_REF_NAME = 255;

function storeError(code, message, extra = {}) {
  const e = new Error(message);
  e.code = code;
  Object.assign(e, extra);
  return e;
}

/** Throws INVALID_REF_NAME unless `name` is a valid ref name (the Rust rule). */
export function validateRefName(name) {
  const bad = (reason) => {
    throw storeError("INVALID_REF", `invalid ref name ${JSON.stringify(String(name).slice(0, 300))}: ${reason}`, { name });
  };
  if (typeof name !== "string" || name.length === 0) bad("empty");
  if (new TextEncoder().encode(name).length > MAX_REF_NAME) bad("longer than 255 bytes");
  if (!/^[A-Za-z0-9._\-+=@/]+$/.test(name)) bad("only ASCII letters, digits and . _ - + = @ / are allowed");
  if (name.split("/").some((c) => c === "" || c === "." || c === "..")) bad("empty, '.' or '..' path component");
}

const HEX_ID = /^[0-9a-f]{64}$/;

function checkId(id, what) {
  if (typeof id !== "string" || !HEX_ID.test(id)) {
    throw storeError("INVALID_ID", `${what} must be a 64-digit lowercase hex object id, got ${JSON.stringify(id)}`);
  }
}

/** IndexedDB's own failures (quota, a closed database) as `BACKEND` errors. */
function backend(err, what) {
  return storeError("BACKEND", `IndexedDB ${what} failed: ${err?.name ?? "Error"}: ${err?.message ?? err}`);
}

function request(req) {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(backend(req.error, "request"));
  });
}

function done(tx) {
  return new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onabort = () => reject(backend(tx.error, "transaction"));
    tx.onerror = () => reject(backend(tx.error, "transaction"));
  });
}

export class IdbStore {
  /** Opens (creating if needed) the database `name`. */
  static async open(name = "snapgraph") {
    const req = indexedDB.open(name, 1);
    req.onupgradeneeded = () => {
      const db = req.result;
      db.createObjectStore(OBJECTS);
      db.createObjectStore(REFS);
      const log = db.createObjectStore(REFLOG, { autoIncrement: true });
      log.createIndex("name", "name");
    };
    const db = await request(req);
    return new IdbStore(db);
  }

  constructor(db) {
    this.db = db;
  }

  close() {
    this.db.close();
  }

  /** The stored bytes of each id, in the order asked; `undefined` where absent. */
  async getMany(ids) {
    ids.forEach((id) => checkId(id, "id"));
    if (ids.length === 0) return [];
    const tx = this.db.transaction(OBJECTS, "readonly");
    const os = tx.objectStore(OBJECTS);
    const got = await Promise.all(ids.map((id) => request(os.get(id))));
    return got.map((v) => (v === undefined ? undefined : new Uint8Array(v)));
  }

  /** The ids among `ids` the store does not hold, in the order asked. */
  async hasMany(ids) {
    ids.forEach((id) => checkId(id, "id"));
    if (ids.length === 0) return [];
    const tx = this.db.transaction(OBJECTS, "readonly");
    const os = tx.objectStore(OBJECTS);
    const counts = await Promise.all(ids.map((id) => request(os.count(id))));
    return ids.filter((_, i) => counts[i] === 0);
  }

  /**
   * Writes objects, `[[id, bytes], ...]` or a record `{ id: bytes }`, in order, in one
   * transaction (durable when it resolves). Already held objects are left as they are.
   */
  async putMany(objects) {
    const entries = Array.isArray(objects) ? objects : Object.entries(objects);
    for (const [id, bytes] of entries) {
      checkId(id, "id");
      if (!(bytes instanceof Uint8Array)) throw storeError("INVALID_ARGUMENT", `object ${id}: bytes must be a Uint8Array`);
    }
    if (entries.length === 0) return;
    const tx = this.db.transaction(OBJECTS, "readwrite", { durability: "strict" });
    const os = tx.objectStore(OBJECTS);
    for (const [id, bytes] of entries) {
      // Same id, same bytes: overwriting a held object leaves it as it is. Store a
      // copy of exactly the bytes (a view may cover a larger buffer).
      os.put(bytes.slice(), id);
    }
    await done(tx);
  }

  /** Deletes objects; absent ones are ignored. */
  async deleteMany(ids) {
    ids.forEach((id) => checkId(id, "id"));
    const tx = this.db.transaction(OBJECTS, "readwrite");
    const os = tx.objectStore(OBJECTS);
    for (const id of ids) os.delete(id);
    await done(tx);
  }

  /** Every object id held, sorted. */
  async ids() {
    const tx = this.db.transaction(OBJECTS, "readonly");
    return request(tx.objectStore(OBJECTS).getAllKeys());
  }

  /** The value of a ref, or `null`. */
  async getRef(name) {
    validateRefName(name);
    const tx = this.db.transaction(REFS, "readonly");
    const v = await request(tx.objectStore(REFS).get(name));
    return v ?? null;
  }

  /**
   * Applies every update or none: `updates` is `[{ name, expected, new }]` where
   * `expected` is what the ref must hold now (`null`: must not exist) and `new` what it
   * will hold (`null`: delete it). An update whose `expected` equals its `new` changes
   * nothing but guards the batch. If any ref does not hold its `expected` value,
   * nothing changes and the error is `REF_CONFLICT` for the first such ref.
   */
  async updateRefs(updates, message = "") {
    const seen = new Set();
    for (const u of updates) {
      validateRefName(u.name);
      if (seen.has(u.name)) {
        throw storeError("INVALID_REF", `invalid ref name ${JSON.stringify(u.name)}: named twice in one atomic update`, { name: u.name });
      }
      seen.add(u.name);
      if (u.expected != null) checkId(u.expected, "expected");
      if (u.new != null) checkId(u.new, "new");
    }
    const tx = this.db.transaction([REFS, REFLOG], "readwrite", { durability: "strict" });
    const refs = tx.objectStore(REFS);
    const log = tx.objectStore(REFLOG);
    const finished = done(tx);
    // Read every ref inside the transaction: nothing else can write them until it ends.
    const actual = await Promise.all(updates.map((u) => request(refs.get(u.name))));
    for (let i = 0; i < updates.length; i++) {
      const u = updates[i];
      const a = actual[i] ?? null;
      if (a !== (u.expected ?? null)) {
        tx.abort();
        await finished.catch(() => {});
        throw storeError(
          "REF_CONFLICT",
          `ref ${u.name} holds ${a ?? "nothing"}, expected ${u.expected ?? "nothing"}`,
          { name: u.name, expected: u.expected ?? null, actual: a },
        );
      }
    }
    for (const u of updates) {
      const expected = u.expected ?? null;
      const next = u.new ?? null;
      if (expected === next) continue;
      if (next === null) refs.delete(u.name);
      else refs.put(next, u.name);
      if (!u.name.startsWith(LEASES)) {
        log.add({ name: u.name, old: expected, new: next, message: String(message) });
      }
    }
    await finished;
  }

  /** Moves `name` from `expected` to `next` if it still holds `expected`. */
  compareAndSwapRef(name, expected, next, message = "") {
    return this.updateRefs([{ name, expected, new: next }], message);
  }

  /** Deletes `name` if it still holds `expected`. */
  deleteRef(name, expected, message = "") {
    return this.updateRefs([{ name, expected, new: null }], message);
  }

  /** Every ref whose name starts with `prefix`, sorted by name: `[[name, id]]`. */
  async listRefs(prefix = "") {
    const tx = this.db.transaction(REFS, "readonly");
    const os = tx.objectStore(REFS);
    const [keys, values] = await Promise.all([request(os.getAllKeys()), request(os.getAll())]);
    return keys.map((k, i) => [k, values[i]]).filter(([k]) => k.startsWith(prefix));
  }

  /** The moves of a ref, oldest first (kept after the ref is deleted): `[{ old, new, message }]`. */
  async reflog(name) {
    validateRefName(name);
    const tx = this.db.transaction(REFLOG, "readonly");
    const rows = await request(tx.objectStore(REFLOG).index("name").getAll(name));
    return rows.map(({ old, new: next, message }) => ({ old, new: next, message }));
  }
}
