/* Hand-written declarations prepended to the generated ones (package.json napi.dtsHeaderFile). */

/**
 * Where the engine reads objects from: a record or `Map` of id to bytes, a lookup
 * function, or a snapgraph `Store` / `Repo`. Read lazily, one id at a time; every
 * object read is re-hashed, so nothing returned here is trusted.
 */
export type Objects =
  | Record<string, Uint8Array>
  | Map<string, Uint8Array>
  | { get(id: string): Uint8Array | null | undefined; has?(id: string): boolean }
  | ((id: string) => Uint8Array | null | undefined)
  | Store
  | Repo

/** Options of `Workspace.commit`. */
export interface CommitOptions {
  /** Parent commits, in order (none: a root commit). */
  parents?: string[]
  /**
   * What the destination already holds: ids (each with its whole closure), or an
   * `Objects` value (a `Set` of ids works too) asked about the objects on changed
   * paths only, in one batch per commit: a `Map` or `Set` (anything with `has`) in one
   * call into JavaScript, a `Store` in one query.
   */
  have?: string[] | Objects | Set<string>
  /** Where to read parent commits this workspace did not make or check out. */
  parentSource?: Objects
  /** Metadata stored in the commit. */
  meta?: Record<string, string>
  /** Leave the files out of the commit. */
  excludeFiles?: boolean
  /** Leave the interpreter state out of the commit. */
  excludeState?: boolean
  /**
   * How the result holds its objects: `'record'` (the default, Bashkit's
   * `Record<string, Buffer>`) or `'map'` (a `Map<string, Buffer>` in the same
   * dependency order; cheaper to build and to iterate per turn). Anything else is
   * `INVALID_ARGUMENT`.
   */
  objectsAs?: 'record' | 'map'
}

/** A commit result whose `objects` is a `Map` (commit option `objectsAs: 'map'`). */
export type CommitResultMap = Omit<CommitResult, 'objects'> & { objects: Map<string, Buffer> }

/** What `Workspace.commit` returns for options `O`: `objects` a `Map` with `objectsAs: 'map'`. */
export type CommitResultOf<O> = O extends { objectsAs: 'map' } ? CommitResultMap : CommitResult

/** Options of `Workspace.checkout` and `Repo.checkoutInto`. */
export interface CheckoutOptions {
  /** How the snapshot's capabilities must relate to the workspace's (default `'superset'`). */
  policy?: 'superset' | 'strict' | 'force'
  /** Whether recorded external reads come back as a drift check (default `'strict'`). */
  drift?: 'strict' | 'off'
  /** Load trees only; file content stays in the source until `loadContent`. */
  shallow?: boolean
}

/** Options of `Workspace.snapshot`. */
export interface SnapshotOptions {
  excludeFiles?: boolean
  excludeState?: boolean
  /** zstd-compress the body. */
  compress?: boolean
}

/** Options of `Repo.commit`. */
export interface RepoCommitOptions {
  message?: string
  meta?: Record<string, string>
  /** Parents besides the workspace's head (a merge). */
  extraParents?: string[]
  /** Let a workspace without a head become the branch's next commit. */
  ontoTip?: boolean
}

/** Every error this package throws. `code` is stable; see README.md for the table. */
export interface SnapgraphError extends Error {
  code: string
}

/**
 * Which binding artifact the generated loader actually loaded: `'native'` for
 * a native addon, otherwise the `platformArchABI` of the WASI flavor. Every
 * flavor napi-rs can build is listed, because `NAPI_RS_NATIVE_LIBRARY_PATH`
 * can point the loader at a WASI artifact this package does not build itself.
 */
export declare const __napiBindingTarget: 'native' | 'wasm32-wasi' | 'wasm32-wasip1'

/**
 * A checkout fetch loop that resumes where the last round stopped, so the whole
 * loop reads each object once.
 */
export declare class CheckoutPlan {
  /** A plan for checking out commit `id`. */
  constructor(id: string)
  /** The ids to fetch this round (`[]`: the checkout has everything). */
  missing(objects: Objects): Array<string>
  /** Whether the last round found nothing missing. */
  isDone(): boolean
}

/**
 * Branches, commits with compare-and-swap, checkouts, forks and labelled
 * snapshots over a store.
 */
