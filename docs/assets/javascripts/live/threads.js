// @ts-check
// More cores for the WebAssembly kernels. ThreadedKernels is kernels.js's WasmKernels on
// a shared WebAssembly.Memory, with kernel threads (kernel-thread.js, one module Worker
// each) that run their own instance of the same module over that memory. A product is
// split by output rows: for many tokens, each thread dequantises its share of the
// weight's rows and multiplies every token by them; for one token (decoding, the
// logits), each thread takes its rows of the fused product. Every output value is then
// the same arithmetic as on one thread: rows are split, sums never are. The engine's
// thread computes the first share itself and waits (Atomics.wait) for the others; the
// jobs travel as numbers in a shared control buffer (thread-jobs.js).
//
// Threads need a SharedArrayBuffer, which a browser gives a cross-origin-isolated page
// only; a static site becomes one through a service worker that adds the COOP/COEP
// headers (docs/coi-serviceworker.js). Elsewhere (file://, no isolation) the page runs on
// one thread and its kernels' name says why (newKernels).
import { WasmKernels } from "./kernels.js";
import { moduleBytes } from "./wasm-module.js";
import {
  DEQUANT_NONE, DEQUANT_Q4_1, DEQUANT_Q8_0, DONE, FAILED, OP_MATMUL, OP_MATVEC, OP_STOP, SEQ, SLOT_BYTES,
  READY, runJob, writeJob,
} from "./thread-jobs.js";

export const MAX_THREADS = 8;
const MIN_SPLIT = 1 << 16; // multiply-adds below which a product stays on one thread (default)
const VECTOR_MIN_SPLIT = 1 << 20; // the same for one token's product (default: the logits, not a layer's)
const START_TIMEOUT_MS = 10000; // (default)
const SPINS = 2000; // loads of a thread's "done" word before the engine's thread sleeps on it
const SLOT_INTS = SLOT_BYTES / 4;
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
  const why = threadsUnavailable();
  if (why === null) return new ThreadedKernels(fileLength, { threads: Math.min(MAX_THREADS, navigator.hardwareConcurrency) });
  const kernels = new WasmKernels(fileLength);
  kernels.name += `, 1 thread (${why})`;
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
 * Share boundaries: `rows` split into `parts` runs, each a multiple of 4 rows (matmul's
 * tile) but the last.
 * @param {number} rows
 * @param {number} parts
 * @returns {number[]} parts + 1 row numbers, from 0 to rows
 */
