//! Conversions between JavaScript values and the core's types, and the object source
//! a JavaScript caller passes (a `Map`, a record of hex ids, or any object with `get`).

use std::borrow::Cow;

use js_sys::{Array, Function, Object, Reflect, Uint8Array};
use snapgraph::{BoxError, ObjectId, ObjectSource};
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};

use crate::error::{self, Described, INVALID_ARGUMENT};

// Steps done inside JavaScript instead of crossing the boundary once per object (each
// crossing, a string decoded from wasm memory, a typed array made, costs more than the
// step itself): building a commit's `objects` record, answering a batch of `has`
// questions, and listing the ids of a record, `Map` or array in one string.
#[wasm_bindgen(inline_js = r#"
// Small commits' bytes are carved out of shared 256 KiB buffers, as Node carves small
// Buffers out of a pool: a fresh ArrayBuffer per commit (zeroed, registered with the
// collector as external memory) costs more than a per-turn commit's own work. A commit
// larger than a quarter of a slab gets a buffer of its own.
const SLAB = 1 << 18
let slab = null
let slabAt = 0
function carve(n) {
  if (n > SLAB >>> 2) return new Uint8Array(n)
  if (slab === null || slabAt + n > SLAB) {
    slab = new Uint8Array(SLAB)
    slabAt = 0
  }
  const out = new Uint8Array(slab.buffer, slabAt, n)
  slabAt = (slabAt + n + 7) & ~7
  return out
}
export function commitResult(generation, objectCount, storedBytes, isComplete, packed, keys, data, sizes) {
  // `data` is a view of wasm memory: copied out once, before anything can grow the
  // memory, and each object a view of that copy. A null-prototype record is a
  // dictionary from the start in V8, so a fresh set of ids per commit grows no
  // hidden-class transitions.
  const bytes = carve(data.length)
  bytes.set(data)
  const buffer = bytes.buffer
  const objects = Object.create(null)
  let at = bytes.byteOffset
  for (let i = 0; i < sizes.length; i++) {
    const size = sizes[i]
    objects[keys.slice((i + 1) << 6, (i + 2) << 6)] = new Uint8Array(buffer, at, size)
    at += size
  }
  return { id: keys.slice(0, 64), generation, objects, objectCount, storedBytes, packed, isComplete }
}
export function commitOptions(o) {
  // Flags (see OPT_* in js.rs), a HaveSet's key and the parents' ids joined, as
  // "flags,key,ids"; null unless `o` is an object, undefined or null.
  if (o === undefined || o === null) return '0,0,'
  if (typeof o !== 'object') return null
  let flags = 0
  let key = 0
  let joined = ''
  const parents = o.parents
  if (Array.isArray(parents)) {
    for (const id of parents) {
      if (typeof id !== 'string' || id.length !== 64) {
        joined = null
        break
      }
      joined += id
    }
    flags |= joined === null ? 2 : 1
    if (joined === null) joined = ''
  } else if (parents !== undefined && parents !== null) flags |= 2
  const have = o.have
  if (have !== undefined && have !== null) {
    let k
    try {
      k = typeof have === 'object' ? have.__snapgraphHaveSet : undefined
    } catch {
      flags |= 1024
    }
    if (typeof k === 'number') {
      flags |= 4
      key = k
    } else flags |= 8
  }
  if (o.parentSource !== undefined && o.parentSource !== null) flags |= 16
  const bool = (v, yes, bad) => (v === true ? yes : v === false || v === undefined || v === null ? 0 : bad)
  flags |= bool(o.excludeFiles, 32, 64) | bool(o.excludeState, 128, 256)
  if (o.meta !== undefined && o.meta !== null) flags |= 512
  return flags + ',' + key + ',' + joined
}
export function hasMany(target, has, ids) {
  let out = ''
  for (let i = 0; i < ids.length; i += 64) out += has.call(target, ids.slice(i, i + 64)) ? '1' : '0'
  return out
}
export function joinIds(v) {
  let out = ''
  const add = (id) => {
    if (typeof id !== 'string' || id.length !== 64) return false
    out += id
    return true
  }
  if (v instanceof Map || v instanceof Set) {
    for (const id of v.keys()) if (!add(id)) return null
  } else if (typeof v === 'string' || v === null || typeof v !== 'object') {
    return null
  } else if (typeof v[Symbol.iterator] === 'function') {
    for (const id of v) if (!add(id)) return null
  } else {
    for (const id of Object.keys(v)) if (!add(id)) return null
  }
  return out
}
"#)]
extern "C" {
    /// `{ id, generation, objects, objectCount, storedBytes, packed, isComplete }`
    /// with `id` = `keys[0..64]` and `objects[keys[64 (i + 1)..64 (i + 2)]]` the `i`th
    /// object: `sizes[i]` bytes of `data` after the objects before it.
    #[wasm_bindgen(js_name = commitResult)]
    #[allow(clippy::too_many_arguments)]
    pub fn commit_result(
        generation: f64,
        object_count: f64,
        stored_bytes: f64,
        is_complete: bool,
        packed: &JsValue,
        keys: &str,
        data: &[u8],
        sizes: &[u32],
    ) -> Object;

    /// `"flags,key,ids"` of commit options (see the `OPT_*` flags); `None` unless
    /// `options` is an object, `undefined` or `null`.
    #[wasm_bindgen(js_name = commitOptions)]
    pub(crate) fn commit_options(options: &JsValue) -> Option<String>;

    /// `has.call(target, id)` for each 64-digit id of `ids`, as `'0'`/`'1'`.
    #[wasm_bindgen(js_name = hasMany, catch)]
    fn has_many(target: &JsValue, has: &Function, ids: &str) -> Result<String, JsValue>;

    /// The ids of `v` one after the other: a `Map`'s or `Set`'s keys, an iterable's
    /// items, or a record's own keys; `null` unless each is a 64-character string.
    #[wasm_bindgen(js_name = joinIds)]
    pub(crate) fn join_ids(v: &JsValue) -> Option<String>;
}

