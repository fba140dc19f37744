// Runs the page's per-turn benchmark in Debian's chromium and prints its JSON:
// `node bench.mjs` (scripts/browser-bench runs it next to the native figure): the
// page's button. `node bench.mjs '{"warmup": 50}'` calls `benchmark()` with these
// options instead.

import { serve } from "./serve.mjs";
import { launch } from "./test/chromium.mjs";

const server = await serve(new URL(".", import.meta.url).pathname);
const chrome = await launch();
try {
  const page = await chrome.context.newPage();
  await page.goto(`http://127.0.0.1:${server.address().port}/`);
  await page.waitForSelector("body[data-ready='1']");
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
  await chrome.close();
  server.close();
}
