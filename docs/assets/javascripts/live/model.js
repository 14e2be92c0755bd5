// @ts-check
// A decoder in plain JavaScript: src/attnlab/llama/model.py, with the same names. A
// model is a list of layers, each its parts, as the family gives them:
//
//   embed (times embed_scale: Gemma's sqrt(d_model)) -> layers -> RMSNorm -> logits
//   a layer: x + [post_attn_norm](mixer(attn_norm(x))), then h + [post_ffn_norm](ffn(ffn_norm(h)))
//
// The mixer is softmax attention (layers/attention.js: its own rotary positions, window,
// biases, q/k norms, output gate, scale) or Gated DeltaNet (layers/deltanet.js); the
// feed-forward is gated (SwiGLU or GELU-tanh). Two ways to look inside: every layer's
// attention (return_attention: softmax weights, or a Gated DeltaNet layer's implicit
// attention matrix), and ablation (a head's output zeroed before the output projection).
//
// LlamaModel takes (config, parts): the sizes (families/*.js's config, the Python
// LlamaConfig's fields) and the weights by part; it knows no file format. Shapes as in
// Python, batch B = 1 left out: T new tokens, S keys (cached ones included). A matrix
// (T, n) is a Float32Array of T * n values, row t at [t * n, (t + 1) * n). Weights stay
// quantised; the kernels dequantise each weight row once per call.
import { JsKernels } from "./jskernels.js";
import { Attention, KVCache } from "./layers/attention.js";
import { DeltaNetCache, GatedDeltaNet } from "./layers/deltanet.js";
import { FeedForward, RMSNorm } from "./layers/parts.js";
import { RotaryEmbedding } from "./layers/rotary.js";

export { JsKernels, matmulTransposed } from "./jskernels.js";
export { Attention, KVCache } from "./layers/attention.js";
export { DeltaNetCache, GatedDeltaNet } from "./layers/deltanet.js";
export { FeedForward, Linear, RMSNorm } from "./layers/parts.js";
export { RotaryEmbedding, ropeFrequencies } from "./layers/rotary.js";

/**
 * One layer's parts, as a family gives them.
 * @typedef {object} LayerParts
 * @property {"full_attention" | "sliding_attention" | "linear_attention"} kind the layer's type
 * @property {Float32Array} attn_norm
 * @property {import("./layers/attention.js").AttentionParts | import("./layers/deltanet.js").DeltaNetParts} attn
 * @property {Float32Array | null} [post_attn_norm] Gemma's sandwich norms
 * @property {Float32Array} ffn_norm
 * @property {import("./layers/parts.js").FeedForwardParts} ffn
 * @property {Float32Array | null} [post_ffn_norm]
 */

/**
 * A model's parts, as a family gives them.
 * @typedef {object} ModelParts
 * @property {import("./gguf.js").Tensor} embed (V, d_model), read a row at a time
 * @property {number | null} [embed_scale] the embedding's factor (Gemma: sqrt(d_model))
 * @property {import("./gguf.js").Tensor | null} lm_head null: tied to the embedding
 * @property {Float32Array} norm
 * @property {LayerParts[]} layers
 */

/**
 * The sizes the model reads: the Python LlamaConfig's fields (more may be present).
 * @typedef {object} ModelSizes
 * @property {number} vocab_size
 * @property {number} d_model
 * @property {number} num_layers
 * @property {number} num_heads
 * @property {number} num_kv_heads
 * @property {number} head_dim
 * @property {number} rms_eps
 * @property {number} context_length
 * @property {number | null} [linear_num_key_heads] Gated DeltaNet's sizes (Qwen3.5; null elsewhere)
 * @property {number | null} [linear_num_value_heads]
 * @property {number | null} [linear_key_head_dim]
 * @property {number | null} [linear_value_head_dim]
 * @property {number | null} [linear_conv_kernel_dim]
 */

/** @typedef {KVCache | DeltaNetCache} LayerCache */

/**
 * What forward returns.
 * @typedef {object} ForwardResult
 * @property {Float32Array} logits (V,): the last position's scores
 * @property {Float32Array | null} attention with return_attention, every layer's maps one
 *   after another: layer l holds (layerHeads[l], T, S) at offset attentionOffset(l)
 * @property {number} T
 * @property {number} S
 */

// --- validation: the Python's messages, raised before any arithmetic ------------------

/**
 * @param {unknown} value
 * @returns {string}
 */
export function describe(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value;
}

