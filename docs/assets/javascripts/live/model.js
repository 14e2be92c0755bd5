// SmolLM2's forward pass in plain JavaScript: src/attnlab/llama/model.py, line for line.
//
// The same pieces with the same names, in the order a token meets them:
//   embed -> num_layers x DecoderBlock
//              (RMSNorm -> LlamaAttention -> residual -> RMSNorm -> SwiGLU -> residual)
//         -> RMSNorm -> logits (tied: the dot product with every token's embedding).
// LlamaAttention is grouped-query attention with rotary positions (Hugging Face's
// rotate-half pairing; the GGUF's query and key rows are unpermuted as
// attnlab.llama.unpermute_rotary_rows does), the causal mask, and the two ways to look
// inside: every head's attention weights, and ablation (a head's context vectors zeroed
// before the output projection).
//
// Shape legend as in Python: T tokens, d_model width, H query heads, Hkv key/value
// heads, D head width, V vocabulary. A matrix (T, n) is a Float32Array of T * n values,
// row t at [t * n, (t + 1) * n). Weights stay quantised; `linear` dequantises each
// weight row once per call and uses it for all T tokens.
//
// A classic script: in a page or Worker it adds `AttnlabLive.model`; in Node
// `require("./model.js")` returns the same object.
(function (root) {
  "use strict";

  // --- validation: the Python's messages, raised before any arithmetic ------------------

  function describe(value) {
    if (value === null) return "null";
    if (Array.isArray(value)) return "an array";
    return typeof value;
  }

  // attnlab.llama.LlamaModel.check_ids for a list of numbers.
  function checkIds(name, ids, vocabSize, maxTokens) {
    if (!Array.isArray(ids) && !(ids instanceof Int32Array) && !(ids instanceof Uint32Array)) {
      throw new TypeError(name + " must be an array of integer token ids; got " + describe(ids));
    }
    if (ids.length === 0) throw new RangeError(name + " must hold at least one token id; got an empty list");
    if (maxTokens !== undefined && ids.length > maxTokens) {
      throw new RangeError(name + " must be at most " + maxTokens + " tokens long (the page's limit); got " + ids.length);
    }
    var low = Infinity;
    var high = -Infinity;
    for (var i = 0; i < ids.length; i++) {
      var id = ids[i];
      if (typeof id !== "number" || !Number.isInteger(id)) {
        throw new TypeError(name + " must hold integer token ids; got " + JSON.stringify(id) + " at index " + i);
      }
      if (id < low) low = id;
      if (id > high) high = id;
    }
    if (low < 0 || high >= vocabSize) {
      throw new RangeError(name + " must be token ids in 0 .. " + (vocabSize - 1) + "; got values from " + low + " to " + high);
    }
    return Int32Array.from(ids);
  }

  // attnlab.llama.LlamaModel._check_ablate: {layer: [head, ...]} -> array of Sets by layer.
  function checkAblate(ablate, numLayers, numHeads) {
    var off = [];
    for (var l = 0; l < numLayers; l++) off.push(new Set());
    if (ablate === undefined || ablate === null) return off;
    if (typeof ablate !== "object" || Array.isArray(ablate)) {
      throw new TypeError("ablate must be an object {layer: [head, ...]}; got " + describe(ablate));
    }
    Object.keys(ablate).forEach(function (key) {
      var layer = Number(key);
      if (!/^\d+$/.test(key) || layer >= numLayers) {
        throw new RangeError("ablate's layers must be ints in 0 .. " + (numLayers - 1) + "; got " + JSON.stringify(key));
      }
      var heads = ablate[key];
      heads = typeof heads === "number" ? [heads] : heads;
      if (!Array.isArray(heads)) {
        throw new TypeError("ablate's heads must be a list of ints; got " + describe(heads) + " in layer " + layer);
      }
      heads.forEach(function (head) {
        if (typeof head !== "number" || !Number.isInteger(head) || head < 0 || head >= numHeads) {
          throw new RangeError("ablate's heads must be ints in 0 .. " + (numHeads - 1) + "; got " + JSON.stringify(head) + " in layer " + layer);
        }
        off[layer].add(head);
      });
    });
    return off;
  }

  // --- the matrix product: the one place where the time goes -----------------------------

  // out (T, rows) = x (T, cols) @ W.T for a dequantised W (rows, cols): each row of W
  // is read once and used for all T tokens. (kernels.js may put a WebAssembly SIMD
  // version of this function in its place; the results agree to float32 rounding.)
  function matmulTransposed(x, T, cols, W, rows, out) {
    for (var r = 0; r < rows; r++) {
      var w = r * cols;
      for (var t = 0; t < T; t++) {
        var xo = t * cols;
        var s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (var c = 0; c < cols; c += 4) {
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

  // A weight matrix kept quantised (out_features rows of in_features values);
  // rowOrder[r] is the stored row that becomes row r (the rotary unpermutation).
  // The kernels (JsKernels below, or kernels.js's WebAssembly) compute its product.
  function Linear(tensor, rowOrder, kernels) {
    this.tensor = tensor;
    this.rows = tensor.rows; // out_features
    this.cols = tensor.cols; // in_features
    this.rowOrder = rowOrder || null;
    this.kernels = kernels;
  }
  // x (T, in_features) -> (T, out_features)
  Linear.prototype.forward = function (x, T) {
    return this.kernels.linear(this, x, T);
  };

  // The product in plain JavaScript: each stored row dequantised once into a scratch
  // matrix (rows, cols) reused by every Linear, then matmulTransposed.
  function JsKernels() {
    this.scratch = new Float32Array(0);
  }
  JsKernels.prototype.linear = function (linear, x, T) {
    var size = linear.rows * linear.cols;
    if (this.scratch.length < size) this.scratch = new Float32Array(size);
    var W = this.scratch;
    for (var r = 0; r < linear.rows; r++) {
      var stored = linear.rowOrder ? linear.rowOrder[r] : r;
      linear.tensor.row(stored, W.subarray(r * linear.cols, (r + 1) * linear.cols));
    }
    var out = new Float32Array(T * linear.rows);
    return matmulTransposed(x, T, linear.cols, W, linear.rows, out);
  };

  // attnlab.llama.unpermute_rotary_rows as an index: our row r of a head is GGUF row
  // 2i (r = i < D/2) or 2i + 1 (r = i + D/2) of that head.
  function unpermuteRotaryRows(numHeads, D) {
    var order = new Int32Array(numHeads * D);
    for (var h = 0; h < numHeads; h++) {
      for (var i = 0; i < D / 2; i++) {
        order[h * D + i] = h * D + 2 * i;
        order[h * D + i + D / 2] = h * D + 2 * i + 1;
      }
    }
    return order;
  }

  // --- the model's pieces -------------------------------------------------------------------

  // The sizes of a Llama-architecture model, read from the GGUF metadata (weights.py's read_gguf).
  function LlamaConfig(metadata) {
    this.vocab_size = metadata["tokenizer.ggml.tokens"].length;
    this.d_model = metadata["llama.embedding_length"];
    this.num_layers = metadata["llama.block_count"];
    this.num_heads = metadata["llama.attention.head_count"];
    this.num_kv_heads = metadata["llama.attention.head_count_kv"];
    this.head_dim = metadata["llama.rope.dimension_count"];
    this.ffn_dim = metadata["llama.feed_forward_length"];
    this.rope_theta = metadata["llama.rope.freq_base"];
    this.rms_eps = metadata["llama.attention.layer_norm_rms_epsilon"];
    this.context_length = metadata["llama.context_length"];
    this.bos_token_id = metadata["tokenizer.ggml.bos_token_id"];
    this.eos_token_id = metadata["tokenizer.ggml.eos_token_id"];
  }

  // weight * x / sqrt(mean(x**2) + eps), each of the T rows; x (T, d_model) -> same.
  function RMSNorm(weight, eps) {
    this.weight = weight; // Float32Array(d_model)
    this.eps = eps;
  }
  RMSNorm.prototype.forward = function (x, T) {
    var d = this.weight.length;
    var out = new Float32Array(T * d);
    for (var t = 0; t < T; t++) {
      var meanSquare = 0;
      for (var c = 0; c < d; c++) meanSquare += x[t * d + c] * x[t * d + c];
      meanSquare = Math.fround(meanSquare / d);
      var inv = Math.fround(1 / Math.sqrt(Math.fround(meanSquare + this.eps))); // torch.rsqrt
      for (var c2 = 0; c2 < d; c2++) out[t * d + c2] = this.weight[c2] * Math.fround(x[t * d + c2] * inv);
    }
    return out;
  };

  // attnlab.RotaryEmbedding: pair i is coordinates (i, i + D/2), turned by position * inv_freq[i].
  function RotaryEmbedding(headDim, theta) {
    this.head_dim = headDim;
    this.inv_freq = new Float32Array(headDim / 2);
    for (var i = 0; i < headDim / 2; i++) {
      this.inv_freq[i] = Math.pow(theta, -Math.fround((2 * i) / headDim)); // theta ** -exponents
    }
  }
  // cos and sin of every position's angles, (T, D/2) each (both halves share them).
  RotaryEmbedding.prototype.cosSin = function (T) {
    var half = this.head_dim / 2;
    var cos = new Float32Array(T * half);
    var sin = new Float32Array(T * half);
    for (var t = 0; t < T; t++) {
      for (var i = 0; i < half; i++) {
        var angle = Math.fround(t * this.inv_freq[i]);
        cos[t * half + i] = Math.cos(angle);
        sin[t * half + i] = Math.sin(angle);
      }
    }
    return { cos: cos, sin: sin };
  };
  // Rotate, in place, every head of x (T, heads * D): x * cos + rotate_half(x) * sin.
  RotaryEmbedding.prototype.applyCosSin = function (x, T, heads, cosSin) {
    var D = this.head_dim;
    var half = D / 2;
    for (var t = 0; t < T; t++) {
      for (var h = 0; h < heads; h++) {
        var at = (t * heads + h) * D;
        for (var i = 0; i < half; i++) {
          var cos = cosSin.cos[t * half + i];
          var sin = cosSin.sin[t * half + i];
          var x1 = x[at + i];
          var x2 = x[at + i + half];
          x[at + i] = Math.fround(x1 * cos) - Math.fround(x2 * sin); // rotate_half: [-x2, x1]
          x[at + i + half] = Math.fround(x2 * cos) + Math.fround(x1 * sin);
        }
      }
    }
  };

  // Grouped-query attention with rotary positions and the causal mask, as
  // attnlab.llama.LlamaAttention: query head h reads key/value head floor(h / (H / Hkv)).
  function LlamaAttention(config, layer, tensors, kernels) {
    var c = config;
    this.num_heads = c.num_heads;
    this.num_kv_heads = c.num_kv_heads;
    this.head_dim = c.head_dim;
    var prefix = "blk." + layer + ".";
    this.q_proj = new Linear(tensors[prefix + "attn_q.weight"], unpermuteRotaryRows(c.num_heads, c.head_dim), kernels);
    this.k_proj = new Linear(tensors[prefix + "attn_k.weight"], unpermuteRotaryRows(c.num_kv_heads, c.head_dim), kernels);
    this.v_proj = new Linear(tensors[prefix + "attn_v.weight"], null, kernels);
    this.o_proj = new Linear(tensors[prefix + "attn_output.weight"], null, kernels);
  }
  // x (T, d_model), already normalised -> output (T, d_model); the weights (H, T, T) are
  // written into attnWeights (if given) and heads in ablateHeads add nothing.
  LlamaAttention.prototype.forward = function (x, T, rotary, cosSin, ablateHeads, attnWeights) {
    var H = this.num_heads;
    var Hkv = this.num_kv_heads;
    var D = this.head_dim;
    var group = H / Hkv;
    var queries = this.q_proj.forward(x, T); // (T, H * D)
    var keys = this.k_proj.forward(x, T); // (T, Hkv * D)
    var values = this.v_proj.forward(x, T); // (T, Hkv * D)
    rotary.applyCosSin(queries, T, H, cosSin);
    rotary.applyCosSin(keys, T, Hkv, cosSin);
    var scale = 1 / Math.sqrt(D);
    var contextVecs = new Float32Array(T * H * D); // (T, H * D), zero for ablated heads
    var attnScores = new Float64Array(T); // one query's scores over keys 0..i
    for (var h = 0; h < H; h++) {
      var ablated = ablateHeads.has(h);
      if (ablated && !attnWeights) continue;
      var kvh = Math.floor(h / group);
      for (var i = 0; i < T; i++) {
        var q = (i * H + h) * D;
        var max = -Infinity;
        for (var j = 0; j <= i; j++) { // causal: keys up to the query's own position
          var k = (j * Hkv + kvh) * D;
          var dot0 = 0, dot1 = 0; // q . k in two interleaved sums (D is even)
          for (var e = 0; e < D; e += 2) {
            dot0 += queries[q + e] * keys[k + e];
            dot1 += queries[q + e + 1] * keys[k + e + 1];
          }
          attnScores[j] = Math.fround(dot0 + dot1) * scale;
          if (attnScores[j] > max) max = attnScores[j];
        }
        var sum = 0;
        for (var j2 = 0; j2 <= i; j2++) {
          attnScores[j2] = Math.exp(attnScores[j2] - max);
          sum += attnScores[j2];
        }
        var rowAt = (h * T + i) * T;
        var out = (i * H + h) * D;
        for (var j3 = 0; j3 <= i; j3++) {
          var weight = attnScores[j3] / sum;
          if (attnWeights) attnWeights[rowAt + j3] = weight;
          if (ablated) continue; // ablation: the head's context vectors stay zero
          var v = (j3 * Hkv + kvh) * D;
          for (var e2 = 0; e2 < D; e2++) contextVecs[out + e2] += weight * values[v + e2];
        }
      }
    }
    return this.o_proj.forward(contextVecs, T); // (T, d_model)
  };

  // Llama's feed-forward: down(silu(gate(x)) * up(x)).
  function SwiGLU(layer, tensors, kernels) {
    var prefix = "blk." + layer + ".";
    this.gate_proj = new Linear(tensors[prefix + "ffn_gate.weight"], null, kernels);
    this.up_proj = new Linear(tensors[prefix + "ffn_up.weight"], null, kernels);
    this.down_proj = new Linear(tensors[prefix + "ffn_down.weight"], null, kernels);
  }
  SwiGLU.prototype.forward = function (x, T) {
    var gate = this.gate_proj.forward(x, T); // (T, ffn_dim)
    var up = this.up_proj.forward(x, T); // (T, ffn_dim)
    var hidden = new Float32Array(gate.length);
    for (var i = 0; i < gate.length; i++) {
      var g = gate[i];
      hidden[i] = Math.fround(g / (1 + Math.exp(-g))) * up[i]; // silu(gate) * up
    }
    return this.down_proj.forward(hidden, T); // (T, d_model)
  };

  // One Llama layer: pre-norm attention and pre-norm SwiGLU, each added back.
  function DecoderBlock(config, layer, tensors, kernels) {
    var prefix = "blk." + layer + ".";
    this.attn_norm = new RMSNorm(tensors[prefix + "attn_norm.weight"].toFloat32(), config.rms_eps);
    this.attn = new LlamaAttention(config, layer, tensors, kernels);
    this.ffn_norm = new RMSNorm(tensors[prefix + "ffn_norm.weight"].toFloat32(), config.rms_eps);
    this.ffn = new SwiGLU(layer, tensors, kernels);
  }
  DecoderBlock.prototype.forward = function (x, T, rotary, cosSin, ablateHeads, attnWeights) {
    var attnOut = this.attn.forward(this.attn_norm.forward(x, T), T, rotary, cosSin, ablateHeads, attnWeights);
    for (var i = 0; i < x.length; i++) x[i] += attnOut[i]; // residual
    var ffnOut = this.ffn.forward(this.ffn_norm.forward(x, T), T);
    for (var i2 = 0; i2 < x.length; i2++) x[i2] += ffnOut[i2]; // residual
    return x;
  };

  // A Llama-architecture causal language model with tied embeddings.
  // kernels: what computes the Linear layers (default: JsKernels, plain JavaScript).
  function LlamaModel(gguf, kernels) {
    var config = new LlamaConfig(gguf.metadata);
    var tensors = gguf.tensors;
    this.config = config;
    this.kernels = kernels || new JsKernels();
    this.embed = tensors["token_embd.weight"]; // (V, d_model), Q8_0, read a row at a time
    this.layers = [];
    for (var l = 0; l < config.num_layers; l++) this.layers.push(new DecoderBlock(config, l, tensors, this.kernels));
    this.norm = new RMSNorm(tensors["output_norm.weight"].toFloat32(), config.rms_eps);
    this.rotary = new RotaryEmbedding(config.head_dim, config.rope_theta);
  }

  // The forward pass over ids (T,): {logits: Float32Array(V), the last position's scores;
  // attention: Float32Array(num_layers * H * T * T), layer, head, query, key}.
  // options.ablate: {layer: [head, ...]}; options.returnAttention (default true).
  LlamaModel.prototype.forward = function (ids, options) {
    options = options || {};
    var c = this.config;
    var inputIds = checkIds("input_ids", ids, c.vocab_size, options.maxTokens);
    var headsOff = checkAblate(options.ablate, c.num_layers, c.num_heads);
    var T = inputIds.length;
    var d = c.d_model;
    var x = new Float32Array(T * d); // (T, d_model)
    for (var t = 0; t < T; t++) this.embed.row(inputIds[t], x.subarray(t * d, (t + 1) * d));
    var returnAttention = options.returnAttention !== false;
    var perLayer = c.num_heads * T * T;
    var attention = returnAttention ? new Float32Array(c.num_layers * perLayer) : null;
    var cosSin = this.rotary.cosSin(T);
    for (var l = 0; l < c.num_layers; l++) {
      var weights = attention ? attention.subarray(l * perLayer, (l + 1) * perLayer) : null;
      x = this.layers[l].forward(x, T, this.rotary, cosSin, headsOff[l], weights);
      if (options.onLayer) options.onLayer(l);
    }
    var last = this.norm.forward(x.subarray((T - 1) * d, T * d), 1); // (1, d_model)
    return { logits: this.logits(last), attention: attention, T: T };
  };

  // Tied logits of one normalised vector: its dot product with every token's embedding.
  LlamaModel.prototype.logits = function (vector) {
    if (this.kernels.tiedLogits && this.embed.type === "Q8_0") return this.kernels.tiedLogits(this.embed, vector);
    var V = this.config.vocab_size;
    var d = this.config.d_model;
    var logits = new Float32Array(V);
    var row = new Float32Array(d);
    for (var v = 0; v < V; v++) {
      this.embed.row(v, row);
      var s = 0;
      for (var c = 0; c < d; c++) s += row[c] * vector[c];
      logits[v] = s;
    }
    return logits;
  };

  // The k largest entries of `logits` after a softmax: [{id, probability, logit}].
  function topK(logits, k) {
    var max = -Infinity;
    for (var i = 0; i < logits.length; i++) if (logits[i] > max) max = logits[i];
    var sum = 0;
    for (var j = 0; j < logits.length; j++) sum += Math.exp(logits[j] - max);
    var best = [];
    for (var v = 0; v < logits.length; v++) {
      if (best.length < k || logits[v] > best[best.length - 1].logit) {
        best.push({ id: v, logit: logits[v] });
        best.sort(function (a, b) { return b.logit - a.logit; });
        if (best.length > k) best.pop();
      }
    }
    return best.map(function (entry) {
      return { id: entry.id, logit: entry.logit, probability: Math.exp(entry.logit - max) / sum };
    });
  }

  var api = {
    LlamaConfig: LlamaConfig,
    LlamaModel: LlamaModel,
    DecoderBlock: DecoderBlock,
    LlamaAttention: LlamaAttention,
    RMSNorm: RMSNorm,
    SwiGLU: SwiGLU,
    RotaryEmbedding: RotaryEmbedding,
    Linear: Linear,
    JsKernels: JsKernels,
    matmulTransposed: matmulTransposed,
    unpermuteRotaryRows: unpermuteRotaryRows,
    checkIds: checkIds,
    checkAblate: checkAblate,
    topK: topK,
  };
  if (typeof module === "object" && module.exports) module.exports = api;
  else {
    root.AttnlabLive = root.AttnlabLive || {};
    root.AttnlabLive.model = api;
  }
})(typeof self !== "undefined" ? self : this);
