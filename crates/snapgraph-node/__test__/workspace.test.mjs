// Every Workspace call: files, state, configuration, reads, commit and checkout.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { sg, fingerprint, sample, throwsCode } from './helpers.mjs'

const { Workspace } = sg

test('files: write, read, list, metadata, exists, walk, rename, remove, mkdir, symlink, setMode', () => {
  const ws = new Workspace()
  ws.write('/notes/a.txt', Buffer.from('hello'))
  ws.write('/notes/b.txt', new Uint8Array([1, 2, 3]))
  assert.deepEqual(ws.read('/notes/a.txt'), Buffer.from('hello'))
  assert.ok(Buffer.isBuffer(ws.read('/notes/b.txt')))
  assert.deepEqual([...ws.read('/notes/b.txt')], [1, 2, 3])

  ws.mkdir('/empty/deeper')
  ws.mkdir('/empty/deeper') // idempotent
  ws.symlink('/notes/link', 'a.txt')
  assert.equal(ws.readLink('/notes/link'), 'a.txt')
  ws.setMode('/notes/a.txt', 0o755)

  assert.deepEqual(ws.metadata('/notes/a.txt'), { kind: 'file', mode: 0o755, size: 5 })
  assert.equal(ws.metadata('/notes').kind, 'dir')
  assert.equal(ws.metadata('/notes/link').kind, 'symlink')
  assert.deepEqual(
    ws.list('/notes').map((e) => [e.name, e.kind, e.size]),
    [['a.txt', 'file', 5], ['b.txt', 'file', 3], ['link', 'symlink', 5]],
  )
  assert.equal(ws.exists('/notes/a.txt'), true)
  assert.equal(ws.exists('/nope'), false)
  assert.equal(ws.exists('relative'), false)
  assert.deepEqual(
    ws.walk().map((e) => e.path),
    ['/empty', '/empty/deeper', '/notes', '/notes/a.txt', '/notes/b.txt', '/notes/link'],
  )

  ws.rename('/notes/b.txt', '/empty/b.txt')
  assert.equal(ws.exists('/notes/b.txt'), false)
  assert.deepEqual([...ws.read('/empty/b.txt')], [1, 2, 3])
  ws.remove('/empty')
  assert.equal(ws.exists('/empty/b.txt'), false)
  // Paths are normalized.
  assert.deepEqual(ws.read('/notes/./x/../a.txt'), Buffer.from('hello'))
})

test('state, head, parallelism, limits, capabilities, copy', () => {
  const ws = new Workspace()
  assert.equal(ws.state().length, 0)
  ws.setState(Buffer.from('interp'))
  assert.deepEqual(ws.state(), Buffer.from('interp'))
  assert.equal(ws.head(), null)

  ws.setParallelism(1)
  assert.equal(ws.parallelism(), 1)
  const limits = ws.limits()
  assert.ok(limits.maxFiles > 0 && limits.maxBytes > 0 && limits.maxUnpackedBytes > 0)
  ws.setLimits({ maxFiles: 10, maxBytes: 1000, maxUnpackedBytes: 5000 })
  assert.deepEqual(ws.limits(), { maxFiles: 10, maxBytes: 1000, maxUnpackedBytes: 5000 })

  assert.equal(ws.capabilities(), null)
  ws.setCapabilities({ builtins: ['ls', 'cat'], features: ['sqlite'], fsBackend: 'memory' })
  assert.deepEqual(ws.capabilities(), {
    builtins: ['cat', 'ls'],
    features: ['sqlite'],
    fsBackend: 'memory',
  })

  ws.write('/f', Buffer.from('1'))
  const copy = ws.copy()
  copy.write('/f', Buffer.from('2'))
  assert.deepEqual(ws.read('/f'), Buffer.from('1'))
  assert.deepEqual(copy.read('/f'), Buffer.from('2'))
})