/**
 * attnlab.llama.LlamaModel.check_ids for a list of numbers; an Int32Array.
 * @param {string} name
 * @param {unknown} ids
 * @param {{vocabSize: number, maxTokens?: number}} options the ids must be below vocabSize,
 *   and at most maxTokens of them (the page's limit) when given
 * @returns {Int32Array}
 */
export function checkIds(name, ids, { vocabSize, maxTokens }) {
  if (!Array.isArray(ids) && !(ids instanceof Int32Array) && !(ids instanceof Uint32Array)) {
    throw new TypeError(`${name} must be an array of integer token ids; got ${describe(ids)}`);
  }
  if (ids.length === 0) throw new RangeError(`${name} must hold at least one token id; got an empty list`);
  if (maxTokens !== undefined && ids.length > maxTokens) {
    throw new RangeError(`${name} must be at most ${maxTokens} tokens long (the page's limit); got ${ids.length}`);
  }
  let low = Infinity;
  let high = -Infinity;
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i];
    if (typeof id !== "number" || !Number.isInteger(id)) {
      throw new TypeError(`${name} must hold integer token ids; got ${JSON.stringify(id)} at index ${i}`);
    }
    if (id < low) low = id;
    if (id > high) high = id;
  }
  if (low < 0 || high >= vocabSize) {
    throw new RangeError(`${name} must be token ids in 0 .. ${vocabSize - 1}; got values from ${low} to ${high}`);
  }
  return Int32Array.from(ids);
}

/**
 * attnlab.llama.LlamaModel._check_ablate: {layer: [head, ...]} -> a Set of heads per
 * layer; a layer's heads are its query heads (softmax) or value heads (Gated DeltaNet).
 * @param {unknown} ablate
 * @param {number[]} layerHeads
 * @returns {Set<number>[]}
 */
export function checkAblate(ablate, layerHeads) {
  const numLayers = layerHeads.length;
  const off = Array.from({ length: numLayers }, () => new Set());
  if (ablate === undefined || ablate === null) return off;
  if (typeof ablate !== "object" || Array.isArray(ablate)) {
    throw new TypeError(`ablate must be an object {layer: [head, ...]}; got ${describe(ablate)}`);
  }
  for (const [key, given] of Object.entries(ablate)) {
    const layer = Number(key);
    if (!/^\d+$/.test(key) || layer >= numLayers) {
      throw new RangeError(`ablate's layers must be ints in 0 .. ${numLayers - 1}; got ${JSON.stringify(key)}`);
    }
    const heads = typeof given === "number" ? [given] : given;
    if (!Array.isArray(heads)) {
      throw new TypeError(`ablate's heads must be a list of ints; got ${describe(heads)} in layer ${layer}`);
    }
    const H = layerHeads[layer];
    for (const head of heads) {
      if (typeof head !== "number" || !Number.isInteger(head) || head < 0 || head >= H) {
        throw new RangeError(`ablate's heads must be ints in 0 .. ${H - 1}; got ${JSON.stringify(head)} in layer ${layer}`);
      }
      off[layer].add(head);
    }
  }
  return off;
}

/**
 * A flag such as return_attention: a boolean or absent (then `fallback`).
 * @param {string} name
 * @param {unknown} value
 * @param {boolean} fallback
 * @returns {boolean}
 */
export function checkBool(name, value, fallback) {
  if (value === undefined) return fallback;
  if (typeof value !== "boolean") throw new TypeError(`${name} must be a boolean; got ${describe(value)}`);
  return value;
}

// --- the model -----------------------------------------------------------------------------

/** One layer: the mixer and the feed-forward, each after its norm (and before its post
 * norm, where the family has one), each added back. */
export class DecoderBlock {
  /**
   * @param {{config: ModelSizes, parts: LayerParts, kernels: import("./layers/parts.js").Kernels,
   *   rotaryFor: (spec: import("./layers/rotary.js").RotarySpec) => RotaryEmbedding}} options
   *   the model's sizes, this layer's weights, what computes the products, and the model's
   *   shared rotary part for a spec
   */
  constructor({ config, parts, kernels, rotaryFor }) {
    const eps = config.rms_eps;
    /** @param {Float32Array | null | undefined} weight */
    const norm = (weight) => (weight ? new RMSNorm(weight, eps, kernels) : null);
    this.kind = parts.kind;
    this.attn_norm = new RMSNorm(parts.attn_norm, eps, kernels);
    const mixer = parts.attn;
    this.attn = mixer.kind === "gated_deltanet"
      ? new GatedDeltaNet(config, mixer, kernels)
      : new Attention({
        sizes: config, parts: mixer, kernels, rotary: mixer.rotary ? rotaryFor(mixer.rotary) : null,
      });
    this.post_attn_norm = norm(parts.post_attn_norm);
    this.ffn_norm = new RMSNorm(parts.ffn_norm, eps, kernels);
    this.ffn = new FeedForward(parts.ffn, kernels);
    this.post_ffn_norm = norm(parts.post_ffn_norm);
  }

