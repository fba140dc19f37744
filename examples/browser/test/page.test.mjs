// The page in a real browser: Debian's chromium driven by playwright-core.
//
// Serves examples/browser on 127.0.0.1, then, as a person would: writes files, commits
// twice, reloads (the history is still there: IndexedDB), rewinds to the first commit
// (its files come back), diffs the two commits, forks, opens a pack file written by
// the `snapgraph pack` CLI, then a tampered copy (a typed error, nothing changes), and
// runs the in-page benchmark. Saves screenshots under target/.
//
// Environment: SNAPGRAPH_CLI (the snapgraph binary, for the pack file), CHROMIUM
// (default /usr/bin/chromium), SNAPGRAPH_SHOTS (screenshot folder, default
// <repo>/target/browser), SNAPGRAPH_BENCH_OUT (file for the benchmark's JSON).

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import { serve } from "../serve.mjs";
import { launch } from "./chromium.mjs";

const root = fileURLToPath(new URL("..", import.meta.url));
const repo = join(root, "..", "..");
const shots = process.env.SNAPGRAPH_SHOTS ?? join(repo, "target", "browser");
mkdirSync(shots, { recursive: true });

let server;
let chrome;
let page;
let base;
let work;
const errors = [];

before(async () => {
  work = mkdtempSync(join(tmpdir(), "snapgraph-browser-"));
  server = await serve(root);
  base = `http://127.0.0.1:${server.address().port}/`;
  chrome = await launch({ viewport: { width: 1360, height: 1100 } });
  page = await chrome.context.newPage();
  // Uncaught exceptions only: errors the page shows are console.error'd on purpose.
  page.on("pageerror", (e) => errors.push(String(e)));
});

after(async () => {
  await chrome?.close();
  await new Promise((r) => server?.close(r));
  rmSync(work, { recursive: true, force: true });
});

const byTest = (id) => page.locator(`[data-testid="${id}"]`);

async function ready() {
  await page.waitForSelector("body[data-ready='1']");
}

async function idle() {
  await page.waitForFunction(() => !document.body.dataset.busy);
}

async function addFile(path, content) {
  await byTest("new-path").fill(path);
  await byTest("new-file").click();
  await idle();
  await byTest("content").fill(content);
  await byTest("save").click();
  await idle();
}

async function commit(message) {
  await byTest("message").fill(message);
  await byTest("commit").click();
  await idle();
  await assertNoError();
}

async function historyIds() {
  return page.locator("#history li").evaluateAll((lis) => lis.map((li) => li.dataset.id));
}

async function fileList() {
  return page.locator("#file-list li").evaluateAll((lis) => lis.map((li) => li.dataset.path));
}

async function openFile(path) {
  await page.locator(`#file-list li[data-path="${path}"]`).click();
  return byTest("content").inputValue();
}

async function assertNoError() {
  if (await byTest("error").isVisible()) {
    assert.fail(`page error: ${await byTest("error-code").textContent()} ${await byTest("error-message").textContent()}`);
  }
}

/** A pack file made by the CLI from a small directory (null without SNAPGRAPH_CLI). */
function cliPack() {
  const cli = process.env.SNAPGRAPH_CLI;
  assert.ok(cli, "SNAPGRAPH_CLI names the snapgraph binary (scripts/browser-test sets it)");
  const dir = join(work, "repo");
  mkdirSync(join(dir, "docs"), { recursive: true });
  writeFileSync(join(dir, "docs", "hello.txt"), "hello from the CLI\n");
  writeFileSync(join(dir, "README.md"), "# packed by snapgraph pack\n");
  execFileSync(cli, ["init", dir], { stdio: "pipe" });
  execFileSync(cli, ["-C", dir, "commit", "-m", "for the browser"], { stdio: "pipe" });
  const out = join(work, "cli.snap");
  execFileSync(cli, ["-C", dir, "pack", "main", "-o", out], { stdio: "pipe" });
  return out;
}