test('commit returns the objects to persist, in dependency order; have makes it incremental', () => {
  const ws = sample()
  const first = ws.commit({ meta: { message_id: 'm1' } })
  assert.match(first.id, /^[0-9a-f]{64}$/)
  assert.equal(first.generation, 1)
  assert.equal(first.isComplete, true)
  assert.ok(Buffer.isBuffer(first.packed))
  const ids = Object.keys(first.objects)
  assert.equal(ids.length, first.objectCount)
  assert.equal(ids[ids.length - 1], first.id, 'the commit comes last')
  assert.equal(
    Object.values(first.objects).reduce((n, b) => n + b.length, 0),
    first.storedBytes,
  )
  assert.equal(ws.head(), first.id)

  const store = new Map(Object.entries(first.objects))
  ws.write('/a.txt', Buffer.from('alpha 2\n'))
  const second = ws.commit({ parents: [first.id], have: store })
  assert.equal(second.isComplete, false)
  assert.equal(second.packed, null)
  assert.equal(second.generation, 2)
  assert.ok(second.objectCount < first.objectCount, 'only what changed')
  for (const id of Object.keys(second.objects)) assert.ok(!store.has(id))

  // have as an id list (closures) and as a record give the same commit.
  const record = Object.fromEntries(store)
  const viaIds = ws.copy()
  const viaRecord = ws.copy()
  viaIds.write('/x', Buffer.from('x'))
  viaRecord.write('/x', Buffer.from('x'))
  const a = viaIds.commit({ parents: [second.id], have: [...store.keys()], parentSource: { ...record, ...second.objects } })
  const b = viaRecord.commit({ parents: [second.id], have: record, parentSource: new Map([...store, ...Object.entries(second.objects)]) })
  assert.equal(a.id, b.id)
  assert.deepEqual(Object.keys(a.objects), Object.keys(b.objects))

  // The commit decodes as it was written.
  const info = sg.SnapshotGraph.commit(second.id, new Map([...store, ...Object.entries(second.objects)]))
  assert.deepEqual(info.parents, [first.id])
  assert.equal(info.generation, 2)
  const firstInfo = sg.SnapshotGraph.commit(first.id, store)
  assert.deepEqual(firstInfo.meta, { message_id: 'm1' })
  assert.equal(firstInfo.stateSize, 7)
})

test('commit can leave out files or state', () => {
  const ws = sample()
  const noFiles = ws.commit({ excludeFiles: true })
  const out = new Workspace()
  out.checkout(noFiles.id, noFiles.objects)
  assert.deepEqual(out.walk(), [])
  assert.deepEqual(out.state(), Buffer.from('state-1'))
  const noState = ws.commit({ excludeState: true })
  const out2 = new Workspace()
  out2.checkout(noState.id, noState.objects)
  assert.equal(out2.state().length, 0)
  assert.deepEqual(out2.read('/a.txt'), Buffer.from('alpha\n'))
})

test('checkout from a record, a Map, a function and a get/has object restores the same workspace', () => {
  const ws = sample()
  const c = ws.commit()
  const record = c.objects
  const map = new Map(Object.entries(record))
  const sources = [record, map, (id) => record[id], { get: (id) => map.get(id), has: (id) => map.has(id) }]
  for (const source of sources) {
    const out = new Workspace()
    const restore = out.checkout(c.id, source)
    assert.equal(restore.commit, c.id)
    assert.equal(out.head(), c.id)
    assert.equal(fingerprint(out), fingerprint(ws))
  }
})

