// Stores (memory, SQLite, directory, and PostgreSQL when SNAPGRAPH_PG_URL names one),
// Repo, sync, gc, verify, sync and async.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sg, fingerprint, sample, throwsCode, rejectsCode } from './helpers.mjs'

const { Workspace, Repo, Store } = sg

const dir = mkdtempSync(join(tmpdir(), 'snapgraph-node-'))
process.on('exit', () => rmSync(dir, { recursive: true, force: true }))

// Each backend makes a fresh, empty store URL per call.
let n = 0
const backends = [
  ['memory', () => 'memory:'],
  ['sqlite', () => `sqlite:${join(dir, `s${++n}.db`)}`],
  ['dir', () => `dir:${join(dir, `d${++n}`)}`],
]
if (process.env.SNAPGRAPH_PG_URL) {
  const base = process.env.SNAPGRAPH_PG_URL
  const sep = base.includes('?') ? '&' : '?'
  backends.push(['postgres', () => `${base}${sep}snapgraph_schema=node_${process.pid}_${++n}`])
}

for (const [name, fresh] of backends) {
  test(`Store calls on ${name}`, () => {
    const store = sg.open(fresh())
    const ws = sample()
    const c = ws.commit()
    const ids = Object.keys(c.objects)
    assert.deepEqual(store.hasMany(ids), ids)
    store.putMany(c.objects)
    assert.deepEqual(store.hasMany(ids), [])
    const got = store.getMany([ids[0], '0'.repeat(64)])
    assert.deepEqual(got[0], c.objects[ids[0]])
    assert.equal(got[1], null)
    assert.deepEqual(new Set(store.ids()), new Set(ids))

    assert.equal(store.getRef('heads/main'), null)
    store.updateRefs([{ name: 'heads/main', expected: null, new: c.id }], 'create')
    assert.equal(store.getRef('heads/main'), c.id)
    throwsCode(() => store.updateRefs([{ name: 'heads/main', expected: null, new: c.id }], 'again'), 'REF_CONFLICT', 'heads/main')
    throwsCode(() => store.updateRefs([{ name: '../evil', expected: null, new: c.id }], 'x'), 'INVALID_REF', '../evil')
    assert.deepEqual(store.listRefs('heads/'), [{ name: 'heads/main', id: c.id }])
    assert.deepEqual(store.reflog('heads/main').map((e) => [e.old, e.new, e.message]), [[null, c.id, 'create']])

    const out = new Workspace()
    out.checkout(c.id, store)
    assert.equal(fingerprint(out), fingerprint(ws))

    store.deleteMany([c.id])
    assert.deepEqual(store.hasMany([c.id]), [c.id])
  })

  test(`Repo flow on ${name}: commit, checkout, log, tag, fork, sync, gc, verify`, () => {
    const repo = Repo.open(fresh())
    const ws = new Workspace()
    ws.write('/notes.txt', Buffer.from('turn 1'))
    const c1 = repo.commit(ws, 'main', { message: 'turn 1' })
    assert.equal(c1.previous, null)
    assert.ok(c1.objectsWritten > 0)
    ws.write('/notes.txt', Buffer.from('turn 2'))
    const c2 = repo.commit(ws, 'main', { message: 'turn 2', meta: { score: '1' } })
    assert.equal(c2.previous, c1.id)
    assert.equal(repo.branch('main'), c2.id)
    assert.equal(repo.resolve('main'), c2.id)
    assert.deepEqual(repo.branches(), [{ name: 'main', id: c2.id }])

    const log = repo.log('main')
    assert.deepEqual(log.map((e) => e.id), [c2.id, c1.id])
    assert.equal(log[0].meta.score, '1')
    assert.equal(repo.log('main', 1).length, 1)

    // A stale workspace cannot overwrite the branch.
    const stale = repo.checkout(c1.id)
    stale.write('/notes.txt', Buffer.from('late'))
    throwsCode(() => repo.commit(stale, 'main'), 'REF_CONFLICT', 'main')
    assert.deepEqual(stale.read('/notes.txt'), Buffer.from('late'), 'the workspace is unchanged')

    const back = repo.checkout('main')
    assert.deepEqual(back.read('/notes.txt'), Buffer.from('turn 2'))
    const shallow = repo.checkoutShallow('main')
    shallow.write('/more.txt', Buffer.from('3'))
    const c3 = repo.commit(shallow, 'main', { message: 'turn 3' })
    assert.equal(c3.previous, c2.id)

    const into = new Workspace()
    const restore = repo.checkoutInto(into, c1.id, { drift: 'off' })
    assert.equal(restore.commit, c1.id)
    assert.deepEqual(into.read('/notes.txt'), Buffer.from('turn 1'))

    const tag = repo.tag('before', c2.id, { score: '0.9' })
    assert.equal(tag.target, c2.id)
    assert.deepEqual(tag.labels, { score: '0.9' })
    assert.deepEqual(repo.snapshots().map((s) => s.name), ['before'])
    assert.equal(repo.inspect('before').target, c2.id)
    assert.equal(repo.resolve('before'), tag.id)
    throwsCode(() => repo.inspect('nope'), 'NOT_FOUND', 'nope')

    assert.equal(repo.fork('experiment', 'before'), tag.id)
    throwsCode(() => repo.fork('experiment', 'main'), 'ALREADY_EXISTS', 'experiment')
    repo.deleteBranch('experiment', tag.id)
    assert.equal(repo.branch('experiment'), null)

    const removed = repo.removeSnapshot('before')
    assert.equal(removed.name, 'before')
    const report = repo.gc()
    assert.ok(report.deleted.length > 0, 'the tag commit and its unique objects go')
    assert.equal(report.problems.length, 0)
    const v = repo.verify()
    assert.equal(v.isClean, true)
    assert.equal(v.brokenRefs.length, 0)

    const other = Repo.open('memory:')
    const sent = sg.sync(repo, other, 'heads/main')
    assert.equal(sent.to, c3.id)
    assert.ok(sent.objects > 0)
    assert.equal(sg.sync(repo.store, other.store, 'heads/main').objects, 0, 'nothing new')
    assert.deepEqual(other.checkout('main').read('/notes.txt'), Buffer.from('turn 2'))
    assert.equal(repo.sync(Repo.open('memory:'), 'main').to, c3.id)
    throwsCode(() => sg.sync(repo, other, 'heads/nope'), 'NOT_FOUND', 'heads/nope')
    assert.equal(sg.verify(other, false).isClean, true)
    assert.equal(sg.gc(other).deleted.length, 0)
    assert.equal(repo.reindex().commits >= 3, true)
  })

  test(`async store calls on ${name}`, async () => {
    const repo = await Repo.openAsync(fresh())
    const store = repo.store
    const ws = sample()
    const pending = repo.commitAsync(ws, 'main', { message: 'a' })
    throwsCode(() => ws.read('/a.txt'), 'BUSY')
    const c = await pending
    assert.equal(ws.head(), c.id)
    const out = await repo.checkoutAsync('main')
    assert.equal(fingerprint(out), fingerprint(ws))
    const sh = await repo.checkoutShallowAsync('main')
    assert.equal(sh.isLoaded('/dir/b.bin'), false)
    assert.deepEqual((await repo.logAsync('main')).map((e) => e.id), [c.id])
    const ids = await store.idsAsync()
    assert.deepEqual(await store.hasManyAsync(ids), [])
    const got = await store.getManyAsync([c.id])
    assert.ok(Buffer.isBuffer(got[0]))
    const target = await sg.openAsync('memory:')
    await target.putManyAsync(Object.fromEntries(ids.map((id, i) => [id, store.getMany([id])[0]])))
    assert.equal((await sg.syncAsync(store, target, 'heads/main')).to, c.id)
    assert.equal((await sg.verifyAsync(target)).isClean, true)
    assert.equal((await sg.gcAsync(target)).problems.length, 0)
    await rejectsCode(repo.checkoutAsync('missing-branch'), 'NOT_FOUND', 'missing-branch')
    await rejectsCode(sg.openAsync('bogus://x'), 'BACKEND', 'bogus://x')
  })
}