export declare class Repo {
  /** A repository over `store`. */
  constructor(store: Store)
  /** A repository over the store at `url` (see `open`). */
  static open(url: string): Repo
  /** `Repo.open` on the thread pool. */
  static openAsync(url: string): Promise<Repo>
  /** The store behind the repository. */
  get store(): Store
  /** The commit a revision names: a branch, a snapshot name or an id. */
  resolve(rev: string): string
  /** A branch's tip, if the branch exists. */
  branch(name: string): string | null
  /** Every branch with its tip, sorted by name. */
  branches(): Array<RefEntry>
  /**
   * Commits `ws` to `branch` and moves the branch by compare-and-swap:
   * `{ message?, meta?, extraParents?, ontoTip? }`. Only what the store lacks is
   * written. On error the workspace is unchanged.
   */
  commit(ws: Workspace, branch: string, options?: RepoCommitOptions): Committed
  /** `commit` on the thread pool (the workspace is `BUSY` meanwhile). */
  commitAsync(ws: Workspace, branch: string, options?: RepoCommitOptions): Promise<Committed>
  /** A new workspace at `rev`, every object verified. */
  checkout(rev: string): Workspace
  /** `checkout` on the thread pool. */
  checkoutAsync(rev: string): Promise<Workspace>
  /**
   * A new workspace at `rev` with trees only: file content stays in the store
   * until `loadContent`, and a commit back costs what changed.
   */
  checkoutShallow(rev: string): Workspace
  /** `checkoutShallow` on the thread pool. */
  checkoutShallowAsync(rev: string): Promise<Workspace>
  /**
   * Checks `rev` out into an existing workspace (keeping its limits and
   * capabilities), all or nothing: `{ policy?, drift? }`.
   */
  checkoutInto(ws: Workspace, rev: string, options?: CheckoutOptions): Restore
  /** Commits of `rev` and its ancestors, newest first, at most `limit`. */
  log(rev: string, limit?: number | undefined | null): Array<CommitInfo>
  /** `log` on the thread pool. */
  logAsync(rev: string, limit?: number | undefined | null): Promise<CommitInfo[]>
  /** Labels `at` as snapshot `name` (a tag commit under `tags/`). */
  tag(name: string, at: string, labels?: Record<string, string> | undefined | null): SnapshotInfo
  /** Every labelled snapshot, sorted by name. */
  snapshots(): Array<SnapshotInfo>
  /** One labelled snapshot. */
  inspect(name: string): SnapshotInfo
  /** Drops a snapshot's name (`IN_USE` if a branch still needs it, unless `force`). */
  removeSnapshot(name: string, force?: boolean | undefined | null): SnapshotInfo
  /** Starts branch `newBranch` at revision `at`; returns the commit. */
  fork(newBranch: string, at: string): string
  /** Deletes a branch if it is still at `expected`. */
  deleteBranch(name: string, expected: string): void
  /** Rebuilds refs from the objects present (lost snapshots, `lost-found/`). */
  reindex(): ReindexReport
  /** `sync(this, dst, 'heads/' + branch, options)`. */
  sync(dst: Store | Repo, branch: string, options?: { force?: boolean }): SyncReport
  /** `gc(this, options)`. */
  gc(options?: { pins?: string[] }): GcReport
  /** `verify(this, readData)`. */
  verify(readData?: boolean | undefined | null): VerifyReport
}

/**
 * What a checkout or restore hands back about the restored commit's external
 * reads: pins to serve, stale paths, and the drift check to drive before first use.
 */
export declare class Restore {
  /** The restored commit. */
  get commit(): string
  /** Reads recorded with a revision: serve exactly these revisions. */
  pins(): Array<Read>
  /** The pinned revision of `source`, if any. */
  revisionFor(source: string): string | null
  /** Workspace paths whose cached bytes must be re-read live. */
  stale(): Array<string>
  /** Whether a drift check must run before first use. */
  needsDriftCheck(): boolean
  /** Sources the drift check still needs a live fingerprint for, sorted. */
  pending(): Array<string>
  /** Every source the drift check covers, with its snapshot fingerprint. */
  expected(): Record<string, string>
  /**
   * Supplies the live fingerprint of `source` (`null`: it no longer exists).
   * False, recording nothing, for a source the check does not cover.
   */
  supply(source: string, live?: string | undefined | null): boolean
  /**
   * Succeeds when every covered source was supplied and none moved; else throws
   * `DRIFT` naming them. Calling it again gives the same answer.
   */
  finish(): void
}