/// `parents` is an array of 64-character strings, joined in the `ids` field.
pub(crate) const OPT_PARENTS_JOINED: u32 = 1;
/// `parents` is present in another form (read again to parse or refuse it).
pub(crate) const OPT_PARENTS_OTHER: u32 = 2;
/// `have` is a `HaveSet`, whose key is the `key` field.
pub(crate) const OPT_HAVE_HELD: u32 = 4;
/// `have` is present and not a `HaveSet`.
pub(crate) const OPT_HAVE_OTHER: u32 = 8;
/// `parentSource` is present.
pub(crate) const OPT_PARENT_SOURCE: u32 = 16;
/// `excludeFiles` is `true`.
pub(crate) const OPT_EXCLUDE_FILES: u32 = 32;
/// `excludeFiles` is present and not a boolean.
pub(crate) const OPT_EXCLUDE_FILES_BAD: u32 = 64;
/// `excludeState` is `true`.
pub(crate) const OPT_EXCLUDE_STATE: u32 = 128;
/// `excludeState` is present and not a boolean.
pub(crate) const OPT_EXCLUDE_STATE_BAD: u32 = 256;
/// `meta` is present.
pub(crate) const OPT_META: u32 = 512;
/// `have` is a freed `HaveSet` (its getter threw).
pub(crate) const OPT_HAVE_FREED: u32 = 1024;

/// `(flags, key, ids)` of what `commitOptions` answered.
pub(crate) fn split_commit_options(read: &str) -> (u32, u32, &str) {
    let mut parts = read.splitn(3, ',');
    let mut number = || parts.next().and_then(|n| n.parse().ok()).unwrap_or(0);
    let (flags, key) = (number(), number());
    (flags, key, parts.next().unwrap_or(""))
}

/// Parses the 64-digit ids of `joined` (ids one after the other), all or none; `what`
/// names them in the error.
pub(crate) fn parse_joined(joined: &str, what: &str) -> JsResult<Vec<ObjectId>> {
    joined
        .as_bytes()
        .chunks(64)
        .map(|digits| match std::str::from_utf8(digits) {
            Ok(s) if digits.len() == 64 => id(s),
            _ => Err(invalid(format!("{what} must be 64-digit hex strings"))),
        })
        .collect()
}

/// Every fallible binding call returns this: the error is a JavaScript `Error`.
pub type JsResult<T> = Result<T, JsValue>;

/// Builds the JavaScript `Error` for a described engine error.
pub fn to_js(d: Described) -> JsValue {
    let e = js_sys::Error::new(&d.message);
    let obj: &Object = e.as_ref();
    set(obj, "code", &JsValue::from_str(d.code));
    if let Some(id) = d.id {
        set(obj, "id", &JsValue::from_str(&id.to_hex()));
    }
    if let Some(p) = &d.path {
        set(obj, "path", &JsValue::from_str(p));
    }
    if let Some(c) = d.commit {
        set(obj, "commit", &JsValue::from_str(&c.to_hex()));
    }
    e.into()
}

/// An `INVALID_ARGUMENT` error.
pub fn invalid(message: impl Into<String>) -> JsValue {
    to_js(Described::new(INVALID_ARGUMENT, message))
}

/// Sets `obj[key] = value`. Setting a data property on a plain object cannot fail.
pub fn set(obj: &Object, key: &str, value: &JsValue) {
    let _ = Reflect::set(obj, &JsValue::from_str(key), value);
}

/// `obj[key]`, `undefined` when `obj` is not an object.
pub fn get(obj: &JsValue, key: &str) -> JsValue {
    if !obj.is_object() {
        return JsValue::UNDEFINED;
    }
    Reflect::get(obj, &JsValue::from_str(key)).unwrap_or(JsValue::UNDEFINED)
}

