//! `objects` arguments: the core's `ObjectSource` over JavaScript values.
//!
//! A `Record<string, Buffer | Uint8Array>`, anything with a `get(id)` method (a
//! `Map`), a function `(id) => Buffer | Uint8Array | null | undefined`, or a snapgraph
//! `Store` / `Repo`. JavaScript values are read lazily, one id at a time, on the
//! calling thread; the engine re-hashes every object it reads, so nothing a script
//! hands back is trusted.

use std::borrow::Cow;
use std::sync::Arc;

use napi::bindgen_prelude::JsObjectValue;
use napi::bindgen_prelude::{
    ClassInstance, Either3, Either4, Function, Null, Object, Uint8ArraySlice, Undefined, Unknown,
};
use napi::{Status, ValueType};
use snapgraph::{BoxError, ObjectId, ObjectSource};

use crate::error::{napi as napi_err, NotBytes, Result};
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
            } => has
                .apply(object, id.to_hex())
                .map_err(|e| lookup_error(id, e)),
            _ => Ok(self.get(id)?.is_some()),
        }
    }
}
