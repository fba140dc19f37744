// Where the page's per-turn time goes that the median does not show: runs the page's
// benchmark in Debian's chromium with a Chrome trace recorded (V8's collector, wasm
// compilation and tier-up, the page's tasks) and prints, as JSON, what the page saw
// (`crossOriginIsolated`, the timer's resolution, wasm memory before and after) and
// what the trace holds inside the timed batches.
//
//   node bench-trace.mjs [trace.json] [options as JSON]   (after scripts/build-wasm)
//
// The options go to the page's `benchmark()` (e.g. '{"warmup": 500}').

import { writeFileSync } from "node:fs";

import { openPage } from "./bench-page.mjs";

const out = process.argv[2];
const options = JSON.parse(process.argv[3] ?? "{}");
const { chrome, page, close } = await openPage();
try {
  const cdp = await chrome.context.newCDPSession(page);
  const events = [];
  cdp.on("Tracing.dataCollected", (e) => events.push(...e.value));
  const done = new Promise((resolve) => cdp.once("Tracing.tracingComplete", resolve));
  await cdp.send("Tracing.start", {
    transferMode: "ReportEvents",
    traceConfig: {
      includedCategories: [
        "v8",
        "v8.wasm",
        "devtools.timeline",
        "disabled-by-default-v8.gc",
        "disabled-by-default-v8.wasm.detailed",
        "blink.user_timing",
      ],
    },
  });
  const seen = await page.evaluate(async (options) => {
    const m = await import("./app.js");
    // Timer resolution: the smallest non-zero step of performance.now().
    let step = Infinity;
    for (let i = 0, last = performance.now(); i < 100_000; i++) {
      const t = performance.now();
      if (t !== last) step = Math.min(step, t - last);
      last = t;
    }
    const r = m.benchmark({ ...options, marks: true });
    return { crossOriginIsolated, timerStepUs: step * 1000, ...r };
  }, options);
  await cdp.send("Tracing.end");
  await done;
  if (out) writeFileSync(out, JSON.stringify({ traceEvents: events }));

  // The timed batches, from the page's user-timing marks, and what ran inside them.
  const marks = events.filter((e) => e.cat === "blink.user_timing" && /^batch/.test(e.name));
  const spans = [];
  for (const e of marks) {
    if (e.ph === "b" || e.ph === "R" || e.ph === "I" || e.ph === "n" || e.ph === "i") spans.push(e);
  }
  const begins = events.filter((e) => e.name === "batch" && (e.ph === "b" || e.ph === "B"));
  const ends = events.filter((e) => e.name === "batch" && (e.ph === "e" || e.ph === "E"));
  const windows = begins.map((b, i) => [b.ts, ends[i]?.ts ?? b.ts]);
  const inside = (e) => windows.some(([s, t]) => e.ts >= s && e.ts <= t);
  const sum = {};
  for (const e of events) {
    if (e.ph !== "X" || !inside(e)) continue;
    const k = `${e.cat} ${e.name}`;
    sum[k] ??= { count: 0, us: 0 };
    sum[k].count++;
    sum[k].us += e.dur ?? 0;
  }
  const top = Object.entries(sum)
    .sort((a, b) => b[1].us - a[1].us)
    .slice(0, 25)
    .map(([k, v]) => `${k}: ${v.count} x, ${Math.round(v.us)} us`);
  const batchUs = windows.map(([s, t]) => t - s);
  // Optimizing (top-tier) wasm compiles and collections that overlap each batch.
  const tierUps = events.filter((e) => e.ph === "X" && e.name === "wasm.TopTierCompilation");
  const collections = events.filter((e) => e.ph === "X" && (e.name === "MinorGC" || e.name === "MajorGC"));
  const overlapping = (list) =>
    windows.map(([s, t]) => list.filter((e) => e.ts < t && e.ts + (e.dur ?? 0) > s).length);
  const tierUpsPerBatch = overlapping(tierUps);
  const collectionsPerBatch = overlapping(collections);
  const lastTierUp = tierUpsPerBatch.findLastIndex((n) => n > 0);
  console.log(
    JSON.stringify({
      ...seen,
      batches: windows.length,
      batchUs: batchUs.join(" "),
      tierUpsPerBatch: tierUpsPerBatch.join(""),
      collectionsPerBatch: collectionsPerBatch.join(""),
      batchesAfterLastTierUp: windows.length - 1 - lastTierUp,
      insideBatches: top,
    }, null, 1),
  );
} finally {
  await close();
}