/// A fresh plain object.
pub fn object() -> Object {
    Object::new()
}

/// Parses a hex object id.
pub fn id(s: &str) -> JsResult<ObjectId> {
    ObjectId::from_hex(s).map_err(|e| to_js(error::parse_id(s, &e)))
}

/// Parses a hex object id given as any value (`what` names it in the error).
pub fn id_value(v: &JsValue, what: &str) -> JsResult<ObjectId> {
    match v.as_string() {
        Some(s) => id(&s),
        None => Err(invalid(format!("{what} must be a hex object id string"))),
    }
}

/// A list of ids: an array (or any iterable) of hex strings.
pub fn ids(v: &JsValue, what: &str) -> JsResult<Vec<ObjectId>> {
    // Arrays directly: the iterator protocol costs a call per step.
    if let Some(a) = v.dyn_ref::<Array>() {
        return a.iter().map(|item| id_value(&item, what)).collect();
    }
    let Some(iter) = js_sys::try_iter(v).ok().flatten() else {
        return Err(invalid(format!(
            "{what} must be an array of hex object ids"
        )));
    };
    let mut out = Vec::new();
    for item in iter {
        let item = item?;
        out.push(id_value(&item, what)?);
    }
    Ok(out)
}

/// An array of hex strings.
pub fn id_array<'a>(ids: impl IntoIterator<Item = &'a ObjectId>) -> Array {
    ids.into_iter().map(hex).collect()
}

/// An id as a JavaScript hex string, without the intermediate `String` of
/// `to_hex` (ids cross the boundary on every source lookup).
pub fn hex(id: &ObjectId) -> JsValue {
    let digits = hex_digits(id);
    // ASCII hex digits are always UTF-8.
    JsValue::from_str(std::str::from_utf8(&digits).unwrap_or_default())
}

/// Appends the 64 hex digits of `id` (without `Display`'s formatting machinery, which
/// costs more than the digits in wasm).
pub fn push_hex(out: &mut String, id: &ObjectId) {
    out.push_str(std::str::from_utf8(&hex_digits(id)).unwrap_or_default());
}

fn hex_digits(id: &ObjectId) -> [u8; 64] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 64];
    for (i, b) in id.as_bytes().iter().enumerate() {
        out[2 * i] = DIGITS[usize::from(b >> 4)];
        out[2 * i + 1] = DIGITS[usize::from(b & 15)];
    }
    out
}

/// Bytes given as a `Uint8Array` (or a string, taken as UTF-8, where `text_ok`).
///
/// Byte arguments come in as `JsValue` and are checked here rather than typed `&[u8]`
/// or `&Uint8Array`: a wrong type then gives `INVALID_ARGUMENT`, not a JavaScript
/// exception thrown through a wasm frame (which would leave the object borrowed).
pub fn bytes(v: &JsValue, what: &str, text_ok: bool) -> JsResult<Vec<u8>> {
    if let Some(a) = v.dyn_ref::<Uint8Array>() {
        return Ok(a.to_vec());
    }
    if text_ok {
        if let Some(s) = v.as_string() {
            return Ok(s.into_bytes());
        }
    }
    Err(invalid(if text_ok {
        format!("{what} must be a Uint8Array or a string")
    } else {
        format!("{what} must be a Uint8Array")
    }))
}

/// A 32-byte snapshot key.
pub fn key(v: &JsValue) -> JsResult<[u8; 32]> {
    let k = bytes(v, "key", false)?;
    k.as_slice()
        .try_into()
        .map_err(|_| invalid(format!("a snapshot key is 32 bytes, got {}", k.len())))
}

/// A `Uint8Array` copy of `data`.
pub fn u8array(data: &[u8]) -> Uint8Array {
    Uint8Array::from(data)
}

/// An optional string property (`undefined` and `null` are absent).
pub fn opt_string(obj: &JsValue, key: &str) -> JsResult<Option<String>> {
    let v = get(obj, key);
    if v.is_undefined() || v.is_null() {
        return Ok(None);
    }
    v.as_string()
        .map(Some)
        .ok_or_else(|| invalid(format!("{key} must be a string")))
}

/// A required string property.
pub fn req_string(obj: &JsValue, key: &str) -> JsResult<String> {
    opt_string(obj, key)?.ok_or_else(|| invalid(format!("{key} is required")))
}

/// An optional non-negative integer property (a number or a bigint).
pub fn opt_u64(obj: &JsValue, key: &str) -> JsResult<Option<u64>> {
    let v = get(obj, key);
    if v.is_undefined() || v.is_null() {
        return Ok(None);
    }
    u64_value(&v, key).map(Some)
}

