//! Where a scan or an `import` hands what it reads, so that a commit's memory is
//! bounded by its batches, not by the tree or its largest file.
//!
//! Files are read whole into the workspace and handed over in batches
//! ([`Batches::file_read`]); a file over [`STREAM_MIN`] is instead cut into its
//! objects as it is read ([`snapgraph::ingest::Ingest`]), the objects handed to the
//! store a few MiB at a time ([`Batches::objects`]), and the workspace given only
//! its content reference ([`Workspace::write_ingested`]). A caller with no store to
//! hand objects to (a scan that only reports) reads every file whole.
//!
//! A file streamed in whose committed version the workspace holds unloaded (a lazy
//! scan's workspace), when the reader is given the store it is in, is cut over that
//! version ([`Workspace::ingest_over`]): the chunks it still holds are hashed
//! instead of cut and not handed to the store again, so an edit of a large file
//! costs a hash of it and a cut of what changed. A file read whole is cut by the
//! commit as before: its objects then go in the commit's own write, where an
//! ingest's would go to the store before it (a writer's lease and a write of their
//! own: three more transactions, three more `fsync`s on a disk).

use std::io::Read;
use std::path::Path;

use snapgraph::ingest::Ingest;
use snapgraph::{ObjectSet, ObjectSource, Workspace};

use crate::error::{vanished, IoContext, Result};

/// Files larger than this are streamed in (when the caller stores objects): at
/// most [`READ_BLOCK`] bytes of the file, the cutter's megabyte and
/// [`HAND_BYTES`] of objects are held at a time, whatever its size.
pub const STREAM_MIN: u64 = 16 << 20;

/// Bytes read from a streamed file per `read` call.
pub const READ_BLOCK: usize = 1 << 20;

/// Objects of a streamed file gathered before they are handed over.
pub const HAND_BYTES: u64 = snapgraph::ingest::PUT_BYTES;

/// What a reader of files hands its work to.
pub trait Batches {
    /// After the file of `bytes` bytes was written into `ws` whole.
    fn file_read(&mut self, ws: &mut Workspace, bytes: u64) -> Result<()>;

    /// Objects of a file being streamed in, in dependency order (chunks, then the
    /// manifest nodes), to be stored before the commit that refers to them.
    fn objects(&mut self, set: ObjectSet) -> Result<()>;

    /// Whether [`objects`](Self::objects) stores what it is given: large files are
    /// streamed in only then.
    fn streams(&self) -> bool;
}

/// Batches that store nothing: every file is read whole.
pub struct Whole;

impl Batches for Whole {
    fn file_read(&mut self, _: &mut Workspace, _: u64) -> Result<()> {
        Ok(())
    }
    fn objects(&mut self, _: ObjectSet) -> Result<()> {
        Ok(())
    }
    fn streams(&self) -> bool {
        false
    }
}

/// Batches for a commit made in memory only (`status`, `diff` against the working
/// directory): a file over [`STREAM_MIN`] is streamed in, hashed, and its objects
/// dropped, so that such a commit holds only their ids and its memory does not grow
/// with the files it reads. Nothing reads those objects after: a diff treats files
/// that large as binary without reading them
/// ([`crate::commands`]' `patch::TEXT_DIFF_MAX_BYTES`).
pub struct Hashed;

impl Batches for Hashed {
    fn file_read(&mut self, _: &mut Workspace, _: u64) -> Result<()> {
        Ok(())
    }
    fn objects(&mut self, _: ObjectSet) -> Result<()> {
        Ok(())
    }
    fn streams(&self) -> bool {
        true
    }
}

/// All of `input` (`expected` bytes as last seen; what arrives past that is read
/// too).
fn read_whole(mut input: impl Read, expected: u64) -> std::io::Result<Vec<u8>> {
    // Grow with what arrives past 64 MiB: a size is only a claim (a reservation it
    // does not fill is never touched: address space, not memory).
    let mut data = Vec::with_capacity(expected.min(64 << 20) as usize);
    // Through `Take`, whose `read_to_end` is the plain loop: `File`'s own first asks
    // the file for its size and position (an `fstat` and an `lseek` per file read),
    // which `expected` already gives.
    (&mut input).take(u64::MAX).read_to_end(&mut data)?;
    Ok(data)
}

