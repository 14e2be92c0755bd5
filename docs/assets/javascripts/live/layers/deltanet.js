// @ts-check
// Gated DeltaNet as a layer's mixer (Qwen3.5's linear attention): attnlab.GatedDeltaNet,
// step for step.
//
//   in_proj_qkv -> causal depthwise conv1d over the last K inputs (its state in the
//   cache) -> SiLU -> queries and keys (Hk heads of Dk, L2-normalised, each key head
//   serving Hv / Hk value heads) and values (Hv heads of Dv);
//   beta = sigmoid(in_proj_b x), g = A * softplus(in_proj_a x + dt_bias) with
//   A = -exp(A_log) (GGUF's ssm_a);
//   per value head, the gated delta rule on a (Dk, Dv) state S (in the cache):
//     S = exp(g) S;  S = S + beta k (v - S^T k)^T;  o = S^T q / sqrt(Dk);
//   an RMSNorm of each head's o times silu(in_proj_z x); out_proj.
//
// The implicit attention (attnlab.gated_delta_attention_matrix): o_t = sum_s A[t, s] v_s
// with S_t = sum_s u_s v_s^T, so A[t, s] = q_t . u_s / sqrt(Dk); each step updates the
// u's as S: u_s = exp(g) u_s - beta (u_s . k) k for the old ones, u_t = beta k. The
// cache keeps the u's (its history) when the first pass asks for the matrix, so cached
// decoding gives the new rows too. The rows are signed and need not sum to one.
import { Linear } from "./parts.js";

/** The L2 norm's epsilon (FLA's and transformers'). */
export const L2_EPS = 1e-6;

/**
 * A Gated DeltaNet layer's parts, as a family gives them.
 * @typedef {object} DeltaNetParts
 * @property {"gated_deltanet"} kind
 * @property {import("./parts.js").Projection} in_proj_qkv (2 Hk Dk + Hv Dv, d_model)
 * @property {import("./parts.js").Projection} in_proj_z (Hv Dv, d_model)
 * @property {import("./parts.js").Projection} in_proj_b (Hv, d_model)
 * @property {import("./parts.js").Projection} in_proj_a (Hv, d_model)
 * @property {Float32Array} conv1d (conv_dim, K): channel c's taps at [c K, (c + 1) K)
 * @property {Float32Array} dt_bias (Hv,)
 * @property {Float32Array} A (Hv,): -exp(A_log)
 * @property {Float32Array} norm (Dv,): the gated RMSNorm's weight
 * @property {import("./parts.js").Projection} out_proj (d_model, Hv Dv)
 * @property {Int32Array | null} [valueHeadOrder] the stored value head that is each of
 *   ours (null: as stored); our value head p reads key head floor(p / (Hv / Hk))
 */

/**
 * The sizes a Gated DeltaNet layer reads from the config (null in a family without one).
 * @typedef {object} DeltaNetSizes
 * @property {number | null} [linear_num_key_heads]
 * @property {number | null} [linear_num_value_heads]
 * @property {number | null} [linear_key_head_dim]
 * @property {number | null} [linear_value_head_dim]
 * @property {number | null} [linear_conv_kernel_dim]
 * @property {number} rms_eps
 */

/**
 * A size the config must give a Gated DeltaNet layer.
 * @param {DeltaNetSizes} sizes
 * @param {"linear_num_key_heads" | "linear_num_value_heads" | "linear_key_head_dim" | "linear_value_head_dim" | "linear_conv_kernel_dim"} name
 * @returns {number}
 */
function sizeOf(sizes, name) {
  const value = sizes[name];
  if (typeof value !== "number") throw new TypeError(`a linear_attention layer needs the config's ${name}; got ${value}`);
  return value;
}

/** What a Gated DeltaNet layer keeps between chunks: the conv's last K - 1 inputs, the
 * state of every value head, and (for the implicit attention) the u's. */
