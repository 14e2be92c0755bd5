// @ts-check
// More cores for the WebAssembly kernels. ThreadedKernels is kernels.js's WasmKernels on
// a shared WebAssembly.Memory, with kernel threads (kernel-thread.js, one module Worker
// each) that run their own instance of the same module over that memory. A product is
// split by output rows into chunks (a few a thread), which the threads and the engine's
// own take as they come free (thread-jobs.js: a busy machine that wakes one thread late
// then slows nothing). For many tokens, a chunk's rows are dequantised by the thread that
// multiplies every token by them; for one token (the logits), a chunk is its rows of the
// fused product. Every output value is the same arithmetic as on one thread, bit for
// bit: rows are split, sums never are. The jobs travel as numbers in a shared control
// buffer; the engine's thread waits (Atomics.wait) for the chunks others took.
//
// Threads need a SharedArrayBuffer, which a browser gives a cross-origin-isolated page
// only; a static site becomes one through a service worker that adds the COOP/COEP
// headers (docs/coi-serviceworker.js). Elsewhere (file://, no isolation) the page runs on
// one thread and its kernels' name says why (newKernels).
import { WasmKernels } from "./kernels.js";
import { moduleBytes } from "./wasm-module.js";
import {
  CONTROL_BYTES, DEQUANT_NONE, DEQUANT_Q4_1, DEQUANT_Q8_0, DONE, FAILED, MAX_THREADS as MOST, OP_MATMUL, OP_MATVEC,
  READY, SEQ, STOP, postJob, takeChunks,
} from "./thread-jobs.js";

export const MAX_THREADS = Math.min(8, MOST);
const MIN_SPLIT = 1 << 16; // multiply-adds below which a product stays on one thread (default)
const VECTOR_MIN_SPLIT = 1 << 20; // the same for one token's product (default: the logits, not a layer's)
const CHUNKS_PER_THREAD = 4; // a product's chunks: enough that a slow thread's share is taken by the others
const START_TIMEOUT_MS = 10000; // (default)
const SPINS = 2000; // loads of the "done" word before the engine's thread sleeps on it
const ANSWER_TIMEOUT_MS = 60000; // a chunk not done in a minute: its thread is gone
/** @type {Record<string, number>} */
const QUANT = { Q4_1: DEQUANT_Q4_1, Q8_0: DEQUANT_Q8_0 }; // the types a thread dequantises itself

/** @typedef {import("./jskernels.js").LinearWeight} LinearWeight */
/** @typedef {import("./gguf.js").Tensor} Tensor */

/**
 * What a kernel thread is to the pool: a browser's Worker, or a test's adapter around
 * Node's worker_threads.
 * @typedef {object} ThreadWorker
 * @property {(message: unknown) => void} postMessage
 * @property {() => unknown} terminate
 */

/**
 * @typedef {object} ThreadOptions
 * @property {number} threads how many threads compute, the engine's own included
 * @property {boolean} [relaxed] relaxed SIMD's multiply-add where the engine has it
 * @property {() => ThreadWorker} [spawn] starts one kernel thread (default: kernel-thread.js in a module Worker)
 * @property {number} [minSplit] multiply-adds below which a product stays on one thread
 * @property {number} [vectorMinSplit] the same for one token's fused product (matvec)
 * @property {number} [startTimeoutMs] how long startThreads waits for the threads
 */

/** @returns {ThreadWorker} */
const spawnWorker = () => new Worker(new URL("./kernel-thread.js", import.meta.url), { type: "module" });

/**
 * Why this page cannot run threads, or null when it can.
 * @returns {string | null}
 */
export function threadsUnavailable() {
  if (globalThis.crossOriginIsolated !== true) return "the page is not cross-origin isolated";
  if (typeof SharedArrayBuffer === "undefined") return "this browser gives the page no SharedArrayBuffer";
  if (typeof Worker === "undefined") return "this browser starts no Worker from a Worker";
  try {
    if (!WebAssembly.validate(moduleBytes(false, true))) return "this browser shares no WebAssembly memory";
  } catch {
    return "this browser shares no WebAssembly memory";
  }
  if ((navigator.hardwareConcurrency || 1) < 2) return "the machine has one core";
  return null;
}

/**
 * The kernels for a file of `fileLength` bytes: threaded where the page may share memory
 * (start them with startThreads), else WebAssembly on one thread, its name saying why.
 * Outside a browser (Node: no `crossOriginIsolated`), one thread, named as before.
 * @param {number} fileLength
 * @returns {WasmKernels}
 */