test('checkout options: policy, drift, shallow and loadContent', () => {
  const ws = sample()
  ws.setCapabilities({ builtins: ['ls'], features: ['sqlite'] })
  const c = ws.commit()
  const lacking = new Workspace()
  lacking.setCapabilities({ builtins: ['ls'], features: [] })
  throwsCode(() => lacking.checkout(c.id, c.objects), 'CAPABILITY', c.id)
  lacking.checkout(c.id, c.objects, { policy: 'force' })
  assert.deepEqual(lacking.read('/a.txt'), Buffer.from('alpha\n'))

  const extra = new Workspace()
  extra.setCapabilities({ builtins: ['ls', 'cat'], features: ['sqlite'] })
  extra.checkout(c.id, c.objects) // superset is fine
  throwsCode(() => extra.checkout(c.id, c.objects, { policy: 'strict' }), 'CAPABILITY')

  const shallow = new Workspace()
  shallow.setCapabilities({ builtins: ['ls'], features: ['sqlite'] })
  shallow.checkout(c.id, c.objects, { shallow: true, drift: 'off' })
  assert.equal(shallow.isLoaded('/dir/b.bin'), false)
  assert.match(shallow.fileContentId('/dir/b.bin'), /^[0-9a-f]{64}$/)
  throwsCode(() => shallow.read('/dir/b.bin'), 'NOT_LOADED', '/dir/b.bin')
  shallow.loadContent('/dir/b.bin', c.objects)
  assert.equal(shallow.isLoaded('/dir/b.bin'), true)
  assert.deepEqual(shallow.read('/dir/b.bin'), Buffer.alloc(100_000, 7))
})

test('content rules: a feature required by content prefix', () => {
  const ws = new Workspace()
  ws.write('/db.sqlite', Buffer.from('SQLite format 3\0rest'))
  const c = ws.commit()
  const out = new Workspace()
  out.requireFeatureForPrefix(Buffer.from('SQLite format 3\0'), 'sqlite')
  throwsCode(() => out.checkout(c.id, c.objects, { policy: 'force' }), 'CAPABILITY', '/db.sqlite')
  assert.equal(out.exists('/db.sqlite'), false)
})

test('recorded reads: pins, stale paths, drift checks', () => {
  const ws = new Workspace()
  ws.write('/cache/page.html', Buffer.from('<html>'))
  ws.recordRead({ source: 's3://b/pinned', fingerprint: 'e1', revision: 'v7', size: 10 })
  ws.recordRead({ source: 'https://x/page', fingerprint: 'etag-1', size: 6, cachedAt: '/cache/page.html' })
  ws.recordRead({ source: 'https://x/unverifiable', fingerprint: '', size: 1, cachedAt: '/cache/page.html' })
  assert.deepEqual(ws.externalReads().map((r) => r.source), ['https://x/page', 'https://x/unverifiable', 's3://b/pinned'])
  assert.equal(ws.forgetRead('https://x/unverifiable').source, 'https://x/unverifiable')
  assert.equal(ws.forgetRead('https://x/unverifiable'), null)
  const c = ws.commit()
  assert.deepEqual(
    sg.SnapshotGraph.externalReads(c.id, c.objects).map((r) => r.source),
    ['https://x/page', 's3://b/pinned'],
  )

  const out = new Workspace()
  const restore = out.checkout(c.id, c.objects)
  assert.deepEqual(restore.pins().map((p) => p.source), ['s3://b/pinned'])
  assert.equal(restore.revisionFor('s3://b/pinned'), 'v7')
  assert.equal(restore.revisionFor('https://x/page'), null)
  assert.equal(restore.needsDriftCheck(), true)
  assert.deepEqual(restore.pending(), ['https://x/page'])
  assert.deepEqual(restore.expected(), { 'https://x/page': 'etag-1' })
  throwsCode(() => restore.finish(), 'DRIFT', 'https://x/page')
  assert.equal(restore.supply('https://unknown', 'x'), false)
  assert.equal(restore.supply('https://x/page', 'etag-2'), true)
  throwsCode(() => restore.finish(), 'DRIFT', 'etag-2')
  restore.supply('https://x/page', 'etag-1')
  restore.finish()
  restore.finish() // the same answer again

  const off = new Workspace()
  const r2 = off.checkout(c.id, c.objects, { drift: 'off' })
  assert.equal(r2.needsDriftCheck(), false)
  assert.deepEqual(r2.stale(), ['/cache/page.html'])
  assert.deepEqual(off.stalePaths(), ['/cache/page.html'])
  assert.equal(off.isStale('/cache/page.html'), true)
  off.write('/cache/page.html', Buffer.from('fresh'))
  assert.equal(off.isStale('/cache/page.html'), false)
})