export class DeltaNetCache {
  /**
   * @param {{convDim: number, kernel: number, heads: number, keyDim: number, valueDim: number}} sizes
   */
  constructor({ convDim, kernel, heads, keyDim, valueDim }) {
    this.convDim = convDim;
    this.kernel = kernel;
    this.heads = heads;
    this.keyDim = keyDim;
    this.valueDim = valueDim;
    this.convState = new Float32Array(convDim * (kernel - 1)); // channel c at [c (K-1), (c+1)(K-1))
    this.state = new Float64Array(heads * keyDim * valueDim); // head h: (Dk, Dv)
    this.length = 0;
    /** @type {Float64Array[] | null} per value head (capacity, Dk): the u's of every position */
    this.history = null;
    this.historyCapacity = 0;
  }

  /** @returns {number} bytes held */
  get nbytes() {
    const history = this.history ? this.history.length * this.length * this.keyDim * 8 : 0;
    return this.convState.byteLength + this.state.byteLength + history;
  }

  /** @param {number} needed positions the history must hold */
  growHistory(needed) {
    if (!this.history) {
      this.historyCapacity = Math.max(needed, 16);
      this.history = Array.from({ length: this.heads }, () => new Float64Array(this.historyCapacity * this.keyDim));
      return;
    }
    if (needed <= this.historyCapacity) return;
    let capacity = this.historyCapacity;
    while (capacity < needed) capacity *= 2;
    this.history = this.history.map((old) => {
      const grown = new Float64Array(capacity * this.keyDim);
      grown.set(old);
      return grown;
    });
    this.historyCapacity = capacity;
  }
}

/** @param {number} x @returns {number} */
const sigmoid = (x) => Math.fround(1 / (1 + Math.exp(-x)));
/** @param {number} x @returns {number} PyTorch's softplus (threshold 20) */
const softplus = (x) => (x > 20 ? x : Math.fround(Math.log1p(Math.exp(x))));
/** @param {number} x @returns {number} */
const silu = (x) => Math.fround(x / (1 + Math.exp(-x)));

/**
 * x (n,) at `at` scaled to unit L2 norm in place: x * rsqrt(sum(x**2) + 1e-6).
 * @param {Float32Array} x
 * @param {number} at
 * @param {number} n
 */
function l2Normalise(x, at, n) {
  let sum = 0;
  for (let i = 0; i < n; i++) sum += x[at + i] * x[at + i];
  const inv = Math.fround(1 / Math.sqrt(Math.fround(Math.fround(sum) + L2_EPS)));
  for (let i = 0; i < n; i++) x[at + i] = Math.fround(x[at + i] * inv);
}

/** Gated DeltaNet (transformers' Qwen3_5GatedDeltaNet, attnlab.GatedDeltaNet). */
export class GatedDeltaNet {
  /**
   * @param {DeltaNetSizes} sizes
   * @param {DeltaNetParts} parts
   * @param {import("./parts.js").Kernels} kernels
   */
  constructor(sizes, parts, kernels) {
    this.kind = "gated_deltanet";
    this.numKeyHeads = sizeOf(sizes, "linear_num_key_heads");
    this.numValueHeads = sizeOf(sizes, "linear_num_value_heads");
    this.keyHeadDim = sizeOf(sizes, "linear_key_head_dim");
    this.valueHeadDim = sizeOf(sizes, "linear_value_head_dim");
    this.kernel = sizeOf(sizes, "linear_conv_kernel_dim");
    this.eps = sizes.rms_eps;
    this.convDim = 2 * this.numKeyHeads * this.keyHeadDim + this.numValueHeads * this.valueHeadDim;
    this.in_proj_qkv = new Linear(parts.in_proj_qkv, kernels);
    this.in_proj_z = new Linear(parts.in_proj_z, kernels);
    this.in_proj_b = new Linear(parts.in_proj_b, kernels);
    this.in_proj_a = new Linear(parts.in_proj_a, kernels);
    this.conv1d = parts.conv1d;
    this.dt_bias = parts.dt_bias;
    this.A = parts.A;
    this.norm = parts.norm;
    this.out_proj = new Linear(parts.out_proj, kernels);
    const Hv = this.numValueHeads;
    const perKey = Hv / this.numKeyHeads;
    // ours[p]: the stored value head that is our head p; keyHead[j]: stored head j's key head
    this.ours = parts.valueHeadOrder ?? Int32Array.from({ length: Hv }, (_, p) => p);
    this.keyHead = new Int32Array(Hv);
    this.ours.forEach((stored, p) => { this.keyHead[stored] = Math.floor(p / perKey); });
  }

