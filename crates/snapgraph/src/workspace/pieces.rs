//! `Workspace::content_pieces`: a file's bytes read from the store a window of chunks
//! at a time, each verified, without the whole file in memory.
//!
//! [`Workspace::load_content`] puts a file's bytes in the workspace, so a caller that
//! only copies them out (a checkout writing files to disk) holds each file whole: a
//! 1 GiB file costs at least 1 GiB. [`Pieces`] hands the same bytes over in order, one
//! chunk body at a time, fetching [`PIECES_WINDOW`] chunks per batched read, so
//! what it holds is bounded by the window whatever the file's size. Every check
//! `load_content` makes is made here too, at the point it can be:
//!
//! - before the first piece: the file's size against the [`Limits`](crate::Limits),
//!   the manifest's shape against the recorded size (every manifest node read and
//!   verified: the chunk list is known before any chunk is);
//! - as each chunk arrives: its hash against its id, its kind and its length against
//!   the manifest's; the content rules against the file's first bytes;
//! - after the last chunk: that the manifest is the one this engine writes for those
//!   chunks (its canonical form, which needs every chunk's format version).
//!
//! An error ends the iteration. The bytes are proven to be the file only once the
//! iterator returns `None`: a caller writing them somewhere must treat what it wrote
//! as unverified until then (the CLI writes into a staging directory it removes on
//! error).

use std::borrow::Cow;

use super::checkout::{body_of, check_chunk, CheckoutError, Loader};
use super::{path, ContentRule, Node, Workspace};
use crate::content::ContentObjects;
use crate::id::ObjectId;
use crate::object::capability::CapabilityFingerprint;
use crate::object::manifest::ChunkRef;
use crate::object::tree::Content;
use crate::object::{ObjectError, ObjectKind};
use crate::source::ObjectSource;

/// Chunks fetched per batched read by [`Pieces`]: with chunks of at most 64 KiB,
/// at most 4 MiB held at a time.
pub const PIECES_WINDOW: usize = 64;

/// The bytes of one file, in order, as verified pieces: see
/// [`Workspace::content_pieces`].
pub struct Pieces<'a, S: ?Sized> {
    state: State<'a, S>,
    rules: &'a [ContentRule],
    live: Option<&'a CapabilityFingerprint>,
    commit: ObjectId,
    /// The path, as errors name it.
    path: String,
    /// The first bytes seen, up to the longest content rule's prefix, until the rules
    /// are checked.
    head: Vec<u8>,
    rules_checked: bool,
}

enum State<'a, S: ?Sized> {
    /// Pieces already in hand (a loaded or inline file, a single chunk).
    Ready(std::vec::IntoIter<Cow<'a, [u8]>>),
    /// A manifest's chunks, fetched a window at a time.
    Chunks(Box<Chunked<'a, S>>),
    Done,
}

struct Chunked<'a, S: ?Sized> {
    loader: Loader<'a, S>,
    root: ObjectId,
    size: u64,
    chunks: Vec<ChunkRef>,
    /// The next chunk to fetch.
    next: usize,
    /// Verified bodies of the current window, in order.
    window: std::collections::VecDeque<Cow<'a, [u8]>>,
    /// Each chunk's format version, for the canonical check at the end.
    versions: Vec<u8>,
}