test('Store.open and open refuse unknown URLs with a typed error', () => {
  throwsCode(() => sg.open('ftp://nowhere'), 'BACKEND', 'ftp://nowhere')
  throwsCode(() => Store.open('nope'), 'BACKEND', 'nope')
})

test('a Repo is an objects source, and a have source', () => {
  const repo = Repo.open('memory:')
  const ws = sample()
  const c = repo.commit(ws, 'main')
  const out = new Workspace()
  out.checkout(c.id, repo)
  assert.equal(fingerprint(out), fingerprint(ws))
  ws.write('/a.txt', Buffer.from('changed'))
  const inc = ws.commit({ parents: [c.id], have: repo })
  assert.ok(inc.objectCount <= 4, `only the changed path: ${inc.objectCount}`)
})

test('Store.missing answers the ids the store does not hold; hasMany is the same call (its old name)', async () => {
  const store = sg.open('memory:')
  const c = sample().commit()
  const ids = Object.keys(c.objects)
  const absent = '0'.repeat(64)
  assert.deepEqual(store.missing(ids), ids)
  store.putMany(c.objects)
  assert.deepEqual(store.missing([absent, ...ids, absent.replace(/^0/, 'f')]), [absent, absent.replace(/^0/, 'f')])
  assert.deepEqual(store.missing(ids), [])
  assert.deepEqual(await store.missingAsync([ids[0], absent]), [absent])
  for (const probe of [ids, [absent, ids[1]], []]) {
    assert.deepEqual(store.hasMany(probe), store.missing(probe))
    assert.deepEqual(await store.hasManyAsync(probe), store.missing(probe))
  }
  // Hostile ids: a typed error, from both names, and the store unchanged.
  throwsCode(() => store.missing(['nope']), 'INVALID_ID', 'nope')
  throwsCode(() => store.hasMany([ids[0], 'x'.repeat(64)]), 'INVALID_ID')
  throwsCode(() => store.missingAsync(['zz']), 'INVALID_ID', 'zz')
  assert.deepEqual(new Set(store.ids()), new Set(ids))
})