  /** The heads whose implicit attention this layer returns (value heads). */
  get heads() {
    return this.numValueHeads;
  }

  /**
   * An empty cache for this layer.
   * @returns {DeltaNetCache}
   */
  newCache() {
    return new DeltaNetCache({
      convDim: this.convDim, kernel: this.kernel, heads: this.numValueHeads,
      keyDim: this.keyHeadDim, valueDim: this.valueHeadDim,
    });
  }

  /**
   * The causal depthwise convolution over the cached inputs and these T, then SiLU;
   * the cache's conv state becomes the last K - 1 inputs.
   * @param {Float32Array} mixed (T, conv_dim)
   * @param {number} T
   * @param {DeltaNetCache} cache
   * @returns {Float32Array} (T, conv_dim)
   */
  convolve(mixed, T, cache) {
    const C = this.convDim;
    const K = this.kernel;
    const old = cache.convState;
    /** @param {number} c @param {number} m @returns {number} input m of channel c (the cached ones first) */
    const input = (c, m) => (m < K - 1 ? old[c * (K - 1) + m] : mixed[(m - (K - 1)) * C + c]);
    const out = new Float32Array(T * C);
    for (let c = 0; c < C; c++) {
      const w = c * K;
      for (let t = 0; t < T; t++) {
        let sum = 0;
        for (let i = 0; i < K; i++) sum += this.conv1d[w + i] * input(c, t + i);
        out[t * C + c] = silu(Math.fround(sum));
      }
    }
    const state = new Float32Array(C * (K - 1));
    for (let c = 0; c < C; c++) for (let i = 0; i < K - 1; i++) state[c * (K - 1) + i] = input(c, T + i);
    cache.convState = state;
    return out;
  }

  /**
   * x (T, d_model) -> (keep, d_model), after the cache's positions; the implicit
   * attention (Hv, T, S) into attnWeights when given.
   * @param {import("./attention.js").MixerInputs} inputs
   * @returns {Float32Array}
   */
  forward({ x, T, cache, ablateHeads, attnWeights, keep }) {
    const Hk = this.numKeyHeads, Hv = this.numValueHeads, Dk = this.keyHeadDim, Dv = this.valueHeadDim;
    const C = this.convDim;
    const past = cache.length;
    if (attnWeights && past > 0 && !cache.history) {
      throw new RangeError(
        "return_attention after cached positions needs the linear layers' history: ask for the attention from the cache's first pass"
      );
    }
    const mixed = this.convolve(this.in_proj_qkv.forward(x, T), T, cache); // (T, conv_dim)
    const z = this.in_proj_z.forward(x, T); // (T, Hv * Dv)
    const b = this.in_proj_b.forward(x, T); // (T, Hv)
    const a = this.in_proj_a.forward(x, T); // (T, Hv)
    for (let t = 0; t < T; t++) {
      for (let h = 0; h < 2 * Hk; h++) l2Normalise(mixed, t * C + h * Dk, Dk); // queries, then keys
    }
    if (attnWeights && past === 0) cache.growHistory(T);
    else if (cache.history) cache.growHistory(past + T);
    const S = past + T;
    const scale = Dk ** -0.5;
    const core = new Float32Array(T * Hv * Dv); // (T, Hv * Dv), stored head order
    const query = new Float64Array(Dk);
    const recall = new Float64Array(Dv);
    const ablated = new Set(Array.from(ablateHeads, (p) => this.ours[p]));
    const ourIndex = new Int32Array(Hv);
    this.ours.forEach((stored, p) => { ourIndex[stored] = p; });
    for (let j = 0; j < Hv; j++) {
      const state = cache.state.subarray(j * Dk * Dv, (j + 1) * Dk * Dv); // (Dk, Dv)
      const u = cache.history ? cache.history[j] : null; // (positions, Dk)
      const p = ourIndex[j];
      for (let t = 0; t < T; t++) {
        const row = t * C;
        const k = row + Hk * Dk + this.keyHead[j] * Dk; // in mixed
        const q = row + this.keyHead[j] * Dk;
        const v = row + 2 * Hk * Dk + j * Dv;
        const beta = sigmoid(b[t * Hv + j]);
        const g = Math.fround(this.A[j] * softplus(Math.fround(a[t * Hv + j] + this.dt_bias[j])));
        const decay = Math.exp(g);
        for (let i = 0; i < Dk * Dv; i++) state[i] *= decay;
        recall.fill(0);
        for (let e = 0; e < Dk; e++) {
          const ke = mixed[k + e];
          for (let f = 0; f < Dv; f++) recall[f] += ke * state[e * Dv + f];
        }
        for (let f = 0; f < Dv; f++) recall[f] = (mixed[v + f] - recall[f]) * beta; // the error, scaled
        for (let e = 0; e < Dk; e++) {
          const ke = mixed[k + e];
          for (let f = 0; f < Dv; f++) state[e * Dv + f] += ke * recall[f];
        }
        for (let e = 0; e < Dk; e++) query[e] = Math.fround(mixed[q + e] * scale);
        if (!ablated.has(j)) {
          const out = (t * Hv + j) * Dv;
          for (let f = 0; f < Dv; f++) {
            let sum = 0;
            for (let e = 0; e < Dk; e++) sum += query[e] * state[e * Dv + f];
            core[out + f] = sum;
          }
        }
        if (u) this.implicitRow({ u, position: past + t, k, mixed, beta, decay, query, attnWeights, rowAt: (p * T + t) * S });
      }
    }
    cache.length += T;
    return this.out_proj.forward(this.gatedNorm(core, z, T).subarray((T - keep) * Hv * Dv), keep);
  }

