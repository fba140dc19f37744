//! A file committed, checked out shallow, edited, and written again through an
//! `Ingest` over its committed version (`Workspace::ingest_over`), in pieces of any
//! size and with any expected length: its content id must be the one a whole write of
//! the new bytes makes, and the file must read back. Edits are placed anywhere or at
//! one of the old cut points (where a re-cut is most easily wrong: the byte at a cut
//! decides it). The old version's bytes are pseudo-random or runs of one byte (cut at
//! the largest size), so a short input reaches many chunks.
#![no_main]

use std::collections::HashMap;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use snapgraph::{CheckoutOptions, CommitOptions, DriftPolicy, ObjectId, Workspace};
use snapgraph_fuzz::pseudo_random;

#[derive(Arbitrary, Debug)]
enum Edit {
    Flip {
        at: u32,
    },
    Insert {
        at: u32,
        len: u16,
        byte: u8,
    },
    Delete {
        at: u32,
        len: u32,
    },
    Truncate {
        at: u32,
    },
    /// Around old cut `k`, `shift` bytes from it (-2..=2), as `kind` (0-3: flip,
    /// insert, delete, truncate).
    AtCut {
        k: u16,
        shift: i8,
        kind: u8,
    },
}

#[derive(Arbitrary, Debug)]
struct Case {
    seed: u64,
    len: u32,
    runs: u16,
    edits: Vec<Edit>,
    piece: u32,
    expected: Option<u32>,
}

fn apply(d: &mut Vec<u8>, edit: &Edit, cuts: &[usize]) {
    let clamp = |at: u32, d: &Vec<u8>| (at as usize).min(d.len());
    match *edit {
        Edit::Flip { at } => {
            if !d.is_empty() {
                let at = at as usize % d.len();
                d[at] ^= 0x5A;
            }
        }
        Edit::Insert { at, len, byte } => {
            let at = clamp(at, d);
            d.splice(at..at, std::iter::repeat_n(byte, usize::from(len)));
        }
        Edit::Delete { at, len } => {
            let at = clamp(at, d);
            let end = at.saturating_add(len as usize % 200_000).min(d.len());
            d.drain(at..end);
        }
        Edit::Truncate { at } => {
            let at = clamp(at, d);
            d.truncate(at);
        }
        Edit::AtCut { k, shift, kind } => {
            if cuts.is_empty() {
                return;
            }
            let e = cuts[usize::from(k) % cuts.len()] as i64 + i64::from(shift.clamp(-2, 2));
            let at = e.clamp(0, d.len() as i64) as u32;
            let next = match kind % 4 {
                0 => Edit::Flip { at },
                1 => Edit::Insert {
                    at,
                    len: 3,
                    byte: 0x33,
                },
                2 => Edit::Delete { at, len: 5 },
                _ => Edit::Truncate { at },
            };
            if let Edit::Flip { at } = next {
                if (at as usize) < d.len() {
                    d[at as usize] ^= 0x5A;
                }
                return;
            }
            apply(d, &next, &[]);
        }
    }
}

fuzz_target!(|case: Case| {
    let len = case.len as usize % 1_500_000;
    let mut old = pseudo_random(len, case.seed);
    if case.runs > 0 {
        let period = usize::from(case.runs) * 16;
        for (i, b) in old.iter_mut().enumerate() {
            if (i / period) % 2 == 0 {
                *b = 7;
            }
        }
    }
    let cuts = snapgraph::chunk::cut_points(&old);
    let mut new = old.clone();
    for edit in case.edits.iter().take(4) {
        apply(&mut new, edit, &cuts);
    }

    let mut first = Workspace::new();
    first.write("/f", &old).expect("write");
    let c1 = first.commit(CommitOptions::new()).expect("commit");
    let mut store: HashMap<ObjectId, Vec<u8>> = c1.into_objects().into_iter().collect();

    let mut ws = Workspace::new();
    ws.checkout_with(
        first.head().expect("a head"),
        &store,
        CheckoutOptions::new().shallow(true).drift(DriftPolicy::Off),
    )
    .expect("checkout")
    .verify(|_| None)
    .expect("no drift check");
    let expected = case.expected.map_or(new.len() as u64, u64::from);
    let Some(mut ingest) = ws.ingest_over("/f", &store, expected).expect("manifest") else {
        // Inline or one chunk: nothing to ingest over.
        assert!(
            old.len() <= 64 << 10,
            "{} bytes stored without a manifest",
            old.len()
        );
        return;
    };
    let piece = (case.piece as usize % (2 << 20)).max(1);
    let mut objects = snapgraph::ObjectSet::new();
    for p in new.chunks(piece) {
        objects.append(ingest.push(p));
    }
    let (file, last) = ingest.finish();
    objects.append(last);
    store.extend(objects);
    ws.write_ingested("/f", file).expect("write_ingested");

    let mut whole = Workspace::new();
    whole.write("/f", &new).expect("write");
    let _ = whole.commit(CommitOptions::new()).expect("commit");
    let c2 = ws.commit(CommitOptions::new()).expect("commit");
    assert_eq!(ws.file_content_id("/f"), whole.file_content_id("/f"));
    store.extend(c2.into_objects());
    let mut back = Workspace::new();
    back.checkout_with(
        ws.head().expect("a head"),
        &store,
        CheckoutOptions::new().drift(DriftPolicy::Off),
    )
    .expect("checkout of the new version")
    .verify(|_| None)
    .expect("no drift check");
    assert!(back.read("/f").expect("read") == new.as_slice());
});