/** History queries; every object read is verified. */
export declare class SnapshotGraph {
  /** What changed from commit `a` to commit `b`; identical subtrees are not read. */
  static diff(a: string, b: string, objects: Objects): DiffResult
  /** `id` and its ancestors, newest first, topological, at most `limit`. */
  static ancestry(id: string, objects: Objects, limit?: number): Array<string>
  /**
   * Every object commit `id` needs (parents not followed), referenced objects
   * first, the commit last.
   */
  static reachable(id: string, objects: Objects): Array<string>
  /** Every object of `id`'s whole history (what a collector must keep). */
  static reachableHistory(id: string, objects: Objects): Array<string>
  /**
   * The objects still missing for a checkout of `id`: fetch them and call again
   * until it returns `[]` (or use a `CheckoutPlan`, which resumes).
   */
  static planCheckout(id: string, objects: Objects): Array<string>
  /** The capability fingerprint commit `id` recorded, if any. */
  static capabilities(id: string, objects: Objects): Capabilities | null
  /** The external reads commit `id` recorded. */
  static externalReads(id: string, objects: Objects): Array<Read>
  /** Commit `id`, decoded. */
  static commit(id: string, objects: Objects): CommitInfo
}

/** A snapgraph store: SQLite, PostgreSQL, a directory, or memory. */
export declare class Store {
  /** `open(url)` as a static. */
  static open(url: string): Store
  /** The verified bytes of each id, in order; `null` where absent. */
  getMany(ids: Array<string>): Array<Buffer | undefined | null>
  /** `getMany` on the thread pool. */
  getManyAsync(ids: Array<string>): Promise<Array<Buffer | null>>
  /**
   * The ids among `ids` the store does not hold, in the order given (Rust's
   * `Store::has_many`, Python's `Store.missing`).
   */
  missing(ids: Array<string>): Array<string>
  /** `missing` on the thread pool. */
  missingAsync(ids: Array<string>): Promise<string[]>
  /**
   * The same as `missing`: the ids among `ids` the store does
   * **not** hold (named after Rust's `Store::has_many`; kept for the callers that
   * use it).
   *
   * @deprecated Use `missing`: the name reads as the ids held, the answer is the
   * ids missing.
   */
  hasMany(ids: Array<string>): Array<string>
  /**
   * `hasMany` on the thread pool: the ids missing, as `missingAsync`.
   *
   * @deprecated Use `missingAsync`.
   */
  hasManyAsync(ids: Array<string>): Promise<string[]>
  /**
   * Writes objects (a commit's `objects`, in their order); held ones are left.
   * Each is re-hashed first: bytes that are not their id's throw `CORRUPT`
   * naming the id, and nothing of the batch is written (a store keeps the first
   * bytes put under an id, so wrong ones would stay that object).
   */
  putMany(objects: Record<string, Uint8Array>): void
  /** `putMany` on the thread pool (the bytes are copied first). */
  putManyAsync(objects: Record<string, Uint8Array>): Promise<void>
  /**
   * Deletes objects; absent ones are ignored. (GC does this safely; this is the
   * raw call.)
   */
  deleteMany(ids: Array<string>): void
  /** Every object id held, in no particular order. */
  ids(): Array<string>
  /** `ids` on the thread pool. */
  idsAsync(): Promise<string[]>
  /** The value of a ref. */
  getRef(name: string): string | null
  /**
   * Applies every compare-and-swap or none (`REF_CONFLICT` naming the first ref
   * that did not hold its expected value).
   */
  updateRefs(updates: Array<RefUpdateArg>, message: string): void
  /** Every ref whose name starts with `prefix`, sorted by name. */
  listRefs(prefix?: string | undefined | null): Array<RefEntry>
  /** The moves of a ref, oldest first. */
  reflog(name: string): Array<ReflogEntry>
}

