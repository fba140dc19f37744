//! The store traits: [`ObjectStore`] (objects in batches), [`RefStore`] (refs by
//! compare-and-swap, reflog) and [`Store`], the two together; [`Paired`] joins one
//! backend's objects with another's refs.

use snapgraph::{ObjectId, ObjectSource};

use crate::error::StoreError;

/// One change of a ref inside an atomic [`RefStore::update_refs`].
///
/// `expected` is what the ref must hold for the update to apply (`None`: it must not
/// exist); `new` is what it will hold (`None`: delete it). An update whose `expected`
/// equals its `new` changes nothing but still guards the whole batch: it is how a
/// caller says "only if this other ref has not moved".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefUpdate {
    /// The ref's name (see [`validate_ref_name`]).
    pub name: String,
    /// The value the ref must hold now.
    pub expected: Option<ObjectId>,
    /// The value it will hold.
    pub new: Option<ObjectId>,
}

impl RefUpdate {
    /// Moves `name` from `expected` to `new`.
    pub fn new(name: impl Into<String>, expected: Option<ObjectId>, new: Option<ObjectId>) -> Self {
        Self {
            name: name.into(),
            expected,
            new,
        }
    }

    /// Requires `name` to hold `value`, changing nothing.
    pub fn guard(name: impl Into<String>, value: Option<ObjectId>) -> Self {
        Self::new(name, value, value)
    }

    /// Whether the update changes the ref (guards do not).
    pub fn changes(&self) -> bool {
        self.expected != self.new
    }
}

/// One move of a ref, as its reflog records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReflogEntry {
    /// The value before (`None`: the ref was created).
    pub old: Option<ObjectId>,
    /// The value after (`None`: the ref was deleted).
    pub new: Option<ObjectId>,
    /// The caller's message.
    pub message: String,
}

/// Who re-hashes the bytes a read returns: [`ObjectStore::get_many_checked`].
///
/// Every read verifies by default. A caller that hashes each object it is given
/// anyway (the core's checkout and `Workspace::load_content`, which re-hash every
/// object before use and report a mismatch naming its id) may ask the store to leave
/// the hash to it, so that each object is hashed once instead of twice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadCheck {
    /// The store re-hashes every object it returns (what [`ObjectStore::get_many`]
    /// does).
    #[default]
    Store,
    /// The caller re-hashes every object it is given and refuses a mismatch: the
    /// store may return a record's bytes without hashing them. The store still
    /// refuses records it cannot decode, and verifies the bases of deltas (which the
    /// caller never sees).
    Caller,
}

/// The object part of a store: stored objects keyed by id, in batches.
///
/// Objects are the stored bytes of the core format. A store keeps them as it likes
/// (compressed, packed) but hands back exactly the bytes that hash to the id:
/// adapters verify every object they read and report a mismatch as
/// [`StoreError::Corrupt`]. `put_many` does not re-hash (callers hand it objects the
/// core made or a verified read returned); a wrong id put in is caught when read.
///
/// The invariant a store keeps with the help of its callers (`Repo`, `sync`): an
/// object is written only after everything it references, so holding an object means
/// holding its whole closure.
pub trait ObjectStore: Send + Sync {
    /// The verified stored bytes of each id, in the order asked; `None` where absent.
    fn get_many(&self, ids: &[ObjectId]) -> Result<Vec<Option<Vec<u8>>>, StoreError>;

    /// [`get_many`](Self::get_many), saying who re-hashes what is returned. With
    /// [`ReadCheck::Caller`] an adapter may skip its own hash of each object
    /// returned (the caller does it); with [`ReadCheck::Store`] this is `get_many`.
    /// The default verifies in both cases, so a store that does not override it
    /// stays as safe as ever; the local adapters (SQLite, directory, PostgreSQL,
    /// memory) skip the hash. Wrappers forward the flag.
    fn get_many_checked(
        &self,
        ids: &[ObjectId],
        check: ReadCheck,
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let _ = check;
        self.get_many(ids)
    }

    /// The ids among `ids` the store does not hold, in the order asked.
    fn has_many(&self, ids: &[ObjectId]) -> Result<Vec<ObjectId>, StoreError>;

