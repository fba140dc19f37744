// Runs the page's per-turn benchmark in Debian's chromium and prints its JSON:
// `node bench.mjs` (scripts/browser-bench runs it next to the native figure): the
// page's button. `node bench.mjs '{"warmup": 50}'` calls `benchmark()` with these
// options instead.

import { openPage } from "./bench-page.mjs";

const { page, close } = await openPage();
try {
  if (process.argv[2]) {
    const options = JSON.parse(process.argv[2]);
    const r = await page.evaluate(async (o) => (await import("./app.js")).benchmark(o), options);
    console.log(JSON.stringify({ ...options, ...r }));
  } else {
    await page.click("[data-testid='bench']");
    await page.waitForFunction(() => window.__bench !== undefined, null, { timeout: 600_000 });
    console.log(JSON.stringify(await page.evaluate(() => window.__bench)));
  }
} finally {
  await close();
}