test("the page keeps a workspace's history in IndexedDB", async () => {
  await page.goto(base);
  await ready();
  await assertNoError();
  assert.deepEqual(await fileList(), ["/README.md"], "a fresh page starts with a README");

  // Write files, commit twice.
  await addFile("/notes/plan.md", "step one\n");
  await commit("first turn");
  let ids = await historyIds();
  assert.equal(ids.length, 1);
  const first = ids[0];
  assert.match(first, /^[0-9a-f]{64}$/);
  assert.equal(await byTest("head").getAttribute("data-id"), first);

  assert.equal(await openFile("/notes/plan.md"), "step one\n");
  await byTest("content").fill("step one\nstep two\n");
  await addFile("/src/main.js", "console.log('hi');\n");
  await commit("second turn");
  ids = await historyIds();
  assert.equal(ids.length, 2);
  const second = ids[0];
  assert.equal(ids[1], first);
  const history = await byTest("history").innerText();
  assert.match(history, /second turn/);
  assert.match(history, /gen 2/);
  assert.match(history, /gen 1/);
  await page.screenshot({ path: join(shots, "1-two-commits.png"), fullPage: true });

  // Reload: the history comes back from IndexedDB, the workspace is at the tip.
  await page.reload();
  await ready();
  await assertNoError();
  assert.deepEqual(await historyIds(), [second, first]);
  assert.deepEqual(await fileList(), ["/README.md", "/notes/plan.md", "/src/main.js"]);
  assert.equal(await openFile("/notes/plan.md"), "step one\nstep two\n");

  // A diff lists the change.
  await page.locator(`#history li[data-id="${first}"] [data-testid="pick-A"]`).check();
  await page.locator(`#history li[data-id="${second}"] [data-testid="pick-B"]`).check();
  await byTest("diff").click();
  await idle();
  await assertNoError();
  const lines = await page.locator('[data-testid="diff-line"]').allInnerTexts();
  // In path order, from the diff's `changes`: kind, sizes before and after.
  assert.deepEqual(lines, ["~ /notes/plan.md (9 B → 18 B)", "+ /src/main.js (19 B)"]);

  // Rewind to the first commit: its files come back, the branch moves.
  await page.locator(`#history li[data-id="${first}"] [data-testid="rewind"]`).click();
  await idle();
  await assertNoError();
  assert.deepEqual(await fileList(), ["/README.md", "/notes/plan.md"]);
  assert.equal(await openFile("/notes/plan.md"), "step one\n");
  assert.deepEqual(await historyIds(), [first]);
  assert.equal(await byTest("head").getAttribute("data-id"), first);

  // Fork at the first commit: a new branch, committed on independently.
  await page.locator(`#history li[data-id="${first}"] [data-testid="fork"]`).click();
  await idle();
  await assertNoError();
  assert.equal(await byTest("branch").inputValue(), "fork-1");
  await addFile("/fork.txt", "only on the fork\n");
  await commit("fork turn");
  assert.equal((await historyIds()).length, 2);
  await byTest("branch").selectOption("main");
  await idle();
  assert.deepEqual(await historyIds(), [first]);
  assert.ok(!(await fileList()).includes("/fork.txt"));
});

test("a pack file from snapgraph pack is browsable; a tampered one is refused and changes nothing", async () => {
  const packPath = cliPack();
  await byTest("pack-file").setInputFiles(packPath);
  await page.locator("#pack-list li").first().waitFor();
  await idle();
  await assertNoError();
  const packed = await page.locator("#pack-list li").evaluateAll((lis) => lis.map((li) => li.dataset.path));
  assert.deepEqual(packed, ["/README.md", "/docs/hello.txt"]);
  await page.locator('#pack-list li[data-path="/docs/hello.txt"]').click();
  assert.equal(await byTest("pack-view").textContent(), "hello from the CLI\n");

  const beforeHistory = await historyIds();
  const beforeFiles = await fileList();
  const beforeBranches = await byTest("branch").locator("option").allTextContents();

  const bytes = readFileSync(packPath);
  bytes[bytes.length >> 1] ^= 0x01;
  const tampered = join(work, "tampered.snap");
  writeFileSync(tampered, bytes);
  await byTest("pack-file").setInputFiles(tampered);
  await byTest("error").waitFor({ state: "visible", timeout: 10_000 });
  await idle();
  assert.equal(await byTest("error-code").textContent(), "CORRUPT");
  assert.match(await byTest("error-message").textContent(), /corrupt/i);
  await page.screenshot({ path: join(shots, "2-tampered-snapshot.png"), fullPage: true });
  // Nothing changed: the opened pack, the workspace, the history, the branches.
  assert.equal(await byTest("pack-view").textContent(), "hello from the CLI\n");
  assert.deepEqual(await historyIds(), beforeHistory);
  assert.deepEqual(await fileList(), beforeFiles);
  assert.deepEqual(await byTest("branch").locator("option").allTextContents(), beforeBranches);
  await page.locator("#error-close").click();

  // The intact pack imports as a branch.
  await byTest("pack-file").setInputFiles(packPath);
  await page.waitForFunction(() => document.getElementById("notice").textContent.startsWith("opened"));
  await idle();
  await byTest("pack-import").click();
  await idle();
  await assertNoError();
  assert.match(await byTest("branch").inputValue(), /^unpacked-[0-9a-f]{12}$/);
  assert.deepEqual(await fileList(), ["/README.md", "/docs/hello.txt"]);
});