    /// Writes objects; already held ones are left as they are (idempotent). Durable
    /// when it returns, in the order given as far as a crash can observe: write
    /// referenced objects in earlier calls or earlier in the batch.
    fn put_many(&self, objects: &[(ObjectId, &[u8])]) -> Result<(), StoreError>;

    /// [`put_many`](Self::put_many) with a hint per object: `bases[i]` (if any) names
    /// an object the store holds whose bytes are probably close to `objects[i]`'s,
    /// such as the previous version of the same file or directory node. A store that
    /// keeps deltas (FORMAT.md section 12) may encode the object against it; the
    /// default ignores the hints. `bases` is as long as `objects` (a shorter one
    /// leaves the rest without hints).
    fn put_many_with_bases(
        &self,
        objects: &[(ObjectId, &[u8])],
        bases: &[Option<ObjectId>],
    ) -> Result<(), StoreError> {
        let _ = bases;
        self.put_many(objects)
    }

    /// Whether [`put_many_with_bases`](Self::put_many_with_bases) uses its hints
    /// (the store keeps deltas, FORMAT.md section 12). Callers compute hints only
    /// then: finding them reads the parent's trees, cheap next to a local store,
    /// one request per tree node through a remote one that ignores them (S3).
    /// Default: false. Wrappers answer for what they wrap.
    fn keeps_deltas(&self) -> bool {
        false
    }

