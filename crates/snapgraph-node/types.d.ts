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
