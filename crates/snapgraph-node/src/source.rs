//! `objects` arguments: the core's `ObjectSource` over JavaScript values.
//!
//! A `Record<string, Buffer | Uint8Array>`, anything with a `get(id)` method (a
//! `Map`), a function `(id) => Buffer | Uint8Array | null | undefined`, or a snapgraph
//! `Store` / `Repo`. JavaScript values are read lazily, one id at a time, on the
//! calling thread; the engine re-hashes every object it reads, so nothing a script
//! hands back is trusted.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::sync::Arc;

use napi::bindgen_prelude::{
    ClassInstance, Either3, Either4, FromNapiValue, Function, JsObjectValue, JsValue, Null, Object,
    Uint8ArraySlice, Undefined, Unknown,
};
use napi::{Env, Status, ValueType};
use snapgraph::{BoxError, ObjectId, ObjectSource};

use crate::error::{napi as napi_err, NotBytes, Result};
use crate::helpers;
use crate::store::{Repo, Store};

/// What a JavaScript source hands back for one id.
pub type Bytes<'a> = Either3<Uint8ArraySlice<'a>, Null, Undefined>;

/// An `objects` argument as napi-rs receives it.
pub type ObjectsArg<'a> = Either4<
    ClassInstance<'a, Store>,
    ClassInstance<'a, Repo>,
    Function<'a, String, Bytes<'a>>,
    Object<'a>,
>;

/// A JavaScript value the engine reads objects from.
pub enum JsSource<'a> {
    /// A snapgraph store: read in Rust, no JavaScript involved.
    Store(Arc<dyn snapgraph_store::Store>),
    /// A lookup function.
    Function(Function<'a, String, Bytes<'a>>),
    /// A record, or an object with `get` (and maybe `has`) methods.
    Object {
        /// The object.
        object: Object<'a>,
        /// Its `get` method, if it has one (a `Map`).
        get: Option<Function<'a, String, Bytes<'a>>>,
        /// Its `has` method, if it has one (a `Map` or a `Set`).
        has: Option<Function<'a, String, bool>>,
    },
}

/// Whether `object[name]` is a function.
fn is_method(object: &Object<'_>, name: &std::ffi::CStr) -> Result<bool> {
    let value: Unknown = object
        .get_c_named_property_unchecked(name)
        .map_err(napi_err)?;
    Ok(value.get_type().map_err(napi_err)? == ValueType::Function)
}

fn method<'a, R>(object: &Object<'a>, name: &str) -> Result<Option<Function<'a, String, R>>>
where
    R: napi::bindgen_prelude::FromNapiValue,
{
    let value: Unknown<'a> = object.get_named_property(name).map_err(napi_err)?;
    if value.get_type().map_err(napi_err)? != ValueType::Function {
        return Ok(None);
    }
    object.get_named_property(name).map(Some).map_err(napi_err)
}

impl<'a> JsSource<'a> {
    /// Classifies an `objects` argument.
    pub fn new(arg: ObjectsArg<'a>) -> Result<Self> {
        Ok(match arg {
            Either4::A(store) => JsSource::Store(store.inner.clone()),
            Either4::B(repo) => JsSource::Store(repo.store_arc()),
            Either4::C(function) => JsSource::Function(function),
            Either4::D(object) => {
                let get = method(&object, "get")?;
                let has = method(&object, "has")?;
                JsSource::Object { object, get, has }
            }
        })
    }

    /// An object with a `get` or a `has` method (what a per-turn commit passes as
    /// `have`: a `Map` or a `Set`), told by its methods alone: no class test and no
    /// failed conversion, each of which builds an error message. `None` for other
    /// objects (a record, a `Store`, a `Repo`: classify them with [`new`](Self::new)).
    pub fn with_methods(object: Object<'a>) -> Result<Option<Self>> {
        let (get, has) = (is_method(&object, c"get")?, is_method(&object, c"has")?);
        if !get && !has {
            return Ok(None);
        }
        let get = if get {
            Some(
                object
                    .get_c_named_property_unchecked(c"get")
                    .map_err(napi_err)?,
            )
        } else {
            None
        };
        let has = if has {
            Some(
                object
                    .get_c_named_property_unchecked(c"has")
                    .map_err(napi_err)?,
            )
        } else {
            None
        };
        Ok(Some(JsSource::Object { object, get, has }))
    }

    /// The store behind this source, if it is one (for calls that run off the
    /// event loop, where JavaScript values cannot be read).
    pub fn store(&self) -> Option<Arc<dyn snapgraph_store::Store>> {
        match self {
            JsSource::Store(s) => Some(s.clone()),
            _ => None,
        }
    }
}

