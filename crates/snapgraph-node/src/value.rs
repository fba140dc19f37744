//! Results built as JavaScript values by hand, where napi-rs's derived conversion
//! costs more than the engine's own work: a commit and its record of objects.
//!
//! A per-turn commit hands back a handful of objects; through `#[napi(object)]` and an
//! `IndexMap`, each one cost a fresh map transition on a plain object (every id is a
//! new property name, so V8 grows a transition tree that is never reused), a UTF-8
//! decode of its key, and an external buffer with a finalizer. Built here instead:
//! the record is a null-prototype object (as Node's `querystring.parse` returns, so an
//! id never meets `Object.prototype`'s names), which V8 keeps as a dictionary from the
//! start; keys are Latin-1 strings; small objects are copied into engine-owned
//! buffers and only large ones are handed over without a copy.

use std::fmt::Write as _;

use napi::bindgen_prelude::{
    Buffer, BufferSlice, FnArgs, FromNapiValue, Function, JsObjectValue, JsValue, Null, Object,
    Unknown,
};
use napi::Env;
use snapgraph::ObjectId;

use crate::error::{invalid, napi, Result};
use crate::helpers::{self, Helpers};

/// Objects up to this size are copied into a buffer the engine owns; larger ones are
/// handed over as they are (an external buffer, freed by its finalizer). The copy is
/// cheaper than a finalizer for a chunk or a tree node.
const COPY_MAX: usize = 64 * 1024;

/// A `Buffer` of `bytes`.
pub fn buffer(env: &Env, bytes: Vec<u8>) -> Result<BufferSlice<'_>> {
    if bytes.len() <= COPY_MAX {
        BufferSlice::copy_from(env, &bytes).map_err(napi)
    } else {
        BufferSlice::from_data(env, bytes).map_err(napi)
    }
}

/// A new null-prototype object (`Object.create(null)`).
fn dictionary(env: &Env) -> Result<Object<'_>> {
    // `Object` is a function, which napi-rs's checked read refuses as an object.
    let object: Object = env
        .get_global()
        .map_err(napi)?
        .get_named_property_unchecked("Object")
        .map_err(napi)?;
    // One `null` argument: a bare `Null` is zero-sized, which napi-rs passes as none.
    let create: Function<FnArgs<(Null,)>, Object> =
        object.get_named_property("create").map_err(napi)?;
    create.call((Null,).into()).map_err(napi)
}

/// `{ [hex id]: Buffer }` in the given order (a commit's: dependency order).
pub fn object_record(
    env: &Env,
    objects: impl IntoIterator<Item = (ObjectId, Vec<u8>)>,
) -> Result<Object<'_>> {
    let mut record = dictionary(env)?;
    for (id, bytes) in objects {
        let key = env.create_string_latin1(id.to_string()).map_err(napi)?;
        record
            .set_property(key, buffer(env, bytes)?)
            .map_err(napi)?;
    }
    Ok(record)
}

/// `new Map(Object.entries(record))`, in the record's order.
fn map_of<'env>(env: &'env Env, record: Object<'env>) -> Result<Object<'env>> {
    let global = env.get_global().map_err(napi)?;
    // `Object` and `Map` are functions, which napi-rs's checked read refuses as objects.
    let object: Object = global
        .get_named_property_unchecked("Object")
        .map_err(napi)?;
    let entries: Function<Object, Unknown> = object.get_named_property("entries").map_err(napi)?;
    let pairs = entries.call(record).map_err(napi)?;
    let map: Function<Unknown, Unknown> = global.get_named_property("Map").map_err(napi)?;
    let made = map.new_instance(pairs).map_err(napi)?;
    Object::from_unknown(made).map_err(napi)
}

/// Above this many stored bytes, a commit's objects get a `Buffer` each rather than
/// views into one: a view keeps its whole commit's bytes alive, which a per-turn commit
/// does not mind and a first commit of a large workspace might.
const SHARED_MAX: usize = 16 * 1024 * 1024;

/// A commit as JavaScript: `{ id, generation, objects, objectCount, storedBytes,
/// packed, isComplete }` (the `CommitResult` interface of `index.d.ts`).
pub fn commit(env: &Env, c: snapgraph::Commit) -> Result<Unknown<'_>> {
    commit_as(env, c, ObjectsAs::Record)
}

