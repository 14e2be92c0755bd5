// @ts-check
// The forward pass's kernels in WebAssembly SIMD (wasm-module.js assembles the module):
// WasmKernels keeps the GGUF file's bytes in the module's memory, with a workspace after
// them, and computes what model.js asks of its kernels (linear, attention, rmsNorm,
// gatedAct, logits); what its workspace cannot hold goes to jskernels.js's JsKernels.
import { HALF_TABLE } from "./gguf.js";
import { JsKernels } from "./jskernels.js";
import { MAX_PAGES, moduleBytes, relaxedSupported, simdSupported } from "./wasm-module.js";

export { moduleBytes, relaxedSupported, simdSupported };

const PAGE = 65536;
const FUSED = new Set(["Q4_1", "Q8_0"]); // the types matvec reads
/** @param {number} n @param {number} to @returns {number} n rounded up to a multiple of to */
const align = (n, to) => Math.ceil(n / to) * to;
const NO_WINDOW = 0x3fffffff; // softmax_rows' window that keeps every key
const SHARED_WORKSPACE_PAGES = 16384; // a shared memory's room for the workspace: 1 GiB

/** @typedef {import("./gguf.js").Tensor} Tensor */
/** @typedef {import("./jskernels.js").LinearWeight} LinearWeight */
/** @typedef {import("./jskernels.js").AttentionArgs} AttentionArgs */

/**
 * The module's exports: byte addresses and counts in, nothing out (wasm-module.js).
 * @typedef {object} KernelExports
 * @property {(x: number, T: number, cols: number, W: number, rows: number, out: number, xStride: number) => void} matmul
 * @property {(src: number, blocks: number, dst: number, half: number) => void} dequant_q4_1
 * @property {(src: number, blocks: number, dst: number, half: number) => void} dequant_q8_0
 * @property {(x: number, src: number, rows: number, blocks: number, half: number, out: number, xsum: number) => void} matvec_q4_1
 * @property {(x: number, src: number, rows: number, blocks: number, half: number, out: number, xsum: number) => void} matvec_q8_0
 * @property {(gate: number, up: number, n: number, out: number) => void} silu_mul
 * @property {(src: number, stride: number, T: number, first: number, scale: number, dst: number, window: number) => void} softmax_rows
 * @property {(x: number, T: number, K: number, B: number, N: number, out: number, outStride: number) => void} matmul_nn
 * @property {(x: number, T: number, d: number, weight: number, eps: number, out: number) => void} rms_norm
 */

/**
 * The workspace reserve makes room for.
 * @typedef {object} Workspace
 * @property {number} maxMatrix values of the largest dequantised matrix
 * @property {number} maxTokens tokens a product takes at once
 * @property {number} maxWidth the widest row
 * @property {number} [maxKeys] positions the attention reads
 * @property {number} [headDim]
 * @property {number} [queryWidth] heads x headDim
 */

/** A WebAssembly memory for the file's bytes (from offset 0; fill `bytes`, e.g. while
 * downloading) and, once `reserve` is called, a workspace after them; the kernels. */
export class WasmKernels {
  /**
   * @param {number} fileLength
   * @param {boolean} [relaxed] use relaxed SIMD's multiply-add where the engine has it
   * @param {boolean} [shared] a shared memory, which threads.js's kernel threads also run on
   */
  constructor(fileLength, relaxed = true, shared = false) {
    this.name = "WebAssembly SIMD";
    this.fileLength = fileLength;
    const initial = Math.ceil(fileLength / PAGE);
    const maximum = Math.min(MAX_PAGES, initial + SHARED_WORKSPACE_PAGES); // a shared memory must say
    this.memory = new WebAssembly.Memory(shared ? { initial, maximum, shared } : { initial });
    this.relaxed = relaxed && relaxedSupported();
    if (this.relaxed) this.name = "WebAssembly SIMD, relaxed multiply-add";
    this.module = new WebAssembly.Module(moduleBytes(this.relaxed, shared));
    const instance = new WebAssembly.Instance(this.module, { env: { memory: this.memory } });
    this.exports = /** @type {KernelExports} */ (/** @type {unknown} */ (instance.exports));
    this.bytes = new Uint8Array(this.memory.buffer, 0, fileLength);
    this.f32 = new Float32Array(this.memory.buffer);
    this.fallback = new JsKernels(); // what goes beyond the workspace
    // the workspace's byte addresses and sizes (reserve sets them)
    this.halfAt = 0; this.weightAt = 0; this.xAt = 0; this.outAt = 0; this.xsumAt = 0; this.qAt = 0;
    this.ctxAt = 0; this.kAt = 0; this.vAt = 0; this.scoresAt = 0; this.wAt = 0; this.normAt = 0;
    this.maxKeys = 0; this.maxTokens = 0; this.maxMatrix = 0; this.maxWidth = 0; this.queryWidth = 0;
  }

