// A Llama-architecture decoder in plain JavaScript: src/attnlab/llama/model.py, line for
// line, with the same names.
//
//   embed -> num_layers x DecoderBlock
//              (RMSNorm -> attention -> residual -> RMSNorm -> SwiGLU -> residual)
//         -> RMSNorm -> logits (tied: the dot product with every token's embedding).
// The attention is grouped-query attention with rotary positions (Hugging Face's
// rotate-half pairing), the causal mask, a KVCache per layer, and the two ways to look
// inside: every head's attention weights (return_attention), and ablation (a head's
// context vectors zeroed before the output projection).
//
// LlamaModel takes (config, parts): the sizes (families/llama.js's LlamaConfig) and
// the weights by part (families/*.js's partsFromGguf); it knows no file format.
// Shapes as in Python, batch B = 1 left out: T new tokens, S keys (cached ones
// included), H query heads, Hkv key/value heads, D head width, V vocabulary. A matrix
// (T, n) is a Float32Array of T * n values, row t at [t * n, (t + 1) * n). Weights stay
// quantised; the kernels dequantise each weight row once per call.

// --- validation: the Python's messages, raised before any arithmetic ------------------

export function describe(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value;
}

// attnlab.llama.LlamaModel.check_ids for a list of numbers; an Int32Array.
export function checkIds(name, ids, vocabSize, maxTokens) {
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

// attnlab.llama.LlamaModel._check_ablate: {layer: [head, ...]} -> an array of Sets by layer.
export function checkAblate(ablate, numLayers, numHeads) {
  const off = Array.from({ length: numLayers }, () => new Set());
  if (ablate === undefined || ablate === null) return off;
  if (typeof ablate !== "object" || Array.isArray(ablate)) {
    throw new TypeError(`ablate must be an object {layer: [head, ...]}; got ${describe(ablate)}`);
  }
  for (const key of Object.keys(ablate)) {
    const layer = Number(key);
    if (!/^\d+$/.test(key) || layer >= numLayers) {
      throw new RangeError(`ablate's layers must be ints in 0 .. ${numLayers - 1}; got ${JSON.stringify(key)}`);
    }
    let heads = ablate[key];
    heads = typeof heads === "number" ? [heads] : heads;
    if (!Array.isArray(heads)) {
      throw new TypeError(`ablate's heads must be a list of ints; got ${describe(heads)} in layer ${layer}`);
    }
    for (const head of heads) {
      if (typeof head !== "number" || !Number.isInteger(head) || head < 0 || head >= numHeads) {
        throw new RangeError(`ablate's heads must be ints in 0 .. ${numHeads - 1}; got ${JSON.stringify(head)} in layer ${layer}`);
      }
      off[layer].add(head);
    }
  }
  return off;
}

// A flag such as return_attention: a boolean or absent (then `fallback`).
export function checkBool(name, value, fallback) {
  if (value === undefined) return fallback;
  if (typeof value !== "boolean") throw new TypeError(`${name} must be a boolean; got ${describe(value)}`);
  return value;
}

// --- the matrix product: the one place where the time goes -----------------------------

// out (T, rows) = x (T, cols) @ W.T for a dequantised W (rows, cols): each row of W
// is read once and used for all T tokens. (kernels.js's WebAssembly SIMD does the same
// product; the results agree to float32 rounding.)
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

// The products in plain JavaScript: each stored row dequantised once into a scratch
// matrix (rows, cols) reused by every Linear, then matmulTransposed.
export class JsKernels {
  constructor() {
    this.name = "JavaScript";
    this.scratch = new Float32Array(0);
  }
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
  // The causal softmax attention of T new queries (T, H * D) over the cache's S keys:
  // each head's weights (H, T, S) into attnWeights (if given), its context vectors into
  // contextVecs (T, H * D), skipped for the heads in ablateHeads.
  attention({ queries, T, H, group, D, past, cache, ablateHeads, attnWeights, contextVecs }) {
    const S = cache.length;
    const K = cache.keys;
    const V = cache.values;
    const stride = cache.capacity * D; // from one key/value head to the next
    const scale = 1 / Math.sqrt(D);
    const scores = new Float64Array(S); // one query's scores over keys 0 .. past + i
    for (let h = 0; h < H; h++) {
      const ablated = ablateHeads.has(h);
      if (ablated && !attnWeights) continue;
      const kvAt = Math.floor(h / group) * stride;
      for (let i = 0; i < T; i++) {
        const q = (i * H + h) * D;
        const last = past + i; // causal: keys up to the query's own position
        let max = -Infinity;
        for (let j = 0; j <= last; j++) {
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
        for (let j = 0; j <= last; j++) {
          scores[j] = Math.exp(scores[j] - max);
          sum += scores[j];
        }
        const rowAt = (h * T + i) * S;
        const out = (i * H + h) * D;
        for (let j = 0; j <= last; j++) {
          const weight = scores[j] / sum;
          if (attnWeights) attnWeights[rowAt + j] = weight;
          if (ablated) continue; // ablation: the head's context vectors stay zero
          const v = kvAt + j * D;
          for (let e = 0; e < D; e++) contextVecs[out + e] += weight * V[v + e];
        }
      }
    }
  }
  // RMSNorm's arithmetic: weight * x / sqrt(mean(x**2) + eps) for each of the T rows of
  // x (T, d), d = weight.length.
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
  // SwiGLU's hidden layer: silu(gate) * up, element by element (silu(g) = g / (1 + e^-g)).
  siluMul(gate, up) {
    const hidden = new Float32Array(gate.length);
    for (let i = 0; i < gate.length; i++) {
      const g = gate[i];
      hidden[i] = Math.fround(g / (1 + Math.exp(-g))) * up[i];
    }
    return hidden;
  }
  // vector (d_model) . every row of `tensor` (V, d_model).
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

// A weight matrix kept quantised (out_features rows of in_features values); rowOrder[r]
// is the stored row that becomes row r (or null). The kernels compute its product.
export class Linear {
  constructor({ tensor, rowOrder = null }, kernels) {
    this.tensor = tensor;
    this.rows = tensor.rows; // out_features
    this.cols = tensor.cols; // in_features
    this.rowOrder = rowOrder;
    this.kernels = kernels;
  }
  // x (T, in_features) -> (T, out_features)
  forward(x, T) {
    return this.kernels.linear(this, x, T);
  }
}

// --- the model's pieces -------------------------------------------------------------------

// weight * x / sqrt(mean(x**2) + eps), each of the T rows; x (T, d_model) -> same.
// The kernels compute it (JsKernels.rmsNorm, or kernels.js's rms_norm).
export class RMSNorm {
  constructor(weight, eps, kernels) {
    this.weight = weight; // Float32Array(d_model)
    this.eps = eps;
    this.kernels = kernels;
  }
  forward(x, T) {
    return this.kernels.rmsNorm(x, T, this.weight, this.eps);
  }
}

// attnlab.RotaryEmbedding: pair i is coordinates (i, i + D/2), turned by position * inv_freq[i].
// factors (or null): Llama 3.1's rotary scaling as llama.cpp stores it, each pair's
// frequency divided by its factor (attnlab.Llama3Scaling gives the same frequencies).
export class RotaryEmbedding {
  constructor(headDim, theta, factors = null) {
    this.head_dim = headDim;
    this.inv_freq = new Float32Array(headDim / 2);
    for (let i = 0; i < headDim / 2; i++) this.inv_freq[i] = theta ** -Math.fround((2 * i) / headDim);
    if (factors) for (let i = 0; i < headDim / 2; i++) this.inv_freq[i] /= factors[i];
  }
  // cos and sin of positions start .. start + T - 1, (T, D/2) each (both halves share them).
  cosSin(start, T) {
    const half = this.head_dim / 2;
    const cos = new Float32Array(T * half);
    const sin = new Float32Array(T * half);
    for (let t = 0; t < T; t++) {
      for (let i = 0; i < half; i++) {
        const angle = Math.fround((start + t) * this.inv_freq[i]);
        cos[t * half + i] = Math.cos(angle);
        sin[t * half + i] = Math.sin(angle);
      }
    }
    return { cos, sin };
  }
  // Rotate, in place, every head of x (T, heads * D): x * cos + rotate_half(x) * sin.
  applyCosSin(x, T, heads, { cos, sin }) {
    const D = this.head_dim;
    const half = D / 2;
    for (let t = 0; t < T; t++) {
      for (let h = 0; h < heads; h++) {
        const at = (t * heads + h) * D;
        for (let i = 0; i < half; i++) {
          const c = cos[t * half + i];
          const s = sin[t * half + i];
          const x1 = x[at + i];
          const x2 = x[at + i + half];
          x[at + i] = Math.fround(x1 * c) - Math.fround(x2 * s); // rotate_half: [-x2, x1]
          x[at + i + half] = Math.fround(x2 * c) + Math.fround(x1 * s);
        }
      }
    }
  }
}

// attnlab.KVCache for one layer: the keys and values of the positions seen so far,
// (Hkv, S, D) each (Python's (B, Hkv, S, D) with B = 1). They are kept in room for
// `capacity` positions: key (h, s) starts at keys[(h * capacity + s) * D].
// `length` is the number of positions held, which is also the next token's position.
export class KVCache {
  constructor(numKvHeads, headDim, capacity = 64) {
    this.num_kv_heads = numKvHeads;
    this.head_dim = headDim;
    this.capacity = capacity;
    this.length = 0;
    this.keys = new Float32Array(numKvHeads * capacity * headDim);
    this.values = new Float32Array(numKvHeads * capacity * headDim);
  }
  get nbytes() {
    return 2 * this.num_kv_heads * this.length * this.head_dim * 4;
  }
  grow(needed) {
    let capacity = this.capacity;
    while (capacity < needed) capacity *= 2;
    if (capacity === this.capacity) return;
    const D = this.head_dim;
    const move = (old) => {
      const out = new Float32Array(this.num_kv_heads * capacity * D);
      for (let h = 0; h < this.num_kv_heads; h++) {
        out.set(old.subarray(h * this.capacity * D, (h * this.capacity + this.length) * D), h * capacity * D);
      }
      return out;
    };
    this.keys = move(this.keys);
    this.values = move(this.values);
    this.capacity = capacity;
  }
  // Add a chunk of T positions, given as (T, Hkv * D) (the projections' layout), after
  // the cached ones.
  append(keys, values, T) {
    const Hkv = this.num_kv_heads;
    const D = this.head_dim;
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

// y (T, n) += bias (n) on every row, in float32; nothing without a bias.
function addBias(y, bias) {
  if (!bias) return;
  for (let i = 0; i < y.length; i++) y[i] += bias[i % bias.length];
}

// Grouped-query attention with rotary positions, the causal mask and a KVCache, as
// attnlab.llama's layer: query head h reads key/value head floor(h / (H / Hkv)).
export class Attention {
  constructor(config, part, kernels) {
    this.num_heads = config.num_heads;
    this.num_kv_heads = config.num_kv_heads;
    this.head_dim = config.head_dim;
    this.q_proj = new Linear(part.q_proj, kernels);
    this.k_proj = new Linear(part.k_proj, kernels);
    this.v_proj = new Linear(part.v_proj, kernels);
    this.o_proj = new Linear(part.o_proj, kernels);
    // Qwen2's q/k/v biases and Qwen3's per-head q/k norms, where the family gives them
    this.biases = [part.q_bias, part.k_bias, part.v_bias].map((b) => b ?? null);
    this.q_norm = part.q_norm ? new RMSNorm(part.q_norm, config.rms_eps, kernels) : null;
    this.k_norm = part.k_norm ? new RMSNorm(part.k_norm, config.rms_eps, kernels) : null;
    this.kernels = kernels;
  }
  // x (T, d_model), already normalised -> (keep, d_model): the output of the last
  // `keep` positions (all T by default). The new keys and values are appended to `cache`
  // (S = cache.length after it); the weights (H, T, S) are written into attnWeights
  // when given; heads in ablateHeads add nothing.
  forward(x, T, rotary, cosSin, cache, ablateHeads, attnWeights, keep = T) {
    const H = this.num_heads;
    const Hkv = this.num_kv_heads;
    const D = this.head_dim;
    const group = H / Hkv;
    let queries = this.q_proj.forward(x, T); // (T, H * D)
    let keys = this.k_proj.forward(x, T); // (T, Hkv * D)
    const values = this.v_proj.forward(x, T); // (T, Hkv * D)
    [queries, keys, values].forEach((y, i) => addBias(y, this.biases[i]));
    if (this.q_norm) queries = this.q_norm.forward(queries, T * H); // each head: (T * H, D)
    if (this.k_norm) keys = this.k_norm.forward(keys, T * Hkv);
    rotary.applyCosSin(queries, T, H, cosSin);
    rotary.applyCosSin(keys, T, Hkv, cosSin);
    const past = cache.length;
    cache.append(keys, values, T);
    const contextVecs = new Float32Array(T * H * D); // (T, H * D), zero for ablated heads
    this.kernels.attention({ queries, T, H, group, D, past, cache, ablateHeads, attnWeights, contextVecs });
    return this.o_proj.forward(contextVecs.subarray((T - keep) * H * D), keep); // (keep, d_model)
  }
}

// Llama's feed-forward: down(silu(gate(x)) * up(x)).
export class SwiGLU {
  constructor(part, kernels) {
    this.gate_proj = new Linear(part.gate_proj, kernels);
    this.up_proj = new Linear(part.up_proj, kernels);
    this.down_proj = new Linear(part.down_proj, kernels);
    this.kernels = kernels;
  }
  forward(x, T) {
    const gate = this.gate_proj.forward(x, T); // (T, ffn_dim)
    const up = this.up_proj.forward(x, T); // (T, ffn_dim)
    const hidden = this.kernels.siluMul(gate, up); // silu(gate) * up
    return this.down_proj.forward(hidden, T); // (T, d_model)
  }
}

// One Llama layer: pre-norm attention and pre-norm SwiGLU, each added back.
export class DecoderBlock {
  constructor(config, part, kernels) {
    this.attn_norm = new RMSNorm(part.attn_norm, config.rms_eps, kernels);
    this.attn = new Attention(config, part, kernels);
    this.ffn_norm = new RMSNorm(part.ffn_norm, config.rms_eps, kernels);
    this.ffn = new SwiGLU(part, kernels);
  }
  // x (T, d_model) -> the last `keep` rows (keep, d_model) (all T by default): every
  // position's keys and values reach the cache either way.
  forward(x, T, rotary, cosSin, cache, ablateHeads, attnWeights, keep = T) {
    const attnOut = this.attn.forward(this.attn_norm.forward(x, T), T, rotary, cosSin, cache, ablateHeads, attnWeights, keep);
    const h = keep === T ? x : x.slice(x.length - attnOut.length);
    for (let i = 0; i < h.length; i++) h[i] += attnOut[i]; // residual
    const ffnOut = this.ffn.forward(this.ffn_norm.forward(h, keep), keep);
    for (let i = 0; i < h.length; i++) h[i] += ffnOut[i]; // residual
    return h;
  }
}

// A Llama-architecture causal language model. parts: families/*.js's partsFromGguf;
// kernels: what computes the products (JsKernels, or kernels.js's WasmKernels).
export class LlamaModel {
  constructor(config, parts, kernels = new JsKernels()) {
    this.config = config;
    this.kernels = kernels;
    this.embed = parts.embed; // (V, d_model), quantised, read a row at a time
    this.lm_head = parts.lm_head || parts.embed; // tied unless the file has its own
    this.layers = parts.layers.map((part) => new DecoderBlock(config, part, kernels));
    this.norm = new RMSNorm(parts.norm, config.rms_eps, kernels);
    this.rotary = new RotaryEmbedding(config.head_dim, config.rope_theta, parts.rope_freqs ?? null); // one for all layers
  }

  // An empty KVCache for each layer, for forward(ids, {cache}).
  new_cache(capacity = 64) {
    return this.layers.map(() => new KVCache(this.config.num_kv_heads, this.config.head_dim, capacity));
  }

  checkCache(cache) {
    const n = this.layers.length;
    if (!Array.isArray(cache) || cache.length !== n || !cache.every((c) => c instanceof KVCache)) {
      throw new TypeError(`cache must be an array of ${n} KVCache (model.new_cache()); got ${describe(cache)}`);
    }
    if (new Set(cache).size !== n) throw new RangeError("cache must hold a different KVCache for every layer");
    const lengths = new Set(cache.map((c) => c.length));
    if (lengths.size > 1) throw new RangeError("cache must hold the same number of positions in every layer");
    return cache[0].length;
  }

  // The forward pass over ids (T,) after the cache's positions (none without one):
  // {logits: Float32Array(V), the last position's scores; attention: null, or with
  // return_attention a Float32Array(num_layers * H * T * S): layer, head, query, key;
  // T, S}. options: cache (from new_cache(), appended to), return_attention (default
  // false, as in Python), ablate ({layer: [head, ...]}), maxTokens (the page's limit).
  forward(ids, { cache = null, return_attention = undefined, ablate = null, maxTokens = undefined, onLayer = null } = {}) {
    const c = this.config;
    const inputIds = checkIds("input_ids", ids, c.vocab_size, maxTokens);
    const returnAttention = checkBool("return_attention", return_attention, false);
    const headsOff = checkAblate(ablate, c.num_layers, c.num_heads);
    const layerCaches = cache === null ? this.new_cache(inputIds.length) : cache;
    const past = this.checkCache(layerCaches);
    const T = inputIds.length;
    if (past + T > c.context_length) {
      throw new RangeError(`input_ids must fit the context of ${c.context_length} tokens; got ${T} new tokens after ${past} cached`);
    }
    const S = past + T;
    const d = c.d_model;
    let x = new Float32Array(T * d); // (T, d_model)
    for (let t = 0; t < T; t++) this.embed.row(inputIds[t], x.subarray(t * d, (t + 1) * d));
    const perLayer = c.num_heads * T * S;
    const attention = returnAttention ? new Float32Array(c.num_layers * perLayer) : null;
    const cosSin = this.rotary.cosSin(past, T); // once, for every layer
    // The last layer's output projection and feed-forward run for the last position
    // only: the logits read nothing else (Python's model returns every position's).
    for (let l = 0; l < c.num_layers; l++) {
      const weights = attention ? attention.subarray(l * perLayer, (l + 1) * perLayer) : null;
      const keep = l === c.num_layers - 1 ? 1 : T;
      x = this.layers[l].forward(x, T, this.rotary, cosSin, layerCaches[l], headsOff[l], weights, keep);
      if (onLayer) onLayer(l);
    }
    const last = this.norm.forward(x.subarray(x.length - d), 1); // (1, d_model)
    return { logits: this.kernels.logits(this.lm_head, last), attention, T, S };
  }
}

// The k largest entries of `logits` after a softmax: [{id, probability, logit}].
export function topK(logits, k) {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i] > max) max = logits[i];
  let sum = 0;
  for (let j = 0; j < logits.length; j++) sum += Math.exp(logits[j] - max);
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
