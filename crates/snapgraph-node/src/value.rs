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
use std::io::Write as _;

use napi::bindgen_prelude::{
    Buffer, BufferSlice, FnArgs, Function, JsObjectValue, JsValue, Null, Object, Unknown,
};
use napi::Env;
use snapgraph::ObjectId;

use crate::error::{napi, Result};
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

/// Above this many stored bytes, a commit's objects get a `Buffer` each rather than
/// views into one: a view keeps its whole commit's bytes alive, which a per-turn commit
/// does not mind and a first commit of a large workspace might.
const SHARED_MAX: usize = 16 * 1024 * 1024;

/// A commit as JavaScript: `{ id, generation, objects, objectCount, storedBytes,
/// packed, isComplete }` (the `CommitResult` interface of `index.d.ts`).
pub fn commit(env: &Env, c: snapgraph::Commit) -> Result<Unknown<'_>> {
    match helpers::get(env) {
        Some(h) if c.stored_bytes() <= SHARED_MAX as u64 => commit_in_js(env, h, c),
        _ => commit_by_napi(env, c).map(|o| o.to_unknown()),
    }
}

/// Bytes at the end of [`commit_encoded`]'s buffer: generation (u64), storedBytes
/// (u64; both below 2^53, so exact as JavaScript numbers), objectCount (u32), the packed snapshot's length (u32), flags (u32: 1 =
/// complete, 2 = has a packed snapshot), 4 bytes of padding; all little endian.
pub const TRAILER: usize = 32;

/// A commit for the JavaScript `commit` of [`helpers::INSTALL`], which decodes it:
/// one `Buffer` of the objects' bytes one after the other, the packed snapshot's,
/// each object's length (u32, little endian), the commit's hex id and then each
/// object's, and the [`TRAILER`]. Above [`SHARED_MAX`] stored bytes, the finished
/// result object instead (each object in its own `Buffer`), which the decoder hands
/// back as it is.
pub fn commit_encoded(env: &Env, c: snapgraph::Commit) -> Result<Unknown<'_>> {
    let packed = c.packed();
    let packed_len = packed.as_ref().map_or(0, Vec::len);
    if c.stored_bytes() > SHARED_MAX as u64 || packed_len > SHARED_MAX {
        return commit_by_napi(env, c).map(|o| o.to_unknown());
    }
    let count = c.object_count();
    let mut data =
        Vec::with_capacity(c.stored_bytes() as usize + packed_len + 68 * count + 64 + TRAILER);
    for (_, bytes) in c.objects().iter() {
        data.extend_from_slice(bytes);
    }
    if let Some(p) = &packed {
        data.extend_from_slice(p);
    }
    for (_, bytes) in c.objects().iter() {
        // An object is at most MAX_OBJECT_SIZE bytes, far below 4 GiB.
        data.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    }
    // Writing into a `Vec` cannot fail.
    let _ = write!(data, "{}", c.id());
    for (oid, _) in c.objects().iter() {
        let _ = write!(data, "{oid}");
    }
    let flags = u32::from(c.is_complete()) | if packed.is_some() { 2 } else { 0 };
    // Each as two u32 (low, high): the decoder reads bytes by index, not as a double.
    data.extend_from_slice(&c.generation().to_le_bytes());
    data.extend_from_slice(&c.stored_bytes().to_le_bytes());
    data.extend_from_slice(&(count as u32).to_le_bytes());
    data.extend_from_slice(&(packed_len as u32).to_le_bytes());
    data.extend_from_slice(&flags.to_le_bytes());
    data.extend_from_slice(&[0; 4]);
    Ok(buffer(env, data)?.to_unknown())
}

/// [`commit`] in one call of the `commitResult` helper: the ids in one string, the
/// objects in one buffer (each one a view into it).
fn commit_in_js<'env>(
    env: &'env Env,
    helpers: &Helpers,
    c: snapgraph::Commit,
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
        )))
        .map_err(napi)
}

/// [`commit`] one napi call at a time (where the helper could not be compiled, or
/// for a large commit).
fn commit_by_napi(env: &Env, c: snapgraph::Commit) -> Result<Object<'_>> {
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
    out.set_named_property("objects", record).map_err(napi)?;
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
