// Hostile inputs: corrupt, truncated, swapped and missing objects, values that are
// not bytes, bad ids, bad paths, damaged and wrongly keyed snapshots, limits. Each
// gives a typed error naming the id or path, and the workspace is unchanged.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sg, fingerprint, sample, throwsCode, rejectsCode } from './helpers.mjs'

const { Workspace, SnapshotGraph } = sg

function committed() {
  const ws = sample()
  const c = ws.commit()
  return { ws, c, objects: { ...c.objects } }
}

/** A populated workspace and its fingerprint, to show that a failed call changed nothing. */
function victim() {
  const ws = new Workspace()
  ws.write('/mine.txt', Buffer.from('precious'))
  ws.setState(Buffer.from('my state'))
  return { ws, before: fingerprint(ws) }
}

test('a flipped bit, a truncation, a swap: CORRUPT naming the object, workspace unchanged', () => {
  const { c, objects } = committed()
  const ids = Object.keys(objects)
  for (const id of ids) {
    const { ws, before } = victim()
    const flipped = { ...objects, [id]: Buffer.from(objects[id]) }
    flipped[id][flipped[id].length - 1] ^= 1
    throwsCode(() => ws.checkout(c.id, flipped), 'CORRUPT', id)
    const truncated = { ...objects, [id]: objects[id].subarray(0, objects[id].length - 1) }
    throwsCode(() => ws.checkout(c.id, truncated), 'CORRUPT', id)
    assert.equal(fingerprint(ws), before)
  }
  // Two objects' bytes swapped.
  const [x, y] = [ids[0], ids[1]]
  const swapped = { ...objects, [x]: objects[y], [y]: objects[x] }
  const { ws, before } = victim()
  throwsCode(() => ws.checkout(c.id, swapped), 'CORRUPT')
  throwsCode(() => SnapshotGraph.diff(c.id, c.id, { ...objects, [c.id]: objects[ids[0]] }), 'CORRUPT', c.id)
  assert.equal(fingerprint(ws), before)
})

test('a missing object: NOT_FOUND naming it; the wrong kind: WRONG_KIND', () => {
  const { c, objects } = committed()
  const some = Object.keys(objects)[0]
  const { ws, before } = victim()
  const missing = { ...objects }
  delete missing[some]
  throwsCode(() => ws.checkout(c.id, missing), 'NOT_FOUND', some)
  throwsCode(() => ws.checkout('ab'.repeat(32), objects), 'NOT_FOUND', 'ab'.repeat(32))
  // A tree or chunk where a commit belongs.
  throwsCode(() => ws.checkout(some, objects), 'WRONG_KIND', some)
  throwsCode(() => SnapshotGraph.ancestry(some, objects), 'WRONG_KIND', some)
  assert.equal(fingerprint(ws), before)
})

test('objects values that are not bytes, and lookups that throw', () => {
  const { c, objects } = committed()
  const { ws, before } = victim()
  throwsCode(() => ws.checkout(c.id, { ...objects, [c.id]: 42 }), 'INVALID_ARGUMENT', c.id)
  throwsCode(() => ws.checkout(c.id, { ...objects, [c.id]: 'text' }), 'INVALID_ARGUMENT', c.id)
  throwsCode(() => ws.checkout(c.id, () => ({})), 'INVALID_ARGUMENT', c.id)
  throwsCode(() => ws.checkout(c.id, new Map([[c.id, [1, 2, 3]]])), 'INVALID_ARGUMENT', c.id)
  const err = throwsCode(() => ws.checkout(c.id, () => { throw new Error('db is down') }), 'BACKEND', c.id)
  assert.ok(err.message.includes('db is down'))
  // A Float64Array is a typed array but not bytes.
  throwsCode(() => ws.checkout(c.id, { ...objects, [c.id]: new Float64Array(4) }), 'INVALID_ARGUMENT', c.id)
  assert.throws(() => ws.checkout(c.id, 17))
  assert.throws(() => ws.checkout(c.id, null))
  assert.equal(fingerprint(ws), before)
})

test('bad ids: INVALID_ID', () => {
  const { c, objects } = committed()
  const { ws, before } = victim()
  for (const bad of ['', 'xyz', 'g'.repeat(64), 'a'.repeat(63), 'A'.repeat(65)]) {
    throwsCode(() => ws.checkout(bad, objects), 'INVALID_ID')
    throwsCode(() => SnapshotGraph.diff(bad, c.id, objects), 'INVALID_ID')
  }
  throwsCode(() => ws.commit({ parents: ['nope'] }), 'INVALID_ID', 'nope')
  throwsCode(() => new sg.CheckoutPlan('nope'), 'INVALID_ID')
  assert.equal(fingerprint(ws), before)
})

