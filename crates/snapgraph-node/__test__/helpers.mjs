// Shared helpers of the node:test suites.
import { createRequire } from 'node:module'
import assert from 'node:assert/strict'

const require = createRequire(import.meta.url)
export const sg = require('../index.js')

/** Everything a script can observe of a workspace: paths, kinds, modes, bytes, state, head. */
export function fingerprint(ws) {
  const entries = ws.walk().map((e) => {
    let content = null
    if (e.kind === 'file' && ws.isLoaded(e.path)) content = ws.read(e.path).toString('hex')
    if (e.kind === 'symlink') content = ws.readLink(e.path)
    return [e.path, e.kind, e.mode, e.size, content]
  })
  return JSON.stringify({ entries, state: ws.state().toString('hex'), head: ws.head() })
}

/** Asserts that `fn` throws an Error with `code`, and that its message mentions `mentions`. */
export function throwsCode(fn, code, mentions) {
  let caught
  try {
    fn()
  } catch (e) {
    caught = e
  }
  assert.ok(caught instanceof Error, `expected an Error with code ${code}, got ${caught}`)
  assert.equal(caught.code, code, `code of: ${caught.message}`)
  if (mentions !== undefined) {
    assert.ok(caught.message.includes(mentions), `${JSON.stringify(caught.message)} should mention ${mentions}`)
  }
  return caught
}

/** Asserts that the promise rejects with an Error with `code`. */
export async function rejectsCode(promise, code, mentions) {
  let caught
  try {
    await promise
  } catch (e) {
    caught = e
  }
  assert.ok(caught instanceof Error, `expected a rejection with code ${code}, got ${caught}`)
  assert.equal(caught.code, code, `code of: ${caught.message}`)
  if (mentions !== undefined) {
    assert.ok(caught.message.includes(mentions), `${JSON.stringify(caught.message)} should mention ${mentions}`)
  }
  return caught
}

/** A deterministic PRNG (mulberry32), so a failing randomized run can be replayed from its seed. */
export function rng(seed) {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  return {
    next,
    int: (n) => Math.floor(next() * n),
    bytes: (n) => {
      const b = Buffer.alloc(n)
      for (let i = 0; i < n; i++) b[i] = Math.floor(next() * 256)
      return b
    },
  }
}

/** A workspace with a few files, a directory, a symlink and state. */
export function sample() {
  const ws = new sg.Workspace()
  ws.write('/a.txt', Buffer.from('alpha\n'))
  ws.write('/dir/b.bin', Buffer.alloc(100_000, 7))
  ws.write('/dir/sub/c.txt', Buffer.from('gamma'))
  ws.symlink('/link', '/a.txt')
  ws.setState(Buffer.from('state-1'))
  return ws
}
