// The JavaScript `commit` (installed on Workspace.prototype at module load, see
// src/helpers.rs INSTALL): it reads the per-turn options itself and decodes one buffer
// from the native `_commitTurn`; every other shape goes to the native `commit`. Both
// must give the same commit, field for field and byte for byte.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { sg, sample, throwsCode } from './helpers.mjs'

const { Workspace } = sg

/** Every observable field of a commit result, with the objects' bytes. */
function shape(c) {
  return {
    keys: Object.keys(c),
    id: c.id,
    generation: c.generation,
    objects: Object.entries(c.objects).map(([id, b]) => [id, Buffer.isBuffer(b), b.toString('hex')]),
    proto: Object.getPrototypeOf(c.objects),
    objectCount: c.objectCount,
    storedBytes: c.storedBytes,
    packed: c.packed === null ? null : [Buffer.isBuffer(c.packed), c.packed.toString('hex')],
    isComplete: c.isComplete,
  }
}

// `excludeFiles: false` is the default, but an option the JavaScript commit does not
// read: it sends the call to the native commit.
const native = (options) => ({ ...options, excludeFiles: false })

test('the JavaScript commit is installed, and the native per-turn call is not reachable', () => {
  const ws = new Workspace()
  assert.equal(typeof Workspace.prototype.commit, 'function')
  assert.equal(Workspace.prototype.commit.name, 'commit')
  assert.equal('_commitTurn' in ws, false)
  assert.equal(Object.getOwnPropertyNames(Workspace.prototype).includes('_commitTurn'), false)
  // Defined like the other methods napi-rs puts on the prototype.
  const d = Object.getOwnPropertyDescriptor(Workspace.prototype, 'commit')
  const w = Object.getOwnPropertyDescriptor(Workspace.prototype, 'write')
  assert.deepEqual([d.writable, d.enumerable, d.configurable], [w.writable, w.enumerable, w.configurable])
})

test('the JavaScript commit and the native commit give the same results, turn after turn', () => {
  const fast = new Workspace()
  const slow = new Workspace()
  for (const ws of [fast, slow]) {
    for (let i = 0; i < 120; i++) ws.write(`/d${i % 4}/f${i}`, Buffer.from(`file ${i} `.repeat(40)))
    ws.setState(Buffer.from('interp'))
  }
  const a = fast.commit()
  const b = slow.commit(native())
  assert.deepEqual(shape(a), shape(b))
  assert.ok(Buffer.isBuffer(a.packed), 'a first commit carries its packed snapshot')
  assert.deepEqual(Workspace.fromSnapshot(a.packed).commit().id, a.id)
  const store = new Map(Object.entries(a.objects))
  const set = new Set(store.keys())
  let head = a.id
  for (let turn = 1; turn <= 6; turn++) {
    for (const ws of [fast, slow]) ws.write(`/d${turn % 4}/f${turn * 5}`, Buffer.from(`turn ${turn}`))
    // A Map and a Set as have, and no have at all (a complete commit).
    const have = turn % 2 ? store : set
    const x = fast.copy().commit({ parents: [head] })
    const y = slow.copy().commit(native({ parents: [head] }))
    assert.deepEqual(shape(x), shape(y))
    assert.equal(x.isComplete, true)
    const c = fast.commit({ parents: [head], have })
    const d = slow.commit(native({ parents: [head], have }))
    assert.deepEqual(shape(c), shape(d))
    assert.equal(c.isComplete, false)
    assert.equal(c.packed, null)
    for (const [id, bytes] of Object.entries(c.objects)) {
      store.set(id, bytes)
      set.add(id)
    }
    head = c.id
  }
  // Two parents (a merge), written in upper case: both commits read them the same.
  const other = sample().commit()
  for (const [id, bytes] of Object.entries(other.objects)) store.set(id, bytes)
  const parents = [head, other.id.toUpperCase()]
  assert.deepEqual(
    shape(fast.copy().commit({ parents, have: store })),
    shape(slow.copy().commit(native({ parents, have: store }))),
  )
  const out = new Workspace()
  out.checkout(head, store)
  assert.deepEqual(out.read('/d2/f30'), Buffer.from('turn 6'))
})

test('have as any object with a has method: its get answers parent lookups, and this is the object', () => {
  const ws = sample()
  const first = ws.commit()
  const store = new Map(Object.entries(first.objects))
  // A workspace that did not make `first` reads the parent through have.get.
  const other = Workspace.fromSnapshot(first.packed)
  other.write('/new.txt', Buffer.from('new'))
  const seen = []
  const have = {
    has(id) {
      assert.equal(this, have)
      seen.push(id)
      return store.has(id)
    },
    get: (id) => store.get(id),
  }
  const fresh = new Workspace()
  fresh.write('/z.txt', Buffer.from('z'))
  const c = fresh.commit({ parents: [first.id], have })
  assert.equal(c.generation, 2)
  assert.ok(seen.length > 0)
  // Without a get, the unknown parent is an error naming it, from both commits.
  const noGet = { has: (id) => store.has(id) }
  const e1 = throwsCode(() => fresh.copy().commit({ parents: [first.id], have: noGet }), 'UNKNOWN_PARENT', first.id)
  const e2 = throwsCode(() => fresh.copy().commit(native({ parents: [first.id], have: noGet })), 'UNKNOWN_PARENT', first.id)
  assert.equal(e1.message, e2.message)
  assert.ok(other.commit({ parents: [first.id], have: store }).objectCount > 0)
})

