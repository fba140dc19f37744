// Runs the page's per-turn benchmark in Debian's chromium and prints its JSON:
// `node bench.mjs` (scripts/browser-bench runs it next to the native figure).

import { serve } from "./serve.mjs";
import { launch } from "./test/chromium.mjs";

const server = await serve(new URL(".", import.meta.url).pathname);
const chrome = await launch();
try {
  const page = await chrome.context.newPage();
  await page.goto(`http://127.0.0.1:${server.address().port}/`);
  await page.waitForSelector("body[data-ready='1']");
  await page.click("[data-testid='bench']");
  await page.waitForFunction(() => window.__bench !== undefined, null, { timeout: 600_000 });
  console.log(JSON.stringify(await page.evaluate(() => window.__bench)));
} finally {
  await chrome.close();
  server.close();
}