/** An in-memory file system with interpreter state: write, commit, check out. */
export declare class Workspace {
  /** An empty workspace: `/` and empty state. */
  constructor()
  /** An independent copy sharing everything until either side writes (O(1)). */
  copy(): Workspace
  /** Writes a file, creating parent directories. */
  write(path: string, data: Uint8Array): void
  /** A file's bytes. */
  read(path: string): Buffer
  /** A symlink's target (symlinks are stored, never followed). */
  readLink(path: string): string
  /** Removes a file, symlink or directory (with everything under it). */
  remove(path: string): void
  /** Creates a directory and its parents; an existing directory is left as it is. */
  mkdir(path: string): void
  /** Moves a file, symlink or directory. */
  rename(from: string, to: string): void
  /** Creates a symlink at `path` pointing at `target`. */
  symlink(path: string, target: string): void
  /**
   * Sets permission bits (at most `0o7777`): anything else, `NaN` or a fraction
   * included, throws `INVALID_ARGUMENT` (a `u32` argument would have wrapped
   * `2 ** 40` to 0 and taken `NaN` as 0 without a word).
   */
  setMode(path: string, mode: number): void
  /** A directory's entries, sorted by name. */
  list(path: string): Array<DirEntry>
  /** What is at `path`. */
  metadata(path: string): Metadata
  /** Whether anything is at `path` (false for an invalid path). */
  exists(path: string): boolean
  /** Every path except `/`, depth-first in sorted order. */
  walk(): Array<WalkEntry>
  /** Replaces the opaque interpreter state. */
  setState(state: Uint8Array): void
  /** The opaque interpreter state. */
  state(): Buffer
  /** The commit this workspace was last committed or checked out at. */
  head(): string | null
  /** Threads a commit may hash new content on (1: the calling thread only). */
  parallelism(): number
  /**
   * Sets the threads a commit may use (at least 1: 0 counts as 1); ids never
   * depend on it. A negative, fractional or `NaN` count throws
   * `INVALID_ARGUMENT`.
   */
  setParallelism(threads: number): void
  /** The limits checkouts and restores into this workspace obey. */
  limits(): Limits
  /** Sets the limits (lower them for input you do not trust). */
  setLimits(limits: Limits): void
  /** Sets what this environment offers; commits record it, checkouts compare. */
  setCapabilities(capabilities: Capabilities): void
  /** The fingerprint set on this workspace. */
  capabilities(): Capabilities | null
  /** Declares that content starting with `prefix` needs `feature`. */
  requireFeatureForPrefix(prefix: Uint8Array, feature: string): void
  /** Records a read of an external source; the next commits store it. */
  recordRead(read: Read): void
  /** Forgets the record of `source`; returns it if there was one. */
  forgetRead(source: string): Read | null
  /** The recorded external reads, sorted by source. */
  externalReads(): Array<Read>
  /** Paths whose cached bytes a restore marked stale. */
  stalePaths(): Array<string>
  /** Whether `path` is marked stale. */
  isStale(path: string): boolean
  /**
   * Whether a file's bytes are in memory (false after a shallow checkout until
   * `loadContent`).
   */
  isLoaded(path: string): boolean
  /** The content id of a committed file (its chunk or manifest), if known. */
  fileContentId(path: string): string | null
  /** Fetches and verifies the bytes of a file a shallow checkout left in the store. */
  loadContent(path: string, objects: Objects): void
  /**
   * Writes the file at `path` from `read`, called with a byte count (1 MiB) until
   * it returns an empty array, `null` or `undefined` (e.g. `(n) => { const b =
   * Buffer.alloc(n); const got = fs.readSync(fd, b); return b.subarray(0, got) }`),
   * cutting the bytes into their objects as they arrive: the file is never whole
   * in memory. Each object goes to `store` (a `Store` or `Repo`) as it is made; the
   * workspace keeps the file's reference, as after a shallow checkout, and the next
   * commit does not emit its objects. The ids are those `write` and a commit would
   * make. Returns the file's size. Throws what `write` throws for the path
   * (`IS_A_DIRECTORY`, ...), and `CALLBACK` when `read` throws.
   *
   * Over a file a shallow checkout left in `store`, the chunks the new bytes
   * still hold are hashed against that version's instead of cut, and not put
   * again: an edit of a large file costs a hash of it and a cut of what changed.
   * `size`, the new size when known, lets an unchanged tail after a change of
   * length be found too (without it only an unchanged start is).
   */
  writeStream(path: string, read: (size: number) => Uint8Array | null | undefined, store: Store | Repo, size?: number): number
  /**
   * Hands the bytes of the file at `path` to `write`, a window of chunks at a time
   * for a file a shallow checkout left in `objects` (never whole in memory), each
   * chunk re-hashed and checked as `loadContent` checks it. The bytes are the file
   * only once this returns: on an error, discard what `write` was given. A loaded
   * file is one call. Returns the bytes handed over. Throws what `loadContent`
   * throws, and `CALLBACK` when `write` throws.
   */
  readStream(path: string, objects: Objects, write: (chunk: Buffer) => void): number
  /**
   * Commits the workspace: `{ parents?, have?, parentSource?, meta?, objectsAs? }`.
   * `have` lists ids the destination holds (with their closures) or is an
   * `objects` value asked about changed paths, in one batch per commit;
   * `objectsAs: 'map'` makes the result's `objects` a `Map`. On error nothing
   * moves.
   */
  commit<O extends CommitOptions = CommitOptions>(options?: O): CommitResultOf<O>
  /**
   * `commit` on the thread pool. `have` and `parentSource` must be id lists or
   * snapgraph stores (JavaScript values cannot be read off the event loop).
   */
  commitAsync<O extends CommitOptions = CommitOptions>(options?: O): Promise<CommitResultOf<O>>
  /**
   * Replaces files and state with those of commit `id`, all or nothing:
   * `{ policy?: 'superset' | 'strict' | 'force', drift?: 'strict' | 'off', shallow? }`.
   */
  checkout(id: string, objects: Objects, options?: CheckoutOptions): Restore
  /** `checkout` on the thread pool, from a `Store` or `Repo`. */
  checkoutAsync(id: string, objects: Store | Repo, options?: CheckoutOptions): Promise<Restore>
  /**
   * The workspace as one self-contained packed snapshot:
   * `{ excludeFiles?, excludeState?, compress? }`.
   */
  snapshot(options?: SnapshotOptions): Buffer
  /** `snapshot` on the thread pool. */
  snapshotAsync(options?: SnapshotOptions): Promise<Buffer>
  /** A snapshot authenticated with a BLAKE3 keyed MAC (`key`: 32 bytes). */
  snapshotKeyed(key: Uint8Array): Buffer
  /** A fresh workspace restored from a snapshot. */
  static fromSnapshot(bytes: Uint8Array): Workspace
  /** `fromSnapshot` on the thread pool. */
  static fromSnapshotAsync(bytes: Uint8Array): Promise<Workspace>
  /** A fresh workspace restored from a keyed snapshot. */
  static fromSnapshotKeyed(bytes: Uint8Array, key: Uint8Array): Workspace
  /**
   * Replaces files and state with a snapshot's, keeping this workspace's
   * configuration; on error nothing changes.
   */
  restoreSnapshot(bytes: Uint8Array): Restore
  /** `restoreSnapshot` on the thread pool. */
  restoreSnapshotAsync(bytes: Uint8Array): Promise<Restore>
  /**
   * `restoreSnapshot` for a keyed snapshot: a wrong key fails before anything
   * is applied.
   */
  restoreSnapshotKeyed(bytes: Uint8Array, key: Uint8Array): Restore
}