test('options the JavaScript commit does not take go to the native commit, with its errors', () => {
  const ws = sample()
  const first = ws.commit()
  const store = new Map(Object.entries(first.objects))
  const head = ws.head()
  // Not 64 hex digits, not strings, not an array: the native commit's errors.
  throwsCode(() => ws.commit({ parents: ['abc'], have: store }), 'INVALID_ID', 'abc')
  throwsCode(() => ws.commit({ parents: ['g'.repeat(64)] }), 'INVALID_ID', 'g'.repeat(64))
  throwsCode(() => ws.commit({ parents: [first.id, 'é'.repeat(64)], have: store }), 'INVALID_ID', 'é')
  throwsCode(() => ws.commit({ parents: [42] }), 'INVALID_ARGUMENT', 'parents')
  throwsCode(() => ws.commit({ parents: 'nope', have: store }), 'INVALID_ARGUMENT', 'parents')
  // A valid id the workspace does not know: the engine's error, the same from both.
  const unknown = '0'.repeat(64)
  const e1 = throwsCode(() => ws.commit({ parents: [unknown] }), 'UNKNOWN_PARENT', unknown)
  const e2 = throwsCode(() => ws.commit(native({ parents: [unknown] })), 'UNKNOWN_PARENT', unknown)
  assert.equal(e1.message, e2.message)
  // have shapes the JavaScript commit passes on: an id list, a record, a function.
  ws.write('/a.txt', Buffer.from('alpha 4\n'))
  const viaMap = ws.copy().commit({ parents: [first.id], have: store })
  for (const have of [[...store.keys()], Object.fromEntries(store), (id) => store.get(id) ?? null]) {
    const c = ws.copy().commit({ parents: [first.id], have })
    assert.deepEqual(shape(c), shape(viaMap))
  }
  // meta and the exclusions are still read.
  const m = ws.copy().commit({ parents: [first.id], have: store, meta: { message: 'hi' } })
  assert.notEqual(m.id, viaMap.id)
  // Nothing moved on a failed call.
  assert.equal(ws.head(), head)
})

test('a commit above 16 MiB gets a Buffer per object, through the JavaScript commit too', () => {
  const ws = new Workspace()
  const big = Buffer.alloc(17 * 1024 * 1024)
  for (let i = 0; i < big.length; i += 4) big.writeUInt32LE((i * 2654435761) >>> 0, i)
  ws.write('/big.bin', big)
  const c = ws.commit()
  const buffers = new Set(Object.values(c.objects).map((b) => b.buffer))
  assert.equal(buffers.size, c.objectCount, 'no two objects share a buffer')
  assert.equal(Object.values(c.objects).reduce((n, b) => n + b.length, 0), c.storedBytes)
  const out = new Workspace()
  out.checkout(c.id, c.objects)
  assert.ok(out.read('/big.bin').equals(big))
})

test('a have batch of more than 30 questions (answered as a string) and one of fewer (as the bits of a number) give the native results', () => {
  const content = (i, tag) => Buffer.from(`${tag} ${i} `.repeat(600))
  const fast = new Workspace()
  const slow = new Workspace()
  for (const ws of [fast, slow]) for (let i = 0; i < 50; i++) ws.write(`/f${i}`, content(i, 'first'))
  const a = fast.commit()
  assert.deepEqual(shape(a), shape(slow.commit(native())))
  const store = new Map(Object.entries(a.objects))
  let asked = 0
  const have = { has: (id) => (asked++, store.has(id)) }
  // 45 files in new directories, every other one with content the store holds: one
  // batch of dozens of questions, answers of both kinds at every bit position.
  for (const [turn, files] of [[1, 45], [2, 9]]) {
    for (const ws of [fast, slow]) {
      for (let i = 0; i < files; i++) ws.write(`/t${turn}/n${i}/g`, i % 2 ? content(i, `turn ${turn}`) : content(i, 'first'))
    }
    asked = 0
    const c = fast.commit({ parents: [fast.head()], have })
    const fastAsked = asked
    const d = slow.commit(native({ parents: [slow.head()], have }))
    assert.deepEqual(shape(c), shape(d))
    assert.equal(c.isComplete, false)
    assert.ok(turn === 1 ? fastAsked > 30 : fastAsked <= 30, `asked ${fastAsked}`)
    for (const [id, bytes] of Object.entries(c.objects)) store.set(id, bytes)
  }
})
