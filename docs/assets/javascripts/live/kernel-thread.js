// @ts-check
// A kernel thread (threads.js starts it as a module Worker from the engine's Worker):
// one message gives it the shared WebAssembly memory, the compiled module, the shared
// control buffer and its number; from then on it sleeps (Atomics.wait) until a job is
// posted, takes chunks of it on its own instance of the module over the same memory
// until none is left (thread-jobs.js), and sleeps again. It posts nothing back.
import { READY, SEQ, STOP, takeChunks } from "./thread-jobs.js";

/**
 * What the thread is sent once.
 * @typedef {object} ThreadStart
 * @property {WebAssembly.Memory} memory shared
 * @property {WebAssembly.Module} module compiled for a shared memory
 * @property {SharedArrayBuffer} control
 * @property {number} thread this thread's number (1 ..)
 */

/**
 * Take jobs' chunks until told to stop (a worker's script calls this with its first
 * message; tests/js calls it from a Node worker thread).
 * @param {ThreadStart} start
 */
export function serve({ memory, module, control, thread }) {
  const instance = new WebAssembly.Instance(module, { env: { memory } });
  const kernels = /** @type {import("./thread-jobs.js").JobExports} */ (/** @type {unknown} */ (instance.exports));
  const shared = { i32: new Int32Array(control), f64: new Float64Array(control) };
  const { i32 } = shared;
  let seen = Atomics.load(i32, SEQ);
  Atomics.store(i32, READY + thread, 1);
  Atomics.notify(i32, READY + thread);
  for (;;) {
    Atomics.wait(i32, SEQ, seen);
    if (Atomics.load(i32, STOP)) return;
    seen = Atomics.load(i32, SEQ);
    takeChunks(kernels, shared);
  }
}

// In a browser's Worker (a `self` without a document; Node has no `self`): the first
// message starts the thread.
if (typeof self !== "undefined" && typeof document === "undefined") {
  self.onmessage = (event) => serve(event.data);
}
