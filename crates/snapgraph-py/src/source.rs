//! What Python passes where the core reads objects: a snapgraph store, or any mapping
//! of hex id to bytes (a `dict`, or the caller's own class with `__getitem__`).

use std::borrow::Cow;
use std::sync::Arc;

use pyo3::exceptions::{PyException, PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyDict, PyString};
use snapgraph::{BoxError, ObjectId, ObjectSource};
use snapgraph_store::Store;

use crate::errors::{invalid_id, Failure};
use crate::store::PyStore;

/// Parses a hex id given by Python, naming the string on error.
pub fn parse_id(s: &str) -> Result<ObjectId, Failure> {
    ObjectId::from_hex(s).map_err(|e| invalid_id(s, e))
}

/// Parses every hex id of an iterable (a list, `dict.keys()`, a generator).
pub fn parse_ids(ids: &Bound<'_, PyAny>) -> Result<Vec<ObjectId>, Failure> {
    if ids.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err("expected an iterable of hex ids, got one str").into());
    }
    let mut out = Vec::with_capacity(ids.len().unwrap_or(0));
    for item in ids.try_iter()? {
        let item = item?;
        let s: String = item.extract()?;
        out.push(parse_id(&s)?);
    }
    Ok(out)
}

/// Objects as the core reads them: a store (read without the GIL) or a Python
/// mapping (each read takes the GIL for its `__getitem__` call).
pub enum Objects {
    /// A snapgraph store.
    Store(Arc<dyn Store>),
    /// Any object with `__getitem__(hex_id) -> bytes`.
    Mapping(Mapping),
}

impl Objects {
    /// Accepts a `snapgraph.Store` or any object with `__getitem__`.
    pub fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        if let Ok(store) = obj.cast::<PyStore>() {
            return Ok(Objects::Store(store.get().inner.clone()));
        }
        if !obj.hasattr("__getitem__")? {
            return Err(PyTypeError::new_err(format!(
                "objects must be a mapping of hex id to bytes (with __getitem__) or a \
                 snapgraph store, not {}",
                obj.get_type().name()?
            )));
        }
        let has_contains = obj.hasattr("__contains__")?;
        Ok(Objects::Mapping(Mapping {
            obj: obj.clone().unbind(),
            has_contains,
            is_dict: obj.is_exact_instance_of::<PyDict>(),
            stop: std::sync::Mutex::new(None),
        }))
    }

    /// The source the core reads.
    pub fn source(&self) -> &dyn ObjectSource {
        match self {
            Objects::Store(s) => s,
            Objects::Mapping(m) => m,
        }
    }

    /// `result`, the outcome of a call that read these objects, unless the mapping
    /// raised a stop meanwhile ([`Mapping::stop`]): then that exception, whatever
    /// the core made of the failure. Every call taking `objects` ends with this.
    pub fn finish<T>(&self, result: Result<T, Failure>) -> Result<T, Failure> {
        match self {
            Objects::Mapping(m) => match m.stop.lock().unwrap_or_else(|p| p.into_inner()).take() {
                Some(stop) => Err(stop.into()),
                None => result,
            },
            Objects::Store(_) => result,
        }
    }
}

/// A Python mapping read as an [`ObjectSource`]. A `KeyError` (or `None`) means
/// absent; any other exception is the source failing, carried to the caller as the
/// cause of a `snapgraph.SourceError`, except a stop ([`Mapping::stop`]).
pub struct Mapping {
    obj: Py<PyAny>,
    has_contains: bool,
    /// An exact `dict`: read with `PyDict_GetItem`, so a miss raises no `KeyError`.
    is_dict: bool,
    /// The first exception outside `Exception` that a call raised: Ctrl-C's
    /// `KeyboardInterrupt`, `SystemExit`. It asks the program to stop; it is not
    /// the source failing, so it must reach the caller as itself, neither wrapped
    /// in a `SourceError` (which an `except Exception` swallows) nor dropped where
    /// the core counts a failed `contains` as "not held". Once set, every read
    /// fails at once without calling Python, and [`Objects::finish`] raises it.
    stop: std::sync::Mutex<Option<PyErr>>,
}

impl Mapping {
    /// `e`, a call's exception, as the source's error; a stop is kept to be raised
    /// by [`Objects::finish`].
    fn failed(&self, py: Python<'_>, e: PyErr) -> BoxError {
        if !e.is_instance_of::<PyException>(py) {
            let mut stop = self.stop.lock().unwrap_or_else(|p| p.into_inner());
            stop.get_or_insert_with(|| e.clone_ref(py));
        }
        Box::new(e)
    }

    /// The stop raised earlier, as an error, if there was one.
    fn stopped(&self, py: Python<'_>) -> Option<BoxError> {
        let stop = self.stop.lock().unwrap_or_else(|p| p.into_inner());
        stop.as_ref().map(|e| Box::new(e.clone_ref(py)) as BoxError)
    }
}

/// The bytes of a value read from a mapping (None: absent).
fn value_bytes(id: &ObjectId, v: Bound<'_, PyAny>) -> Result<Option<Cow<'static, [u8]>>, BoxError> {
    if v.is_none() {
        return Ok(None);
    }
    match v.extract::<PyBackedBytes>() {
        Ok(b) => Ok(Some(Cow::Owned(b.to_vec()))),
        Err(_) => Err(Box::new(PyTypeError::new_err(format!(
            "objects[{:?}] is a {}, expected bytes",
            id.to_hex(),
            v.get_type()
                .name()
                .map_or_else(|_| "?".to_string(), |n| n.to_string())
        )))),
    }
}

impl ObjectSource for Mapping {
    fn get(&self, id: &ObjectId) -> Result<Option<Cow<'_, [u8]>>, BoxError> {
        Python::attach(|py| {
            if let Some(stop) = self.stopped(py) {
                return Err(stop);
            }
            let obj = self.obj.bind(py);
            if self.is_dict {
                let dict = obj
                    .cast::<PyDict>()
                    .map_err(|e| Box::new(PyErr::from(e)) as BoxError)?;
                return match dict.get_item(id.to_hex()) {
                    Ok(Some(v)) => value_bytes(id, v),
                    Ok(None) => Ok(None),
                    Err(e) => Err(self.failed(py, e)),
                };
            }
            match obj.get_item(id.to_hex()) {
                Ok(v) => value_bytes(id, v),
                Err(e) if e.is_instance_of::<PyKeyError>(py) => Ok(None),
                Err(e) => Err(self.failed(py, e)),
            }
        })
    }

    fn contains(&self, id: &ObjectId) -> Result<bool, BoxError> {
        if !self.has_contains {
            return Ok(self.get(id)?.is_some());
        }
        Python::attach(|py| {
            if let Some(stop) = self.stopped(py) {
                return Err(stop);
            }
            self.obj
                .bind(py)
                .contains(id.to_hex())
                .map_err(|e| self.failed(py, e))
        })
    }
}