/** The environment a snapshot was taken in. */
export interface Capabilities {
  /** Builtin commands offered. */
  builtins: Array<string>
  /** Features offered. */
  features: Array<string>
  /** The file-system backend's name. */
  fsBackend?: string
  /** The engine's version. */
  engineVersion?: string
}

/** A changed file or symlink. */
export interface Change {
  /** Its path. */
  path: string
  /** `'added'`, `'removed'`, `'modified'`, `'typeChanged'` or `'modeChanged'`. */
  kind: string
  /** The entry before (`null` when added). */
  old: ChangeEntry | null
  /** The entry after (`null` when removed). */
  new: ChangeEntry | null
}

/** One side of a change: what the entry was. */
export interface ChangeEntry {
  /** `'file'` or `'symlink'`. */
  kind: string
  /** Permission bits. */
  mode: number
  /** Bytes (a symlink's: its target's). */
  size: number
  /**
   * The content object (chunk or manifest root); absent for inline content and
   * symlinks.
   */
  id?: string
}

/** A decoded commit. */
export interface CommitInfo {
  /** The commit's id. */
  id: string
  /** The root tree. */
  tree: string
  /** Parent commits, in order. */
  parents: Array<string>
  /** 1 for a root commit, else one more than the highest parent's. */
  generation: number
  /** Bytes of the interpreter state. */
  stateSize: number
  /** The capability fingerprint object, if recorded. */
  capabilities?: string
  /** The external reads object, if recorded. */
  reads?: string
  /** Metadata (message, labels, ...). */
  meta: Record<string, string>
}

