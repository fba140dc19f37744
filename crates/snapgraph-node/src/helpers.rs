//! Two small JavaScript functions the binding calls instead of crossing into
//! JavaScript once per object: one builds a commit's result, one answers a batch of
//! `has` questions. Compiled once per Node environment (main thread or worker) and
//! kept in its instance data; where compiling is refused, the callers build the same
//! values through napi one call at a time.
//!
//! Every napi call costs a few thousand instructions (a `Buffer`, an interned key, a
//! call into a `Map`'s `has`), more than the engine's own work on a small per-turn
//! commit; inside JavaScript the same steps are a few hundred.

use napi::bindgen_prelude::{Buffer, FnArgs, Function, FunctionRef, Object, Unknown};
use napi::Env;

/// `(id, generation, objectCount, storedBytes, isComplete, packed, keys, data, asMap)`:
/// the commit result, with `objects` made of views into `data` (see [`COMMIT`]).
pub type CommitArgs = FnArgs<(
    String,
    f64,
    u32,
    f64,
    bool,
    Option<Buffer>,
    String,
    Buffer,
    bool,
)>;

/// Builds the commit result: `keys` holds the objects' hex ids one after the other,
/// `data` their stored bytes one after the other, then each one's length (u32, little
/// endian). `objects` is a null-prototype record (V8 keeps it a dictionary from the
/// start, so a fresh id per commit grows no map transitions), or a `Map` with `asMap`;
/// each value a `Buffer` view into `data`.
const COMMIT: &str = r#"(function commitResult(id, generation, objectCount, storedBytes, isComplete, packed, keys, data, asMap) {
  const objects = asMap ? new Map() : Object.create(null)
  const n = keys.length >>> 6
  let at = 0
  let len = data.length - 4 * n
  for (let i = 0; i < n; i++, len += 4) {
    const size = data.readUInt32LE(len)
    const key = keys.slice(i << 6, (i + 1) << 6)
    const view = data.subarray(at, at + size)
    if (asMap) objects.set(key, view)
    else objects[key] = view
    at += size
  }
  return { id, generation, objects, objectCount, storedBytes, packed, isComplete }
})"#;

/// `this.has(id)` for each 64-digit id of `ids`: up to [`BITS`] ids, a number whose bit
/// `i` is set only for `true` (as a per-id `has` call converted to a boolean reads it:
/// any other answer fails that conversion, and a failed question counts as "not
/// held"); more, a string of `'0'`/`'1'`. A number crosses back without a string
/// built by concatenation and converted to UTF-8 twice. A `has` that throws gives
/// `'!'` and the message instead: the exception is caught here, so none is left
/// pending on the environment (a commit whose `have` fails to answer emits what it
/// would have pruned, and returns).
const HAS_MANY: &str = r#"(function hasMany(ids) {
  const n = ids.length >>> 6
  try {
    if (n <= 30) {
      let bits = 0
      for (let i = 0; i < n; i++) if (this.has(ids.slice(i << 6, (i + 1) << 6)) === true) bits |= 1 << i
      return bits
    }
    let out = ''
    for (let i = 0; i < ids.length; i += 64) out += this.has(ids.slice(i, i + 64)) === true ? '1' : '0'
    return out
  } catch (e) {
    return '!' + String(e && e.message !== undefined ? e.message : e)
  }
})"#;

/// Most ids [`HAS_MANY`] answers as the bits of one number.
pub const BITS: usize = 30;