    /// Called by a writer right after it took a lease ([`crate::gc::Lease`]), before
    /// it looks at the store. From here until the writer's lease is released no
    /// collection deletes anything (the lease protocol, [`mod@crate::gc`]), so a store
    /// that caches what it holds may answer "present" from what it knew at the fence
    /// instead of re-checking for deletions on every call (the S3 store reads
    /// `gc-epoch` once here rather than once per `has_many`). Default: nothing (the
    /// store answers from its backend every time). Wrappers forward it.
    fn fence(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// [`fence`](Self::fence) for a writer whose lease was granted under the
    /// collection token `token` ([`crate::gc::Lease::token`]: the value of
    /// `snapgraph/gc` its lease's guarded update checked). Every sweep changes the
    /// token when it begins and again when it ends, tokens never repeat, and a lease
    /// is granted only while no sweep runs: so if the lease under which this store
    /// last fenced with a request had the same token, nothing was deleted since, and
    /// a store that caches what it holds may skip the fence's request (the S3 store
    /// then sends none). Pass only the token of a lease just granted and still held.
    /// Default: [`fence`](Self::fence). Wrappers forward it.
    fn fence_leased(&self, token: Option<ObjectId>) -> Result<(), StoreError> {
        let _ = token;
        self.fence()
    }

    /// A hint that `ids` will soon be asked of [`get_many`](Self::get_many), in about
    /// this order ([`snapgraph::ObjectSource::will_read`], which stores get through
    /// [`impl_object_source!`](crate::impl_object_source)): the S3 store starts
    /// streaming them in one wave of ranged GETs, holding a bounded buffer. Answers
    /// never depend on it. Default: nothing. Wrappers forward it.
    fn will_read(&self, ids: &[ObjectId]) {
        let _ = ids;
    }

    /// With `true`, lets this handle's reads share one snapshot of the store until it
    /// is called with `false`: a hint for a burst of small reads, such as a commit's
    /// scan loading the directories that changed. SQLite then begins one read
    /// transaction for all of them instead of one a call (a lock, an unlock and an
    /// `fstat` of the file each). Meanwhile reads may not see what other handles
    /// write; a write through this handle ends the shared snapshot, and the next read
    /// begins another, which sees it. Default: nothing (each read sees the store as it
    /// is). Wrappers forward it.
    fn share_reads(&self, share: bool) -> Result<(), StoreError> {
        let _ = share;
        Ok(())
    }

    /// Whether this store answers presence questions from memory, so that asking it
    /// one id at a time costs no more than a batch ([`snapgraph::ObjectSource::answers_in_memory`],
    /// which stores get through [`impl_object_source!`](crate::impl_object_source)):
    /// a commit with it as `have_in` then walks once, asking per object, instead of
    /// probing first for one batched question. Default: `false`; the memory store
    /// says `true`. Wrappers forward it.
    fn answers_in_memory(&self) -> bool {
        false
    }

    /// Called by [`gc`](crate::gc()) while it sweeps, once no writer holds a lease:
    /// removes storage that holds nothing an id names and that no writer can still
    /// complete (the S3 store: a pack whose index was never written, by a writer
    /// that died, once older than its grace). Returns the bytes freed. Default:
    /// nothing of the kind (0).
    fn remove_orphans(&self) -> Result<u64, StoreError> {
        Ok(0)
    }

    /// Objects whose record's place at rest is not there, or would not stay there,
    /// found without reading the records: each with why (SQLite: a pack or segment
    /// file a reference names is missing or shorter than the reference says, or
    /// counts fewer live records than the rows naming it, so that deleting that many
    /// of them would remove it while the others still need it). A read of a missing
    /// one fails as [`StoreError::Corrupt`]; this finds them all at the cost of the
    /// store's index, for [`crate::verify()`]. Default: nothing to check (an empty
    /// list); wrappers forward it.
    fn check_at_rest(&self) -> Result<Vec<(ObjectId, String)>, StoreError> {
        Ok(Vec::new())
    }

    /// Rewrites how objects are kept at rest (recompressed, moved out of sparse
    /// packs), never which objects are held or a record's delta depth, so it is safe
    /// beside writers and collectors without a lease ([`crate::repack`]). Every
    /// record rewritten is decoded and verified first: a damaged one stops the
    /// repack with its typed error ([`StoreError::Corrupt`] or
    /// [`StoreError::BadDelta`] naming the id), batches already swapped in staying
    /// valid. `None`: the store does not repack (the default; only SQLite does).
    /// Wrappers forward it.
    fn repack(
        &self,
        options: &crate::repack::RepackOptions,
    ) -> Result<Option<crate::repack::RepackReport>, StoreError> {
        let _ = options;
        Ok(None)
    }

    /// Deletes objects; absent ones are ignored. A caller deleting a delta's base
    /// deletes the delta first or in the same call ([`gc`](crate::gc()) does).
    fn delete_many(&self, ids: &[ObjectId]) -> Result<(), StoreError>;

    /// Calls `f` with every object id held, in no particular order. An error from `f`
    /// stops the iteration and is returned.
    fn for_each_id(
        &self,
        f: &mut dyn FnMut(ObjectId) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;

    /// Calls `f` with `(delta, base)` for every object held as a delta, in no
    /// particular order: garbage collection keeps the base of everything it keeps.
    /// Stores that keep no deltas have none to list (the default).
    fn for_each_delta(
        &self,
        f: &mut dyn FnMut(ObjectId, ObjectId) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let _ = f;
        Ok(())
    }
}

/// The ref part of a store: names for commits, changed only by compare-and-swap,
/// atomically in batches, each change recorded in the ref's reflog.
///
/// A ref moves only after its commit's closure is in the object part (callers keep
/// that order), so a ref store may live elsewhere than the objects (see [`Paired`]):
/// what it needs from its backend is an atomic multi-key compare-and-swap.
pub trait RefStore: Send + Sync {
    /// The value of a ref.
    fn get_ref(&self, name: &str) -> Result<Option<ObjectId>, StoreError>;

    /// The value of a ref as good enough to build a guarded update from: possibly
    /// stale (a store that caches its refs answers from what it last read or wrote),
    /// because the [`update_refs`](Self::update_refs) it goes into checks it by
    /// compare-and-swap, and a conflict makes the caller read again. The lease
    /// protocol reads the collection token this way, and [`crate::Repo::commit`] the
    /// branch tip (re-read with [`get_ref`](Self::get_ref) whenever it disagrees with
    /// the workspace). Default: [`get_ref`](Self::get_ref). Wrappers forward it.
    fn get_ref_for_update(&self, name: &str) -> Result<Option<ObjectId>, StoreError> {
        self.get_ref(name)
    }

    /// Applies every update or none: if any ref does not hold its `expected` value,
    /// nothing changes and the error is [`StoreError::RefConflict`] for the first
    /// such ref. Each changing update appends `message` to that ref's reflog, except
    /// for writers' leases (`snapgraph/lease/…`, see [`crate::refs::logged`]).
    fn update_refs(&self, updates: &[RefUpdate], message: &str) -> Result<(), StoreError>;

    /// Whether [`update_refs_with_objects`](Self::update_refs_with_objects) writes
    /// objects and moves refs in one atomic step here: a writer then publishes a
    /// small commit without taking a lease (one write instead of three: see
    /// [`crate::gc`](mod@crate::gc), "Optimistic writers"). Default: no. Wrappers forward it.
    fn writes_objects_with_refs(&self) -> bool {
        false
    }

    /// Writes `objects` (each with its delta base hint in `bases`, as
    /// [`ObjectStore::put_many_with_bases`] does; objects held already are kept as
    /// they are) and applies `updates` as [`update_refs`](Self::update_refs) does,
    /// all in one atomic step: when any ref does not hold its `expected` value the
    /// error is [`StoreError::RefConflict`] and nothing is written, objects included.
    /// Returns `false`, having done nothing, when this store cannot (the default;
    /// [`writes_objects_with_refs`](Self::writes_objects_with_refs) says so
    /// beforehand). Wrappers forward it.
    fn update_refs_with_objects(
        &self,
        objects: &[(ObjectId, &[u8])],
        bases: &[Option<ObjectId>],
        updates: &[RefUpdate],
        message: &str,
    ) -> Result<bool, StoreError> {
        let _ = (objects, bases, updates, message);
        Ok(false)
    }

    /// Every ref whose name starts with `prefix`, sorted by name.
    fn list_refs(&self, prefix: &str) -> Result<Vec<(String, ObjectId)>, StoreError>;

    /// The moves of a ref, oldest first (kept after the ref is deleted).
    fn reflog(&self, name: &str) -> Result<Vec<ReflogEntry>, StoreError>;

    /// Moves `name` from `expected` to `new` if it still holds `expected`.
    fn compare_and_swap_ref(
        &self,
        name: &str,
        expected: Option<ObjectId>,
        new: ObjectId,
        message: &str,
    ) -> Result<(), StoreError> {
        self.update_refs(&[RefUpdate::new(name, expected, Some(new))], message)
    }

    /// Deletes `name` if it still holds `expected`.
    fn delete_ref(&self, name: &str, expected: ObjectId, message: &str) -> Result<(), StoreError> {
        self.update_refs(&[RefUpdate::new(name, Some(expected), None)], message)
    }
}

/// A whole store: objects ([`ObjectStore`]) and refs ([`RefStore`]), and the core's
/// [`ObjectSource`] over the objects (adapters get it from
/// [`impl_object_source!`](crate::impl_object_source)).
///
/// Implemented for every type that has the three parts; to pair one backend's
/// objects with another's refs, use [`Paired`].
pub trait Store: ObjectStore + RefStore + ObjectSource {}

impl<T: ObjectStore + RefStore + ObjectSource + ?Sized> Store for T {}

/// One backend's objects with another's refs: a [`Store`] whose object calls go to
/// `objects` and ref calls to `refs` (say, objects in a bucket and refs in
/// PostgreSQL, or objects in a directory and refs in SQLite).
///
/// The pair keeps the store invariant as long as each part keeps its own: objects
/// are durable when `put_many` returns, so a ref moved afterwards in the other
/// backend never names an object that is not there. Nothing is atomic across the
/// two; nothing needs to be, since objects are immutable and refs move last.
#[derive(Debug, Clone, Default)]
pub struct Paired<O, R> {
    /// Where objects live.
    pub objects: O,
    /// Where refs live.
    pub refs: R,
}

impl<O, R> Paired<O, R> {
    /// Pairs `objects` with `refs`.
    pub fn new(objects: O, refs: R) -> Self {
        Self { objects, refs }
    }
}

impl<O: ObjectStore, R: Send + Sync> ObjectStore for Paired<O, R> {
    fn get_many(&self, ids: &[ObjectId]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.objects.get_many(ids)
    }
    fn get_many_checked(
        &self,
        ids: &[ObjectId],
        check: ReadCheck,
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.objects.get_many_checked(ids, check)
    }
    fn has_many(&self, ids: &[ObjectId]) -> Result<Vec<ObjectId>, StoreError> {
        self.objects.has_many(ids)
    }
    fn put_many(&self, objects: &[(ObjectId, &[u8])]) -> Result<(), StoreError> {
        self.objects.put_many(objects)
    }
    fn put_many_with_bases(
        &self,
        objects: &[(ObjectId, &[u8])],
        bases: &[Option<ObjectId>],
    ) -> Result<(), StoreError> {
        self.objects.put_many_with_bases(objects, bases)
    }
    fn keeps_deltas(&self) -> bool {
        self.objects.keeps_deltas()
    }
    fn fence(&self) -> Result<(), StoreError> {
        self.objects.fence()
    }
    fn fence_leased(&self, token: Option<ObjectId>) -> Result<(), StoreError> {
        self.objects.fence_leased(token)
    }
    fn will_read(&self, ids: &[ObjectId]) {
        self.objects.will_read(ids)
    }
    fn answers_in_memory(&self) -> bool {
        self.objects.answers_in_memory()
    }
    fn share_reads(&self, share: bool) -> Result<(), StoreError> {
        self.objects.share_reads(share)
    }
    fn remove_orphans(&self) -> Result<u64, StoreError> {
        self.objects.remove_orphans()
    }
    fn check_at_rest(&self) -> Result<Vec<(ObjectId, String)>, StoreError> {
        self.objects.check_at_rest()
    }
    fn repack(
        &self,
        options: &crate::repack::RepackOptions,
    ) -> Result<Option<crate::repack::RepackReport>, StoreError> {
        self.objects.repack(options)
    }
    fn delete_many(&self, ids: &[ObjectId]) -> Result<(), StoreError> {
        self.objects.delete_many(ids)
    }
    fn for_each_id(
        &self,
        f: &mut dyn FnMut(ObjectId) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.objects.for_each_id(f)
    }
    fn for_each_delta(
        &self,
        f: &mut dyn FnMut(ObjectId, ObjectId) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.objects.for_each_delta(f)
    }
}

impl<O: Send + Sync, R: RefStore> RefStore for Paired<O, R> {
    fn get_ref(&self, name: &str) -> Result<Option<ObjectId>, StoreError> {
        self.refs.get_ref(name)
    }
    fn get_ref_for_update(&self, name: &str) -> Result<Option<ObjectId>, StoreError> {
        self.refs.get_ref_for_update(name)
    }
    fn update_refs(&self, updates: &[RefUpdate], message: &str) -> Result<(), StoreError> {
        self.refs.update_refs(updates, message)
    }
    fn list_refs(&self, prefix: &str) -> Result<Vec<(String, ObjectId)>, StoreError> {
        self.refs.list_refs(prefix)
    }
    fn reflog(&self, name: &str) -> Result<Vec<ReflogEntry>, StoreError> {
        self.refs.reflog(name)
    }
}

impl<O: ObjectStore, R> ObjectSource for Paired<O, R> {
    fn get(
        &self,
        id: &ObjectId,
    ) -> Result<Option<std::borrow::Cow<'_, [u8]>>, snapgraph::BoxError> {
        source_get(&self.objects, id)
    }
    fn contains(&self, id: &ObjectId) -> Result<bool, snapgraph::BoxError> {
        source_contains(&self.objects, id)
    }
    fn get_many(
        &self,
        ids: &[ObjectId],
    ) -> Result<Vec<Option<std::borrow::Cow<'_, [u8]>>>, snapgraph::BoxError> {
        source_get_many(&self.objects, ids)
    }
    fn contains_many(&self, ids: &[ObjectId]) -> Result<Vec<bool>, snapgraph::BoxError> {
        source_contains_many(&self.objects, ids)
    }
    fn will_read(&self, ids: &[ObjectId]) {
        self.objects.will_read(ids)
    }
    fn answers_in_memory(&self) -> bool {
        self.objects.answers_in_memory()
    }
}