/** What a commit produced. */
export interface CommitResult {
  /** The commit's id. */
  id: string
  /** Its generation (1 for a root commit). */
  generation: number
  /**
   * Objects to persist, keyed by id, in dependency order (referenced objects
   * first, the commit last): writing them in this order keeps a store closed. A
   * null-prototype object (like `querystring.parse`'s): use `Object.entries`,
   * `Object.hasOwn` or `id in objects`, not `objects.hasOwnProperty`. With the
   * commit option `objectsAs: 'map'`, a `Map` in the same order instead
   * (`CommitResultOf`). Up to
   * 16 MiB of objects, each `Buffer` is a view into one buffer per commit (like
   * Node's pooled small `Buffer`s; `Buffer.from(b)` copies one out).
   */
  objects: Record<string, Buffer>
  /** How many objects. */
  objectCount: number
  /** Their total size in bytes. */
  storedBytes: number
  /**
   * The commit as a self-contained packed snapshot, or `null` when `have` made it
   * incremental.
   */
  packed: Buffer | null
  /** Whether `objects` holds everything the commit needs. */
  isComplete: boolean
}

/** What `Repo.commit` wrote. */
export interface Committed {
  /** The new commit. */
  id: string
  /** The branch's previous tip (`null`: a new branch). */
  previous: string | null
  /** Objects new to the store. */
  objectsWritten: number
  /** Their bytes. */
  bytesWritten: number
}

/** What changed from one commit to another. */
export interface DiffResult {
  /** Every change, as values, in path order. */
  changes: Array<Change>
  /** Files (and symlinks) present only in the second commit. */
  filesAdded: Array<string>
  /** Files whose content, kind or mode changed. */
  filesModified: Array<string>
  /** Files present only in the first commit. */
  filesRemoved: Array<string>
  /** Whether the interpreter state differs. */
  stateChanged: boolean
  /** External read sources recorded only in the second commit. */
  readsAdded: Array<string>
  /** Sources whose record changed. */
  readsChanged: Array<string>
  /** Sources recorded only in the first commit. */
  readsRemoved: Array<string>
}

/** One entry of a directory listing. */
export interface DirEntry {
  /** The entry's name. */
  name: string
  /** `'file'`, `'dir'` or `'symlink'`. */
  kind: string
  /** Permission bits. */
  mode: number
  /** Bytes (see `Metadata.size`). */
  size: number
}

/** The format version of objects this engine writes. */
export declare function formatVersion(): number

/** Deletes every object no ref (and no pin) reaches; safe with concurrent writers. */
export declare function gc(store: Store | Repo, options?: { pins?: string[] }): GcReport

/** `gc` on the thread pool. */
export declare function gcAsync(store: Store | Repo, options?: { pins?: string[] }): Promise<GcReport>

/** What a collection did. */
export interface GcReport {
  /** Objects deleted, referrers first. */
  deleted: Array<string>
  /** Objects kept. */
  kept: number
  /** Refs marked from. */
  refs: number
  /** Problems met while marking (the sweep skips nothing it could not mark). */
  problems: Array<Problem>
}

/** Per-workspace limits on what a checkout may allocate. */
export interface Limits {
  /** Most files and symlinks one checkout may create. */
  maxFiles: number
  /** Most file bytes one checkout may hold. */
  maxBytes: number
  /** Most bytes a compressed snapshot body may unpack to. */
  maxUnpackedBytes: number
}

/** What is at a path. */
export interface Metadata {
  /** `'file'`, `'dir'` or `'symlink'`. */
  kind: string
  /** Permission bits (`0o7777` at most). */
  mode: number
  /** Bytes of a file, of a symlink's target, 0 for a directory. */
  size: number
}

/** Opens a store by URL: `sqlite:PATH`, `dir:PATH`, `postgres://…`, `memory:`. */
export declare function open(url: string): Store

/** `open` on the thread pool (a PostgreSQL connection is network I/O). */
export declare function openAsync(url: string): Promise<Store>

/**
 * A problem a walk met: a missing or invalid object, one referenced as two kinds, or
 * one reachable that the collector's marking would not keep.
 */
export interface Problem {
  /**
   * `'missing'`, `'invalid'`, `'kindConflict'` or `'unmarked'` (`'other'` for a
   * kind of problem newer than this binding).
   */
  kind: string
  /** The object. */
  id: string
  /** An object referencing a missing one (`null` for a root or an invalid one). */
  referencedBy: string | null
  /** What is wrong with an invalid one. */
  reason?: string
}

