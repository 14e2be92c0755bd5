// @ts-check
// Softmax attention as a layer's mixer, with its parts: grouped-query attention with
// this layer's rotary positions (or none), the causal mask or a sliding window, Qwen2's
// q/k/v biases, Qwen3's and Gemma 3's per-head q/k norms, Qwen3.5's output gate
// (q_proj gives each head's query and gate; the context vectors times sigmoid(gate)),
// and the scores' scale (1/sqrt(D), or Gemma's query_pre_attn_scalar**-0.5).
// KVCache keeps every position's keys and values (a window layer masks the old ones,
// as attnlab's MaskRule does: cached decoding equals the full pass).
import { Linear, RMSNorm } from "./parts.js";
/** @typedef {import("./rotary.js").RotaryEmbedding} RotaryEmbedding */

/**
 * A softmax attention layer's parts, as a family gives them.
 * @typedef {object} AttentionParts
 * @property {"attention"} kind
 * @property {import("./parts.js").Projection} q_proj
 * @property {import("./parts.js").Projection} k_proj
 * @property {import("./parts.js").Projection} v_proj
 * @property {import("./parts.js").Projection} o_proj
 * @property {Float32Array | null} [q_bias]
 * @property {Float32Array | null} [k_bias]
 * @property {Float32Array | null} [v_bias]
 * @property {Float32Array | null} [q_norm] one weight of width head_dim for every head
 * @property {Float32Array | null} [k_norm]
 * @property {boolean} [gated] q_proj gives (T, H * 2D): each head's query, then its gate
 * @property {number | null} window each query sees its last `window` positions (null: all)
 * @property {import("./rotary.js").RotarySpec | null} rotary
 * @property {number} scale the scores' factor
 */

/**
 * The sizes an attention layer reads from the config.
 * @typedef {object} AttentionSizes
 * @property {number} num_heads
 * @property {number} num_kv_heads
 * @property {number} head_dim
 * @property {number} rms_eps
 */

/**
 * attnlab.KVCache for one layer: the keys and values of the positions seen so far,
 * (Hkv, S, D) each, kept in room for `capacity` positions: key (h, s) starts at
 * keys[(h * capacity + s) * D]. `length` is the number of positions held, which is
 * also the next token's position.
 */
export class KVCache {
  /**
   * @param {number} numKvHeads
   * @param {number} headDim
   * @param {number} [capacity]
   */
  constructor(numKvHeads, headDim, capacity = 64) {
    this.numKvHeads = numKvHeads;
    this.headDim = headDim;
    this.capacity = Math.max(1, capacity);
    this.length = 0;
    /** @type {Float32Array} */
    this.keys = new Float32Array(numKvHeads * this.capacity * headDim);
    /** @type {Float32Array} */
    this.values = new Float32Array(numKvHeads * this.capacity * headDim);
  }

  /** @returns {number} bytes of the positions held */
  get nbytes() {
    return 2 * this.numKvHeads * this.length * this.headDim * 4;
  }

  /** @param {number} needed positions to make room for */
  grow(needed) {
    let capacity = this.capacity;
    while (capacity < needed) capacity *= 2;
    if (capacity === this.capacity) return;
    const D = this.headDim;
    /** @param {Float32Array} old @returns {Float32Array} */
    const move = (old) => {
      const out = new Float32Array(this.numKvHeads * capacity * D);
      for (let h = 0; h < this.numKvHeads; h++) {
        out.set(old.subarray(h * this.capacity * D, (h * this.capacity + this.length) * D), h * capacity * D);
      }
      return out;
    };
    this.keys = move(this.keys);
    this.values = move(this.values);
    this.capacity = capacity;
  }

  /**
   * Add a chunk of T positions, given as (T, Hkv * D) (the projections' layout), after
   * the cached ones.
   * @param {Float32Array} keys
   * @param {Float32Array} values
   * @param {number} T
   */
  append(keys, values, T) {
    const Hkv = this.numKvHeads;
    const D = this.headDim;
    this.grow(this.length + T);
    for (let t = 0; t < T; t++) {
      for (let h = 0; h < Hkv; h++) {
        const to = (h * this.capacity + this.length + t) * D;
        this.keys.set(keys.subarray((t * Hkv + h) * D, (t * Hkv + h + 1) * D), to);
        this.values.set(values.subarray((t * Hkv + h) * D, (t * Hkv + h + 1) * D), to);
      }
    }
    this.length += T;
  }
}

/**
 * y (T, n) += bias (n) on every row, in float32; nothing without a bias.
 * @param {Float32Array} y
 * @param {Float32Array | null | undefined} bias
 */
function addBias(y, bias) {
  if (!bias) return;
  for (let i = 0; i < y.length; i++) y[i] += bias[i % bias.length];
}

/**
 * Each head's query and gate from a gated q_proj's output (T, H * 2D), per head
 * [query (D), gate (D)], as transformers' torch.chunk.
 * @param {Float32Array} packed (T, H * 2D)
 * @param {{T: number, H: number, D: number}} options positions, heads and head_dim
 * @returns {{queries: Float32Array, gate: Float32Array}} (T, H * D) each
 */
