// @ts-check
// The jobs threads.js shares with its kernel threads, as numbers in a small shared
// control buffer (no message is posted while the model runs): what both sides read and
// write. A job is one product split into chunks of whole rows; whoever is free takes
// the next chunk (the engine's thread too), so a thread that the machine is slow to
// wake delays nothing: the others take its chunks. Int32 words:
//   SEQ: the number of the job posted (the kernel threads sleep on it);
//   CLAIM: (chunks << 16) | the next chunk; Atomics.add claims one, and a claim is
//     valid while the next chunk < chunks: the job's arguments stay as they are until
//     every claimed chunk is done, so a late thread can never read the next job's
//     arguments for this job's chunk;
//   DONE: chunks done (the engine's thread waits until it is the job's chunks);
//   FAILED: 1 once a chunk threw; STOP: 1 tells the threads to end;
//   READY + k: 1 once thread k has its instance.
// Then the job's arguments as float64 from byte ARGS_BYTE: byte addresses in the
// WebAssembly memory and counts. Threads never allocate.

export const SEQ = 0;
export const CLAIM = 1;
export const DONE = 2;
export const FAILED = 3;
export const STOP = 4;
export const READY = 8; // + thread number (1 ..)
export const MAX_THREADS = 16;
const ARGS = (READY + MAX_THREADS) / 2 + 1; // float64 index of the first argument
export const CONTROL_BYTES = (ARGS + 16) * 8;
export const MAX_CHUNKS = 0x7fff;

export const OP_MATMUL = 1; // [op, chunkRows, rows, dequant, src, rowBytes, half, x, T, cols, W, out, xStride]
export const OP_MATVEC = 2; // [op, chunkRows, rows, kind, x, src, rowBytes, blocks, half, out, xsum]
export const DEQUANT_NONE = 0;
export const DEQUANT_Q4_1 = 1;
export const DEQUANT_Q8_0 = 2;

/**
 * The kernels a thread calls (kernels.js's KernelExports, the ones jobs use).
 * @typedef {object} JobExports
 * @property {(x: number, T: number, cols: number, W: number, rows: number, out: number, xStride: number) => void} matmul
 * @property {(src: number, blocks: number, dst: number, half: number) => void} dequant_q4_1
 * @property {(src: number, blocks: number, dst: number, half: number) => void} dequant_q8_0
 * @property {(x: number, src: number, rows: number, blocks: number, half: number, out: number, xsum: number) => void} matvec_q4_1
 * @property {(x: number, src: number, rows: number, blocks: number, half: number, out: number, xsum: number) => void} matvec_q8_0
 */

/**
 * Post a job: its arguments, then its chunks (the threads' claim word), then its number.
 * @param {{i32: Int32Array, f64: Float64Array}} control
 * @param {number[]} job [op, chunkRows, rows, ...]: see OP_MATMUL and OP_MATVEC
 * @returns {number} how many chunks
 */
export function postJob({ i32, f64 }, job) {
  const chunks = Math.ceil(job[2] / job[1]);
  if (chunks > MAX_CHUNKS) throw new RangeError(`a job has at most ${MAX_CHUNKS} chunks; got ${chunks}`);
  f64.set(job, ARGS);
  Atomics.store(i32, DONE, 0);
  Atomics.store(i32, CLAIM, chunks << 16);
  Atomics.add(i32, SEQ, 1);
  Atomics.notify(i32, SEQ);
  return chunks;
}

/**
 * Take chunks of the posted job until none is left (a kernel thread after each wake-up;
 * the engine's thread after posting).
 * @param {JobExports} kernels
 * @param {{i32: Int32Array, f64: Float64Array}} control
 */
export function takeChunks(kernels, { i32, f64 }) {
  for (;;) {
    const claim = Atomics.add(i32, CLAIM, 1);
    const chunk = claim & 0xffff;
    if (chunk >= claim >>> 16) return;
    try {
      runChunk(kernels, f64, chunk);
    } catch {
      Atomics.store(i32, FAILED, 1);
    }
    Atomics.add(i32, DONE, 1);
    Atomics.notify(i32, DONE);
  }
}

/**
 * Rows chunk * chunkRows .. of the posted job: the same calls as one thread makes for
 * those rows.
 * @param {JobExports} kernels
 * @param {Float64Array} f64
 * @param {number} chunk
 */
function runChunk(kernels, f64, chunk) {
  const [op, chunkRows, rows] = f64.subarray(ARGS, ARGS + 3);
  const r0 = chunk * chunkRows;
  const n = Math.min(chunkRows, rows - r0);
  if (op === OP_MATMUL) {
    const [dequant, src, rowBytes, half, x, T, cols, W, out, xStride] = f64.subarray(ARGS + 3, ARGS + 13);
    const weights = W + r0 * cols * 4;
    if (dequant === DEQUANT_Q4_1) kernels.dequant_q4_1(src + r0 * rowBytes, (n * cols) / 32, weights, half);
    else if (dequant === DEQUANT_Q8_0) kernels.dequant_q8_0(src + r0 * rowBytes, (n * cols) / 32, weights, half);
    kernels.matmul(x, T, cols, weights, n, out + T * r0 * 4, xStride); // a (T, n) block
  } else if (op === OP_MATVEC) {
    const [kind, x, src, rowBytes, blocks, half, out, xsum] = f64.subarray(ARGS + 3, ARGS + 11);
    const matvec = kind === DEQUANT_Q4_1 ? kernels.matvec_q4_1 : kernels.matvec_q8_0;
    matvec(x, src + r0 * rowBytes, n, blocks, half, out + r0 * 4, xsum);
  } else {
    throw new RangeError(`unknown kernel job ${op}`);
  }
}