  /**
   * x (T, d_model) -> the last `keep` rows (keep, d_model): every position still
   * reaches the cache.
   * @param {import("./layers/attention.js").MixerInputs} inputs
   * @returns {Float32Array}
   */
  forward(inputs) {
    const { x, T, keep } = inputs;
    let mixed = this.attn.forward({ ...inputs, x: this.attn_norm.forward(x, T) });
    if (this.post_attn_norm) mixed = this.post_attn_norm.forward(mixed, keep);
    const h = keep === T ? x : x.slice(x.length - mixed.length);
    for (let i = 0; i < h.length; i++) h[i] += mixed[i]; // residual
    let ffnOut = this.ffn.forward(this.ffn_norm.forward(h, keep), keep);
    if (this.post_ffn_norm) ffnOut = this.post_ffn_norm.forward(ffnOut, keep);
    for (let i = 0; i < h.length; i++) h[i] += ffnOut[i]; // residual
    return h;
  }
}

/** A causal language model made of its layers. parts: families/*.js's partsFromGguf;
 * kernels: what computes the products (JsKernels, or kernels.js's WasmKernels). */
export class LlamaModel {
  /**
   * @param {ModelSizes} config
   * @param {ModelParts} parts
   * @param {import("./layers/parts.js").Kernels} [kernels]
   */
  constructor(config, parts, kernels = new JsKernels()) {
    this.config = config;
    this.kernels = kernels;
    this.embed = parts.embed;
    this.embedScale = parts.embed_scale ?? null;
    this.lm_head = parts.lm_head || parts.embed; // tied unless the file has its own
    /** @type {Map<string, RotaryEmbedding>} one rotary part per distinct spec, shared */
    this.rotaries = new Map();
    /** @param {import("./layers/rotary.js").RotarySpec} spec */
    const rotaryFor = (spec) => {
      const key = JSON.stringify([spec.theta, spec.dim, spec.scaling]);
      let rotary = this.rotaries.get(key);
      if (!rotary) {
        rotary = new RotaryEmbedding(config.head_dim, spec.theta, { dim: spec.dim, scaling: spec.scaling });
        this.rotaries.set(key, rotary);
      }
      return rotary;
    };
    this.layers = parts.layers.map((part) => new DecoderBlock({ config, parts: part, kernels, rotaryFor }));
    this.norm = new RMSNorm(parts.norm, config.rms_eps, kernels);
    /** Each layer's heads in the attention maps (query heads, or value heads). */
    this.layerHeads = this.layers.map((layer) => layer.attn.heads);
  }

  /**
   * An empty cache for each layer (KVCache or DeltaNetCache), for forward(ids, {cache}).
   * @param {{capacity?: number}} [options] positions to make room for at first
   * @returns {LayerCache[]}
   */
  newCache({ capacity = 64 } = {}) {
    return this.layers.map((layer) => layer.attn.newCache(capacity));
  }

  /**
   * The cache's length, once every layer's cache is checked.
   * @param {unknown} cache
   * @returns {number}
   */
  checkCache(cache) {
    const n = this.layers.length;
    const fits = (/** @type {unknown} */ c, /** @type {number} */ l) =>
      this.layers[l].attn.kind === "gated_deltanet" ? c instanceof DeltaNetCache : c instanceof KVCache;
    if (!Array.isArray(cache) || cache.length !== n || !cache.every(fits)) {
      throw new TypeError(`cache must be an array of ${n} layer caches (model.newCache()); got ${describe(cache)}`);
    }
    if (new Set(cache).size !== n) throw new RangeError("cache must hold a different cache for every layer");
    const lengths = new Set(cache.map((c) => c.length));
    if (lengths.size > 1) throw new RangeError("cache must hold the same number of positions in every layer");
    return cache[0].length;
  }

