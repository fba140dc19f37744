// Packed snapshots: plain, options, keyed, async.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { sg, fingerprint, sample, throwsCode, rejectsCode } from './helpers.mjs'

const { Workspace } = sg
const key = Buffer.alloc(32, 9)

test('snapshot, fromSnapshot and restoreSnapshot round-trip', () => {
  const ws = sample()
  const bytes = ws.snapshot()
  assert.ok(Buffer.isBuffer(bytes))
  assert.deepEqual(ws.snapshot(), bytes, 'the same workspace packs to the same bytes')
  const back = Workspace.fromSnapshot(bytes)
  assert.deepEqual(back.walk(), ws.walk())
  assert.deepEqual(back.read('/dir/b.bin'), ws.read('/dir/b.bin'))
  assert.deepEqual(back.state(), ws.state())

  const other = new Workspace()
  other.write('/other', Buffer.from('replaced'))
  const restore = other.restoreSnapshot(bytes)
  assert.match(restore.commit, /^[0-9a-f]{64}$/)
  assert.equal(other.exists('/other'), false)
  assert.deepEqual(other.read('/a.txt'), Buffer.from('alpha\n'))
})

test('snapshot options: compress, excludeFiles, excludeState', () => {
  const ws = new Workspace()
  ws.write('/text.txt', Buffer.from('the same words again '.repeat(5000)))
  ws.setState(Buffer.from('state'))
  const plain = ws.snapshot()
  const small = ws.snapshot({ compress: true })
  assert.ok(small.length < plain.length / 4)
  assert.deepEqual(Workspace.fromSnapshot(small).read('/text.txt'), ws.read('/text.txt'))

  const stateOnly = ws.snapshot({ excludeFiles: true })
  const target = new Workspace()
  target.write('/mine', Buffer.from('kept'))
  target.restoreSnapshot(stateOnly)
  assert.deepEqual(target.read('/mine'), Buffer.from('kept'), 'no files in the snapshot: files stay')
  assert.deepEqual(target.state(), Buffer.from('state'))

  const filesOnly = ws.snapshot({ excludeState: true })
  const t2 = new Workspace()
  t2.setState(Buffer.from('own state'))
  t2.restoreSnapshot(filesOnly)
  assert.deepEqual(t2.state(), Buffer.from('own state'))
  assert.ok(t2.exists('/text.txt'))
})

test('commit.packed equals a snapshot of the same workspace', () => {
  const ws = sample()
  const c = ws.commit()
  assert.deepEqual(c.packed, ws.snapshot())
})

test('keyed snapshots need the right key', () => {
  const ws = sample()
  const bytes = ws.snapshotKeyed(key)
  const back = Workspace.fromSnapshotKeyed(bytes, key)
  assert.equal(fingerprint(back).length > 0, true)
  assert.deepEqual(back.read('/a.txt'), Buffer.from('alpha\n'))
  throwsCode(() => Workspace.fromSnapshotKeyed(bytes, Buffer.alloc(32, 1)), 'NOT_AUTHENTIC')
  throwsCode(() => Workspace.fromSnapshot(bytes), 'KEY_REQUIRED')
  throwsCode(() => Workspace.fromSnapshotKeyed(ws.snapshot(), key), 'NOT_KEYED')
  throwsCode(() => ws.snapshotKeyed(Buffer.alloc(16)), 'INVALID_ARGUMENT', '32 bytes')
  const target = new Workspace()
  target.restoreSnapshotKeyed(bytes, key)
  assert.deepEqual(target.read('/dir/sub/c.txt'), Buffer.from('gamma'))
})

test('async snapshot calls', async () => {
  const ws = sample()
  const bytes = await ws.snapshotAsync({ compress: true })
  const back = await Workspace.fromSnapshotAsync(bytes)
  assert.deepEqual(back.walk(), ws.walk())
  const target = new Workspace()
  const restore = await target.restoreSnapshotAsync(bytes)
  assert.match(restore.commit, /^[0-9a-f]{64}$/)
  assert.deepEqual(target.read('/a.txt'), Buffer.from('alpha\n'))
  await rejectsCode(Workspace.fromSnapshotAsync(Buffer.from('garbage')), 'CORRUPT')
  const before = fingerprint(target)
  await rejectsCode(target.restoreSnapshotAsync(bytes.subarray(0, bytes.length - 3)), 'CORRUPT')
  assert.equal(fingerprint(target), before)
})

test('a shallow workspace cannot pack its unloaded files: NOT_LOADED naming the file', () => {
  const ws = sample()
  const c = ws.commit()
  const shallow = new Workspace()
  shallow.checkout(c.id, c.objects, { shallow: true })
  throwsCode(() => shallow.snapshot(), 'NOT_LOADED', '/dir/b.bin')
  assert.ok(shallow.snapshot({ excludeFiles: true }).length > 0)
})
