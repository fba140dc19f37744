// The page's per-turn commit by CPU time of the page's main thread (Linux), which a
// loaded machine disturbs far less than the wall clock: the page's `turnLoop()` in
// Debian's chromium, `rounds` rounds of `turns` turns after `warmup` turns; the
// renderer's main thread is read from /proc/<pid>/task/<tid>/schedstat
// (nanoseconds on a CPU) before and after each round. A round with no turns measures
// the driver's own cost per round (one DevTools call), which is subtracted. Prints one
// JSON line; `scripts/browser-bench --cpu` prints it next to the native figure
// (`turns_native cpu`, the same rounds).
//
//   node bench-cpu.mjs [rounds = 15] [turns = 200] [warmup = 1000]

import { readFileSync, readdirSync } from "node:fs";

import { openPage } from "./bench-page.mjs";

const [rounds, turns, warmup] = [15, 200, 1000].map((d, i) => Number(process.argv[2 + i] ?? d));

/** Nanoseconds on a CPU of each renderer's main thread (the thread whose id is the
 * process's), by process id. */
function rendererThreads() {
  const out = new Map();
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      if (!/--type=renderer\b/.test(readFileSync(`/proc/${pid}/cmdline`, "utf8"))) continue;
      out.set(pid, Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, "utf8").split(" ")[0]));
    } catch {
      // the process ended
    }
  }
  return out;
}

const { page, close } = await openPage();
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
try {
  await page.evaluate(async () => {
    const m = await import("./app.js");
    window.__loop = m.turnLoop();
  });
  for (let done = 0; done < warmup; done += 100) {
    await page.evaluate((n) => {
      window.__loop.prepare(n);
      window.__loop.run();
    }, Math.min(100, warmup - done));
  }
  // The page's main thread: the renderer thread that ran the warm-up (the most CPU).
  const threads = rendererThreads();
  const [pid] = [...threads].sort((a, b) => b[1] - a[1])[0] ?? [];
  if (!pid) throw new Error("bench-cpu: no chromium renderer found in /proc");
  const cpu = () => Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, "utf8").split(" ")[0]);
  const round = async (n) => {
    await page.evaluate((k) => window.__loop.prepare(k), n);
    const c0 = cpu();
    const w0 = performance.now();
    await page.evaluate(() => window.__loop.run());
    return [cpu() - c0, performance.now() - w0];
  };
  const empty = [];
  const full = [];
  const wall = [];
  for (let r = 0; r < rounds; r++) {
    empty.push((await round(0))[0]);
    const [c, w] = await round(turns);
    full.push(c);
    wall.push(w);
  }
  const overhead = median(empty);
  const perTurn = full.map((c) => (c - overhead) / turns / 1000);
  console.log(
    JSON.stringify({
      files: 2000,
      rounds,
      turns,
      warmup,
      cpuMedianUs: Math.round(median(perTurn)),
      cpuMinUs: Math.round(Math.min(...perTurn)),
      wallMedianUs: Math.round((median(wall) * 1000) / turns),
      driverUsPerRound: Math.round(overhead / 1000),
    }),
  );
  await page.evaluate(() => window.__loop.free());
} finally {
  await close();
}
