// @ts-check
// A kernel thread (threads.js starts it as a module Worker from the engine's Worker):
// one message gives it the shared WebAssembly memory, the compiled module and its slot
// of the shared control buffer; from then on it waits (Atomics.wait) for a job number
// in its slot, runs the job on its own instance of the module over the same memory,
// and says it is done (Atomics.notify). It posts nothing back.
import { DONE, FAILED, OP_STOP, READY, SEQ, SLOT_BYTES, argsAt, runJob } from "./thread-jobs.js";

/**
 * What the thread is sent once.
 * @typedef {object} ThreadStart
 * @property {WebAssembly.Memory} memory shared
 * @property {WebAssembly.Module} module compiled for a shared memory
 * @property {SharedArrayBuffer} control
 * @property {number} slot this thread's slot of the control buffer
 */

/**
 * Serve jobs until the stop job (a worker's script calls this with its first message;
 * tests/js calls it from a Node worker thread).
 * @param {ThreadStart} start
 */
export function serve({ memory, module, control, slot }) {
  const instance = new WebAssembly.Instance(module, { env: { memory } });
  const kernels = /** @type {import("./thread-jobs.js").JobExports} */ (/** @type {unknown} */ (instance.exports));
  const i32 = new Int32Array(control);
  const f64 = new Float64Array(control);
  const base = (slot * SLOT_BYTES) / 4;
  Atomics.store(i32, base + READY, 1);
  Atomics.notify(i32, base + READY);
  let seen = Atomics.load(i32, base + SEQ);
  for (;;) {
    Atomics.wait(i32, base + SEQ, seen);
    const seq = Atomics.load(i32, base + SEQ);
    if (seq === seen) continue;
    seen = seq;
    if (f64[argsAt(slot)] === OP_STOP) return;
    try {
      runJob(kernels, f64, slot);
    } catch {
      Atomics.store(i32, base + FAILED, 1);
    }
    Atomics.store(i32, base + DONE, seq);
    Atomics.notify(i32, base + DONE);
  }
}

// In a browser's Worker (a `self` without a document; Node has no `self`): the first
// message starts the thread.
if (typeof self !== "undefined" && typeof document === "undefined") {
  self.onmessage = (event) => serve(event.data);
}