impl Workspace {
    /// An [`Ingest`](crate::ingest::Ingest) for new bytes of the file at `path`, a
    /// file a [lazy or shallow checkout](Self::checkout_with) left in the store:
    /// given the chunk list of the version it holds (its manifest read from
    /// `source`, checked as [`load_content`](Self::load_content) checks it, no chunk
    /// read), the ingest takes each of those chunks the new bytes still hold,
    /// hashed instead of cut and not handed back, so that an edit of a large file
    /// costs a hash of it and a cut of what changed (see the
    /// [`ingest`](crate::ingest) module, "Over a previous version"). `expected` is
    /// the new length as far as known (it only decides where an unchanged tail is
    /// looked for). The objects and ids are those of a plain [`Ingest`](crate::ingest::Ingest); put the
    /// result at `path` with [`write_ingested`](Self::write_ingested).
    ///
    /// `None` when there is no such version to ingest over: `path` is missing, not
    /// a file, loaded (its bytes in memory: [`write`](Self::write) re-cuts only
    /// around an edit already), or stored as one chunk or inline. Errors are those
    /// of reading the manifest: the file's new bytes do not need it, so a caller may
    /// fall back to a plain `Ingest`.
    ///
    /// ```
    /// # use snapgraph::{CheckoutOptions, CommitOptions, ObjectId, Workspace};
    /// use snapgraph::ingest::Ingest;
    /// let big: Vec<u8> = (0..400_000u32)
    ///     .flat_map(|i| (i.wrapping_mul(2_654_435_761) >> 7).to_le_bytes())
    ///     .collect();
    /// let mut ws = Workspace::new();
    /// ws.write("/log", &big)?;
    /// let c = ws.commit(CommitOptions::new())?;
    /// let id = c.id();
    /// let mut store: std::collections::HashMap<ObjectId, _> = c.into_objects().into_iter().collect();
    ///
    /// let mut lazy = Workspace::new();
    /// lazy.checkout_with(id, &store, CheckoutOptions::new().lazy(true))?;
    /// let grown = [&big[..], b"one more line\n"].concat();
    /// let mut ingest = lazy.ingest_over("/log", &store, grown.len() as u64)?.expect("stored as a manifest");
    /// let mut new_objects = ingest.push(&grown);
    /// let (file, last) = ingest.finish();
    /// new_objects.append(last);
    /// // Only the last chunk was cut again: it and the manifest are all that is new.
    /// assert!(new_objects.stored_bytes() < 80_000);
    /// // The same content as the new bytes cut whole.
    /// let mut plain = Ingest::new();
    /// plain.push(&grown);
    /// assert_eq!(file.content_id(), plain.finish().0.content_id());
    /// store.extend(new_objects);
    /// lazy.write_ingested("/log", file)?;
    /// lazy.commit(CommitOptions::new())?;
    /// # Ok::<(), snapgraph::Error>(())
    /// ```
    pub fn ingest_over<S: ObjectSource + ?Sized>(
        &self,
        path: &str,
        source: &S,
        expected: u64,
    ) -> Result<Option<crate::ingest::Ingest>, CheckoutError> {
        let comps = path::parse(path).map_err(super::FsError::from)?;
        let reference = match self.lookup(&comps) {
            Ok(Some(Node::File(f))) => match (&f.data, &f.objects) {
                (None, Some(reference)) => reference.clone(),
                _ => return Ok(None),
            },
            _ => return Ok(None),
        };
        let Content::Manifest(root) = reference.content else {
            return Ok(None);
        };
        let commit = self.head.unwrap_or(root);
        let mut loader = self.loader(source, commit, true, super::checkout::Depth::Full);
        loader.budget.leaf((1, 0))?;
        loader.budget.bytes(reference.size)?;
        let chunks = loader.chunk_refs(root, reference.size)?;
        Ok(Some(crate::ingest::Ingest::over(chunks, expected)))
    }