export function newKernels(fileLength) {
  if (typeof globalThis.crossOriginIsolated === "undefined") return new WasmKernels(fileLength);
  let why = threadsUnavailable();
  if (why === null) {
    try {
      return new ThreadedKernels(fileLength, { threads: Math.min(MAX_THREADS, navigator.hardwareConcurrency) });
    } catch (error) { // e.g. no room to reserve a shared memory's maximum (a 32-bit browser)
      why = `no shared memory: ${error instanceof Error ? error.message : String(error)}`;
    }
  }
  const kernels = new WasmKernels(fileLength);
  kernels.name += `, 1 thread: ${why}`;
  return kernels;
}

/**
 * Start the kernel threads of `kernels` if it is ThreadedKernels (once; before the model
 * runs: a Worker starts only while its parent's event loop turns).
 * @param {WasmKernels | null} kernels
 * @returns {Promise<number>} the threads that compute
 */
export async function startThreads(kernels) {
  return kernels instanceof ThreadedKernels ? kernels.startThreads() : 1;
}

/**
 * The rows of one chunk of a product of `rows` rows on `threads` threads: a multiple of 4
 * (matmul's tile), CHUNKS_PER_THREAD chunks a thread.
 * @param {number} rows
 * @param {number} threads
 * @returns {number}
 */
export function chunkRows(rows, threads) {
  return Math.max(4, Math.ceil(rows / (threads * CHUNKS_PER_THREAD) / 4) * 4);
}

/** WasmKernels whose products are split by rows across kernel threads. */
export class ThreadedKernels extends WasmKernels {
  /**
   * @param {number} fileLength
   * @param {ThreadOptions} options
   */
  constructor(fileLength, { threads, relaxed = true, spawn = spawnWorker, minSplit = MIN_SPLIT, vectorMinSplit = VECTOR_MIN_SPLIT,
    startTimeoutMs = START_TIMEOUT_MS }) {
    super(fileLength, relaxed, true);
    this.minSplit = minSplit;
    this.vectorMinSplit = vectorMinSplit;
    this.startTimeoutMs = startTimeoutMs;
    this.baseName = this.name;
    this.wanted = Math.min(MOST, Math.max(1, Math.floor(threads)));
    this.spawn = spawn;
    this.threads = 1; // computing now: the engine's own, until startThreads
    /** @type {ThreadWorker[]} */
    this.workers = [];
    this.control = new SharedArrayBuffer(CONTROL_BYTES);
    this.shared = { i32: new Int32Array(this.control), f64: new Float64Array(this.control) };
    this.name = `${this.baseName}, 1 thread: the kernel threads are not started`;
  }

