// The page's per-turn loop (`benchmark()` in examples/browser/app.js) on the wasm
// module under Node, for instruction counts: bench/instructions.sh runs it under
// callgrind for 0 and for N turns; the difference over N is one turn. Content for 300
// turns is made up front whatever N is, so only the turns differ.
//
//   scripts/build-wasm && node crates/snapgraph-wasm/bench/turn_loop.mjs [turns <= 300]
//
// SNAPGRAPH_WASM_PKG: another build's pkg directory (to count before and after).
import { readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..')
const pkg = resolve(process.env.SNAPGRAPH_WASM_PKG ?? join(root, 'examples', 'browser', 'pkg'))
const sg = await import(pathToFileURL(join(pkg, 'snapgraph_wasm.js')).href)
await sg.default({ module_or_path: readFileSync(join(pkg, 'snapgraph_wasm_bg.wasm')) })

const FILES = 2000
const SIZE = 4000
const DIRS = 20
const turns = Math.min(Number(process.argv[2] ?? 300), 300)
// SNAPGRAPH_WARM: turns run first in every run (0 and N alike), so the difference
// counts steady-state turns (V8's optimizing compiles of the loop and the glue happen
// during the first turns, on the main thread under --predictable).
const warm = Number(process.env.SNAPGRAPH_WARM ?? 0)

// xorshift32 bytes: content the commit cannot deduplicate (the page uses
// crypto.getRandomValues; any incompressible bytes do).
let state = 0x9e3779b9
function fill(buf) {
  const v = new DataView(buf.buffer, buf.byteOffset, buf.byteLength)
  for (let i = 0; i + 4 <= buf.length; i += 4) {
    state ^= state << 13
    state ^= state >>> 17
    state ^= state << 5
    v.setUint32(i, state >>> 0, true)
  }
  return buf
}
const path = (i) => `/d${String(i % DIRS).padStart(4, '0')}/f${String(i).padStart(6, '0')}.bin`

const ws = new sg.Workspace()
const store = new Map()
// The ids the store holds, in wasm memory (a build without `HaveSet`, counted for a
// before/after comparison, is asked through the Map).
const held = sg.HaveSet ? new sg.HaveSet() : null
const keep = (objects) => {
  for (const id in objects) store.set(id, objects[id])
  held?.addAll(objects)
}
for (let i = 0; i < FILES; i++) ws.write(path(i), fill(new Uint8Array(SIZE)))
keep(ws.commit({}).objects)
const data = Array.from({ length: warm + 300 }, () => fill(new Uint8Array(SIZE)))
for (let k = 0; k < warm + turns; k++) {
  ws.write(path((k * 7919) % FILES), data[k])
  keep(ws.commit({ parents: [ws.head()], have: held ?? store }).objects)
}
ws.free()
held?.free()
// Under `--expose-gc` (instructions.sh), collect once at the end so each run pays for
// the garbage its turns made, whenever V8 would have collected it.
globalThis.gc?.()