/// A failed JavaScript lookup: a value that is not bytes, or the exception the
/// script's `get` threw.
fn lookup_error(id: &ObjectId, e: napi::Error) -> BoxError {
    if e.status == Status::InvalidArg {
        Box::new(NotBytes(format!(
            "objects[{id}] is not a Buffer, a Uint8Array, null or undefined"
        )))
    } else {
        format!("objects lookup of {id} threw: {}", e.reason).into()
    }
}

fn owned(bytes: Bytes<'_>) -> Option<Cow<'static, [u8]>> {
    match bytes {
        Either3::A(slice) => Some(Cow::Owned(slice.as_ref().to_vec())),
        Either3::B(_) | Either3::C(_) => None,
    }
}

impl ObjectSource for JsSource<'_> {
    fn get(&self, id: &ObjectId) -> std::result::Result<Option<Cow<'_, [u8]>>, BoxError> {
        match self {
            JsSource::Store(s) => s.get(id),
            JsSource::Function(f) => f
                .call(id.to_hex())
                .map(owned)
                .map_err(|e| lookup_error(id, e)),
            JsSource::Object {
                object,
                get: Some(get),
                ..
            } => get
                .apply(object, id.to_hex())
                .map(owned)
                .map_err(|e| lookup_error(id, e)),
            JsSource::Object { object, .. } => object
                .get_named_property::<Bytes<'_>>(&id.to_hex())
                .map(owned)
                .map_err(|e| lookup_error(id, e)),
        }
    }

    fn contains(&self, id: &ObjectId) -> std::result::Result<bool, BoxError> {
        match self {
            JsSource::Store(s) => s.contains(id),
            JsSource::Object {
                object,
                has: Some(has),
                ..
            } => Ok(has_many(object, has, std::slice::from_ref(id))?[0]),
            _ => Ok(self.get(id)?.is_some()),
        }
    }

    fn get_many(
        &self,
        ids: &[ObjectId],
    ) -> std::result::Result<Vec<Option<Cow<'_, [u8]>>>, BoxError> {
        match self {
            JsSource::Store(s) => s.get_many(ids),
            _ => ids.iter().map(|id| self.get(id)).collect(),
        }
    }

    /// A `Store` answers in one batch; an object with `has` in one call of the
    /// `hasMany` helper (a commit's `have` questions, see `helpers`).
    fn contains_many(&self, ids: &[ObjectId]) -> std::result::Result<Vec<bool>, BoxError> {
        match self {
            JsSource::Store(s) => s.contains_many(ids),
            JsSource::Object {
                object,
                has: Some(has),
                ..
            } => has_many(object, has, ids),
            _ => ids.iter().map(|id| self.contains(id)).collect(),
        }
    }
}

/// `has` asked about each of `ids` through the `hasMany` helper: one call into
/// JavaScript, and a `has` that throws is an error here rather than an exception left
/// pending (which would surface from a commit that went on and succeeded). Where the
/// helper could not be compiled, `has` is called once per id.
fn has_many(
    object: &Object<'_>,
    has: &Function<'_, String, bool>,
    ids: &[ObjectId],
) -> std::result::Result<Vec<bool>, BoxError> {
    let env = Env::from_raw(object.value().env);
    let Some(helpers) = helpers::get(&env) else {
        return ids
            .iter()
            .map(|id| {
                has.apply(object, id.to_hex())
                    .map_err(|e| lookup_error(id, e))
            })
            .collect();
    };
    let mut hex = String::with_capacity(64 * ids.len());
    for id in ids {
        // Writing into a `String` cannot fail.
        let _ = write!(hex, "{id}");
    }
    let failed = |e: napi::Error| BoxError::from(format!("objects has() failed: {}", e.reason));
    let answer = helpers
        .has_many(&env)
        .and_then(|f| f.apply(object, hex))
        .map_err(failed)?;
    // Up to `BITS` ids the helper answers with a number (bit `i` for `ids[i]`), else
    // (and when `has` threw) with a string.
    if answer.get_type().map_err(failed)? == ValueType::Number {
        if ids.len() > helpers::BITS {
            return Err("objects has() answered a batch with the wrong shape".into());
        }
        let bits = u32::from_unknown(answer).map_err(failed)?;
        return Ok((0..ids.len()).map(|i| bits & (1 << i) != 0).collect());
    }
    let answer = String::from_unknown(answer).map_err(failed)?;
    if let Some(message) = answer.strip_prefix('!') {
        return Err(format!("objects has() threw: {message}").into());
    }
    if answer.len() != ids.len() {
        return Err("objects has() answered a batch with the wrong length".into());
    }
    Ok(answer.bytes().map(|b| b == b'1').collect())
}