function splitGate(packed, { T, H, D }) {
  const queries = new Float32Array(T * H * D);
  const gate = new Float32Array(T * H * D);
  for (let th = 0; th < T * H; th++) {
    queries.set(packed.subarray(2 * th * D, (2 * th + 1) * D), th * D);
    gate.set(packed.subarray((2 * th + 1) * D, (2 * th + 2) * D), th * D);
  }
  return { queries, gate };
}

/**
 * The inputs of a mixer's forward.
 * @typedef {object} MixerInputs
 * @property {Float32Array} x (T, d_model), already normalised
 * @property {number} T
 * @property {any} cache this layer's cache, appended to
 * @property {Set<number>} ablateHeads heads that add nothing
 * @property {Float32Array | null} attnWeights (heads, T, S), written when given
 * @property {number} keep the output of the last `keep` positions only
 * @property {Map<RotaryEmbedding, {cos: Float32Array, sin: Float32Array}>} cosSin this pass's, by rotary part
 */

/** Grouped-query softmax attention: query head h reads key/value head floor(h / (H / Hkv)). */
export class Attention {
  /**
   * @param {{sizes: AttentionSizes, parts: AttentionParts, kernels: import("./parts.js").Kernels,
   *   rotary: RotaryEmbedding | null}} options the model's sizes, this layer's weights, what
   *   computes the products, and this layer's positions (a rotary part shared with its kin)
   */
  constructor({ sizes, parts, kernels, rotary }) {
    this.kind = "attention";
    this.numHeads = sizes.num_heads;
    this.numKvHeads = sizes.num_kv_heads;
    this.headDim = sizes.head_dim;
    this.q_proj = new Linear(parts.q_proj, kernels);
    this.k_proj = new Linear(parts.k_proj, kernels);
    this.v_proj = new Linear(parts.v_proj, kernels);
    this.o_proj = new Linear(parts.o_proj, kernels);
    this.biases = [parts.q_bias, parts.k_bias, parts.v_bias].map((b) => b ?? null);
    this.q_norm = parts.q_norm ? new RMSNorm(parts.q_norm, sizes.rms_eps, kernels) : null;
    this.k_norm = parts.k_norm ? new RMSNorm(parts.k_norm, sizes.rms_eps, kernels) : null;
    this.gated = parts.gated ?? false;
    this.window = parts.window;
    this.scale = parts.scale;
    this.rotary = rotary;
    this.kernels = kernels;
  }

  /** The heads whose weights this layer returns. */
  get heads() {
    return this.numHeads;
  }

  /**
   * An empty cache for this layer.
   * @param {number} capacity
   * @returns {KVCache}
   */
  newCache(capacity) {
    return new KVCache(this.numKvHeads, this.headDim, capacity);
  }

  /**
   * x (T, d_model) -> (keep, d_model). The new keys and values are appended to the
   * cache (S = cache.length after it); the weights (H, T, S) go to attnWeights when given.
   * @param {MixerInputs} inputs
   * @returns {Float32Array}
   */
  forward({ x, T, cache, ablateHeads, attnWeights, keep, cosSin }) {
    const H = this.numHeads;
    const Hkv = this.numKvHeads;
    const D = this.headDim;
    let queries = this.q_proj.forward(x, T); // (T, H * D), or (T, H * 2D) with the gate
    let gate = null;
    if (this.gated) ({ queries, gate } = splitGate(queries, { T, H, D }));
    let keys = this.k_proj.forward(x, T); // (T, Hkv * D)
    const values = this.v_proj.forward(x, T); // (T, Hkv * D)
    [queries, keys, values].forEach((y, i) => addBias(y, this.biases[i]));
    if (this.q_norm) queries = this.q_norm.forward(queries, T * H); // each head: (T * H, D)
    if (this.k_norm) keys = this.k_norm.forward(keys, T * Hkv);
    if (this.rotary) {
      const turns = cosSin.get(this.rotary);
      if (!turns) throw new Error("the pass has no cos/sin for this layer's rotary part");
      this.rotary.applyCosSin(queries, T, H, turns);
      this.rotary.applyCosSin(keys, T, Hkv, turns);
    }
    const past = cache.length;
    cache.append(keys, values, T);
    const contextVecs = new Float32Array(T * H * D); // (T, H * D), zero for ablated heads
    this.kernels.attention({
      queries, T, H, group: H / Hkv, D, past, cache, ablateHeads, attnWeights, contextVecs,
      scale: this.scale, window: this.window,
    });
    if (gate) {
      for (let i = 0; i < contextVecs.length; i++) {
        contextVecs[i] *= Math.fround(1 / (1 + Math.exp(-gate[i]))); // times sigmoid(gate)
      }
    }
    return this.o_proj.forward(contextVecs.subarray((T - keep) * H * D), keep); // (keep, d_model)
  }
}
