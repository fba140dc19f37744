//! `HaveSet`: the ids a destination holds, kept in wasm memory, so that a commit's
//! `have` questions are answered there instead of by a call into JavaScript.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

use hashbrown::{HashMap, HashSet};
use snapgraph::{BoxError, ObjectId, ObjectSource};
use wasm_bindgen::prelude::*;

use crate::js::{self, invalid, JsResult};

type Ids = Rc<RefCell<HashSet<ObjectId>>>;

thread_local! {
    /// Every live `HaveSet` by its key, so that a commit given one as a `JsValue` (its
    /// `have` option) finds the set without taking the JavaScript object apart.
    static SETS: RefCell<HashMap<u32, Ids>> = RefCell::new(HashMap::new());
    static NEXT: Cell<u32> = const { Cell::new(1) };
}

/// Ids of objects a destination holds (a page's store), kept in wasm memory: as a
/// commit's `have` it is asked inside the module, with no call into JavaScript per
/// object, like a Rust `HashSet` passed to `have_in`. It holds ids, not bytes: it
/// answers no parent lookups (a merge with a commit this workspace neither made nor
/// checked out takes a `parentSource`).
///
/// ```js
/// const held = new HaveSet();
/// const c = ws.commit({ parents: [ws.head()], have: held });
/// await idb.putMany(c.objects);  // once stored:
/// held.addAll(c.objects);
/// ```
#[wasm_bindgen]
pub struct HaveSet {
    key: u32,
    ids: Ids,
}

impl Drop for HaveSet {
    fn drop(&mut self) {
        let _ = SETS.try_with(|s| s.borrow_mut().remove(&self.key));
    }
}

/// The ids of one `HaveSet`, as a commit's `have_in` source.
pub(crate) struct HeldSource(Ids);

impl HeldSource {
    /// The live `HaveSet` whose key is `key` (what its JavaScript object's
    /// `__snapgraphHaveSet` getter answers).
    pub fn by_key(key: u32) -> JsResult<Self> {
        SETS.with(|s| s.borrow().get(&key).cloned())
            .map(Self)
            .ok_or_else(|| invalid("have: this HaveSet was freed"))
    }
}

impl ObjectSource for HeldSource {
    fn get(&self, _id: &ObjectId) -> Result<Option<Cow<'_, [u8]>>, BoxError> {
        Ok(None)
    }

    fn contains(&self, id: &ObjectId) -> Result<bool, BoxError> {
        Ok(self.0.borrow().contains(id))
    }

    fn contains_many(&self, ids: &[ObjectId]) -> Result<Vec<bool>, BoxError> {
        let set = self.0.borrow();
        Ok(ids.iter().map(|id| set.contains(id)).collect())
    }
}

#[wasm_bindgen]
impl HaveSet {
    /// An empty set.
    #[wasm_bindgen(constructor)]
    pub fn new() -> HaveSet {
        let key = NEXT.with(|n| {
            let k = n.get();
            n.set(k.wrapping_add(1).max(1));
            k
        });
        let ids = Ids::default();
        SETS.with(|s| s.borrow_mut().insert(key, ids.clone()));
        HaveSet { key, ids }
    }

    /// The key a commit finds this set by (internal).
    #[wasm_bindgen(getter, js_name = __snapgraphHaveSet)]
    pub fn registry_key(&self) -> u32 {
        self.key
    }

    /// Adds one id; `INVALID_ID` unless it is 64 lowercase hex digits.
    pub fn add(&self, id: &str) -> JsResult<()> {
        let id = js::id(id)?;
        self.ids.borrow_mut().insert(id);
        Ok(())
    }

    /// Adds many ids, all or none: a commit's `objects` record (its keys), a `Map` or
    /// `Set` (its keys), or an array (or other iterable) of hex ids. Read in one call
    /// into JavaScript.
    #[wasm_bindgen(js_name = addAll)]
    pub fn add_all(
        &self,
        #[wasm_bindgen(
            unchecked_param_type = "Record<string, Uint8Array> | Map<string, unknown> | Set<string> | Iterable<string>"
        )]
        ids: JsValue,
    ) -> JsResult<()> {
        let joined = js::join_ids(&ids).ok_or_else(|| {
            invalid("ids must be a record, Map or Set keyed by hex ids, or an iterable of hex ids")
        })?;
        let parsed = js::parse_joined(&joined, "ids")?;
        self.ids.borrow_mut().extend(parsed);
        Ok(())
    }

    /// Whether `id` is in the set (false for a string that is not an id).
    pub fn has(&self, id: &str) -> bool {
        ObjectId::from_hex(id).is_ok_and(|id| self.ids.borrow().contains(&id))
    }

    /// Removes `id` (after the store deleted it); whether it was there.
    pub fn delete(&self, id: &str) -> bool {
        ObjectId::from_hex(id).is_ok_and(|id| self.ids.borrow_mut().remove(&id))
    }

    /// Removes every id.
    pub fn clear(&self) {
        self.ids.borrow_mut().clear();
    }

    /// How many ids.
    #[wasm_bindgen(getter)]
    pub fn size(&self) -> u32 {
        u32::try_from(self.ids.borrow().len()).unwrap_or(u32::MAX)
    }
}

impl Default for HaveSet {
    fn default() -> Self {
        Self::new()
    }
}