    /// The bytes of the file at `path`, in order, as pieces the caller copies out one
    /// at a time: for a file a [shallow checkout](Self::checkout_with) left in the
    /// store, each chunk is fetched ([`PIECES_WINDOW`] per batched read), re-hashed
    /// and checked as [`load_content`](Self::load_content) checks it, so the file is
    /// never whole in memory; a loaded or inline file is one piece. Nothing in the
    /// workspace changes.
    ///
    /// Errors come up front (a path that is not a file, the size over the
    /// [`Limits`](crate::Limits), a bad manifest) or as an item (a missing or bad
    /// chunk, a content rule, a manifest not in canonical form, found after the last
    /// chunk): iteration ends at the first. The pieces are the file's bytes only once
    /// the iterator has returned `None`.
    ///
    /// ```
    /// # use snapgraph::{CheckoutOptions, CommitOptions, Workspace};
    /// let mut ws = Workspace::new();
    /// let big: Vec<u8> = (0..300_000u32).flat_map(|i| i.to_le_bytes()).collect();
    /// ws.write("/big.bin", &big)?;
    /// let c = ws.commit(CommitOptions::new())?;
    /// let id = c.id();
    /// let store: std::collections::HashMap<_, _> = c.into_objects().into_iter().collect();
    ///
    /// let mut shallow = Workspace::new();
    /// shallow.checkout_with(id, &store, CheckoutOptions::new().shallow(true))?;
    /// let mut out = Vec::new();
    /// for piece in shallow.content_pieces("/big.bin", &store)? {
    ///     out.extend_from_slice(&piece?);
    /// }
    /// assert_eq!(out, big);
    /// # Ok::<(), snapgraph::Error>(())
    /// ```
    pub fn content_pieces<'a, S: ObjectSource + ?Sized>(
        &'a self,
        path: &str,
        source: &'a S,
    ) -> Result<Pieces<'a, S>, CheckoutError> {
        let comps = path::parse(path).map_err(super::FsError::from)?;
        let p = path::join(&comps);
        let reference = match self.lookup(&comps)? {
            Some(Node::File(f)) => match (&f.data, &f.objects) {
                (Some(data), _) => {
                    // Loaded bytes were checked against the rules as they were loaded.
                    let mut pieces = self.pieces(p, ObjectId::from_bytes([0; 32]));
                    pieces.state = State::Ready(vec![Cow::Borrowed(&data[..])].into_iter());
                    pieces.rules_checked = true;
                    return Ok(pieces);
                }
                (None, Some(reference)) => reference.clone(),
                // Unloaded files always keep their reference.
                (None, None) => return Err(super::FsError::NotLoaded { path: p }.into()),
            },
            // Not a file: `read` says why.
            _ => {
                return Err(match self.read(path) {
                    Err(e) => e.into(),
                    Ok(_) => super::FsError::NotFound { path: p }.into(),
                })
            }
        };
        let commit = match (self.head, reference.content.object()) {
            (Some(head), _) => head,
            (None, Some((id, _))) => id,
            (None, None) => ObjectId::from_bytes([0; 32]),
        };
        let mut loader = self.loader(source, commit, true, super::checkout::Depth::Full);
        loader.budget.leaf((1, 0))?;
        loader.budget.bytes(reference.size)?;
        let size = reference.size;
        let mut pieces = self.pieces(p, commit);
        pieces.state = match &reference.content {
            Content::Inline(bytes) => State::Ready(vec![Cow::Owned(bytes.to_vec())].into_iter()),
            Content::Chunk(id) => {
                let loaded = loader.load_ahead(id, ObjectKind::Chunk)?;
                if loaded.body().len() as u64 != size {
                    return Err(ObjectError::malformed(
                        *id,
                        ObjectKind::Chunk,
                        format!("{} bytes where the entry says {size}", loaded.body().len()),
                    )
                    .into());
                }
                State::Ready(vec![body_of(loaded.stored)].into_iter())
            }
            Content::Manifest(root) => {
                let root = *root;
                let chunks = loader.chunk_refs(root, size)?;
                if chunks.len() > PIECES_WINDOW {
                    let ids: Vec<ObjectId> = chunks.iter().map(|c| c.id).collect();
                    source.will_read(&ids);
                }
                State::Chunks(Box::new(Chunked {
                    loader,
                    root,
                    size,
                    versions: Vec::with_capacity(chunks.len()),
                    chunks,
                    next: 0,
                    window: Default::default(),
                }))
            }
        };
        Ok(pieces)
    }

    /// Pieces of the file at `path` of `commit`, with nothing in hand yet.
    fn pieces<'a, S: ?Sized>(&'a self, path: String, commit: ObjectId) -> Pieces<'a, S> {
        Pieces {
            state: State::Done,
            rules: &self.content_rules,
            live: self.capabilities.as_deref(),
            commit,
            path,
            head: Vec::new(),
            rules_checked: false,
        }
    }
}

