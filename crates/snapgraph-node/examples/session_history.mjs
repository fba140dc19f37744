// Session history in SQLite, as Bashkit's Node docs show it: commit after every turn
// into an `objects` table (only what changed, `have` answered by the table), rewind to
// an earlier turn, diff two turns, restore on a fresh machine with a planCheckout fetch
// loop, and collect garbage by `reachable`.
//
//   npm install && npm run build && node examples/session_history.mjs
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'

const require = createRequire(import.meta.url)
const { Workspace, SnapshotGraph, CheckoutPlan } = require('../index.js') // 'snapgraph' once installed

const dir = mkdtempSync(join(tmpdir(), 'snapgraph-session-'))
const db = new Database(join(dir, 'session.db'))
db.exec(`
  CREATE TABLE objects (id TEXT PRIMARY KEY, bytes BLOB NOT NULL);
  CREATE TABLE turns (turn INTEGER PRIMARY KEY, commit_id TEXT NOT NULL);
`)
const putObject = db.prepare('INSERT OR IGNORE INTO objects (id, bytes) VALUES (?, ?)')
const getObject = db.prepare('SELECT bytes FROM objects WHERE id = ?').pluck()
const hasObject = db.prepare('SELECT 1 FROM objects WHERE id = ?').pluck()
const putTurn = db.prepare('INSERT INTO turns (turn, commit_id) VALUES (?, ?)')
const turnCommit = db.prepare('SELECT commit_id FROM turns WHERE turn = ?').pluck()
const countObjects = db.prepare('SELECT count(*) FROM objects').pluck()

// The table as the engine's object source: read one id at a time, every object re-hashed.
const table = { get: (id) => getObject.get(id), has: (id) => hasObject.get(id) !== undefined }

// Objects go in the order the commit lists them (referenced first, the commit last),
// in one transaction with the turn's row.
const persist = db.transaction((turn, commit) => {
  for (const [id, bytes] of Object.entries(commit.objects)) putObject.run(id, bytes)
  putTurn.run(turn, commit.id)
})

// ----- one commit per turn -----
const ws = new Workspace()
ws.setCapabilities({ builtins: ['cat', 'echo', 'ls'], features: [], fsBackend: 'memory' })
const source = (i, v) => Buffer.from(`export const v${i} = ${v}\n` + `// module ${i}: ${'lorem ipsum '.repeat(400)}\n`)
const mod = (i) => `/project/src/pkg${i % 5}/module${i}.js`
for (let i = 0; i < 50; i++) ws.write(mod(i), source(i, i))
let head = null
const written = []
for (let turn = 1; turn <= 8; turn++) {
  ws.write('/project/NOTES.md', Buffer.from(`# notes\n${'- turn\n'.repeat(turn)}`))
  ws.write(mod(turn), source(turn, turn * 100))
  if (turn === 5) ws.remove(mod(40))
  ws.setState(Buffer.from(JSON.stringify({ cwd: '/project', turn, env: { PS1: '$ ' } })))
  const commit = ws.commit({ parents: head ? [head] : [], have: table, meta: { turn: String(turn) } })
  persist(turn, commit)
  written.push(commit.objectCount)
  head = commit.id
}
console.log(`8 turns: objects written per turn ${written.join(', ')} (${countObjects.get()} in the table)`)
assert.ok(written.slice(1).every((n) => n < written[0] / 5), 'later turns write only what changed')
assert.deepEqual(SnapshotGraph.ancestry(head, table).length, 8)

// ----- rewind to turn 3 and go another way -----
const rewound = new Workspace()
rewound.setCapabilities({ builtins: ['cat', 'echo', 'ls'], features: [], fsBackend: 'memory' })
const restore = rewound.checkout(turnCommit.get(3), table)
restore.finish() // no external reads recorded: nothing to check
assert.equal(JSON.parse(rewound.state().toString()).turn, 3)
assert.ok(rewound.exists(mod(40)), 'removed at turn 5, still there at turn 3')
rewound.write('/project/ALT.md', Buffer.from('another way'))
const alt = rewound.commit({ parents: [turnCommit.get(3)], have: table, meta: { turn: '3b' } })
persist(100, alt)
console.log(`rewound to turn 3, branched: ${alt.id.slice(0, 12)} (${alt.objectCount} new objects)`)

// ----- diff two turns -----
const d = SnapshotGraph.diff(turnCommit.get(4), turnCommit.get(5), table)
console.log(`turn 4 -> 5: +${d.filesAdded.length} ~${d.filesModified.length} -${d.filesRemoved.length}, state changed: ${d.stateChanged}`)
assert.deepEqual(d.filesRemoved, [mod(40)])
assert.deepEqual(d.filesModified, ['/project/NOTES.md', mod(5)])
assert.equal(d.stateChanged, true)

// ----- restore on a machine that has nothing: fetch only what is missing, in rounds -----
const local = new Map()
const plan = new CheckoutPlan(head)
let rounds = 0
for (;;) {
  const missing = plan.missing(local)
  if (missing.length === 0) break
  rounds++
  const placeholders = missing.map(() => '?').join(',')
  const rows = db.prepare(`SELECT id, bytes FROM objects WHERE id IN (${placeholders})`).all(...missing)
  for (const row of rows) local.set(row.id, row.bytes)
}
const fresh = new Workspace()
fresh.setCapabilities({ builtins: ['cat', 'echo', 'ls'], features: [], fsBackend: 'memory' })
fresh.checkout(head, local)
assert.deepEqual(fresh.read('/project/NOTES.md'), ws.read('/project/NOTES.md'))
console.log(`fresh machine: ${local.size} objects fetched in ${rounds} rounds`)

// ----- GC: keep the last three turns and the branch, drop the rest -----
const keepCommits = [6, 7, 8, 100].map((t) => turnCommit.get(t))
const keep = new Set(keepCommits.flatMap((id) => SnapshotGraph.reachable(id, table)))
const before = countObjects.get()
const drop = db.prepare('SELECT id FROM objects').pluck().all().filter((id) => !keep.has(id))
const del = db.prepare('DELETE FROM objects WHERE id = ?')
db.transaction(() => drop.forEach((id) => del.run(id)))()
console.log(`gc: kept ${keep.size} objects, deleted ${drop.length} of ${before}`)
for (const id of keepCommits) new Workspace().checkout(id, table, { policy: 'force' })
try {
  new Workspace().checkout(turnCommit.get(1), table, { policy: 'force' })
  assert.fail('turn 1 was collected')
} catch (e) {
  assert.equal(e.code, 'NOT_FOUND')
  console.log(`turn 1 is gone: ${e.code}: ${e.message}`)
}

db.close()
rmSync(dir, { recursive: true, force: true })
console.log('session history example: ok')