test('commitAsync and checkoutAsync run off the event loop; the workspace is BUSY meanwhile', async () => {
  const store = sg.open('memory:')
  const ws = sample()
  const pending = ws.commitAsync({ meta: { turn: '1' } })
  throwsCode(() => ws.write('/z', Buffer.from('z')), 'BUSY')
  const c = await pending
  assert.equal(ws.head(), c.id)
  store.putMany(c.objects)

  ws.write('/a.txt', Buffer.from('next'))
  const c2 = await ws.commitAsync({ parents: [c.id], have: store })
  assert.equal(c2.isComplete, false)
  store.putMany(c2.objects)

  const out = new Workspace()
  const restore = await out.checkoutAsync(c2.id, store)
  assert.equal(restore.commit, c2.id)
  assert.equal(fingerprint(out), fingerprint(ws))
  // JavaScript sources cannot be read off the event loop.
  throwsCode(() => out.checkoutAsync(c.id, c.objects), 'INVALID_ARGUMENT', 'Store')
  throwsCode(() => out.commitAsync({ have: c.objects }), 'INVALID_ARGUMENT', 'Store')
  assert.equal(out.head(), c2.id)
})

test('a reentrant call from an objects function is BUSY, not a deadlock', () => {
  const ws = sample()
  const c = ws.commit()
  const out = new Workspace()
  let inner
  const source = (id) => {
    try {
      out.read('/a.txt')
    } catch (e) {
      inner = e
    }
    return c.objects[id]
  }
  out.checkout(c.id, source)
  assert.equal(inner.code, 'BUSY')
  assert.equal(fingerprint(out), fingerprint(ws))
})

test('formatVersion', () => {
  assert.equal(typeof sg.formatVersion(), 'number')
  assert.ok(sg.formatVersion() >= 1)
})

test('a commit result: every field, objects a null-prototype record in dependency order', async () => {
  const ws = new Workspace()
  ws.write('/a/one.txt', Buffer.from('one'))
  ws.write('/big.bin', Buffer.alloc(200_000, 7))
  for (const c of [ws.commit(), await ws.copy().commitAsync()]) {
    assert.deepEqual(Object.keys(c), ['id', 'generation', 'objects', 'objectCount', 'storedBytes', 'packed', 'isComplete'])
    assert.equal(Object.getPrototypeOf(c.objects), null, 'ids never meet Object.prototype names')
    const ids = Object.keys(c.objects)
    assert.equal(ids.length, c.objectCount)
    assert.equal(ids.at(-1), c.id, 'the commit comes last')
    for (const id of ids) {
      assert.match(id, /^[0-9a-f]{64}$/)
      assert.ok(Buffer.isBuffer(c.objects[id]), id)
      assert.ok(Object.hasOwn(c.objects, id) && id in c.objects)
    }
    const sizes = Object.values(c.objects).map((b) => b.length)
    assert.equal(sizes.reduce((x, y) => x + y, 0), c.storedBytes)
    assert.ok(c.packed === null || Buffer.isBuffer(c.packed))
    // Round trip: the record checks out, from itself and from a copy into a Map.
    for (const source of [c.objects, new Map(Object.entries(c.objects))]) {
      const out = new Workspace()
      out.checkout(c.id, source)
      assert.deepEqual(out.read('/big.bin'), Buffer.alloc(200_000, 7))
      assert.equal(out.read('/a/one.txt').toString(), 'one')
    }
  }
})