impl<'a, S: ObjectSource + ?Sized> Chunked<'a, S> {
    /// Fetches and verifies the next window; `false` when every chunk was handed out.
    fn fill(&mut self) -> Result<bool, CheckoutError> {
        if self.next >= self.chunks.len() {
            return Ok(false);
        }
        let end = (self.next + PIECES_WINDOW).min(self.chunks.len());
        let window = &self.chunks[self.next..end];
        let fetched = self.loader.fetch_window(window)?;
        for (c, stored) in window.iter().zip(fetched) {
            self.versions
                .push(check_chunk(&c.id, &stored, c.len as usize, true)?);
            self.window.push_back(body_of(stored));
        }
        self.next = end;
        Ok(true)
    }

    /// After the last chunk: the manifest must be the one this engine writes for them.
    fn finish(&self) -> Result<(), CheckoutError> {
        let spans = crate::content::spans_of(&self.chunks, &self.versions);
        ContentObjects::canonical(self.root, self.size, &spans)?;
        Ok(())
    }
}

impl<'a, S: ObjectSource + ?Sized> Pieces<'a, S> {
    fn step(&mut self) -> Option<Result<Cow<'a, [u8]>, CheckoutError>> {
        match &mut self.state {
            State::Done => None,
            State::Ready(pieces) => pieces.next().map(Ok),
            State::Chunks(chunked) => {
                if let Some(piece) = chunked.window.pop_front() {
                    return Some(Ok(piece));
                }
                match chunked.fill() {
                    Err(e) => Some(Err(e)),
                    Ok(true) => chunked.window.pop_front().map(Ok),
                    Ok(false) => match chunked.finish() {
                        Ok(()) => None,
                        Err(e) => Some(Err(e)),
                    },
                }
            }
        }
    }

    /// Checks the content rules once the file's first bytes (as many as the longest
    /// rule's prefix, or the whole file) have been seen.
    fn check_rules(&mut self, piece: Option<&[u8]>) -> Result<(), CheckoutError> {
        let (rules, live, commit) = (self.rules, self.live, self.commit);
        let want = rules.iter().map(|r| r.prefix.len()).max().unwrap_or(0);
        if let Some(piece) = piece {
            let take = want.saturating_sub(self.head.len()).min(piece.len());
            self.head.extend_from_slice(&piece[..take]);
            if self.head.len() < want {
                return Ok(());
            }
        }
        self.rules_checked = true;
        for rule in rules {
            if self.head.starts_with(&rule.prefix)
                && !live.is_some_and(|l| l.features.contains(&rule.feature))
            {
                return Err(CheckoutError::FeatureRequired {
                    commit,
                    path: self.path.clone(),
                    feature: rule.feature.clone(),
                });
            }
        }
        Ok(())
    }
}

impl<'a, S: ObjectSource + ?Sized> Iterator for Pieces<'a, S> {
    type Item = Result<Cow<'a, [u8]>, CheckoutError>;

    fn next(&mut self) -> Option<Self::Item> {
        let item = self.step();
        let checked = match (&item, self.rules_checked) {
            (_, true) | (Some(Err(_)), _) => Ok(()),
            (Some(Ok(piece)), false) => self.check_rules(Some(piece)),
            (None, false) => self.check_rules(None),
        };
        let item = match checked {
            Ok(()) => item,
            Err(e) => Some(Err(e)),
        };
        if matches!(item, None | Some(Err(_))) {
            self.state = State::Done;
        }
        item
    }
}