  /**
   * Room after the file for: the float16 table, one dequantised matrix of maxMatrix
   * values, and x and out of maxTokens x maxWidth values each; for the attention, up
   * to maxKeys positions of queryWidth (heads x headDim) values. Growing the memory
   * replaces its buffer: rebind the file's tensors to `bytes` afterwards.
   * @param {Workspace} workspace
   * @returns {WasmKernels}
   */
  reserve({ maxMatrix, maxTokens, maxWidth, maxKeys = 0, headDim = 0, queryWidth = 0 }) {
    this.halfAt = align(this.fileLength, 16);
    this.weightAt = this.halfAt + 65536 * 4;
    this.xAt = this.weightAt + maxMatrix * 4;
    this.outAt = this.xAt + maxTokens * maxWidth * 4;
    this.xsumAt = this.outAt + Math.max(maxTokens * maxWidth, maxMatrix / maxWidth) * 4;
    // attention: the queries and context vectors (maxKeys, queryWidth); one head's keys
    // and values (keys padded to a multiple of 4, D), scores and weights (maxKeys,
    // padded keys); a norm's weight (maxWidth)
    this.maxKeys = maxKeys;
    const keys = align(maxKeys, 4);
    this.qAt = align(this.xsumAt + maxWidth * 4, 16);
    this.ctxAt = this.qAt + maxKeys * queryWidth * 4;
    this.kAt = this.ctxAt + maxKeys * queryWidth * 4;
    this.vAt = this.kAt + keys * headDim * 4;
    this.scoresAt = this.vAt + keys * headDim * 4;
    this.wAt = this.scoresAt + maxKeys * keys * 4;
    this.normAt = this.wAt + maxKeys * keys * 4;
    const end = this.normAt + maxWidth * 4;
    const pages = Math.ceil(end / PAGE) - this.memory.buffer.byteLength / PAGE;
    if (pages > 0) this.memory.grow(pages);
    this.bytes = new Uint8Array(this.memory.buffer, 0, this.fileLength);
    this.f32 = new Float32Array(this.memory.buffer);
    this.f32.set(HALF_TABLE, this.halfAt / 4);
    this.maxTokens = maxTokens;
    this.maxMatrix = maxMatrix;
    this.maxWidth = maxWidth;
    this.queryWidth = queryWidth;
    return this;
  }

  /**
   * Stored rows start .. start + rows - 1 of `tensor` as float32 at byte `dst` of the
   * memory: one WebAssembly call for Q4_1 and Q8_0, gguf.js's row for the other types.
   * @param {Tensor} tensor
   * @param {number} start
   * @param {number} rows
   * @param {number} dst
   */
  dequantRows(tensor, start, rows, dst) {
    const src = tensor.bytes.byteOffset + start * tensor.rowBytes;
    const blocks = (rows * tensor.cols) / 32;
    if (tensor.type === "Q4_1") this.exports.dequant_q4_1(src, blocks, dst, this.halfAt);
    else if (tensor.type === "Q8_0") this.exports.dequant_q8_0(src, blocks, dst, this.halfAt);
    else {
      for (let r = 0; r < rows; r++) {
        const at = dst / 4 + r * tensor.cols;
        tensor.row(start + r, this.f32.subarray(at, at + tensor.cols));
      }
    }
  }

  /**
   * One token (x: cols values) times every row of a Q4_1 or Q8_0 tensor, fused (no
   * dequantised matrix written): rows `start` .. `start + rows - 1`, at `outAt`.
   * @param {Tensor} tensor
   * @param {Float32Array} vector
   * @param {number} start
   * @param {number} rows
   * @returns {Float32Array} a view of the workspace
   */
  matvec(tensor, vector, start, rows) {
    const cols = tensor.cols;
    const blocks = cols / 32;
    this.f32.set(vector.subarray(0, cols), this.xAt / 4);
    const xsum = this.f32.subarray(this.xsumAt / 4, this.xsumAt / 4 + blocks);
    for (let b = 0; b < blocks; b++) {
      let sum = 0;
      for (let j = 0; j < 32; j++) sum += vector[b * 32 + j];
      xsum[b] = sum;
    }
    const kernel = tensor.type === "Q4_1" ? this.exports.matvec_q4_1 : this.exports.matvec_q8_0;
    kernel(this.xAt, tensor.bytes.byteOffset + start * tensor.rowBytes, rows, blocks, this.halfAt, this.outAt, this.xsumAt);
    return this.f32.subarray(this.outAt / 4, this.outAt / 4 + rows);
  }

