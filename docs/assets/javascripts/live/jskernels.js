// @ts-check
// The forward pass's arithmetic in plain JavaScript: what computes the model's products
// where WebAssembly SIMD is missing (kernels.js's WasmKernels does the same, faster, and
// falls back here for what its workspace cannot hold). The results agree to float32
// rounding.

/**
 * A weight matrix as a kernel reads it: gguf.js's tensor (rows of `cols` values, kept
 * quantised) and the stored row that becomes each of ours (or null: as stored).
 * @typedef {object} LinearWeight
 * @property {import("./gguf.js").Tensor} tensor
 * @property {number} rows out_features
 * @property {number} cols in_features
 * @property {Int32Array | null} rowOrder
 */

/**
 * A layer's keys and values as the attention kernel reads them (layers/attention.js's
 * KVCache): key (h, s) starts at keys[(h * capacity + s) * D].
 * @typedef {object} KeyValues
 * @property {Float32Array} keys
 * @property {Float32Array} values
 * @property {number} capacity
 * @property {number} length
 */

/**
 * The softmax attention of T new queries over a cache's S keys.
 * @typedef {object} AttentionArgs
 * @property {Float32Array} queries (T, H * D), rotated
 * @property {number} T new tokens
 * @property {number} H query heads
 * @property {number} group query heads per key/value head
 * @property {number} D head width
 * @property {number} past cached positions before these T
 * @property {KeyValues} cache holds the S = past + T keys and values
 * @property {Set<number>} ablateHeads heads whose context vectors stay zero
 * @property {Float32Array | null} attnWeights (H, T, S), written when given
 * @property {Float32Array} contextVecs (T, H * D), added to
 * @property {number} scale the scores' factor (1 / sqrt(D) unless the family says otherwise)
 * @property {number | null} window each query sees its last `window` positions (null: all)
 */

/**
 * out (T, rows) = x (T, cols) @ W.T for a dequantised W (rows, cols): each row of W is
 * read once and used for all T tokens. cols is a multiple of 4.
 * @param {Float32Array} x
 * @param {number} T
 * @param {number} cols
 * @param {Float32Array} W
 * @param {number} rows
 * @param {Float32Array} out
 * @returns {Float32Array} out
 */
export function matmulTransposed(x, T, cols, W, rows, out) {
  for (let r = 0; r < rows; r++) {
    const w = r * cols;
    for (let t = 0; t < T; t++) {
      const xo = t * cols;
      let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (let c = 0; c < cols; c += 4) {
        s0 += W[w + c] * x[xo + c];
        s1 += W[w + c + 1] * x[xo + c + 1];
        s2 += W[w + c + 2] * x[xo + c + 2];
        s3 += W[w + c + 3] * x[xo + c + 3];
      }
      out[t * rows + r] = s0 + s1 + s2 + s3;
    }
  }
  return out;
}

/** float32 GELU, tanh form (PyTorch's gelu(approximate="tanh"), Gemma's gelu_pytorch_tanh).
 * @param {number} x
 * @returns {number}
 */
export function geluTanh(x) {
  const inner = Math.fround(Math.sqrt(2 / Math.PI) * Math.fround(x + Math.fround(0.044715 * x * x * x)));
  return Math.fround(0.5 * x * Math.fround(1 + Math.tanh(inner)));
}

/** @param {number} x @returns {number} silu(x) = x / (1 + e^-x) in float32 */
export const silu = (x) => Math.fround(x / (1 + Math.exp(-x)));

/** The products in plain JavaScript: each stored row dequantised once into a scratch
 * matrix (rows, cols) reused by every Linear, then matmulTransposed. */
export class JsKernels {
  constructor() {
    this.name = "JavaScript";
    this.scratch = new Float32Array(0);
  }

  /**
   * x (T, cols) @ W.T -> (T, rows).
   * @param {LinearWeight} linear
   * @param {Float32Array} x
   * @param {number} T
   * @returns {Float32Array}
   */
  linear(linear, x, T) {
    const size = linear.rows * linear.cols;
    if (this.scratch.length < size) this.scratch = new Float32Array(size);
    const W = this.scratch;
    for (let r = 0; r < linear.rows; r++) {
      const stored = linear.rowOrder ? linear.rowOrder[r] : r;
      linear.tensor.row(stored, W.subarray(r * linear.cols, (r + 1) * linear.cols));
    }
    return matmulTransposed(x, T, linear.cols, W, linear.rows, new Float32Array(T * linear.rows));
  }