export function shareBounds(rows, parts) {
  const bounds = [0];
  for (let p = 1; p < parts; p++) bounds.push(Math.min(rows, Math.round((rows * p) / parts / 4) * 4));
  bounds.push(rows);
  return bounds;
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
    this.wanted = Math.max(1, Math.floor(threads));
    this.spawn = spawn;
    this.threads = 1; // computing now: the engine's own, until startThreads
    /** @type {ThreadWorker[]} */
    this.workers = [];
    this.control = new SharedArrayBuffer(SLOT_BYTES * this.wanted);
    this.i32 = new Int32Array(this.control);
    this.f64 = new Float64Array(this.control);
    this.name = `${this.baseName}, 1 thread (the kernel threads are not started)`;
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
    try {
      for (let slot = 1; slot < this.wanted; slot++) {
        const worker = this.spawn();
        this.workers.push(worker);
        worker.postMessage({ memory: this.memory, module: this.module, control: this.control, slot });
      }
      const deadline = performance.now() + this.startTimeoutMs;
      const ready = () => this.workers.every((_, i) => Atomics.load(this.i32, (i + 1) * SLOT_INTS + READY) === 1);
      while (!ready()) {
        if (performance.now() > deadline) throw new Error(`no answer in ${this.startTimeoutMs / 1000} s`);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    } catch (error) {
      this.stopThreads();
      const why = error instanceof Error ? error.message : String(error);
      this.name = `${this.baseName}, 1 thread (the kernel threads did not start: ${why})`;
      return 1;
    }
    this.threads = this.wanted;
    this.name = `${this.baseName}, ${this.threads} threads`;
    return this.threads;
  }

  /** Stop the kernel threads (the memory stays usable on one thread). */
  stopThreads() {
    this.workers.forEach((worker, i) => {
      this.post(i + 1, [OP_STOP]);
      worker.terminate();
    });
    this.workers = [];
    this.threads = 1;
  }

  /**
   * Post a job to thread `slot`.
   * @param {number} slot
   * @param {number[]} job
   * @returns {number} the job's number, which the thread's "done" word reaches when done
   */
  post(slot, job) {
    writeJob(this.f64, slot, job);
    const seq = Atomics.add(this.i32, slot * SLOT_INTS + SEQ, 1) + 1;
    Atomics.notify(this.i32, slot * SLOT_INTS + SEQ);
    return seq;
  }

  /**
   * Run jobs[0] here and jobs[1..] on the kernel threads; return when all are done.
   * @param {number[][]} jobs
   */
  runShares(jobs) {
    /** @type {number[]} */
    const seqs = jobs.map((job, p) => (p === 0 ? 0 : this.post(p, job)));
    writeJob(this.f64, 0, jobs[0]);
    runJob(this.exports, this.f64, 0);
    for (let p = 1; p < jobs.length; p++) {
      const at = p * SLOT_INTS + DONE;
      for (let spins = 0; ; spins++) {
        const done = Atomics.load(this.i32, at);
        if (done === seqs[p]) break;
        if (spins > SPINS) Atomics.wait(this.i32, at, done, 1000);
      }
      if (Atomics.load(this.i32, p * SLOT_INTS + FAILED)) throw new Error(`kernel thread ${p} failed a job`);
    }
  }

  /**
   * Into how many shares a product of `work` multiply-adds goes.
   * @param {number} work
   * @returns {number}
   */
  partsFor(work) {
    return work < this.minSplit ? 1 : this.threads;
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
    const parts = rows * cols < this.vectorMinSplit ? 1 : this.threads;
    if (parts < 2) return super.matvec(tensor, vector, start, rows);
    const blocks = cols / 32;
    this.f32.set(vector.subarray(0, cols), this.xAt / 4);
    const xsum = this.f32.subarray(this.xsumAt / 4, this.xsumAt / 4 + blocks);
    for (let b = 0; b < blocks; b++) { // as WasmKernels.matvec
      let sum = 0;
      for (let j = 0; j < 32; j++) sum += vector[b * 32 + j];
      xsum[b] = sum;
    }
    const bounds = shareBounds(rows, parts);
    /** @type {number[][]} */
    const jobs = [];
    for (let p = 0; p < parts; p++) {
      const [r0, r1] = [bounds[p], bounds[p + 1]];
      if (r1 === r0) continue;
      const src = tensor.bytes.byteOffset + (start + r0) * tensor.rowBytes;
      jobs.push([OP_MATVEC, QUANT[tensor.type], this.xAt, src, r1 - r0, blocks, this.halfAt, this.outAt + r0 * 4, this.xsumAt]);
    }
    this.runShares(jobs);
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
    const parts = this.partsFor(T * rows * cols);
    if (T === 1 || T > this.maxTokens || parts < 2) return super.linear(linear, x, T);
    const kind = QUANT[tensor.type] ?? DEQUANT_NONE;
    if (kind === DEQUANT_NONE) {
      if (!linear.rowOrder) this.dequantRows(tensor, 0, rows, this.weightAt);
      else for (let r = 0; r < rows; r++) this.dequantRows(tensor, linear.rowOrder[r], 1, this.weightAt + r * cols * 4);
    }
    this.f32.set(x.subarray(0, T * cols), this.xAt / 4);
    const bounds = shareBounds(rows, parts);
    /** @type {number[][]} */
    const jobs = [];
    for (let p = 0; p < parts; p++) {
      const [r0, r1] = [bounds[p], bounds[p + 1]];
      if (r1 === r0) continue;
      const n = r1 - r0;
      const src = kind === DEQUANT_NONE ? 0 : tensor.bytes.byteOffset + r0 * tensor.rowBytes;
      const weights = this.weightAt + r0 * cols * 4;
      jobs.push([OP_MATMUL, kind, src, (n * cols) / 32, this.halfAt, this.xAt, T, cols, weights, n, this.outAt + T * r0 * 4, cols]);
    }
    this.runShares(jobs);
    const out = new Float32Array(T * rows); // share p's outputs: a (T, r1 - r0) block at outAt + T * r0
    for (let p = 0; p < parts; p++) {
      const [r0, r1] = [bounds[p], bounds[p + 1]];
      const block = this.outAt / 4 + T * r0;
      const n = r1 - r0;
      for (let t = 0; t < T && n; t++) out.set(this.f32.subarray(block + t * n, block + (t + 1) * n), t * rows + r0);
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
