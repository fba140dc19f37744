// Randomized round trip: random operations on a workspace and on a plain JavaScript
// model of it, a commit after each burst, then every commit checked out fresh (from a
// record, a Map and a store), packed and unpacked, and compared with the model. The
// seed is printed, and SNAPGRAPH_SEED replays one run.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { sg, rng } from './helpers.mjs'

const { Workspace, SnapshotGraph } = sg

const NAMES = ['a', 'b', 'c', 'dir', 'x.txt', 'y.bin', 'sub']

function modelOf(ws) {
  const files = {}
  for (const e of ws.walk()) {
    if (e.kind === 'file') files[e.path] = ws.read(e.path).toString('hex')
    else if (e.kind === 'symlink') files[e.path] = `-> ${ws.readLink(e.path)}`
    else files[e.path] = 'dir'
  }
  return files
}

function randomPath(r) {
  const depth = 1 + r.int(3)
  let p = ''
  for (let i = 0; i < depth; i++) p += '/' + NAMES[r.int(NAMES.length)]
  return p
}

/** One random operation, applied to the workspace and, when it succeeds, to the model. */
function step(r, ws, model) {
  const path = randomPath(r)
  const op = r.int(10)
  try {
    if (op < 5) {
      const size = [0, 1, 100, 5000, 70_000][r.int(5)]
      const data = r.bytes(size)
      ws.write(path, data)
    } else if (op === 5) ws.remove(path)
    else if (op === 6) ws.rename(path, randomPath(r))
    else if (op === 7) ws.mkdir(path)
    else if (op === 8) ws.symlink(path, NAMES[r.int(NAMES.length)])
    else ws.setState(r.bytes(r.int(64)))
  } catch (e) {
    // Refused operations are typed and leave everything as it was.
    assert.equal(typeof e.code, 'string', `untyped error: ${e.message}`)
    assert.deepEqual(modelOf(ws), model.files, `failed ${e.code} changed the workspace`)
    return
  }
  model.files = modelOf(ws)
  model.state = ws.state().toString('hex')
}

test('random histories round-trip through commit, checkout, diff and snapshots', () => {
  const seed = process.env.SNAPGRAPH_SEED ? Number(process.env.SNAPGRAPH_SEED) : (Date.now() % 1e9)
  console.log(`# roundtrip seed ${seed} (replay with SNAPGRAPH_SEED=${seed})`)
  for (let run = 0; run < 4; run++) {
    const r = rng(seed + run)
    const ws = new Workspace()
    const store = new Map()
    const model = { files: {}, state: '' }
    const commits = []
    let head = null
    for (let turn = 0; turn < 12; turn++) {
      for (let i = 0; i < 1 + r.int(8); i++) step(r, ws, model)
      const c = ws.commit({ parents: head ? [head] : [], have: store, meta: { turn: String(turn) } })
      for (const [id, bytes] of Object.entries(c.objects)) store.set(id, bytes)
      assert.equal(c.id, ws.head())
      commits.push({ id: c.id, files: model.files, state: model.state })
      head = c.id
    }
    assert.deepEqual(
      SnapshotGraph.ancestry(head, store),
      commits.map((c) => c.id).reverse(),
    )
    const record = Object.fromEntries(store)
    const db = sg.open('memory:')
    db.putMany(record)
    for (const [i, c] of commits.entries()) {
      for (const source of [store, record, db]) {
        const out = new Workspace()
        out.checkout(c.id, source)
        assert.deepEqual(modelOf(out), c.files, `seed ${seed + run} commit ${i}`)
        assert.equal(out.state().toString('hex'), c.state)
      }
      const out = new Workspace()
      out.checkout(c.id, store)
      const packed = Workspace.fromSnapshot(out.snapshot({ compress: r.int(2) === 1 }))
      assert.deepEqual(modelOf(packed), c.files)
      if (i > 0) {
        const prev = commits[i - 1]
        const d = SnapshotGraph.diff(prev.id, c.id, store)
        const changedFiles = (m) => Object.entries(m).filter(([, v]) => v !== 'dir')
        const before = new Map(changedFiles(prev.files))
        const after = new Map(changedFiles(c.files))
        const added = [...after.keys()].filter((p) => !before.has(p)).sort()
        const removed = [...before.keys()].filter((p) => !after.has(p)).sort()
        const modified = [...after.keys()].filter((p) => before.has(p) && before.get(p) !== after.get(p)).sort()
        assert.deepEqual([...d.filesAdded].sort(), added, `added, seed ${seed + run} commit ${i}`)
        assert.deepEqual([...d.filesRemoved].sort(), removed, `removed, seed ${seed + run} commit ${i}`)
        assert.deepEqual([...d.filesModified].sort(), modified, `modified, seed ${seed + run} commit ${i}`)
        assert.equal(d.stateChanged, prev.state !== c.state)
      }
    }
  }
})