  /**
   * The causal (sliding-window) softmax attention: each head's weights (H, T, S) into
   * attnWeights (if given), its context vectors into contextVecs, skipped for ablated heads.
   * @param {AttentionArgs} args
   */
  attention({ queries, T, H, group, D, past, cache, ablateHeads, attnWeights, contextVecs, scale, window }) {
    const S = cache.length;
    const K = cache.keys;
    const V = cache.values;
    const stride = cache.capacity * D; // from one key/value head to the next
    const scores = new Float64Array(S); // one query's scores over its keys
    for (let h = 0; h < H; h++) {
      const ablated = ablateHeads.has(h);
      if (ablated && !attnWeights) continue;
      const kvAt = Math.floor(h / group) * stride;
      for (let i = 0; i < T; i++) {
        const q = (i * H + h) * D;
        const last = past + i; // causal: keys up to the query's own position
        const first = window === null ? 0 : Math.max(0, last - window + 1);
        let max = -Infinity;
        for (let j = first; j <= last; j++) {
          const k = kvAt + j * D;
          let dot0 = 0, dot1 = 0; // q . k in two interleaved sums (D is even)
          for (let e = 0; e < D; e += 2) {
            dot0 += queries[q + e] * K[k + e];
            dot1 += queries[q + e + 1] * K[k + e + 1];
          }
          const score = Math.fround(dot0 + dot1) * scale;
          scores[j] = score;
          if (score > max) max = score;
        }
        let sum = 0;
        for (let j = first; j <= last; j++) {
          scores[j] = Math.exp(scores[j] - max);
          sum += scores[j];
        }
        const rowAt = (h * T + i) * S;
        const out = (i * H + h) * D;
        for (let j = first; j <= last; j++) {
          const weight = scores[j] / sum;
          if (attnWeights) attnWeights[rowAt + j] = weight;
          if (ablated) continue; // ablation: the head's context vectors stay zero
          const v = kvAt + j * D;
          for (let e = 0; e < D; e++) contextVecs[out + e] += weight * V[v + e];
        }
      }
    }
  }

  /**
   * RMSNorm's arithmetic: weight * x / sqrt(mean(x**2) + eps) for each of the T rows of
   * x (T, d), d = weight.length.
   * @param {Float32Array} x
   * @param {number} T
   * @param {Float32Array} weight
   * @param {number} eps
   * @returns {Float32Array}
   */
  rmsNorm(x, T, weight, eps) {
    const d = weight.length;
    const out = new Float32Array(T * d);
    for (let t = 0; t < T; t++) {
      let meanSquare = 0;
      for (let c = 0; c < d; c++) meanSquare += x[t * d + c] * x[t * d + c];
      meanSquare = Math.fround(meanSquare / d);
      const inv = Math.fround(1 / Math.sqrt(Math.fround(meanSquare + eps))); // torch.rsqrt
      for (let c = 0; c < d; c++) out[t * d + c] = weight[c] * Math.fround(x[t * d + c] * inv);
    }
    return out;
  }

  /**
   * A gated feed-forward's hidden layer: act(gate) * up, element by element.
   * @param {Float32Array} gate
   * @param {Float32Array} up
   * @param {"silu" | "gelu_tanh"} [activation]
   * @returns {Float32Array}
   */
  gatedAct(gate, up, activation = "silu") {
    const act = activation === "silu" ? silu : geluTanh;
    const hidden = new Float32Array(gate.length);
    for (let i = 0; i < gate.length; i++) hidden[i] = act(gate[i]) * up[i];
    return hidden;
  }

  /**
   * SwiGLU's hidden layer: silu(gate) * up (silu(g) = g / (1 + e^-g)).
   * @param {Float32Array} gate
   * @param {Float32Array} up
   * @returns {Float32Array}
   */
  siluMul(gate, up) {
    return this.gatedAct(gate, up, "silu");
  }

  /**
   * vector (d_model) . every row of `tensor` (V, d_model).
   * @param {import("./gguf.js").Tensor} tensor
   * @param {Float32Array} vector
   * @returns {Float32Array}
   */
  logits(tensor, vector) {
    const logits = new Float32Array(tensor.rows);
    const row = new Float32Array(tensor.cols);
    for (let v = 0; v < tensor.rows; v++) {
      tensor.row(v, row);
      let s = 0;
      for (let c = 0; c < row.length; c++) s += row[c] * vector[c];
      logits[v] = s;
    }
    return logits;
  }
}