  /**
   * x (T, cols) @ W.T for a Linear over a tensor of this memory: one token through
   * matvec; more, each stored row dequantised once (in its unpermuted place), then one
   * matmul.
   * @param {LinearWeight} linear
   * @param {Float32Array} x
   * @param {number} T
   * @returns {Float32Array} (T, rows)
   */
  linear(linear, x, T) {
    const { tensor, rows, cols } = linear;
    if (T === 1 && FUSED.has(tensor.type)) {
      const stored = this.matvec(tensor, x, 0, rows);
      if (!linear.rowOrder) return stored.slice();
      const out = new Float32Array(rows);
      for (let r = 0; r < rows; r++) out[r] = stored[linear.rowOrder[r]];
      return out;
    }
    if (T > this.maxTokens) return this.inChunks(linear, x, T);
    if (!linear.rowOrder) this.dequantRows(tensor, 0, rows, this.weightAt); // in stored order: one call
    else for (let r = 0; r < rows; r++) this.dequantRows(tensor, linear.rowOrder[r], 1, this.weightAt + r * cols * 4);
    this.f32.set(x.subarray(0, T * cols), this.xAt / 4);
    this.exports.matmul(this.xAt, T, cols, this.weightAt, rows, this.outAt, cols);
    return this.f32.slice(this.outAt / 4, this.outAt / 4 + T * rows);
  }

  /**
   * JsKernels.attention, one head at a time as three WebAssembly calls: scores =
   * queries @ keys.T (matmul), the causal (window) softmax (softmax_rows), weights @
   * values (matmul_nn). The queries and the context vectors stay (T, H * D) in the
   * workspace; a head's keys and values are copied there (padded with zero rows to a
   * multiple of 4 keys).
   * @param {AttentionArgs} args
   */
  attention(args) {
    const { queries, T, H, group, D, past, cache, ablateHeads, attnWeights, contextVecs, scale, window } = args;
    const S = cache.length;
    if (S > this.maxKeys || D % 4 || H * D > this.queryWidth) return this.fallback.attention(args);
    const f32 = this.f32;
    const { matmul, softmax_rows, matmul_nn } = this.exports;
    const keys = align(S, 4);
    const width = H * D;
    f32.set(queries.subarray(0, T * width), this.qAt / 4);
    f32.fill(0, this.ctxAt / 4, this.ctxAt / 4 + T * width); // ablated heads stay zero
    const weights = this.wAt / 4;
    let copied = -1;
    for (let h = 0; h < H; h++) {
      const ablated = ablateHeads.has(h);
      if (ablated && !attnWeights) continue;
      const kv = Math.floor(h / group);
      if (kv !== copied) { // this key/value head's S keys and values, one after another
        const from = kv * cache.capacity * D;
        f32.set(cache.keys.subarray(from, from + S * D), this.kAt / 4);
        f32.set(cache.values.subarray(from, from + S * D), this.vAt / 4);
        f32.fill(0, (this.kAt / 4) + S * D, (this.kAt / 4) + keys * D);
        f32.fill(0, (this.vAt / 4) + S * D, (this.vAt / 4) + keys * D);
        copied = kv;
      }
      matmul(this.qAt + h * D * 4, T, D, this.kAt, keys, this.scoresAt, width); // (T, keys)
      softmax_rows(this.scoresAt, keys, T, past + 1, scale, this.wAt, window ?? NO_WINDOW); // (T, keys)
      if (attnWeights && keys === S) attnWeights.set(f32.subarray(weights, weights + T * S), h * T * S);
      else if (attnWeights) {
        for (let i = 0; i < T; i++) attnWeights.set(f32.subarray(weights + i * keys, weights + i * keys + S), (h * T + i) * S);
      }
      if (!ablated) matmul_nn(this.wAt, T, keys, this.vAt, D, this.ctxAt + h * D * 4, width); // (T, D) of (T, H * D)
    }
    contextVecs.set(f32.subarray(this.ctxAt / 4, this.ctxAt / 4 + T * width));
  }