test('checking out a hollow commit is PRUNED (its own code), naming the commit', async () => {
  const store = sg.open('memory:')
  const repo = new Repo(store)
  const ws = new Workspace()
  ws.write('/old.txt', Buffer.from('old'))
  const old = repo.commit(ws, 'main', { message: 'old' }).id
  ws.write('/new.txt', Buffer.from('new'))
  const tip = repo.commit(ws, 'main', { message: 'new' }).id
  // Make `old` hollow as retention would: its tree gone, the hollow record written.
  const tree = sg.SnapshotGraph.commit(old, store).tree
  store.deleteMany([tree])
  store.updateRefs([{ name: `snapgraph/hollow/${old}`, expected: null, new: old }], 'hollow')
  const e = throwsCode(() => repo.checkout(old), 'PRUNED', old)
  assert.ok(e.message.includes('pruned'))
  await rejectsCode(repo.checkoutAsync(old), 'PRUNED', old)
  // History is kept; the tip still checks out.
  assert.deepEqual(repo.log(tip).map((c) => c.id), [tip, old])
  assert.equal(repo.checkout(tip).read('/new.txt').toString(), 'new')
  // A commit whose tree is gone without the hollow record is not PRUNED.
  ws.write('/third.txt', Buffer.from('3'))
  const third = repo.commit(ws, 'main', { message: '3' }).id
  store.deleteMany([sg.SnapshotGraph.commit(third, store).tree])
  const other = throwsCode(() => repo.checkout(third), 'NOT_FOUND')
  assert.notEqual(other.code, 'PRUNED')
})
