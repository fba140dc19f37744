// Workspace.writeStream / readStream: files larger than memory, both ways.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sg, throwsCode } from './helpers.mjs'

const { Workspace } = sg

/** Incompressible, deterministic bytes. */
function pseudoRandom(n, seed) {
  const parts = []
  let len = 0
  for (let i = 0; len < n; i++) {
    const d = createHash('sha512').update(`${seed}:${i}`).digest()
    parts.push(d)
    len += d.length
  }
  return Buffer.concat(parts).subarray(0, n)
}

/** A `read` callback over `data` that records the sizes asked for. */
function reader(data) {
  let at = 0
  const asked = []
  const read = (n) => {
    asked.push(n)
    const piece = data.subarray(at, at + n)
    at += piece.length
    return piece
  }
  return { read, asked }
}

test('writeStream makes what write makes; readStream gives it back a window at a time', () => {
  const data = pseudoRandom(3_500_000, 1)
  const whole = new Workspace()
  whole.write('/d/big.bin', data)
  const expected = whole.commit()

  const store = sg.open('memory:')
  const ws = new Workspace()
  const { read, asked } = reader(data)
  // The size hint is a count like any other: nothing is read before it is refused.
  for (const bad of [-1, NaN, 0.5]) {
    assert.throws(() => ws.writeStream('/d/big.bin', read, store, bad), (e) => e.code === 'INVALID_ARGUMENT' && /size/.test(e.message))
  }
  assert.equal(asked.length, 0)
  assert.equal(ws.writeStream('/d/big.bin', read, store), data.length)
  assert.deepEqual([...new Set(asked)], [1 << 20])
  assert.equal(ws.isLoaded('/d/big.bin'), false)
  assert.equal(ws.metadata('/d/big.bin').size, data.length)
  const c = ws.commit()
  assert.equal(c.id, expected.id)
  // The content objects went to the store, not into the commit.
  for (const id of Object.keys(expected.objects)) {
    if (!(id in c.objects)) assert.deepEqual(store.getMany([id])[0], Buffer.from(expected.objects[id]))
  }
  store.putMany(c.objects)

  const back = new Workspace()
  back.checkout(c.id, store, { shallow: true })
  const pieces = []
  assert.equal(back.readStream('/d/big.bin', store, (b) => pieces.push(b)), data.length)
  assert.ok(pieces.length > 1 && pieces.every((p) => Buffer.isBuffer(p) && p.length <= 65536))
  assert.deepEqual(Buffer.concat(pieces), data)
  // A loaded file is one call; a Repo takes the objects too.
  const one = []
  whole.readStream('/d/big.bin', {}, (b) => one.push(b))
  assert.equal(one.length, 1)
  const repo = sg.Repo.open('memory:')
  const viaRepo = new Workspace()
  viaRepo.writeStream('/x', reader(data).read, repo)
  assert.equal(viaRepo.commit().id !== undefined, true)
})

test('streams throw typed errors', () => {
  const data = pseudoRandom(300_000, 2)
  const store = sg.open('memory:')
  const ws = new Workspace()
  ws.writeStream('/f', reader(data).read, store)
  const c = ws.commit()
  store.putMany(c.objects)
  const shallow = new Workspace()
  shallow.checkout(c.id, store, { shallow: true })
  // The file's chunks: the store's objects over 4 KB that the commit did not emit.
  const get = (id) => store.getMany([id])[0]
  const chunks = store.ids().filter((id) => !(id in c.objects) && get(id).length > 4000).sort()
  const victim = chunks[0]
  const objects = Object.fromEntries(store.ids().map((id) => [id, get(id)]))
  const damaged = { ...objects, [victim]: Buffer.from(objects[victim]) }
  damaged[victim][damaged[victim].length - 1] ^= 1
  throwsCode(() => shallow.readStream('/f', damaged, () => {}), 'CORRUPT', victim)
  const missing = { ...objects }
  delete missing[victim]
  throwsCode(() => shallow.readStream('/f', missing, () => {}), 'NOT_FOUND', victim)
  throwsCode(() => shallow.readStream('/nope', objects, () => {}), 'NOT_FOUND', '/nope')
  ws.mkdir('/dir')
  throwsCode(() => ws.writeStream('/dir', reader(Buffer.alloc(100)).read, store), 'IS_A_DIRECTORY', '/dir')
  throwsCode(() => ws.writeStream('/g', () => { throw new Error('disk gone') }, store), 'CALLBACK', 'disk gone')
  throwsCode(() => shallow.readStream('/f', objects, () => { throw new Error('disk full') }), 'CALLBACK', 'disk full')
})

test('writeStream stores in writes of a few MiB: a SQLite store keeps the chunks in its segment file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sg-stream-'))
  try {
    const data = pseudoRandom(3_500_000, 3)
    const store = sg.open(`sqlite:${join(dir, 's.db')}`)
    const ws = new Workspace()
    assert.equal(ws.writeStream('/big.bin', reader(data).read, store), data.length)
    assert.deepEqual(readdirSync(join(dir, 's.db-segments')), ['1.seg'])
    const c = ws.commit()
    store.putMany(c.objects)
    const back = new Workspace()
    back.checkout(c.id, store, { shallow: true })
    const pieces = []
    back.readStream('/big.bin', store, (b) => pieces.push(b))
    assert.deepEqual(Buffer.concat(pieces), data)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('writeStream over a shallow checkout makes what write makes, whatever changed', () => {
  const data = pseudoRandom(3_000_000, 3)
  const store = sg.open('memory:')
  const first = new Workspace()
  first.write('/log', data)
  const c1 = first.commit()
  store.putMany(c1.objects)
  const edits = [
    ['a line appended', Buffer.concat([data, Buffer.from('one more line\n')])],
    ['a line prepended', Buffer.concat([Buffer.from('first\n'), data])],
    ['a byte changed', Buffer.from(data).fill(7, 1_500_000, 1_500_001)],
    ['cut short', data.subarray(0, 2_000_000)],
    ['other bytes', pseudoRandom(2_500_000, 4)],
  ]
  for (const [what, next] of edits) {
    const whole = new Workspace()
    whole.write('/log', next)
    whole.commit()
    // With the new size, without it, and with a wrong one: a hint only.
    for (const size of [next.length, undefined, 12345]) {
      const ws = new Workspace()
      ws.checkout(c1.id, store, { shallow: true })
      assert.equal(ws.writeStream('/log', reader(next).read, store, size), next.length, what)
      assert.equal(ws.isLoaded('/log'), false, what)
      const c = ws.commit()
      assert.equal(ws.fileContentId('/log'), whole.fileContentId('/log'), `${what}, size ${size}`)
      store.putMany(c.objects)
      const back = new Workspace()
      back.checkout(c.id, store, { shallow: true })
      const pieces = []
      back.readStream('/log', store, (b) => pieces.push(b))
      assert.ok(Buffer.concat(pieces).equals(next), `${what} reads back`)
    }
  }
})
