// Per-turn commit and checkout at 2,000 files through Node, next to Rust, in one run:
// rounds alternate between this process and the Rust peer
// (benches/benches/node_peer.rs, same protocol), so both see the same machine load.
//
//   node crates/snapgraph-node/bench/turns.mjs [rounds = 3] [turns = 200] [checkouts = 10] [warmup = 1000]
//
// One command: it builds the package first (npm ci if needed, npm run build: a no-op
// when it is current; SNAPGRAPH_NO_BUILD=1 skips that) and the Rust peer.
//
// Protocol: 2,000 files of 4,000 pseudo-random bytes in 20 directories, committed
// once; `warmup` turns untimed (the same count on both sides: 1,000 by default, so V8
// has compiled the per-turn JavaScript with its optimizing tier, as in a session of
// many turns; with 5 the Node turns ran in the baseline tier); then each turn
// rewrites one file and commits with the store as `have` and the head as parent, and
// the new objects go into the store (timed: write + commit + insert; the commit asks
// for `objectsAs: 'map'`, so the insert iterates a `Map`; SNAPGRAPH_OBJECTS=record
// takes the default record and `Object.entries`). Then checkouts of the head into
// fresh workspaces (timed: new Workspace + checkout). Medians per round.
import { createRequire } from 'node:module'
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const require = createRequire(import.meta.url)
const here = join(dirname(fileURLToPath(import.meta.url)), '..')
const root = join(here, '..', '..')
if (!process.env.SNAPGRAPH_NO_BUILD) {
  const run = (args, env = {}) =>
    execFileSync('npm', args, { cwd: here, stdio: ['ignore', 2, 'inherit'], env: { ...process.env, ...env } })
  if (!existsSync(join(here, 'node_modules', '@napi-rs', 'cli'))) {
    run(['ci', '--no-audit', '--no-fund'], { npm_config_build_from_source: 'true' })
  }
  run(['run', '-s', 'build'])
}
const sg = require('../index.js')

const [rounds = 3, turns = 200, checkouts = 10, warmup = 1000] = process.argv.slice(2).map(Number)
const asRecord = process.env.SNAPGRAPH_OBJECTS === 'record'
const FILES = 2000
const SIZE = 4000
const DIRS = 20

function prng(seed) {
  let a = seed >>> 0
  return (buf) => {
    for (let i = 0; i < buf.length; i += 4) {
      a = (a + 0x6d2b79f5) >>> 0
      let t = Math.imul(a ^ (a >>> 15), a | 1)
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
      buf.writeUInt32LE((t ^ (t >>> 14)) >>> 0, i)
    }
    return buf
  }
}

const median = (v) => [...v].sort((x, y) => x - y)[v.length >> 1]
const path = (i) => `/d${String(i % DIRS).padStart(4, '0')}/f${String(i).padStart(6, '0')}.bin`
// Made once, as the Rust peer's `Turns` does: a turn indexes them, formats none.
const paths = Array.from({ length: FILES }, (_, i) => path(i))

function nodeRound(seed) {
  const fill = prng(seed)
  const ws = new sg.Workspace()
  for (let i = 0; i < FILES; i++) ws.write(paths[i], fill(Buffer.alloc(SIZE)))
  const first = ws.commit()
  const store = new Map(Object.entries(first.objects))
  let head = first.id
  let edit = 0
  const turn = asRecord
    ? (data) => {
        ws.write(paths[edit++ % FILES], data)
        const c = ws.commit({ parents: [head], have: store })
        for (const [id, bytes] of Object.entries(c.objects)) store.set(id, bytes)
        head = c.id
      }
    : (data) => {
        ws.write(paths[edit++ % FILES], data)
        const c = ws.commit({ parents: [head], have: store, objectsAs: 'map' })
        for (const [id, bytes] of c.objects) store.set(id, bytes)
        head = c.id
      }
  for (let i = 0; i < warmup; i++) turn(fill(Buffer.alloc(SIZE)))
  const commitUs = []
  for (let i = 0; i < turns; i++) {
    const data = fill(Buffer.alloc(SIZE))
    const t = process.hrtime.bigint()
    turn(data)
    commitUs.push(Number(process.hrtime.bigint() - t) / 1e3)
  }
  const timeCheckout = (source) => {
    const ms = []
    for (let i = 0; i < checkouts; i++) {
      const t = process.hrtime.bigint()
      const out = new sg.Workspace()
      out.checkout(head, source)
      ms.push(Number(process.hrtime.bigint() - t) / 1e6)
    }
    return median(ms)
  }
  const db = sg.open('memory:')
  db.putMany(Object.fromEntries(store))
  return { commit: median(commitUs), checkoutMap: timeCheckout(store), checkoutStore: timeCheckout(db) }
}

function rustRound() {
  const out = execFileSync(
    'cargo',
    ['bench', '-q', '-p', 'snapgraph-benches', '--bench', 'node_peer', '--', String(turns), String(checkouts), String(warmup)],
    { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] },
  )
  const line = out.trim().split('\n').pop()
  const r = JSON.parse(line)
  return { commit: r.commit_turn_us, checkout: r.checkout_ms }
}

rustRound() // builds the peer before anything is timed
const rows = []
for (let r = 0; r < rounds; r++) {
  const node = nodeRound(r + 1)
  const rust = rustRound()
  rows.push({ node, rust })
  console.log(
    `round ${r + 1}: commit/turn node ${node.commit.toFixed(1)} us, rust ${rust.commit.toFixed(1)} us (${(node.commit / rust.commit).toFixed(2)}x); ` +
      `checkout node(Map) ${node.checkoutMap.toFixed(2)} ms, node(Store) ${node.checkoutStore.toFixed(2)} ms, rust ${rust.checkout.toFixed(2)} ms`,
  )
}
// Each ratio is taken within a round (both sides under the same load), then
// summarized over the rounds by its median and its minimum (the round least
// disturbed by other work on the machine).
const ratio = (f) => {
  const v = rows.map(f)
  return `${median(v).toFixed(2)}x (min ${Math.min(...v).toFixed(2)}x)`
}
console.log(
  `over ${rounds} rounds, median (min) of the per-round ratios: commit/turn ${ratio((x) => x.node.commit / x.rust.commit)} Rust; ` +
    `checkout from a Map ${ratio((x) => x.node.checkoutMap / x.rust.checkout)}, from a Store ${ratio((x) => x.node.checkoutStore / x.rust.checkout)}`,
)