/// A non-negative integer given as a number or a bigint.
pub fn u64_value(v: &JsValue, what: &str) -> JsResult<u64> {
    if let Some(n) = v.as_f64() {
        // Exact integers only, up to 2^53 (beyond, a number cannot be exact).
        if n >= 0.0 && n.fract() == 0.0 && n <= 9_007_199_254_740_992.0 {
            return Ok(n as u64);
        }
    } else if v.is_bigint() {
        if let Ok(n) = u64::try_from(v.clone()) {
            return Ok(n);
        }
    }
    Err(invalid(format!("{what} must be a non-negative integer")))
}

/// An optional boolean property.
pub fn opt_bool(obj: &JsValue, key: &str) -> JsResult<bool> {
    let v = get(obj, key);
    if v.is_undefined() || v.is_null() {
        return Ok(false);
    }
    v.as_bool()
        .ok_or_else(|| invalid(format!("{key} must be a boolean")))
}

/// A `u64` as a JavaScript number (exact up to 2^53, which the format guarantees for
/// generations and is far above any size a browser holds).
pub fn number(n: u64) -> JsValue {
    JsValue::from_f64(n as f64)
}

/// Where the engine reads objects from, as a JavaScript caller gives it.
///
/// - any object with a `get(id)` method (a `Map`, a custom store): `get` returns a
///   `Uint8Array`, or `undefined`/`null` when absent; a `has(id)` method, if there is
///   one, answers presence questions (a commit's `have`);
/// - a function `(id) => Uint8Array | undefined | null`;
/// - otherwise a plain record `{ [hexId]: Uint8Array }`.
///
/// Calls are synchronous: load objects from IndexedDB first (a
/// [`CheckoutPlan`](crate::graph::CheckoutPlan) says which).
pub struct JsSource {
    target: JsValue,
    get: Option<Function>,
    has: Option<Function>,
}

impl JsSource {
    /// Wraps `v`; refuses values that are not objects.
    pub fn new(v: &JsValue, what: &str) -> JsResult<Self> {
        if let Some(f) = v.dyn_ref::<Function>() {
            return Ok(Self {
                target: JsValue::UNDEFINED,
                get: Some(f.clone()),
                has: None,
            });
        }
        if !v.is_object() {
            return Err(invalid(format!(
                "{what} must be a Map, an object with get(id), a function of an id, or a record of hex ids to Uint8Arrays"
            )));
        }
        let method = |name| get(v, name).dyn_into::<Function>().ok();
        Ok(Self {
            target: v.clone(),
            get: method("get"),
            has: method("has"),
        })
    }

    fn fetch(&self, id: &ObjectId) -> Result<JsValue, BoxError> {
        let key = hex(id);
        let r = match &self.get {
            Some(f) => f.call1(&self.target, &key),
            None => Reflect::get(&self.target, &key),
        };
        r.map_err(|e| BoxError::from(js_message(&e)))
    }
}

/// The message of a thrown JavaScript value.
pub fn js_message(e: &JsValue) -> String {
    if let Some(err) = e.dyn_ref::<js_sys::Error>() {
        return String::from(err.message());
    }
    e.as_string()
        .unwrap_or_else(|| "the source threw a non-Error value".to_owned())
}

impl ObjectSource for JsSource {
    fn get(&self, id: &ObjectId) -> Result<Option<Cow<'_, [u8]>>, BoxError> {
        let v = self.fetch(id)?;
        if v.is_undefined() || v.is_null() {
            return Ok(None);
        }
        match v.dyn_ref::<Uint8Array>() {
            Some(a) => Ok(Some(Cow::Owned(a.to_vec()))),
            None => Err("the source returned something other than a Uint8Array".into()),
        }
    }

    /// With a `has` method, one call for the batch (a commit's `have` questions).
    fn contains_many(&self, ids: &[ObjectId]) -> Result<Vec<bool>, BoxError> {
        let Some(has) = self.has.as_ref().filter(|_| ids.len() > 1) else {
            return ids.iter().map(|id| self.contains(id)).collect();
        };
        let mut hex = String::with_capacity(64 * ids.len());
        for id in ids {
            push_hex(&mut hex, id);
        }
        let answer =
            has_many(&self.target, has, &hex).map_err(|e| BoxError::from(js_message(&e)))?;
        if answer.len() != ids.len() {
            return Err("has() answered a batch with the wrong length".into());
        }
        Ok(answer.bytes().map(|b| b == b'1').collect())
    }

    fn contains(&self, id: &ObjectId) -> Result<bool, BoxError> {
        match &self.has {
            Some(f) => f
                .call1(&self.target, &hex(id))
                .map(|v| v.is_truthy())
                .map_err(|e| BoxError::from(js_message(&e))),
            None => {
                let v = self.fetch(id)?;
                Ok(!(v.is_undefined() || v.is_null()))
            }
        }
    }
}
