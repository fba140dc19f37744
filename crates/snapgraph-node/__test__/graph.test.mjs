// SnapshotGraph, CheckoutPlan and Bashkit's free functions.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { sg, fingerprint, throwsCode } from './helpers.mjs'

const { Workspace, SnapshotGraph, CheckoutPlan } = sg

function history() {
  const store = {}
  const ws = new Workspace()
  ws.write('/keep.txt', Buffer.from('same'))
  ws.write('/edit.txt', Buffer.from('v1'))
  ws.write('/gone.txt', Buffer.from('bye'))
  ws.setState(Buffer.from('s1'))
  const a = ws.commit()
  Object.assign(store, a.objects)
  ws.write('/edit.txt', Buffer.from('v2'))
  ws.remove('/gone.txt')
  ws.write('/new/file.txt', Buffer.from('hi'))
  ws.setState(Buffer.from('s2'))
  const b = ws.commit({ parents: [a.id], have: store })
  Object.assign(store, b.objects)
  ws.write('/edit.txt', Buffer.from('v3'))
  const c = ws.commit({ parents: [b.id], have: store })
  Object.assign(store, c.objects)
  return { store, ws, a: a.id, b: b.id, c: c.id }
}

test('diff lists added, modified and removed files and the state change', () => {
  const { store, a, b } = history()
  const d = SnapshotGraph.diff(a, b, store)
  assert.deepEqual(d.filesAdded, ['/new/file.txt'])
  assert.deepEqual(d.filesModified, ['/edit.txt'])
  assert.deepEqual(d.filesRemoved, ['/gone.txt'])
  assert.equal(d.stateChanged, true)
  assert.deepEqual(d.readsAdded, [])
  // The same diff as values.
  assert.deepEqual(
    d.changes.map((c) => [c.path, c.kind]),
    [['/edit.txt', 'modified'], ['/gone.txt', 'removed'], ['/new/file.txt', 'added']],
  )
  const edit = d.changes[0]
  assert.deepEqual([edit.old.kind, edit.old.size, edit.new.size], ['file', 2, 2])
  assert.equal(d.changes[1].new, null)
  assert.equal(d.changes[2].old, null)
  const same = SnapshotGraph.diff(b, b, store)
  assert.deepEqual([same.filesAdded, same.filesModified, same.filesRemoved, same.stateChanged], [[], [], [], false])
  assert.deepEqual(sg.snapshotDiff(a, b, store), d)
})

test('ancestry is newest first and honours the limit', () => {
  const { store, a, b, c } = history()
  assert.deepEqual(SnapshotGraph.ancestry(c, store), [c, b, a])
  assert.deepEqual(SnapshotGraph.ancestry(c, store, 2), [c, b])
  assert.deepEqual(sg.snapshotAncestry(c, store, 1), [c])
  throwsCode(() => SnapshotGraph.ancestry(c, store, -1), 'INVALID_ARGUMENT', 'limit')
})

test('reachable lists what a commit needs, commit last; reachableHistory adds the parents', () => {
  const { store, a, c } = history()
  const need = SnapshotGraph.reachable(c, store)
  assert.equal(need[need.length - 1], c)
  const out = new Workspace()
  const only = Object.fromEntries(need.map((id) => [id, store[id]]))
  out.checkout(c, only)
  assert.deepEqual(out.read('/edit.txt'), Buffer.from('v3'))
  const all = SnapshotGraph.reachableHistory(c, store)
  assert.ok(all.includes(a))
  assert.equal(new Set(all).size, Object.keys(store).length, 'the history is the whole store')
  assert.deepEqual(sg.snapshotReachable(c, store), need)
})

test('GC by reachable: objects no kept commit reaches can go', () => {
  const { store, ws, b, c } = history()
  // Keep only c (and not its history): drop everything else.
  const keep = new Set(SnapshotGraph.reachable(c, store))
  const kept = Object.fromEntries(Object.entries(store).filter(([id]) => keep.has(id)))
  assert.ok(Object.keys(kept).length < Object.keys(store).length)
  const out = new Workspace()
  out.checkout(c, kept)
  assert.equal(fingerprint(out), fingerprint(ws))
  throwsCode(() => new Workspace().checkout(b, kept), 'NOT_FOUND')
})

test('planCheckout and CheckoutPlan drive a fetch loop to a complete checkout', () => {
  const ws = new Workspace()
  for (let i = 0; i < 200; i++) ws.write(`/d${i % 7}/f${i}.txt`, Buffer.from(`file ${i}`))
  ws.write('/big.bin', Buffer.alloc(300_000, 3))
  const c = ws.commit()
  const remote = c.objects

  const local = new Map()
  let rounds = 0
  for (;;) {
    const missing = SnapshotGraph.planCheckout(c.id, local)
    if (missing.length === 0) break
    for (const id of missing) local.set(id, remote[id])
    rounds++
  }
  assert.ok(rounds >= 2 && rounds <= 8, `rounds: ${rounds}`)
  assert.equal(local.size, c.objectCount)

  const plan = new CheckoutPlan(c.id)
  const fetched = {}
  let asked = 0
  while (true) {
    const missing = plan.missing(fetched)
    if (missing.length === 0) break
    asked += missing.length
    for (const id of missing) fetched[id] = remote[id]
  }
  assert.equal(plan.isDone(), true)
  assert.equal(asked, c.objectCount, 'each object asked for once')
  assert.deepEqual(sg.snapshotPlanCheckout(c.id, fetched), [])
  const out = new Workspace()
  out.checkout(c.id, fetched)
  assert.equal(fingerprint(out), fingerprint(ws))
})

test('capabilities of a commit', () => {
  const ws = new Workspace()
  ws.setCapabilities({ builtins: ['grep'], features: ['net'], fsBackend: 'mem', engineVersion: '1.2' })
  ws.write('/f', Buffer.from('x'))
  const c = ws.commit()
  const caps = SnapshotGraph.capabilities(c.id, c.objects)
  assert.deepEqual(caps, { builtins: ['grep'], features: ['net'], fsBackend: 'mem', engineVersion: '1.2' })
  assert.deepEqual(sg.snapshotCapabilities(c.id, c.objects), caps)
  const bare = new Workspace().commit()
  assert.equal(SnapshotGraph.capabilities(bare.id, bare.objects), null)
})
