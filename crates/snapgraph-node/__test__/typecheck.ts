// Compiled (not run) by `npm run typecheck`: the checked-in declarations describe the
// documented usage, and misuse is a type error.
import { Workspace, SnapshotGraph, Repo, open, type CommitResult, type Objects } from '../index.js'

const ws = new Workspace()
ws.write('/a.txt', Buffer.from('a'))
ws.write('/b.bin', new Uint8Array([1, 2]))
const first: CommitResult = ws.commit({ meta: { turn: '1' } })
const objects: Objects = first.objects
const packed: Buffer | null = first.packed
const second = ws.commit({ parents: [first.id], have: new Map(Object.entries(first.objects)) })
const diff = SnapshotGraph.diff(first.id, second.id, { ...objects, ...second.objects })
const added: string[] = diff.filesAdded
const restore = new Workspace().checkout(first.id, (id: string) => first.objects[id], { policy: 'force' })
restore.finish()
const repo: Repo = Repo.open('memory:')
const pending: Promise<unknown> = repo.commitAsync(ws, 'main', { message: 'm' })
open('memory:').putMany(first.objects)
const asMap = ws.commit({ parents: [second.id], have: new Set([first.id]), objectsAs: 'map' })
const map: Map<string, Buffer> = asMap.objects
const asRecord: CommitResult = ws.commit({ objectsAs: 'record' })
const later: Promise<Map<string, Buffer>> = ws.commitAsync({ objectsAs: 'map' }).then((c) => c.objects)
// @ts-expect-error: a map-shaped result's objects are not a record
const notRecord: Record<string, Buffer> = ws.commit({ objectsAs: 'map' }).objects
// @ts-expect-error: unknown shape
ws.commit({ objectsAs: 'Map' })
// @ts-expect-error: a string is not bytes
ws.write('/c', 'text')
// @ts-expect-error: unknown policy
ws.checkout(first.id, objects, { policy: 'lenient' })
void [packed, added, pending, map, asRecord, later, notRecord]