  /**
   * One step of the u's (the state in the basis of the values seen) and, when asked,
   * the implicit attention's row A[position, 0 .. position].
   * @param {{u: Float64Array, position: number, k: number, mixed: Float32Array, beta: number,
   *   decay: number, query: Float64Array, attnWeights: Float32Array | null, rowAt: number}} step
   */
  implicitRow({ u, position, k, mixed, beta, decay, query, attnWeights, rowAt }) {
    const Dk = this.keyHeadDim;
    for (let s = 0; s < position; s++) {
      const at = s * Dk;
      let dot = 0;
      for (let e = 0; e < Dk; e++) {
        u[at + e] *= decay;
        dot += u[at + e] * mixed[k + e];
      }
      const scaled = beta * dot;
      for (let e = 0; e < Dk; e++) u[at + e] -= scaled * mixed[k + e];
    }
    for (let e = 0; e < Dk; e++) u[position * Dk + e] = beta * mixed[k + e];
    if (!attnWeights) return;
    for (let s = 0; s <= position; s++) {
      let dot = 0;
      for (let e = 0; e < Dk; e++) dot += query[e] * u[s * Dk + e];
      attnWeights[rowAt + s] = dot;
    }
  }

  /**
   * Each head's RMSNorm (weight `norm`) times silu(z): (T, Hv * Dv) -> the same.
   * @param {Float32Array} core
   * @param {Float32Array} z
   * @param {number} T
   * @returns {Float32Array}
   */
  gatedNorm(core, z, T) {
    const Dv = this.valueHeadDim;
    const out = new Float32Array(core.length);
    for (let at = 0; at < T * this.numValueHeads * Dv; at += Dv) {
      let meanSquare = 0;
      for (let f = 0; f < Dv; f++) meanSquare += core[at + f] * core[at + f];
      const inv = Math.fround(1 / Math.sqrt(Math.fround(Math.fround(meanSquare / Dv) + this.eps)));
      for (let f = 0; f < Dv; f++) {
        out[at + f] = Math.fround(this.norm[f] * Math.fround(core[at + f] * inv)) * silu(z[at + f]);
      }
    }
    return out;
  }
}