test('bad paths and file-system misuse: typed errors naming the path, workspace unchanged', () => {
  const { ws, before } = victim()
  ws.mkdir('/d')
  ws.symlink('/s', '/mine.txt')
  const setup = fingerprint(ws)
  throwsCode(() => ws.write('relative.txt', Buffer.from('x')), 'INVALID_PATH', 'relative.txt')
  throwsCode(() => ws.write('/a/../../up', Buffer.from('x')), 'INVALID_PATH', '/a/../../up')
  throwsCode(() => ws.write('/nul\0byte', Buffer.from('x')), 'INVALID_PATH')
  throwsCode(() => ws.write('/' + 'n'.repeat(256), Buffer.from('x')), 'INVALID_PATH')
  throwsCode(() => ws.write('/' + 'd/'.repeat(300) + 'f', Buffer.from('x')), 'INVALID_PATH')
  throwsCode(() => ws.read('/nothing'), 'NOT_FOUND', '/nothing')
  throwsCode(() => ws.read('/d'), 'IS_A_DIRECTORY', '/d')
  throwsCode(() => ws.write('/mine.txt/under', Buffer.from('x')), 'NOT_A_DIRECTORY', '/mine.txt')
  throwsCode(() => ws.read('/s'), 'IS_A_SYMLINK', '/s')
  throwsCode(() => ws.readLink('/mine.txt'), 'NOT_A_SYMLINK', '/mine.txt')
  throwsCode(() => ws.symlink('/mine.txt', '/x'), 'ALREADY_EXISTS', '/mine.txt')
  throwsCode(() => ws.symlink('/t', ''), 'INVALID_ARGUMENT', '/t')
  throwsCode(() => ws.remove('/'), 'INVALID_OPERATION')
  throwsCode(() => ws.rename('/d', '/d/inside'), 'INVALID_OPERATION', '/d')
  throwsCode(() => ws.setMode('/mine.txt', 0o17777), 'INVALID_ARGUMENT', '/mine.txt')
  // Numbers a u32 argument would have wrapped or truncated to a valid mode.
  throwsCode(() => ws.setMode('/mine.txt', 2 ** 40), 'INVALID_ARGUMENT', '/mine.txt')
  for (const bad of [NaN, -1, 0.5, Infinity]) {
    throwsCode(() => ws.setMode('/mine.txt', bad), 'INVALID_ARGUMENT', '/mine.txt: mode')
  }
  throwsCode(() => ws.list('/mine.txt'), 'NOT_A_DIRECTORY', '/mine.txt')
  throwsCode(() => ws.metadata('/ghost'), 'NOT_FOUND', '/ghost')
  throwsCode(() => ws.recordRead({ source: 's', fingerprint: 'f', size: 1, cachedAt: 'rel' }), 'INVALID_PATH', 'rel')
  throwsCode(() => ws.recordRead({ source: 's', fingerprint: 'f', size: -1 }), 'INVALID_ARGUMENT', 'size')
  // Values of the wrong JavaScript type are refused before the call.
  assert.throws(() => ws.write('/x', 'a string'))
  assert.throws(() => ws.write('/x', 12))
  assert.throws(() => ws.write(5, Buffer.from('x')))
  assert.throws(() => ws.setState({}))
  assert.equal(fingerprint(ws), setup)
  assert.notEqual(setup, before)
})

test('bad options: INVALID_ARGUMENT', () => {
  const { c, objects } = committed()
  const { ws, before } = victim()
  throwsCode(() => ws.checkout(c.id, objects, { policy: 'lenient' }), 'INVALID_ARGUMENT', 'lenient')
  throwsCode(() => ws.checkout(c.id, objects, { drift: 'sometimes' }), 'INVALID_ARGUMENT', 'sometimes')
  throwsCode(() => ws.checkout(c.id, objects, { shallow: 'yes' }), 'INVALID_ARGUMENT', 'shallow')
  throwsCode(() => ws.commit({ parents: 'abc' }), 'INVALID_ARGUMENT', 'parents')
  throwsCode(() => ws.commit({ meta: { k: 1 } }), 'INVALID_ARGUMENT', 'meta')
  throwsCode(() => ws.setLimits({ maxFiles: NaN, maxBytes: 1, maxUnpackedBytes: 1 }), 'INVALID_ARGUMENT', 'maxFiles')
  throwsCode(() => ws.setLimits({ maxFiles: 1.5, maxBytes: 1, maxUnpackedBytes: 1 }), 'INVALID_ARGUMENT', 'maxFiles')
  for (const bad of [NaN, -3, 1.5]) {
    throwsCode(() => ws.setParallelism(bad), 'INVALID_ARGUMENT', 'threads')
  }
  assert.equal(fingerprint(ws), before)
})

test('commits refused: unknown and duplicate parents, nothing moves', () => {
  const { ws, before } = victim()
  const ghost = 'cd'.repeat(32)
  throwsCode(() => ws.commit({ parents: [ghost] }), 'UNKNOWN_PARENT', ghost)
  const c = ws.commit()
  const afterCommit = fingerprint(ws)
  throwsCode(() => ws.commit({ parents: [c.id, c.id] }), 'INVALID_ARGUMENT', c.id)
  assert.equal(fingerprint(ws), afterCommit)
  assert.notEqual(before, afterCommit) // only the head moved, by the good commit
})

