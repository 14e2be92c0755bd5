// @ts-check
// The jobs threads.js hands its kernel threads, as numbers in a small shared control
// buffer (no message is posted while the model runs): what both sides read and write.
// Each thread has a slot of SLOT_BYTES: four int32 words (the job's number, the number
// of the last job done, "ready", "failed"), then the job's arguments as float64 (byte
// addresses in the WebAssembly memory, counts). Threads never allocate: each job
// writes to the memory that the engine's thread read back from.

export const SLOT_BYTES = 128;
export const SEQ = 0; // int32 word: the number of the job posted (the thread waits on it)
export const DONE = 1; // int32 word: the number of the last job done (the engine waits on it)
export const READY = 2; // int32 word: 1 once the thread has its instance
export const FAILED = 3; // int32 word: 1 if a job threw (the engine then throws too)
const ARGS = 2; // the arguments start at float64 index 2 of the slot (byte 16)
export const MAX_ARGS = SLOT_BYTES / 8 - ARGS;

export const OP_STOP = 0;
export const OP_MATMUL = 1; // [op, dequant, src, blocks, half, x, T, cols, W, rows, out, xStride]
export const OP_MATVEC = 2; // [op, kind, x, src, rows, blocks, half, out, xsum]
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
 * The float64 index of slot `slot`'s first argument.
 * @param {number} slot
 * @returns {number}
 */
export const argsAt = (slot) => (slot * SLOT_BYTES) / 8 + ARGS;

/**
 * Write one job's numbers (the op first) into slot `slot`.
 * @param {Float64Array} f64 the control buffer as float64
 * @param {number} slot
 * @param {number[]} job
 */
export function writeJob(f64, slot, job) {
  if (job.length > MAX_ARGS) throw new RangeError(`a job has at most ${MAX_ARGS} numbers; got ${job.length}`);
  f64.set(job, argsAt(slot));
}

/**
 * Run the job in slot `slot` (the engine's thread runs its own share the same way).
 * @param {JobExports} kernels
 * @param {Float64Array} f64
 * @param {number} slot
 */
export function runJob(kernels, f64, slot) {
  const a = argsAt(slot);
  const op = f64[a];
  if (op === OP_MATMUL) {
    const [dequant, src, blocks, half, x, T, cols, W, rows, out, xStride] = f64.subarray(a + 1, a + 12);
    if (dequant === DEQUANT_Q4_1) kernels.dequant_q4_1(src, blocks, W, half);
    else if (dequant === DEQUANT_Q8_0) kernels.dequant_q8_0(src, blocks, W, half);
    kernels.matmul(x, T, cols, W, rows, out, xStride);
  } else if (op === OP_MATVEC) {
    const [kind, x, src, rows, blocks, half, out, xsum] = f64.subarray(a + 1, a + 9);
    const matvec = kind === DEQUANT_Q4_1 ? kernels.matvec_q4_1 : kernels.matvec_q8_0;
    matvec(x, src, rows, blocks, half, out, xsum);
  } else if (op !== OP_STOP) {
    throw new RangeError(`unknown kernel job ${op}`);
  }
}
