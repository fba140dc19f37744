// The page as the benchmarks open it: served from this folder on 127.0.0.1, in
// Debian's chromium on a fresh profile, loaded and ready (`body[data-ready='1']`).

import { serve } from "./serve.mjs";
import { launch } from "./test/chromium.mjs";

/** `{ chrome, page, close }`; `close()` ends the browser and the server. */
export async function openPage() {
  const server = await serve(new URL(".", import.meta.url).pathname);
  const chrome = await launch();
  const close = async () => {
    await chrome.close();
    server.close();
  };
  try {
    const page = await chrome.context.newPage();
    await page.goto(`http://127.0.0.1:${server.address().port}/`);
    await page.waitForSelector("body[data-ready='1']");
    return { chrome, page, close };
  } catch (e) {
    await close();
    throw e;
  }
}