/** Content read from outside the workspace, recorded so a restore can check it. */
export interface Read {
  /** Where it came from (a URL, a path outside the workspace). */
  source: string
  /** The content's fingerprint when read (empty: unverifiable). */
  fingerprint: string
  /** A pinned revision, if the source has revisions. */
  revision?: string
  /** Bytes read. */
  size: number
  /** The workspace path holding the cached bytes, if any. */
  cachedAt?: string
}

/** A ref and the commit it names. */
export interface RefEntry {
  /** The ref's full name (`heads/main`, `tags/v1`, ...). */
  name: string
  /** The commit. */
  id: string
}

/** One move of a ref. */
export interface ReflogEntry {
  /** The value before (`null`: created). */
  old: string | null
  /** The value after (`null`: deleted). */
  new: string | null
  /** The message given with the move. */
  message: string
}

/** One compare-and-swap of `Store.updateRefs`. */
export interface RefUpdateArg {
  /** The ref. */
  name: string
  /** The value it must hold (`null`: absent). */
  expected?: string | null
  /** The value to set (`null`: delete). */
  new?: string | null
}

/** What `Repo.reindex` rebuilt. */
export interface ReindexReport {
  /** Commits found. */
  commits: number
  /** Snapshot refs recreated. */
  tagsRestored: Array<RefEntry>
  /** Unreferenced head commits, now under `lost-found/`. */
  lostFound: Array<string>
}

/** Bashkit's name for `SnapshotGraph.ancestry`. */
export declare function snapshotAncestry(id: string, objects: Objects, limit?: number): Array<string>

/** Bashkit's name for `SnapshotGraph.capabilities`. */
export declare function snapshotCapabilities(id: string, objects: Objects): Capabilities | null

/** Bashkit's name for `SnapshotGraph.diff`. */
export declare function snapshotDiff(a: string, b: string, objects: Objects): DiffResult

/** A labelled snapshot (a `tags/` ref). */
export interface SnapshotInfo {
  /** Its name. */
  name: string
  /** The tag commit. */
  id: string
  /** The commit it labels. */
  target: string
  /** Its labels. */
  labels: Record<string, string>
}

/** Bashkit's name for `SnapshotGraph.planCheckout`. */
export declare function snapshotPlanCheckout(id: string, objects: Objects): Array<string>

/** Bashkit's name for `SnapshotGraph.reachable`. */
export declare function snapshotReachable(id: string, objects: Objects): Array<string>

/**
 * Copies what `dst` lacks of ref `name` from `src`, then moves `dst`'s ref
 * (fast-forward only unless `{ force: true }`).
 */
export declare function sync(src: Store | Repo, dst: Store | Repo, name: string, options?: { force?: boolean }): SyncReport

/** `sync` on the thread pool. */
export declare function syncAsync(src: Store | Repo, dst: Store | Repo, name: string, options?: { force?: boolean }): Promise<SyncReport>

/** What a sync did. */
export interface SyncReport {
  /** The destination's ref before (`null`: absent). */
  from: string | null
  /** The destination's ref after. */
  to: string | null
  /** Objects written to the destination. */
  objects: number
  /** Their bytes. */
  bytes: number
  /** Objects examined. */
  examined: number
  /** `hasMany` queries sent to the destination. */
  queries: number
  /** Levels of the object graph walked. */
  levels: number
}

/**
 * Checks every ref's closure; with `readData` (default true) re-hashes every
 * object too.
 */
export declare function verify(store: Store | Repo, readData?: boolean): VerifyReport

/** `verify` on the thread pool. */
export declare function verifyAsync(store: Store | Repo, readData?: boolean): Promise<VerifyReport>

/** What a verification found. */
export interface VerifyReport {
  /** Refs checked. */
  refs: number
  /** Objects reachable from them. */
  reachable: number
  /** Objects held. */
  objects: number
  /** Objects re-hashed. */
  rehashed: number
  /** Bytes re-hashed. */
  bytes: number
  /** Objects no ref reaches. */
  unreachable: number
  /** Missing and invalid objects. */
  problems: Array<Problem>
  /** Refs whose closure is incomplete or invalid. */
  brokenRefs: Array<string>
  /** No problems and no broken refs. */
  isClean: boolean
}

/** One path of `Workspace.walk()`. */
export interface WalkEntry {
  /** The absolute path. */
  path: string
  /** `'file'`, `'dir'` or `'symlink'`. */
  kind: string
  /** Permission bits. */
  mode: number
  /** Bytes (see `Metadata.size`). */
  size: number
}