/// Checks a batch a caller asks to put, before any of it is written: every object
/// must hash to its id and carry a valid header ([`snapgraph::object::verify`]).
/// [`ObjectStore::put_many`] trusts its caller (the engine puts what it just
/// hashed), and a store keeps the first bytes put under an id, so wrong bytes put
/// once would stay that object: a later put of the right ones is a no-op, and a
/// commit asking the store what it holds counts the id as held. The bindings'
/// `put` calls check with this first. A batch of more than [`CHECK_SPLIT`] bytes
/// is hashed on every core; the error is the first bad object's in batch order.
pub fn check_put(objects: &[(ObjectId, &[u8])]) -> Result<(), snapgraph::ObjectError> {
    let check = |part: &[(ObjectId, &[u8])]| {
        part.iter()
            .try_for_each(|(id, bytes)| snapgraph::object::verify(id, bytes).map(drop))
    };
    let bytes: usize = objects.iter().map(|(_, b)| b.len()).sum();
    let threads = crate::cpus::cores().min(bytes / CHECK_SPLIT).max(1);
    if threads == 1 {
        return check(objects);
    }
    let per = objects.len().div_ceil(threads);
    std::thread::scope(|s| {
        let parts: Vec<_> = objects[per..]
            .chunks(per)
            .map(|part| s.spawn(move || check(part)))
            .collect();
        let first = check(&objects[..per]);
        let rest = parts.into_iter().map(|h| {
            h.join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        });
        std::iter::once(first).chain(rest).collect()
    })
}