/// [`commit`] with `objects` a `Map` (option `objectsAs: 'map'`).
pub fn commit_map(env: &Env, c: snapgraph::Commit) -> Result<Unknown<'_>> {
    commit_as(env, c, ObjectsAs::Map)
}

/// [`commit`] with `objects` shaped as asked.
pub fn commit_as(env: &Env, c: snapgraph::Commit, shape: ObjectsAs) -> Result<Unknown<'_>> {
    match helpers::get(env) {
        Some(h) if c.stored_bytes() <= SHARED_MAX as u64 => commit_in_js(env, h, c, shape),
        _ => commit_by_napi(env, c, shape).map(|o| o.to_unknown()),
    }
}

/// How a commit result holds its objects (option `objectsAs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ObjectsAs {
    /// A null-prototype `Record<string, Buffer>` (the default: Bashkit's shape).
    #[default]
    Record,
    /// A `Map<string, Buffer>` in the same order.
    Map,
}

impl ObjectsAs {
    /// Option `objectsAs`: `'record'` (or absent) or `'map'`; anything else is
    /// `INVALID_ARGUMENT`.
    pub fn parse(name: Option<&str>) -> Result<Self> {
        match name {
            None | Some("record") => Ok(Self::Record),
            Some("map") => Ok(Self::Map),
            Some(other) => Err(invalid(format!(
                "option objectsAs: unknown shape {other:?}: expected 'record' or 'map'"
            ))),
        }
    }
}

/// A commit for the JavaScript `commit` of [`helpers::INSTALL`], which decodes it
/// from one `Buffer` ([`write_into`](Encoded::write_into)).
pub struct Encoded {
    commit: snapgraph::Commit,
    packed: Option<Vec<u8>>,
    len: usize,
}

/// Bytes at the end of an [`Encoded`] result: generation (u64), storedBytes (u64;
/// both below 2^53, so exact as JavaScript numbers), objectCount (u32), the packed
/// snapshot's length (u32), flags (u32: 1 = complete, 2 = has a packed snapshot), 4
/// bytes of padding; all little endian.
pub const TRAILER: usize = 32;

/// Lowercase hex digits, for ids written straight into a result.
const HEX: &[u8; 16] = b"0123456789abcdef";

impl Encoded {
    /// The commit as one result of [`size`](Self::size) bytes: the objects' bytes one
    /// after the other, the packed snapshot's, each object's length (u32, little
    /// endian), the commit's hex id and then each object's, and the [`TRAILER`].
    /// The commit back above [`SHARED_MAX`] stored bytes (the caller then builds the
    /// finished result with each object in its own `Buffer`).
    pub fn new(commit: snapgraph::Commit) -> std::result::Result<Self, snapgraph::Commit> {
        if commit.stored_bytes() > SHARED_MAX as u64 {
            return Err(commit);
        }
        let packed = commit.packed();
        let packed_len = packed.as_ref().map_or(0, Vec::len);
        if packed_len > SHARED_MAX {
            return Err(commit);
        }
        let (count, bytes) = commit
            .objects()
            .iter()
            .fold((0, 0), |(n, b), (_, o)| (n + 1, b + o.len()));
        let len = bytes + packed_len + 68 * count + 64 + TRAILER;
        Ok(Self {
            commit,
            packed,
            len,
        })
    }

    /// The result's size in bytes.
    pub fn size(&self) -> usize {
        self.len
    }