  /**
   * Start the kernel threads and wait until each has its instance; on failure (no
   * Worker, a timeout) stay on one thread, the name saying so.
   * @returns {Promise<number>} the threads that compute, the engine's own included
   */
  async startThreads() {
    if (this.workers.length || this.wanted < 2) {
      if (this.wanted < 2) this.name = `${this.baseName}, 1 thread`;
      return this.threads;
    }
    const { i32 } = this.shared;
    try {
      for (let thread = 1; thread < this.wanted; thread++) {
        const worker = this.spawn();
        this.workers.push(worker);
        worker.postMessage({ memory: this.memory, module: this.module, control: this.control, thread });
      }
      const deadline = performance.now() + this.startTimeoutMs;
      const ready = () => this.workers.every((_, i) => Atomics.load(i32, READY + i + 1) === 1);
      while (!ready()) {
        if (performance.now() > deadline) throw new Error(`no answer in ${this.startTimeoutMs / 1000} s`);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    } catch (error) {
      this.stopThreads();
      const why = error instanceof Error ? error.message : String(error);
      this.name = `${this.baseName}, 1 thread: the kernel threads did not start (${why})`;
      return 1;
    }
    this.threads = this.wanted;
    this.name = `${this.baseName}, ${this.threads} threads`;
    return this.threads;
  }

  /** Stop the kernel threads (the memory stays usable on one thread). */
  stopThreads() {
    const { i32 } = this.shared;
    Atomics.store(i32, STOP, 1);
    Atomics.add(i32, SEQ, 1);
    Atomics.notify(i32, SEQ);
    this.workers.forEach((worker) => worker.terminate());
    this.workers = [];
    this.threads = 1;
  }

  /**
   * Post a job, take its chunks here too, and return once every chunk is done.
   * @param {number[]} job see thread-jobs.js's OP_MATMUL and OP_MATVEC
   */
  runJob(job) {
    const { i32 } = this.shared;
    const chunks = postJob(this.shared, job);
    takeChunks(this.exports, this.shared);
    let since = 0; // when this thread began to sleep on the chunks the kernel threads took
    for (let spins = 0; ; spins++) {
      const done = Atomics.load(i32, DONE);
      if (done === chunks) break;
      if (spins < SPINS) continue;
      since ||= performance.now();
      if (performance.now() - since > ANSWER_TIMEOUT_MS) throw new Error(`a kernel thread did not answer in ${ANSWER_TIMEOUT_MS / 1000} s`);
      Atomics.wait(i32, DONE, done, 1000);
    }
    if (Atomics.exchange(i32, FAILED, 0)) throw new Error("a chunk of a product failed in WebAssembly");
  }

  /**
   * WasmKernels.matvec with the rows split across the threads (outputs in one run at outAt).
   * @override
   * @param {Tensor} tensor
   * @param {Float32Array} vector
   * @param {number} start
   * @param {number} rows
   * @returns {Float32Array} a view of the workspace
   */
  matvec(tensor, vector, start, rows) {
    const cols = tensor.cols;
    if (this.threads < 2 || rows * cols < this.vectorMinSplit) return super.matvec(tensor, vector, start, rows);
    const blocks = cols / 32;
    this.f32.set(vector.subarray(0, cols), this.xAt / 4);
    const xsum = this.f32.subarray(this.xsumAt / 4, this.xsumAt / 4 + blocks);
    for (let b = 0; b < blocks; b++) { // as WasmKernels.matvec
      let sum = 0;
      for (let j = 0; j < 32; j++) sum += vector[b * 32 + j];
      xsum[b] = sum;
    }
    const src = tensor.bytes.byteOffset + start * tensor.rowBytes;
    this.runJob([OP_MATVEC, chunkRows(rows, this.threads), rows, QUANT[tensor.type], this.xAt, src, tensor.rowBytes,
      blocks, this.halfAt, this.outAt, this.xsumAt]);
    return this.f32.subarray(this.outAt / 4, this.outAt / 4 + rows);
  }

  /**
   * WasmKernels.linear with the weight's rows split across the threads (many tokens; one
   * token goes through matvec). Q4_1 and Q8_0 rows are dequantised by the thread that
   * multiplies them, in the file's order (the model's row order applied to the
   * outputs); other types here, in the model's order, as WasmKernels does.
   * @override
   * @param {LinearWeight} linear
   * @param {Float32Array} x (T, cols)
   * @param {number} T
   * @returns {Float32Array} (T, rows)
   */
  linear(linear, x, T) {
    const { tensor, rows, cols } = linear;
    if (T === 1 || T > this.maxTokens || this.threads < 2 || T * rows * cols < this.minSplit) {
      return super.linear(linear, x, T);
    }
    const kind = QUANT[tensor.type] ?? DEQUANT_NONE;
    if (kind === DEQUANT_NONE) {
      if (!linear.rowOrder) this.dequantRows(tensor, 0, rows, this.weightAt);
      else for (let r = 0; r < rows; r++) this.dequantRows(tensor, linear.rowOrder[r], 1, this.weightAt + r * cols * 4);
    }
    this.f32.set(x.subarray(0, T * cols), this.xAt / 4);
    const chunk = chunkRows(rows, this.threads);
    this.runJob([OP_MATMUL, chunk, rows, kind, tensor.bytes.byteOffset, tensor.rowBytes, this.halfAt, this.xAt, T, cols,
      this.weightAt, this.outAt, cols]);
    const out = new Float32Array(T * rows); // chunk c's outputs: a (T, n) block at outAt + T * r0
    for (let r0 = 0; r0 < rows; r0 += chunk) {
      const n = Math.min(chunk, rows - r0);
      const block = this.outAt / 4 + T * r0;
      for (let t = 0; t < T; t++) out.set(this.f32.subarray(block + t * n, block + (t + 1) * n), t * rows + r0);
    }
    const order = linear.rowOrder;
    if (kind === DEQUANT_NONE || !order) return out;
    const ordered = new Float32Array(T * rows); // row r of the model is stored row order[r]
    for (let t = 0; t < T; t++) {
      for (let r = 0; r < rows; r++) ordered[t * rows + r] = out[t * rows + order[r]];
    }
    return ordered;
  }
}