/// Bytes per thread below which [`check_put`] hashes on the caller's thread alone.
pub const CHECK_SPLIT: usize = 4 << 20;

/// [`ObjectSource::get`] through [`ObjectStore::get_many`].
pub fn source_get<'a>(
    store: &(impl ObjectStore + ?Sized),
    id: &ObjectId,
) -> Result<Option<std::borrow::Cow<'a, [u8]>>, snapgraph::BoxError> {
    let mut got = store.get_many(std::slice::from_ref(id))?;
    Ok(got.pop().flatten().map(std::borrow::Cow::Owned))
}

/// [`ObjectSource::get_many`] through one [`ObjectStore::get_many`].
pub fn source_get_many<'a>(
    store: &(impl ObjectStore + ?Sized),
    ids: &[ObjectId],
) -> Result<Vec<Option<std::borrow::Cow<'a, [u8]>>>, snapgraph::BoxError> {
    Ok(store
        .get_many(ids)?
        .into_iter()
        .map(|b| b.map(std::borrow::Cow::Owned))
        .collect())
}

/// [`ObjectSource::contains`] through [`ObjectStore::has_many`].
pub fn source_contains(
    store: &(impl ObjectStore + ?Sized),
    id: &ObjectId,
) -> Result<bool, snapgraph::BoxError> {
    Ok(store.has_many(std::slice::from_ref(id))?.is_empty())
}