/// Reads the regular file `file`, whose `lstat` gave `expected` bytes, onto the end
/// of `buf`: until its end, or past `limit` bytes, or when a read that was asked for
/// more ends exactly at `expected` bytes. A short read of a regular file ends at its
/// end, so that last rule saves the read that would return 0 (one system call per
/// file: a release's two thousand files are read in a commit). What is read is the
/// file as its `lstat` saw it either way: a file that grows after that read has a
/// new stat, which the next scan sees. Reads into the vector's spare capacity (no
/// zeroing), which is grown only for a file larger than `expected`.
pub fn read_sized(
    file: &std::fs::File,
    expected: u64,
    limit: u64,
    buf: &mut Vec<u8>,
) -> std::io::Result<()> {
    let start = buf.len();
    buf.reserve(usize::try_from(expected.min(64 << 20)).unwrap_or(0) + 1);
    loop {
        if buf.len() == buf.capacity() {
            buf.reserve(buf.capacity().max(8192));
        }
        match rustix::io::read(file, rustix::buffer::spare_capacity(buf)) {
            Ok(0) => return Ok(()),
            Ok(_) => {
                let got = (buf.len() - start) as u64;
                if got > limit || (got == expected && buf.len() < buf.capacity()) {
                    return Ok(());
                }
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// [`read_whole`] of an opened file (see [`read_sized`]).
fn read_whole_file(file: &std::fs::File, expected: u64) -> std::io::Result<Vec<u8>> {
    let mut data = Vec::new();
    read_sized(file, expected, u64::MAX, &mut data)?;
    Ok(data)
}

/// Writes the file at `path` in the workspace as `data`, read whole, and tells
/// `batches`; returns its length.
fn write_whole(
    ws: &mut Workspace,
    path: &str,
    data: Vec<u8>,
    batches: &mut dyn Batches,
) -> Result<u64> {
    let len = data.len() as u64;
    // The read buffer becomes the file's bytes (no copy into fresh memory).
    ws.write_owned(path, data)?;
    batches.file_read(ws, len)?;
    Ok(len)
}

/// Files no larger than this are read ahead ([`read_all`]).
pub const READ_AHEAD_MAX: u64 = 1 << 20;

/// Files read ahead and not yet taken, at most: with [`READ_AHEAD_MAX`], 16 MiB.
pub const READ_AHEAD_DEPTH: usize = 16;

/// Fewer files than this are read on the calling thread alone: a thread's start
/// costs more than it saves.
const READ_AHEAD_MIN_FILES: usize = 64;

/// Reads the files `files` (each on disk, its workspace path, its size as last seen)
/// into `ws` in order, as [`read_into`] reads each from its opened file, then calls
/// `each` with its position and the bytes read. Where there are many (a first
/// commit's whole tree) and two cores, the files of at most [`READ_AHEAD_MAX`] bytes
/// at odd positions are opened and read on a second thread (started off this core,
/// see [`crate::cpus`]), at most [`READ_AHEAD_DEPTH`] of them ahead of this one,
/// which reads the others (and the larger ones) itself and writes them all into the
/// workspace in order: reading is most of the work (the system calls, and the page
/// faults of the fresh memory the bytes land in), so it is shared. Errors name the
/// file, as [`read_into`]'s do; the first one stops the reading.
///
/// A file gone since the walk saw it (its `open` finds nothing there, as when a
/// build or a test run deletes its temporary files while a commit runs) is not an
/// error: it is taken out of the workspace, if there, and `each` is given `None`
/// for it (stop 57; before, the commit failed). The snapshot then holds the tree
/// as it was once that file was gone.
pub fn read_all(
    ws: &mut Workspace,
    files: &[(std::path::PathBuf, String, u64)],
    batches: &mut dyn Batches,
    store: Option<&dyn ObjectSource>,
    mut each: impl FnMut(&mut Workspace, usize, Option<u64>) -> Result<()>,
) -> Result<()> {
    let gone = |ws: &mut Workspace, path: &str| -> Result<Option<u64>> {
        if ws.exists(path) {
            ws.remove(path)?;
        }
        Ok(None)
    };
    let read_here = |ws: &mut Workspace, i: usize, batches: &mut dyn Batches| {
        let (full, path, size) = &files[i];
        let f = match std::fs::File::open(full) {
            Ok(f) => f,
            Err(e) if vanished(&e) => return gone(ws, path),
            Err(e) => return Err(crate::CliError::io(full, e)),
        };
        read_opened(ws, path, f, full, *size, batches, store).map(Some)
    };
    if files.len() < READ_AHEAD_MIN_FILES || crate::cpus::cores() < 2 {
        for i in 0..files.len() {
            let len = read_here(ws, i, batches)?;
            each(ws, i, len)?;
        }
        return Ok(());
    }
    let (tx, rx) =
        std::sync::mpsc::sync_channel::<Option<std::io::Result<Vec<u8>>>>(READ_AHEAD_DEPTH);
    std::thread::scope(|scope| {
        let beside = crate::cpus::Beside::here();
        scope.spawn(move || {
            beside.leave();
            for (full, _, size) in files.iter().skip(1).step_by(2) {
                let read = (*size <= READ_AHEAD_MAX)
                    .then(|| std::fs::File::open(full).and_then(|f| read_whole_file(&f, *size)));
                // Taken no more (an error on the other side): stop.
                if tx.send(read).is_err() {
                    return;
                }
            }
        });
        beside.yield_to();
        // Dropped on the way out (an error here): the reader's next send fails.
        let rx = rx;
        for (i, (full, path, _)) in files.iter().enumerate() {
            let ahead = if i % 2 == 1 {
                rx.recv().ok().flatten()
            } else {
                None
            };
            let len = match ahead {
                Some(Ok(data)) => Some(write_whole(ws, path, data, batches)?),
                Some(Err(e)) if vanished(&e) => gone(ws, path)?,
                Some(Err(e)) => return Err(crate::CliError::io(full, e)),
                // This thread's share, too large to read ahead, or (never) the
                // reader gone.
                None => read_here(ws, i, batches)?,
            };
            each(ws, i, len)?;
        }
        Ok(())
    })
}

/// Reads the opened file `f` (at `full`; `size` bytes as last seen) into the
/// workspace at `path`: whole, or streamed in past [`STREAM_MIN`] (over its
/// committed version when there is one). Returns the bytes read.
fn read_opened(
    ws: &mut Workspace,
    path: &str,
    f: std::fs::File,
    full: &Path,
    size: u64,
    batches: &mut dyn Batches,
    store: Option<&dyn ObjectSource>,
) -> Result<u64> {
    // Whole, or streamed in past `STREAM_MIN` (over its committed version when
    // there is one).
    if let Some(ingest) = over(ws, path, size, batches, store) {
        return stream_into(ws, path, f, full, ingest, batches);
    }
    if size <= STREAM_MIN || !batches.streams() {
        let data = read_whole_file(&f, size).at(full)?;
        return write_whole(ws, path, data, batches);
    }
    read_into(ws, path, f, full, size, batches)
}

/// Reads the file at `path` in the workspace from `input` (`file` names it in
/// errors; `expected` is its size as last seen): whole, or streamed in when over
/// [`STREAM_MIN`] and `batches` stores objects. Returns the bytes read, which may
/// differ from `expected` for a file that changed since.
pub fn read_into(
    ws: &mut Workspace,
    path: &str,
    input: impl Read,
    file: &Path,
    expected: u64,
    batches: &mut dyn Batches,
) -> Result<u64> {
    if expected <= STREAM_MIN || !batches.streams() {
        let data = read_whole(input, expected).at(file)?;
        return write_whole(ws, path, data, batches);
    }
    stream_into(ws, path, input, file, Ingest::new(), batches)
}

/// An ingest over the committed version of the file at `path` (`size` bytes as
/// last seen), for a file streamed in (see the module documentation). A committed
/// version that cannot be read is not needed for the new one: the file is then
/// read as without one, with a warning.
fn over(
    ws: &Workspace,
    path: &str,
    size: u64,
    batches: &dyn Batches,
    store: Option<&dyn ObjectSource>,
) -> Option<Ingest> {
    let store = store.filter(|_| size > STREAM_MIN && batches.streams())?;
    match ws.ingest_over(path, store, size) {
        Ok(ingest) => ingest,
        Err(e) => {
            eprintln!(
                "warning: {path}: its committed version could not be read ({e}); reading it afresh"
            );
            None
        }
    }
}

/// Streams `input` into `ingest`, handing its objects to `batches` a few MiB at a
/// time, and puts the result at `path`. Returns the bytes read.
fn stream_into(
    ws: &mut Workspace,
    path: &str,
    mut input: impl Read,
    file: &Path,
    mut ingest: Ingest,
    batches: &mut dyn Batches,
) -> Result<u64> {
    let mut block = vec![0u8; READ_BLOCK];
    let mut pending = ObjectSet::new();
    loop {
        let n = match input.read(&mut block) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(crate::CliError::io(file, e)),
        };
        let made = ingest.push(&block[..n]);
        pending.append(made);
        if pending.stored_bytes() >= HAND_BYTES {
            batches.objects(std::mem::take(&mut pending))?;
        }
    }
    let len = ingest.len();
    let (ingested, last) = ingest.finish();
    pending.append(last);
    if !pending.is_empty() {
        batches.objects(pending)?;
    }
    ws.write_ingested(path, ingested)?;
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file gone between the walk and its read is taken out of the workspace and
    /// reported as `None`, on this thread's share and on the reader's alike (over
    /// `READ_AHEAD_MIN_FILES` files, odd positions are read ahead); a file that
    /// cannot be read for another reason is still an error naming it.
    #[test]
    fn a_file_gone_before_its_read_is_absent_not_an_error() {
        let t = tempfile::tempdir().unwrap();
        let mut ws = Workspace::new();
        let mut files = Vec::new();
        for i in 0..(READ_AHEAD_MIN_FILES + 6) {
            let path = format!("/f{i:03}");
            let full = t.path().join(&path[1..]);
            ws.write(&path, b"as committed").unwrap();
            // Positions 3 and 4 (read ahead, and here) are gone.
            if i != 3 && i != 4 {
                std::fs::write(&full, format!("now {i}")).unwrap();
            }
            files.push((full, path, 6));
        }
        let mut seen = Vec::new();
        read_all(&mut ws, &files, &mut Whole, None, |_, i, len| {
            seen.push((i, len));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen.len(), files.len());
        for (i, len) in seen {
            let path = &files[i].1;
            if i == 3 || i == 4 {
                assert_eq!(len, None, "{path}");
                assert!(!ws.exists(path), "{path}");
            } else {
                assert_eq!(len, Some(format!("now {i}").len() as u64), "{path}");
                assert_eq!(ws.read(path).unwrap(), format!("now {i}").as_bytes());
            }
        }
        // Not a vanishing: a directory where the file was.
        std::fs::create_dir(t.path().join("dir")).unwrap();
        let err = read_all(
            &mut ws,
            &[(t.path().join("dir"), "/dir".to_string(), 1)],
            &mut Whole,
            None,
            |_, _, _| Ok(()),
        )
        .unwrap_err();
        assert!(err.to_string().contains("/dir"), "{err}");
    }
}