test("the IndexedDB store: compare-and-swap refs, atomic batches, reflog, objects", async () => {
  const r = await page.evaluate(async () => {
    const { IdbStore } = await import("./idb-store.js");
    const store = await IdbStore.open("store-test");
    const a = "a".repeat(64);
    const b = "b".repeat(64);
    const code = async (p) => p.then(() => "ok", (e) => e.code);
    const out = {};
    out.create = await code(store.compareAndSwapRef("heads/x", null, a, "create"));
    out.createAgain = await code(store.compareAndSwapRef("heads/x", null, b, "again"));
    out.stale = await code(store.compareAndSwapRef("heads/x", b, a, "stale"));
    out.move = await code(store.compareAndSwapRef("heads/x", a, b, "move"));
    // A batch with one bad expectation applies nothing.
    out.batch = await code(
      store.updateRefs(
        [
          { name: "heads/y", expected: null, new: a },
          { name: "heads/x", expected: a, new: a },
        ],
        "batch",
      ),
    );
    out.yAfterBatch = await store.getRef("heads/y");
    // A guard (expected == new) that holds lets the batch through.
    out.guarded = await code(
      store.updateRefs(
        [
          { name: "heads/y", expected: null, new: a },
          { name: "heads/x", expected: b, new: b },
        ],
        "guarded",
      ),
    );
    out.twice = await code(
      store.updateRefs(
        [
          { name: "heads/z", expected: null, new: a },
          { name: "heads/z", expected: null, new: b },
        ],
        "twice",
      ),
    );
    out.badNames = await Promise.all(["", "heads/../x", "/lead", "sp ace", "x".repeat(256)].map((n) => code(store.getRef(n))));
    out.badId = await code(store.compareAndSwapRef("heads/w", null, "nope", ""));
    out.delete = await code(store.deleteRef("heads/y", a, "delete"));
    out.refs = await store.listRefs("heads/");
    out.reflogX = await store.reflog("heads/x");
    out.reflogY = (await store.reflog("heads/y")).map((e) => e.message);
    await store.putMany([[a, new Uint8Array([1, 2, 3])]]);
    out.absent = await store.hasMany([a, b]);
    out.got = (await store.getMany([a, b])).map((v) => (v ? [...v] : null));
    await store.deleteMany([a]);
    out.afterDelete = await store.hasMany([a]);
    store.close();
    return out;
  });
  assert.equal(r.create, "ok");
  assert.equal(r.createAgain, "REF_CONFLICT");
  assert.equal(r.stale, "REF_CONFLICT");
  assert.equal(r.move, "ok");
  assert.equal(r.batch, "REF_CONFLICT");
  assert.equal(r.yAfterBatch, null, "nothing of a refused batch applies");
  assert.equal(r.guarded, "ok");
  assert.equal(r.twice, "INVALID_REF");
  assert.deepEqual(r.badNames, Array(5).fill("INVALID_REF"));
  assert.equal(r.badId, "INVALID_ID");
  assert.equal(r.delete, "ok");
  assert.deepEqual(r.refs, [["heads/x", "b".repeat(64)]]);
  assert.deepEqual(r.reflogX, [
    { old: null, new: "a".repeat(64), message: "create" },
    { old: "a".repeat(64), new: "b".repeat(64), message: "move" },
  ]);
  assert.deepEqual(r.reflogY, ["guarded", "delete"]);
  assert.deepEqual(r.absent, ["b".repeat(64)]);
  assert.deepEqual(r.got, [[1, 2, 3], null]);
  assert.deepEqual(r.afterDelete, ["a".repeat(64)]);
});

test("the page times a 2,000-file per-turn commit", async () => {
  await byTest("bench").click();
  await idle();
  await page.waitForFunction(() => window.__bench !== undefined, null, { timeout: 300_000 });
  await assertNoError();
  const r = await page.evaluate(() => window.__bench);
  assert.equal(r.files, 2000);
  assert.ok(r.medianUs > 0 && Number.isFinite(r.medianUs));
  assert.match(await byTest("bench-out").textContent(), /per-turn commit at 2000 files: median \d+ µs/);
  await page.screenshot({ path: join(shots, "3-page.png"), fullPage: true });
  const out = process.env.SNAPGRAPH_BENCH_OUT;
  if (out) writeFileSync(out, JSON.stringify(r, null, 2) + "\n");
  assert.deepEqual(errors, [], "no uncaught page errors");
});
