// Runs a wasm32-wasip1 test binary under Node's WASI, with the repository preopened
// at its own absolute path (the test finds corpus/ through CARGO_MANIFEST_DIR).
// Usage: node run-wasi.mjs <repo dir> <file.wasm> [test args...]; exits with the
// program's exit code.
import { readFile } from "node:fs/promises";
import process from "node:process";
import { WASI } from "node:wasi";

const [repo, wasmPath, ...args] = process.argv.slice(2);
const wasi = new WASI({
  version: "preview1",
  args: [wasmPath, ...args],
  env: {},
  preopens: { [repo]: repo },
  returnOnExit: true,
});
const imports = wasi.getImportObject();
// Node 20 crashes (SIGSEGV in V8, after the program's last write) when the module
// calls the WASI functions directly, as the corpus test does once it has read and
// restored the snapshots; calling them through a JavaScript function does not.
const preview1 = imports.wasi_snapshot_preview1;
for (const [name, f] of Object.entries(preview1)) {
  preview1[name] = (...a) => f(...a);
}
const module = await WebAssembly.compile(await readFile(wasmPath));
const instance = await WebAssembly.instantiate(module, imports);
process.exitCode = wasi.start(instance);