/// [`ObjectSource::contains_many`] through one [`ObjectStore::has_many`].
pub fn source_contains_many(
    store: &(impl ObjectStore + ?Sized),
    ids: &[ObjectId],
) -> Result<Vec<bool>, snapgraph::BoxError> {
    let absent: std::collections::HashSet<ObjectId> = store.has_many(ids)?.into_iter().collect();
    Ok(ids.iter().map(|id| !absent.contains(id)).collect())
}

/// The core's [`ObjectSource`] over a store's objects for a caller that re-hashes
/// every object it reads ([`ReadCheck::Caller`]): hand it to the core's checkout
/// (`Workspace::checkout_with`, `Workspace::load_content`), which verify each object
/// before use, and each object is hashed once, not twice. A tampered object is still
/// refused, by the core, with an error naming its id.
///
/// Do not hand it to anything that trusts what it reads (a copy into another store,
/// [`verify`](crate::verify())): those take the store itself.
#[derive(Debug, Clone, Copy)]
pub struct CallerVerifies<S>(pub S);

impl<S: ObjectStore> ObjectSource for CallerVerifies<S> {
    fn get(
        &self,
        id: &ObjectId,
    ) -> Result<Option<std::borrow::Cow<'_, [u8]>>, snapgraph::BoxError> {
        let mut got = self
            .0
            .get_many_checked(std::slice::from_ref(id), ReadCheck::Caller)?;
        Ok(got.pop().flatten().map(std::borrow::Cow::Owned))
    }
    fn contains(&self, id: &ObjectId) -> Result<bool, snapgraph::BoxError> {
        source_contains(&self.0, id)
    }
    fn get_many(
        &self,
        ids: &[ObjectId],
    ) -> Result<Vec<Option<std::borrow::Cow<'_, [u8]>>>, snapgraph::BoxError> {
        Ok(self
            .0
            .get_many_checked(ids, ReadCheck::Caller)?
            .into_iter()
            .map(|b| b.map(std::borrow::Cow::Owned))
            .collect())
    }
    fn contains_many(&self, ids: &[ObjectId]) -> Result<Vec<bool>, snapgraph::BoxError> {
        source_contains_many(&self.0, ids)
    }
    fn answers_in_memory(&self) -> bool {
        self.0.answers_in_memory()
    }
}

