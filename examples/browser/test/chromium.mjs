// Launches Debian's chromium through playwright-core with a fresh profile (so
// IndexedDB starts empty), the way every browser run here does (the test and the
// benchmark).

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { chromium } from "playwright-core";

/**
 * `{ context, close }`: a browser context on a fresh profile directory (playwright
 * passes it as `--user-data-dir`); `close()` ends the browser and removes the profile.
 */
export async function launch(options = {}) {
  const profile = mkdtempSync(join(tmpdir(), "snapgraph-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    ...options,
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
    ],
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