    /// Writes the result into `out`, which must be exactly [`size`](Self::size) bytes
    /// (every byte is written); else
    /// `INVALID_ARGUMENT`, writing nothing.
    pub fn write_into(&self, out: &mut [u8]) -> Result<()> {
        if out.len() != self.len {
            return Err(invalid(format!(
                "a commit result of {} bytes needs a buffer of that size, got {}",
                self.len,
                out.len()
            )));
        }
        let c = &self.commit;
        let mut at = 0;
        let mut put = |bytes: &[u8]| {
            out[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        };
        for (_, bytes) in c.objects().iter() {
            put(bytes);
        }
        if let Some(p) = &self.packed {
            put(p);
        }
        for (_, bytes) in c.objects().iter() {
            // An object is at most MAX_OBJECT_SIZE bytes, far below 4 GiB.
            put(&(bytes.len() as u32).to_le_bytes());
        }
        let mut hex = [0u8; 64];
        let mut put_id = |id: &ObjectId, put: &mut dyn FnMut(&[u8])| {
            for (i, b) in id.as_bytes().iter().enumerate() {
                hex[2 * i] = HEX[usize::from(b >> 4)];
                hex[2 * i + 1] = HEX[usize::from(b & 15)];
            }
            put(&hex);
        };
        put_id(&c.id(), &mut put);
        for (oid, _) in c.objects().iter() {
            put_id(oid, &mut put);
        }
        let packed_len = self.packed.as_ref().map_or(0, Vec::len);
        let flags = u32::from(c.is_complete()) | if self.packed.is_some() { 2 } else { 0 };
        // Each as two u32 (low, high): the decoder reads bytes by index, not as a double.
        put(&c.generation().to_le_bytes());
        put(&c.stored_bytes().to_le_bytes());
        put(&(c.objects().len() as u32).to_le_bytes());
        put(&(packed_len as u32).to_le_bytes());
        put(&flags.to_le_bytes());
        put(&[0; 4]);
        // `size` counted exactly these bytes; were it ever more, the rest would be
        // another allocation's leftovers: zeroed rather than handed to JavaScript.
        if let Some(rest) = out.get_mut(at..) {
            rest.fill(0);
        }
        Ok(())
    }
}

/// A commit above [`SHARED_MAX`] for the JavaScript `commit`: the finished result,
/// each object in its own `Buffer` (record-shaped: the JavaScript makes a `Map` of it
/// when asked).
pub fn commit_large(env: &Env, c: snapgraph::Commit) -> Result<Unknown<'_>> {
    commit_by_napi(env, c, ObjectsAs::Record).map(|o| o.to_unknown())
}

/// [`commit`] in one call of the `commitResult` helper: the ids in one string, the
/// objects in one buffer (each one a view into it).
fn commit_in_js<'env>(
    env: &'env Env,
    helpers: &Helpers,
    c: snapgraph::Commit,
    shape: ObjectsAs,
) -> Result<Unknown<'env>> {
    let packed = c.packed().map(Buffer::from);
    let (id, generation, complete, stored, count) = (
        c.id().to_hex(),
        c.generation() as f64,
        c.is_complete(),
        c.stored_bytes(),
        c.object_count(),
    );
    let mut keys = String::with_capacity(64 * count);
    let mut data = Vec::with_capacity(stored as usize + 4 * count);
    let mut sizes = Vec::with_capacity(4 * count);
    for (oid, bytes) in c.objects().iter() {
        // Writing into a `String` cannot fail.
        let _ = write!(keys, "{oid}");
        data.extend_from_slice(bytes);
        // An object is at most MAX_OBJECT_SIZE bytes, far below 4 GiB.
        sizes.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    }
    data.extend_from_slice(&sizes);
    let build = helpers.commit(env).map_err(napi)?;
    build
        .call(FnArgs::from((
            id,
            generation,
            count as u32,
            stored as f64,
            complete,
            packed,
            keys,
            Buffer::from(data),
            shape == ObjectsAs::Map,
        )))
        .map_err(napi)
}

/// [`commit`] one napi call at a time (where the helper could not be compiled, or
/// for a large commit).
fn commit_by_napi(env: &Env, c: snapgraph::Commit, shape: ObjectsAs) -> Result<Object<'_>> {
    let packed = c.packed();
    let (id, generation, complete, bytes, count) = (
        c.id(),
        c.generation(),
        c.is_complete(),
        c.stored_bytes(),
        c.object_count(),
    );
    let mut out = Object::new(env).map_err(napi)?;
    out.set_named_property("id", id.to_hex()).map_err(napi)?;
    out.set_named_property("generation", generation as f64)
        .map_err(napi)?;
    let record = object_record(env, c.into_objects())?;
    match shape {
        ObjectsAs::Record => out.set_named_property("objects", record),
        ObjectsAs::Map => out.set_named_property("objects", map_of(env, record)?),
    }
    .map_err(napi)?;
    out.set_named_property("objectCount", count as u32)
        .map_err(napi)?;
    out.set_named_property("storedBytes", bytes as f64)
        .map_err(napi)?;
    match packed {
        Some(p) => out.set_named_property("packed", buffer(env, p)?),
        None => out.set_named_property("packed", Null),
    }
    .map_err(napi)?;
    out.set_named_property("isComplete", complete)
        .map_err(napi)?;
    Ok(out)
}