  /**
   * Where layer l's maps start in forward's attention, for T queries over S keys.
   * @param {number} layer
   * @param {number} T
   * @param {number} S
   * @returns {number}
   */
  attentionOffset(layer, T, S) {
    let heads = 0;
    for (let l = 0; l < layer; l++) heads += this.layerHeads[l];
    return heads * T * S;
  }

  /**
   * The forward pass over ids (T,) after the cache's positions (none without one).
   * @param {unknown} ids
   * @param {{cache?: LayerCache[] | null, return_attention?: boolean, ablate?: object | null,
   *   maxTokens?: number, onLayer?: ((layer: number) => void) | null}} [options]
   *   cache (from newCache(), appended to); return_attention (default false, as in
   *   Python); ablate ({layer: [head, ...]}); maxTokens (the page's limit)
   * @returns {ForwardResult}
   */
  forward(ids, { cache = null, return_attention = undefined, ablate = null, maxTokens = undefined, onLayer = null } = {}) {
    const c = this.config;
    const inputIds = checkIds("input_ids", ids, { vocabSize: c.vocab_size, maxTokens });
    const returnAttention = checkBool("return_attention", return_attention, false);
    const headsOff = checkAblate(ablate, this.layerHeads);
    headsOff.forEach((heads, l) => {
      if (heads.size && this.layers[l].attn.kind === "gated_deltanet") {
        throw new RangeError("a linear_attention (Gated DeltaNet) layer takes no ablate_heads"); // as the package
      }
    });
    const layerCaches = cache === null ? this.newCache({ capacity: inputIds.length }) : cache;
    const past = this.checkCache(layerCaches);
    if (returnAttention && past > 0 && layerCaches.some((c) => c instanceof DeltaNetCache && !c.history)) {
      throw new RangeError(
        "return_attention after cached positions needs the linear layers' history: ask for the attention from the cache's first pass"
      );
    }
    const T = inputIds.length;
    if (past + T > c.context_length) {
      throw new RangeError(`input_ids must fit the context of ${c.context_length} tokens; got ${T} new tokens after ${past} cached`);
    }
    const S = past + T;
    const d = c.d_model;
    /** @type {Float32Array} */
    let x = new Float32Array(T * d); // (T, d_model)
    for (let t = 0; t < T; t++) this.embed.row(inputIds[t], x.subarray(t * d, (t + 1) * d));
    if (this.embedScale !== null) {
      const scale = Math.fround(this.embedScale);
      for (let i = 0; i < x.length; i++) x[i] = Math.fround(x[i] * scale);
    }
    const attention = returnAttention ? new Float32Array(this.attentionOffset(c.num_layers, T, S)) : null;
    const cosSin = new Map(); // once per rotary part, for every layer that shares it
    for (const rotary of this.rotaries.values()) cosSin.set(rotary, rotary.cosSin(past, T));
    // The last layer's output projection and feed-forward run for the last position
    // only: the logits read nothing else (Python's model returns every position's).
    for (let l = 0; l < c.num_layers; l++) {
      const at = this.attentionOffset(l, T, S);
      const attnWeights = attention ? attention.subarray(at, at + this.layerHeads[l] * T * S) : null;
      const keep = l === c.num_layers - 1 ? 1 : T;
      x = this.layers[l].forward({ x, T, cache: layerCaches[l], ablateHeads: headsOff[l], attnWeights, keep, cosSin });
      if (onLayer) onLayer(l);
    }
    const last = this.norm.forward(x.subarray(x.length - d), 1); // (1, d_model)
    return { logits: this.kernels.logits(this.lm_head, last), attention, T, S };
  }
}

/**
 * The k largest entries of `logits` after a softmax.
 * @param {Float32Array} logits
 * @param {number} k
 * @returns {{id: number, logit: number, probability: number}[]}
 */
export function topK(logits, k) {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i] > max) max = logits[i];
  let sum = 0;
  for (let j = 0; j < logits.length; j++) sum += Math.exp(logits[j] - max);
  /** @type {{id: number, logit: number}[]} */
  const best = [];
  for (let v = 0; v < logits.length; v++) {
    if (best.length < k || logits[v] > best[best.length - 1].logit) {
      best.push({ id: v, logit: logits[v] });
      best.sort((a, b) => b.logit - a.logit);
      if (best.length > k) best.pop();
    }
  }
  return best.map(({ id, logit }) => ({ id, logit, probability: Math.exp(logit - max) / sum }));
}