  /**
   * act(gate) * up (a gated feed-forward's hidden layer), as JsKernels.gatedAct: SiLU in
   * WebAssembly a workspace at a time, GELU (tanh) in JavaScript.
   * @param {Float32Array} gate
   * @param {Float32Array} up
   * @param {"silu" | "gelu_tanh"} [activation]
   * @returns {Float32Array}
   */
  gatedAct(gate, up, activation = "silu") {
    const n = gate.length;
    if (n % 4 || activation !== "silu") return this.fallback.gatedAct(gate, up, activation);
    const out = new Float32Array(n);
    const chunk = this.maxTokens * this.maxWidth;
    for (let start = 0; start < n; start += chunk) {
      const m = Math.min(chunk, n - start);
      this.f32.set(gate.subarray(start, start + m), this.xAt / 4);
      this.f32.set(up.subarray(start, start + m), this.outAt / 4);
      this.exports.silu_mul(this.xAt, this.outAt, m, this.xAt);
      out.set(this.f32.subarray(this.xAt / 4, this.xAt / 4 + m), start);
    }
    return out;
  }

  /**
   * silu(gate) * up (SwiGLU's hidden layer).
   * @param {Float32Array} gate
   * @param {Float32Array} up
   * @returns {Float32Array}
   */
  siluMul(gate, up) {
    return this.gatedAct(gate, up, "silu");
  }

  /**
   * RMSNorm of T rows (T, d), as JsKernels.rmsNorm, as many rows at a time as fit.
   * @param {Float32Array} x
   * @param {number} T
   * @param {Float32Array} weight
   * @param {number} eps
   * @returns {Float32Array}
   */
  rmsNorm(x, T, weight, eps) {
    const d = weight.length;
    if (d % 4 || d > this.maxWidth) return this.fallback.rmsNorm(x, T, weight, eps);
    const out = new Float32Array(T * d);
    const rows = Math.floor((this.maxTokens * this.maxWidth) / d);
    this.f32.set(weight, this.normAt / 4);
    for (let t = 0; t < T; t += rows) {
      const n = Math.min(rows, T - t);
      this.f32.set(x.subarray(t * d, (t + n) * d), this.xAt / 4);
      this.exports.rms_norm(this.xAt, n, d, this.normAt, eps, this.outAt);
      out.set(this.f32.subarray(this.outAt / 4, this.outAt / 4 + n * d), t * d);
    }
    return out;
  }

  /**
   * More tokens than the workspace holds: maxTokens at a time.
   * @param {LinearWeight} linear
   * @param {Float32Array} x
   * @param {number} T
   * @returns {Float32Array}
   */
  inChunks(linear, x, T) {
    const out = new Float32Array(T * linear.rows);
    for (let t = 0; t < T; t += this.maxTokens) {
      const n = Math.min(this.maxTokens, T - t);
      out.set(this.linear(linear, x.subarray(t * linear.cols, (t + n) * linear.cols), n), t * linear.rows);
    }
    return out;
  }

  /**
   * vector (d_model) . every row of `tensor` (V, d_model): the logits, a chunk of rows
   * at a time through the dequantised-weight buffer.
   * @param {Tensor} tensor
   * @param {Float32Array} vector
   * @returns {Float32Array}
   */
  logits(tensor, vector) {
    const cols = tensor.cols;
    if (FUSED.has(tensor.type)) {
      const logits = new Float32Array(tensor.rows);
      const chunk = Math.floor((this.xsumAt - this.outAt) / 4);
      for (let start = 0; start < tensor.rows; start += chunk) {
        const rows = Math.min(chunk, tensor.rows - start);
        logits.set(this.matvec(tensor, vector, start, rows), start);
      }
      return logits;
    }
    const chunk = Math.floor(this.maxMatrix / cols);
    const logits = new Float32Array(tensor.rows);
    this.f32.set(vector, this.xAt / 4);
    for (let start = 0; start < tensor.rows; start += chunk) {
      const rows = Math.min(chunk, tensor.rows - start);
      this.dequantRows(tensor, start, rows, this.weightAt);
      this.exports.matmul(this.xAt, 1, cols, this.weightAt, rows, this.outAt, cols);
      logits.set(this.f32.subarray(this.outAt / 4, this.outAt / 4 + rows), start);
    }
    return logits;
  }
}

