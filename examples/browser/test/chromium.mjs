// Launches Debian's chromium through playwright-core with a fresh profile, the way
// every browser run here does (the test and the benchmark).

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { chromium } from "playwright-core";

/** `{ browser, close }`: `close()` ends the browser and removes its profile. */
export async function launch() {
  const profile = mkdtempSync(join(tmpdir(), "snapgraph-chromium-"));
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
      // A fresh profile every run, so IndexedDB starts empty.
      `--user-data-dir=${profile}`,
    ],
  });
  return {
    browser,
    close: async () => {
      await browser.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