/// Installed once per environment at module load: `Workspace.prototype.commit`
/// becomes a JavaScript function that reads the options itself (property reads in
/// JavaScript cost tens of instructions, through napi about a thousand), calls the
/// native `_commitTurn` (taken off the prototype here) with the parents' ids in one
/// string and `have` with its `get`/`has` methods, and decodes the one `Buffer` it
/// returns (`value::Encoded`) into the `CommitResult`, its `objects` a null-prototype
/// record or, with `objectsAs: 'map'`, a `Map`. (Writing the result once into a
/// `Buffer` the JavaScript allocated, in a second native call, cost more than the
/// copy it saved: BENCHMARKS.md, "node5".) Options it does not read (`parentSource`, `meta`,
/// `excludeFiles`, `excludeState`), an `objectsAs` other than `'record'`/`'map'`, a
/// `have` that is not an object with a `has` method (an id list, a record, a
/// function, a `Store`, a `Repo`), a parent that is not a string of 64 characters,
/// and anything unexpected go to the native `commit` unchanged, which classifies and
/// validates them as before; so do parents of 64 characters that are not hex digits,
/// for which `_commitTurn` returns `null` before it does anything (no regular
/// expression runs per turn).
const INSTALL: &str = r#"(function install(exports) {
  const proto = exports.Workspace && exports.Workspace.prototype
  if (!proto) return
  const native = proto.commit
  const turn = proto._commitTurn
  const descriptor = Object.getOwnPropertyDescriptor(proto, 'commit')
  if (typeof native !== 'function' || typeof turn !== 'function' || !descriptor) return
  Reflect.deleteProperty(proto, '_commitTurn')
  const TRAILER = 32
  // The Buffer's own `latin1Slice` (what `toString('latin1', a, b)` ends in) when
  // this Node has it.
  const latin1 = typeof Buffer.prototype.latin1Slice === 'function'
    ? (b, from, to) => b.latin1Slice(from, to)
    : (b, from, to) => b.toString('latin1', from, to)
  // Little-endian u32 by index reads (no Buffer method call, none of its checks:
  // every offset is inside `out`).
  function u32(b, at) {
    return (b[at] | (b[at + 1] << 8) | (b[at + 2] << 16) | (b[at + 3] << 24)) >>> 0
  }
  function decode(out, asMap) {
    const end = out.length - TRAILER
    const generation = u32(out, end) + u32(out, end + 4) * 4294967296
    const storedBytes = u32(out, end + 8) + u32(out, end + 12) * 4294967296
    const n = u32(out, end + 16)
    const packedLen = u32(out, end + 20)
    const flags = u32(out, end + 24)
    const hexAt = end - 64 * (n + 1)
    const hex = latin1(out, hexAt, end)
    let sizeAt = hexAt - 4 * n
    let at = 0
    let objects
    if (asMap) {
      objects = new Map()
      for (let i = 0, k = 64; i < n; i++, k += 64, sizeAt += 4) {
        const size = (out[sizeAt] | (out[sizeAt + 1] << 8) | (out[sizeAt + 2] << 16) | (out[sizeAt + 3] << 24)) >>> 0
        objects.set(hex.slice(k, k + 64), out.subarray(at, at + size))
        at += size
      }
    } else {
      objects = Object.create(null)
      for (let i = 0, k = 64; i < n; i++, k += 64, sizeAt += 4) {
        const size = (out[sizeAt] | (out[sizeAt + 1] << 8) | (out[sizeAt + 2] << 16) | (out[sizeAt + 3] << 24)) >>> 0
        objects[hex.slice(k, k + 64)] = out.subarray(at, at + size)
        at += size
      }
    }
    const packed = (flags & 2) !== 0 ? out.subarray(at, at + packedLen) : null
    return { id: hex.slice(0, 64), generation, objects, objectCount: n, storedBytes, packed, isComplete: (flags & 1) !== 0 }
  }
  // What `_commitTurn` answered: the encoded result, or the finished one (a commit
  // above 16 MiB, its objects each in their own Buffer).
  function finish(out, asMap) {
    if (out instanceof Uint8Array) return decode(out, asMap)
    if (asMap) out.objects = new Map(Object.entries(out.objects))
    return out
  }
  // `_commitTurn` gives `null` for parents that are not 64 hex digits each, before it
  // does anything: the native `commit` then reports them.
  function commit(options) {
    if (options === undefined) return finish(turn.call(this, '', undefined, undefined, undefined), false)
    if (typeof options !== 'object' || options === null) return native.call(this, options)
    const parents = options.parents
    const have = options.have
    const shape = options.objectsAs
    if (options.parentSource !== undefined || options.meta !== undefined ||
        options.excludeFiles !== undefined || options.excludeState !== undefined ||
        (shape !== undefined && shape !== 'map' && shape !== 'record')) {
      return native.call(this, options)
    }
    let ids = ''
    if (parents !== undefined) {
      if (!Array.isArray(parents)) return native.call(this, options)
      for (let i = 0; i < parents.length; i++) {
        const id = parents[i]
        if (typeof id !== 'string' || id.length !== 64) return native.call(this, options)
      }
      ids = parents.length === 1 ? parents[0] : parents.join('')
    }
    let out
    if (have === undefined) {
      out = turn.call(this, ids, undefined, undefined, undefined)
    } else {
      if (typeof have !== 'object' || have === null || Array.isArray(have)) return native.call(this, options)
      const has = have.has
      if (typeof has !== 'function') return native.call(this, options)
      const get = have.get
      out = turn.call(this, ids, have, typeof get === 'function' ? get : undefined, has)
    }
    return out === null ? native.call(this, options) : finish(out, shape === 'map')
  }
  Object.defineProperty(proto, 'commit', { ...descriptor, value: commit })
})"#;

/// Runs [`INSTALL`] on the module's exports. A failure leaves the native `commit`
/// in place (it gives the same results, through more napi calls).
pub fn install(env: &Env, exports: Object<'_>) {
    let installed = env
        .run_script::<_, Function<Object, Unknown>>(INSTALL)
        .and_then(|f| f.call(exports));
    // Nothing to report: the native `commit` stays.
    drop(installed);
}

/// The compiled helpers of one environment.
pub struct Helpers {
    commit: FunctionRef<CommitArgs, Unknown<'static>>,
    has_many: FunctionRef<String, Unknown<'static>>,
}

fn compile(env: &Env) -> napi::Result<Helpers> {
    let commit: Function<CommitArgs, Unknown<'static>> = env.run_script(COMMIT)?;
    let has_many: Function<String, Unknown<'static>> = env.run_script(HAS_MANY)?;
    Ok(Helpers {
        commit: commit.create_ref()?,
        has_many: has_many.create_ref()?,
    })
}

/// This environment's helpers, compiled on first use; `None` where they cannot be
/// (the callers then take the napi path).
pub fn get(env: &Env) -> Option<&'static Helpers> {
    if let Ok(Some(h)) = env.get_instance_data::<Option<Helpers>>() {
        return h.as_ref();
    }
    // The environment owns the references: they go with it, so they are left to it
    // rather than deleted while it is torn down.
    let compiled = compile(env).ok();
    env.set_instance_data(compiled, (), |ctx| std::mem::forget(ctx.value))
        .ok()?;
    env.get_instance_data::<Option<Helpers>>()
        .ok()
        .flatten()
        .and_then(|h| h.as_ref())
}

impl Helpers {
    /// The commit-result builder.
    pub fn commit<'env>(
        &self,
        env: &'env Env,
    ) -> napi::Result<Function<'env, CommitArgs, Unknown<'static>>> {
        self.commit.borrow_back(env)
    }

    /// The batched `has`.
    pub fn has_many<'env>(
        &self,
        env: &'env Env,
    ) -> napi::Result<Function<'env, String, Unknown<'static>>> {
        self.has_many.borrow_back(env)
    }
}