test('limits: a checkout over the workspace limits is refused before anything is applied', () => {
  const { c, objects } = committed()
  const { ws, before } = victim()
  ws.setLimits({ maxFiles: 2, maxBytes: 1 << 30, maxUnpackedBytes: 1 << 30 })
  throwsCode(() => ws.checkout(c.id, objects), 'LIMIT', c.id)
  ws.setLimits({ maxFiles: 1000, maxBytes: 1000, maxUnpackedBytes: 1 << 30 })
  throwsCode(() => ws.checkout(c.id, objects), 'LIMIT', c.id)
  assert.equal(fingerprint(ws), before)
})

test('damaged snapshots: CORRUPT, SNAPSHOT_TOO_NEW, NOT_AUTHENTIC, key mismatches; nothing applied', () => {
  const source = sample()
  const bytes = source.snapshot()
  const key = Buffer.alloc(32, 5)
  const keyed = source.snapshotKeyed(key)
  const { ws, before } = victim()
  throwsCode(() => ws.restoreSnapshot(Buffer.alloc(0)), 'CORRUPT')
  throwsCode(() => ws.restoreSnapshot(Buffer.from('definitely not a snapshot')), 'CORRUPT')
  throwsCode(() => ws.restoreSnapshot(bytes.subarray(0, bytes.length >> 1)), 'CORRUPT')
  for (const at of [20, bytes.length >> 1, bytes.length - 1]) {
    const flipped = Buffer.from(bytes)
    flipped[at] ^= 0x10
    throwsCode(() => ws.restoreSnapshot(flipped), 'CORRUPT')
  }
  const tooNew = Buffer.from(bytes)
  tooNew[10] = 250
  throwsCode(() => ws.restoreSnapshot(tooNew), 'SNAPSHOT_TOO_NEW')
  throwsCode(() => ws.restoreSnapshotKeyed(keyed, Buffer.alloc(32, 6)), 'NOT_AUTHENTIC')
  // Altered bytes fail the checksum first (NOT_AUTHENTIC is for a wrong key, or for
  // bytes altered by someone who recomputed the checksum).
  const tampered = Buffer.from(keyed)
  tampered[keyed.length >> 1] ^= 1
  throwsCode(() => ws.restoreSnapshotKeyed(tampered, key), 'CORRUPT')
  throwsCode(() => ws.restoreSnapshot(keyed), 'KEY_REQUIRED')
  throwsCode(() => ws.restoreSnapshotKeyed(bytes, key), 'NOT_KEYED')
  throwsCode(() => ws.restoreSnapshotKeyed(keyed, Buffer.alloc(31)), 'INVALID_ARGUMENT')
  throwsCode(() => Workspace.fromSnapshot(bytes.subarray(0, 40)), 'CORRUPT')
  assert.equal(fingerprint(ws), before)
})

test('putMany of bytes that are not their id\'s: CORRUPT naming it, nothing written', async () => {
  // A store keeps the first bytes put under an id, so wrong ones would stay that
  // object (a later put of the right bytes is a no-op).
  const { c, objects } = committed()
  const store = sg.open('memory:')
  const ids = Object.keys(objects)
  for (const wrong of [objects[ids[1]], Buffer.from('junk'), Buffer.alloc(0)]) {
    throwsCode(() => store.putMany({ ...objects, [ids[0]]: wrong }), 'CORRUPT', ids[0])
    await rejectsCode(store.putManyAsync({ ...objects, [ids[0]]: wrong }), 'CORRUPT', ids[0])
    assert.deepEqual(store.missing(ids), ids)
  }
  store.putMany(objects)
  assert.deepEqual(store.missing(ids), [])
  new Workspace().checkout(c.id, store)
})

test('a store holding wrong bytes under an id: CORRUPT on read, never trusted', () => {
  // Bytes that reached the store some other way (a disk's fault, a hand edit).
  const { c, objects } = committed()
  const root = mkdtempSync(join(tmpdir(), 'sg-hostile-'))
  const store = sg.open(`dir:${root}`)
  const ids = Object.keys(objects)
  store.putMany(objects)
  const file = (id) => join(root, 'objects', id.slice(0, 2), id.slice(2))
  writeFileSync(file(ids[0]), readFileSync(file(ids[1])))
  const { ws, before } = victim()
  throwsCode(() => ws.checkout(c.id, store), 'CORRUPT', ids[0])
  throwsCode(() => store.getMany([ids[0]]), 'CORRUPT', ids[0])
  store.updateRefs([{ name: 'heads/main', expected: null, new: c.id }], 'x')
  const report = sg.verify(store)
  assert.equal(report.isClean, false)
  assert.ok(report.problems.some((p) => p.id === ids[0] && p.kind === 'invalid'))
  assert.equal(fingerprint(ws), before)
})
