// The per-turn loop of turns.mjs alone, for instruction counts (bench/instructions.sh
// runs it under callgrind for 0 and for N turns; the difference over N is one turn).
// Data for 300 turns is made up front whatever N is, so only the turns differ.
//
//   node bench/turn_loop.mjs [turns <= 300]
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
// SNAPGRAPH_NODE_INDEX: another build's index.js (to count before and after a change).
const sg = require(process.env.SNAPGRAPH_NODE_INDEX ?? '../index.js')
const FILES = 2000
const SIZE = 4000
const DIRS = 20
const turns = Math.min(Number(process.argv[2] ?? 300), 300)
// SNAPGRAPH_WARM: turns run first in every run (0 and N alike), so the difference
// counts steady-state turns: V8 compiles the loop and the binding's helpers with its
// optimizing tiers during the first turns (on the main thread under --predictable),
// a one-time cost a session of many turns does not pay per turn.
const warm = Number(process.env.SNAPGRAPH_WARM ?? 0)

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
const path = (i) => `/d${String(i % DIRS).padStart(4, '0')}/f${String(i).padStart(6, '0')}.bin`
// Made once, as the Rust loop's `Turns` does: a turn indexes them, formats none.
const paths = Array.from({ length: FILES }, (_, i) => path(i))

const fill = prng(1)
const ws = new sg.Workspace()
for (let i = 0; i < FILES; i++) ws.write(paths[i], fill(Buffer.alloc(SIZE)))
const first = ws.commit()
const store = new Map(Object.entries(first.objects))
let head = first.id
const data = []
for (let i = 0; i < warm + 300; i++) data.push(fill(Buffer.alloc(SIZE)))
// SNAPGRAPH_OBJECTS=record: the default record and `Object.entries` (what a build
// without `objectsAs` runs); else `objectsAs: 'map'` and a `Map` iterated.
if (process.env.SNAPGRAPH_OBJECTS === 'record') {
  for (let i = 0; i < warm + turns; i++) {
    ws.write(paths[i % FILES], data[i])
    const c = ws.commit({ parents: [head], have: store })
    for (const [id, bytes] of Object.entries(c.objects)) store.set(id, bytes)
    head = c.id
  }
} else {
  for (let i = 0; i < warm + turns; i++) {
    ws.write(paths[i % FILES], data[i])
    const c = ws.commit({ parents: [head], have: store, objectsAs: 'map' })
    for (const [id, bytes] of c.objects) store.set(id, bytes)
    head = c.id
  }
}
// Under `--expose-gc` (instructions.sh), collect once at the end so each run pays for
// the garbage its turns made, whenever V8 would have collected it.
globalThis.gc?.()