/// Longest ref name accepted, in bytes.
pub const MAX_REF_NAME: usize = 255;

/// Checks a ref name: 1 to 255 bytes of ASCII letters, digits, `.`, `_`, `-`, `+`,
/// `=`, `@` and `/`; no empty, `.` or `..` component; no leading or trailing `/`.
/// Every adapter refuses other names with [`StoreError::InvalidRefName`], so a name
/// is safe as a file name under the directory adapter.
pub fn validate_ref_name(name: &str) -> Result<(), StoreError> {
    let bad = |reason| {
        Err(StoreError::InvalidRefName {
            name: name.chars().take(300).collect(),
            reason,
        })
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name.len() > MAX_REF_NAME {
        return bad("longer than 255 bytes");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"._-+=@/".contains(&b))
    {
        return bad("only ASCII letters, digits and . _ - + = @ / are allowed");
    }
    if name
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return bad("empty, '.' or '..' path component");
    }
    Ok(())
}

/// Implements the core's [`ObjectSource`] for an [`ObjectStore`] through
/// `get_many`/`has_many`.
#[macro_export]
macro_rules! impl_object_source {
    ($ty:ty) => {
        impl ::snapgraph::ObjectSource for $ty {
            fn get(
                &self,
                id: &::snapgraph::ObjectId,
            ) -> ::std::result::Result<
                ::std::option::Option<::std::borrow::Cow<'_, [u8]>>,
                ::snapgraph::BoxError,
            > {
                $crate::store::source_get(self, id)
            }
            fn contains(
                &self,
                id: &::snapgraph::ObjectId,
            ) -> ::std::result::Result<bool, ::snapgraph::BoxError> {
                $crate::store::source_contains(self, id)
            }
            fn get_many(
                &self,
                ids: &[::snapgraph::ObjectId],
            ) -> ::std::result::Result<
                ::std::vec::Vec<::std::option::Option<::std::borrow::Cow<'_, [u8]>>>,
                ::snapgraph::BoxError,
            > {
                // One batched read for the core's levels and windows.
                Ok($crate::ObjectStore::get_many(self, ids)?
                    .into_iter()
                    .map(|b| b.map(::std::borrow::Cow::Owned))
                    .collect())
            }
            fn contains_many(
                &self,
                ids: &[::snapgraph::ObjectId],
            ) -> ::std::result::Result<::std::vec::Vec<bool>, ::snapgraph::BoxError> {
                $crate::store::source_contains_many(self, ids)
            }
            fn will_read(&self, ids: &[::snapgraph::ObjectId]) {
                $crate::ObjectStore::will_read(self, ids)
            }
            fn answers_in_memory(&self) -> bool {
                $crate::ObjectStore::answers_in_memory(self)
            }
        }
    };
}

