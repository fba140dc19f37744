// Commit option `objectsAs`: 'record' (the default, Bashkit's Record<string, Buffer>)
// or 'map' (a Map in the same dependency order). Every path gives it: the JavaScript
// per-turn commit (`_commitTurn`), the native commit (options it
// hands over), `commitAsync`, and a commit above 16 MiB (each object its own Buffer).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { sg, fingerprint, sample, throwsCode } from './helpers.mjs'

const { Workspace } = sg

/** A commit result's fields, its objects as [id, isBuffer, hex] in their order. */
function shape(c) {
  const entries = c.objects instanceof Map ? [...c.objects] : Object.entries(c.objects)
  return {
    keys: Object.keys(c),
    id: c.id,
    generation: c.generation,
    objects: entries.map(([id, b]) => [id, Buffer.isBuffer(b), b.toString('hex')]),
    objectCount: c.objectCount,
    storedBytes: c.storedBytes,
    packed: c.packed === null ? null : c.packed.toString('hex'),
    isComplete: c.isComplete,
  }
}

// An option the JavaScript commit does not read: it sends the call to the native one.
const native = (options) => ({ ...options, excludeFiles: false })

test("objectsAs 'map' gives the record's objects, in the same order, on every path", async () => {
  const a = sample()
  const b = sample()
  const first = a.commit()
  const firstMap = b.commit({ objectsAs: 'map' })
  assert.ok(firstMap.objects instanceof Map)
  assert.equal(Object.getPrototypeOf(first.objects), null, 'the default stays a null-prototype record')
  assert.deepEqual(shape(firstMap), shape(first))
  assert.equal(firstMap.objects.size, first.objectCount)
  // 'record' spelled out is the default.
  assert.deepEqual(shape(sample().commit({ objectsAs: 'record' })), shape(first))
  assert.equal(Object.getPrototypeOf(sample().commit({ objectsAs: 'record' }).objects), null)

  const store = new Map(Object.entries(first.objects))
  let head = first.id
  for (let turn = 1; turn <= 5; turn++) {
    for (const ws of [a, b]) ws.write(`/dir/t${turn}.txt`, Buffer.from(`turn ${turn}`))
    const options = { parents: [head], have: store }
    const viaRecord = a.copy().commit(options)
    const viaMap = b.copy().commit({ ...options, objectsAs: 'map' })
    const viaNative = b.copy().commit(native({ ...options, objectsAs: 'map' }))
    const viaAsync = await b.copy().commitAsync({ parents: [head], have: [...store.keys()], objectsAs: 'map' })
    for (const c of [viaMap, viaNative, viaAsync]) {
      assert.ok(c.objects instanceof Map)
      assert.deepEqual(shape(c), shape(viaRecord))
    }
    const c = b.commit({ ...options, objectsAs: 'map' })
    a.commit(options)
    // The commit comes last: referenced objects first.
    assert.equal([...c.objects.keys()].at(-1), c.id)
    for (const [id, bytes] of c.objects) store.set(id, bytes)
    head = c.id
  }
  const out = new Workspace()
  out.checkout(head, store)
  assert.equal(out.read('/dir/t5.txt').toString(), 'turn 5')
})

test("objectsAs 'map' above 16 MiB: each object in its own Buffer, still a Map", () => {
  const ws = new Workspace()
  // 17 MiB of bytes that do not repeat (distinct chunks, no dedup).
  const big = Buffer.alloc(17 * 1024 * 1024)
  let x = 1
  for (let i = 0; i < big.length; i += 4) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0
    big.writeUInt32LE(x, i)
  }
  ws.write('/big.bin', big)
  const twin = ws.copy()
  const m = ws.commit({ objectsAs: 'map' })
  const r = twin.commit()
  assert.ok(m.objects instanceof Map)
  assert.ok(m.storedBytes > 16 * 1024 * 1024)
  assert.equal(m.id, r.id)
  assert.deepEqual([...m.objects.keys()], Object.keys(r.objects))
  for (const [id, bytes] of m.objects) assert.ok(bytes.equals(r.objects[id]), id)
})

test('a hostile objectsAs is INVALID_ARGUMENT from every path, and nothing moves', () => {
  const ws = sample()
  const first = ws.commit()
  const store = new Map(Object.entries(first.objects))
  ws.write('/a.txt', Buffer.from('changed'))
  const before = fingerprint(ws)
  const control = ws.copy().commit({ parents: [first.id], have: store }).id
  for (const bad of ['Map', 'MAP', 'object', '', 5, null, {}, ['map'], true]) {
    throwsCode(() => ws.commit({ objectsAs: bad }), 'INVALID_ARGUMENT', 'objectsAs')
    throwsCode(() => ws.commit({ parents: [first.id], have: store, objectsAs: bad }), 'INVALID_ARGUMENT', 'objectsAs')
    throwsCode(() => ws.commit(native({ parents: [first.id], objectsAs: bad })), 'INVALID_ARGUMENT', 'objectsAs')
    // The async call reads its options before it returns a promise: it throws.
    throwsCode(() => ws.commitAsync({ parents: [first.id], objectsAs: bad }), 'INVALID_ARGUMENT', 'objectsAs')
    assert.equal(fingerprint(ws), before, `workspace unchanged after objectsAs ${JSON.stringify(bad)}`)
  }
  // The workspace still commits as it would have.
  assert.equal(ws.commit({ parents: [first.id], have: store, objectsAs: 'map' }).id, control)
})

test("a have that throws, with objectsAs 'map': the commit still answers, as the record's does", () => {
  const ws = sample()
  const first = ws.commit()
  ws.write('/a.txt', Buffer.from('again'))
  const boom = { has() { throw new Error('no answer') } }
  const r = ws.copy().commit({ parents: [first.id], have: boom })
  const m = ws.copy().commit({ parents: [first.id], have: boom, objectsAs: 'map' })
  assert.deepEqual(shape(m), shape(r))
  assert.equal(m.isComplete, true, 'nothing pruned: every object emitted')
})