test('have as a Map or a Set is asked in one batch per commit, with the answers of a per-id has', () => {
  const ws = new Workspace()
  for (let i = 0; i < 300; i++) ws.write(`/d${i % 3}/f${i}`, Buffer.from(`file ${i} `.repeat(50)))
  const first = ws.commit()
  const store = new Map(Object.entries(first.objects))
  let head = first.id
  for (let turn = 1; turn <= 5; turn++) {
    ws.write(`/d${turn % 3}/f${turn * 7}`, Buffer.from(`turn ${turn}`))
    // A Map whose has() is counted, a Set of its ids, and the id list (closures)
    // give the same objects.
    let calls = 0
    const counted = new Map(store)
    const has = counted.has.bind(counted)
    counted.has = (id) => {
      calls++
      return has(id)
    }
    const viaSet = ws.copy()
    const viaIds = ws.copy()
    const c = ws.commit({ parents: [head], have: counted })
    assert.ok(calls > 1, 'every question answered')
    const s = viaSet.commit({ parents: [head], have: new Set(store.keys()) })
    const l = viaIds.commit({ parents: [head], have: [...store.keys()] })
    assert.equal(s.id, c.id)
    assert.deepEqual(Object.keys(s.objects), Object.keys(c.objects))
    assert.deepEqual(Object.keys(l.objects), Object.keys(c.objects))
    for (const id of Object.keys(c.objects)) assert.ok(!store.has(id))
    assert.equal(c.isComplete, false)
    for (const [id, b] of Object.entries(c.objects)) store.set(id, b)
    head = c.id
  }
  // Everything the store holds restores the head.
  const out = new Workspace()
  out.checkout(head, store)
  assert.deepEqual(out.read('/d2/f35'), Buffer.from('turn 5'))
})

test('a have whose has() throws or answers wrongly counts as holding nothing', () => {
  const ws = sample()
  const first = ws.commit()
  const store = new Map(Object.entries(first.objects))
  ws.write('/a.txt', Buffer.from('alpha 2\n'))
  const full = ws.copy().commit({ parents: [first.id] })
  const throwing = { get: (id) => store.get(id), has: () => { throw new Error('offline') } }
  // The exception stays inside the question: the commit emits what it would have
  // pruned, and returns.
  const c = ws.copy().commit({ parents: [first.id], have: throwing })
  assert.deepEqual(Object.keys(c.objects).sort(), Object.keys(full.objects).sort())
  assert.equal(c.isComplete, true)
  // An answer that is not a boolean is not "held".
  const lying = { get: (id) => store.get(id), has: () => 'yes' }
  const d = ws.copy().commit({ parents: [first.id], have: lying })
  assert.deepEqual(Object.keys(d.objects).sort(), Object.keys(full.objects).sort())
  assert.equal(d.isComplete, true)
})

test('commit objects are Buffers with exactly their stored bytes, also from commitAsync', async () => {
  const ws = sample()
  const first = ws.commit()
  const db = sg.open('memory:')
  db.putMany(first.objects)
  for (const [id, b] of Object.entries(first.objects)) {
    assert.ok(Buffer.isBuffer(b))
    assert.deepEqual(db.getMany([id])[0], b)
  }
  assert.equal(Object.getPrototypeOf(first.objects), null)
  ws.write('/a.txt', Buffer.from('alpha 3\n'))
  const second = await ws.commitAsync({ parents: [first.id], have: db })
  assert.ok(second.objectCount > 0)
  assert.equal(Object.keys(second.objects).length, second.objectCount)
  assert.equal(Object.values(second.objects).reduce((n, b) => n + b.length, 0), second.storedBytes)
  db.putMany(second.objects)
  assert.deepEqual(db.hasMany(Object.keys(second.objects)), [], 'none missing')
  const out = new Workspace()
  out.checkout(second.id, db)
  assert.deepEqual(out.read('/a.txt'), Buffer.from('alpha 3\n'))
})