macro_rules! forward_store {
    ($($ptr:ty),*) => {$(
        impl<T: ObjectStore + ?Sized> ObjectStore for $ptr {
            fn get_many(&self, ids: &[ObjectId]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
                crate::store::ObjectStore::get_many(&**self, ids)
            }
            fn get_many_checked(
                &self,
                ids: &[ObjectId],
                check: ReadCheck,
            ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
                (**self).get_many_checked(ids, check)
            }
            fn has_many(&self, ids: &[ObjectId]) -> Result<Vec<ObjectId>, StoreError> {
                (**self).has_many(ids)
            }
            fn put_many(&self, objects: &[(ObjectId, &[u8])]) -> Result<(), StoreError> {
                (**self).put_many(objects)
            }
            fn put_many_with_bases(
                &self,
                objects: &[(ObjectId, &[u8])],
                bases: &[Option<ObjectId>],
            ) -> Result<(), StoreError> {
                (**self).put_many_with_bases(objects, bases)
            }
            fn keeps_deltas(&self) -> bool {
                (**self).keeps_deltas()
            }
            fn fence(&self) -> Result<(), StoreError> {
                (**self).fence()
            }
            fn fence_leased(&self, token: Option<ObjectId>) -> Result<(), StoreError> {
                (**self).fence_leased(token)
            }
            fn will_read(&self, ids: &[ObjectId]) {
                (**self).will_read(ids)
            }
            fn share_reads(&self, share: bool) -> Result<(), StoreError> {
                (**self).share_reads(share)
            }
            fn answers_in_memory(&self) -> bool {
                (**self).answers_in_memory()
            }
            fn remove_orphans(&self) -> Result<u64, StoreError> {
                (**self).remove_orphans()
            }
            fn check_at_rest(&self) -> Result<Vec<(ObjectId, String)>, StoreError> {
                (**self).check_at_rest()
            }
            fn repack(
                &self,
                options: &crate::repack::RepackOptions,
            ) -> Result<Option<crate::repack::RepackReport>, StoreError> {
                (**self).repack(options)
            }
            fn delete_many(&self, ids: &[ObjectId]) -> Result<(), StoreError> {
                (**self).delete_many(ids)
            }
            fn for_each_id(
                &self,
                f: &mut dyn FnMut(ObjectId) -> Result<(), StoreError>,
            ) -> Result<(), StoreError> {
                (**self).for_each_id(f)
            }
            fn for_each_delta(
                &self,
                f: &mut dyn FnMut(ObjectId, ObjectId) -> Result<(), StoreError>,
            ) -> Result<(), StoreError> {
                (**self).for_each_delta(f)
            }
        }
        impl<T: RefStore + ?Sized> RefStore for $ptr {
            fn get_ref(&self, name: &str) -> Result<Option<ObjectId>, StoreError> {
                (**self).get_ref(name)
            }
            fn get_ref_for_update(&self, name: &str) -> Result<Option<ObjectId>, StoreError> {
                (**self).get_ref_for_update(name)
            }
            fn update_refs(&self, updates: &[RefUpdate], message: &str) -> Result<(), StoreError> {
                (**self).update_refs(updates, message)
            }
            fn writes_objects_with_refs(&self) -> bool {
                (**self).writes_objects_with_refs()
            }
            fn update_refs_with_objects(
                &self,
                objects: &[(ObjectId, &[u8])],
                bases: &[Option<ObjectId>],
                updates: &[RefUpdate],
                message: &str,
            ) -> Result<bool, StoreError> {
                (**self).update_refs_with_objects(objects, bases, updates, message)
            }
            fn list_refs(&self, prefix: &str) -> Result<Vec<(String, ObjectId)>, StoreError> {
                (**self).list_refs(prefix)
            }
            fn reflog(&self, name: &str) -> Result<Vec<ReflogEntry>, StoreError> {
                (**self).reflog(name)
            }
        }
    )*};
}

forward_store!(&T, Box<T>, std::sync::Arc<T>);

#[cfg(test)]
mod tests {
    use super::*;

    /// The objects of a commit of `files` files of 64 KiB of distinct bytes.
    fn objects(files: u32) -> Vec<(ObjectId, Vec<u8>)> {
        let mut ws = snapgraph::Workspace::new();
        for i in 0..files {
            let data: Vec<u8> = (0..1u32 << 14)
                .flat_map(|j| (i ^ j).to_le_bytes())
                .collect();
            ws.write(&format!("/f{i}"), &data).unwrap();
        }
        let c = ws.commit(snapgraph::CommitOptions::new()).unwrap();
        c.objects()
            .iter()
            .map(|(id, b)| (*id, b.to_vec()))
            .collect()
    }

    #[test]
    fn check_put_names_the_first_object_not_its_ids_on_one_thread_or_many() {
        // 64 KiB of objects (one thread) and 12 MiB (split across the cores).
        for files in [1, 192] {
            let good = objects(files);
            let batch: Vec<(ObjectId, &[u8])> =
                good.iter().map(|(id, b)| (*id, b.as_slice())).collect();
            check_put(&batch).unwrap();
            for at in [0, batch.len() / 2, batch.len() - 1] {
                let mut bad = batch.clone();
                let other = batch[(at + 1) % batch.len()].1;
                bad[at].1 = if other == bad[at].1 { b"junk" } else { other };
                // A second bad object later in the batch: the first is named.
                let last = bad.len() - 1;
                if at < last {
                    bad[last].1 = b"junk";
                }
                match check_put(&bad) {
                    Err(snapgraph::ObjectError::Corrupt { id, .. }) => assert_eq!(id, batch[at].0),
                    other => panic!("object {at} of {}: {other:?}", batch.len()),
                }
            }
        }
    }
}
