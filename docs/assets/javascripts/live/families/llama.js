// The Llama family (`general.architecture = "llama"`: SmolLM2, TinyLlama, Llama 3.x):
// everything that knows its GGUF file, and nothing else does.
//
// - LlamaConfig: the model's sizes with attnlab.llama.LlamaConfig's names and defaults
//   (SmolLM2-135M's), read from the `llama.*` metadata keys by configFromGguf;
// - partsFromGguf: the map from GGUF tensor names to the model's parts (model.js's
//   LlamaModel takes (config, parts) and knows no GGUF name), with llama.cpp's rotary
//   row order undone for q and k (attnlab.llama.unpermute_rotary_rows).
//
// Another family is one more file beside this one, listed in families/index.js.

import { checkFinite, repr, shapeText } from "../gguf.js";

export const ARCHITECTURE = "llama";

// attnlab.llama.LlamaConfig, field for field (tests/js compares the two).
export class LlamaConfig {
  static defaults = Object.freeze({
    vocab_size: 49152,
    d_model: 576,
    num_layers: 30,
    num_heads: 9,
    num_kv_heads: 3,
    head_dim: 64,
    ffn_dim: 1536,
    rope_theta: 100000.0,
    rms_eps: 1e-5,
    context_length: 8192,
    bos_token_id: 1,
    eos_token_id: 2,
    architecture: "llama",
    attention_bias: false,
    qk_norm: false,
    tie_word_embeddings: true,
    rope_scaling: null,
    sliding_window: null,
  });

  constructor(fields = {}) {
    for (const name of Object.keys(fields)) {
      if (!(name in LlamaConfig.defaults)) {
        throw new TypeError(`LlamaConfig has no field ${JSON.stringify(name)}; its fields are ${Object.keys(LlamaConfig.defaults).join(", ")}`);
      }
    }
    Object.assign(this, LlamaConfig.defaults, fields);
    Object.freeze(this);
  }
}

// The config a GGUF file's metadata (and its tensors' names) describe, as
// attnlab.llama's families/llama.py reads it, every count checked first with its words
// (positive, heads dividing, block_count the blocks present). The page does not stretch
// rotary frequencies: a file that asks for it is refused by name. With the tensors'
// names given (the page's engine), every tensor the config implies is checked present
// with its shape, none unused, and the token list no longer than the embedding.
export function configFromGguf(metadata, tensors = {}, arch = ARCHITECTURE, fields = {}) {
  const scaling = metadata[`${arch}.rope.scaling.type`];
  if (scaling !== undefined && scaling !== "none") {
    throw new RangeError(`${arch}.rope.scaling.type must be "none" here (the page does not scale rotary frequencies); got ${JSON.stringify(scaling)}`);
  }
  const key = (name, fallback) => {
    const value = metadata[`${arch}.${name}`] ?? fallback;
    if (value === undefined) throw new RangeError(`the GGUF file lacks the metadata key '${arch}.${name}'`);
    return value;
  };
  const count = (name, fallback) => {
    const value = key(name, fallback);
    if (!Number.isInteger(value) || value < 1) throw new RangeError(`the GGUF's ${arch}.${name} must be a positive int; got ${repr(value)}`);
    return value;
  };
  const number = (name, fallback) => {
    const value = key(name, fallback);
    if (typeof value !== "number" || !(value > 0)) throw new RangeError(`the GGUF's ${arch}.${name} must be a number > 0; got ${repr(value)}`);
    if (!Number.isFinite(value)) throw new RangeError(`the GGUF's ${arch}.${name} must be finite; got ${repr(value)}`);
    return value;
  };
  const numLayers = count("block_count");
  const blocks = new Set(Object.keys(tensors).filter((name) => name.startsWith("blk.")).map((name) => name.split(".")[1]));
  if (numLayers !== blocks.size) {
    throw new RangeError(`the GGUF's ${arch}.block_count is ${numLayers}, but the file holds tensors of ${blocks.size} block(s)`);
  }
  const dModel = count("embedding_length");
  const numHeads = count("attention.head_count");
  const numKvHeads = count("attention.head_count_kv", numHeads);
  if (numHeads % numKvHeads) {
    throw new RangeError(`the GGUF's ${arch}.attention.head_count (${numHeads}) must be a multiple of ${arch}.attention.head_count_kv (${numKvHeads})`);
  }
  const widths = [`${arch}.attention.key_length`, `${arch}.rope.dimension_count`];
  if (dModel % numHeads && !widths.some((width) => width in metadata)) {
    throw new RangeError(`the GGUF's ${arch}.embedding_length (${dModel}) must be a multiple of ${arch}.attention.head_count (${numHeads}) when the file states no head width`);
  }
  const headDim = count("attention.key_length", count("rope.dimension_count", Math.floor(dModel / numHeads)));
  if (headDim % 2) throw new RangeError(`the GGUF's head width must be even (rotary pairs); got ${headDim}`);
  const config = new LlamaConfig({
    // the embedding's rows, as attnlab.llama reads it (a token list may be shorter)
    vocab_size: count("vocab_size", tensors["token_embd.weight"]?.rows ?? metadata["tokenizer.ggml.tokens"]?.length),
    d_model: dModel,
    num_layers: numLayers,
    num_heads: numHeads,
    num_kv_heads: numKvHeads,
    head_dim: headDim,
    ffn_dim: count("feed_forward_length"),
    rope_theta: number("rope.freq_base", 10000.0),
    rms_eps: number("attention.layer_norm_rms_epsilon"),
    context_length: count("context_length"),
    bos_token_id: metadata["tokenizer.ggml.bos_token_id"],
    eos_token_id: metadata["tokenizer.ggml.eos_token_id"],
    architecture: arch,
    tie_word_embeddings: !tensors["output.weight"],
    ...fields,
  });
  if (Object.keys(tensors).length) checkTensors(metadata, tensors, config);
  return config;
}

// Every tensor name the config implies -> its shape (outermost first), in
// attnlab.llama's order: attnlab.llama.LlamaModel's parameters under GGUF's names.
export function expectedShapes(c) {
  const V = c.vocab_size, d = c.d_model, H = c.num_heads, Hkv = c.num_kv_heads, D = c.head_dim, F = c.ffn_dim;
  const shapes = { "token_embd.weight": [V, d], "output_norm.weight": [d] };
  if (!c.tie_word_embeddings) shapes["output.weight"] = [V, d];
  for (let l = 0; l < c.num_layers; l++) {
    const layer = {
      attn_norm: [d], attn_q: [H * D, d], attn_k: [Hkv * D, d], attn_v: [Hkv * D, d], attn_output: [d, H * D],
      ffn_norm: [d], ffn_gate: [F, d], ffn_up: [F, d], ffn_down: [d, F],
    };
    for (const [part, shape] of Object.entries(layer)) shapes[`blk.${l}.${part}.weight`] = shape;
    if (c.attention_bias) for (const [n, w] of [["q", H], ["k", Hkv], ["v", Hkv]]) shapes[`blk.${l}.attn_${n}.bias`] = [w * D];
    if (c.qk_norm) for (const n of ["q", "k"]) shapes[`blk.${l}.attn_${n}_norm.weight`] = [D];
  }
  return shapes;
}

// attnlab.llama's checks of a file's tensors against its config, with its words.
function checkTensors(metadata, tensors, config) {
  const c = config;
  const tokens = metadata["tokenizer.ggml.tokens"];
  if (Array.isArray(tokens) && tokens.length > c.vocab_size) {
    throw new RangeError(`the GGUF's tokenizer.ggml.tokens holds ${tokens.length} tokens, more than the model's vocabulary of ${c.vocab_size} (the embedding's rows)`);
  }
  const shapes = expectedShapes(c);
  const missing = Object.keys(shapes).filter((name) => !(name in tensors));
  if (missing.length) {
    throw new RangeError(`the GGUF file lacks ${missing.length} tensor(s) of the ${c.architecture} family, e.g. '${missing[0]}'`);
  }
  const extra = Object.keys(tensors).filter((name) => !Object.hasOwn(shapes, name) && name !== "rope_freqs.weight").sort();
  if (extra.length) {
    throw new RangeError(`the GGUF file has tensor(s) the ${c.architecture} family does not use, e.g. '${extra[0]}'`);
  }
  shapes["rope_freqs.weight"] = [c.head_dim / 2];
  for (const [name, wanted] of Object.entries(shapes)) {
    const got = tensors[name] ? [...tensors[name].dims].reverse() : wanted;
    if (got.join() !== wanted.join()) {
      throw new RangeError(`the GGUF file's tensor '${name}' has shape ${shapeText(got)}; the file's ${c.architecture}.* keys imply ${shapeText(wanted)}`);
    }
  }
}

// attnlab.llama.unpermute_rotary_rows as an index: our row r of a head is GGUF row
// 2i (r = i < D/2) or 2i + 1 (r = i + D/2) of that head.
export function unpermuteRotaryRows(numHeads, D) {
  const order = new Int32Array(numHeads * D);
  for (let h = 0; h < numHeads; h++) {
    for (let i = 0; i < D / 2; i++) {
      order[h * D + i] = h * D + 2 * i;
      order[h * D + i + D / 2] = h * D + 2 * i + 1;
    }
  }
  return order;
}

// The tensor `name` of the file, or a RangeError naming it.
export function tensor(tensors, name) {
  const found = tensors[name];
  if (!found) throw new RangeError(`the GGUF has no tensor ${name}`);
  return found;
}

// A Llama file's tensors as the model's parts, the rotary rows un-permuted.
export function partsFromGguf(tensors, config) {
  return readParts(tensors, config, (heads) => unpermuteRotaryRows(heads, config.head_dim));
}

// GGUF tensors -> the model's parts: {embed, lm_head (null when tied), norm, layers:
// [{attn_norm, q_proj, k_proj, v_proj, o_proj, ffn_norm, gate_proj, up_proj,
// down_proj}]}. A projection is {tensor, rowOrder} (rowOrder: the stored row that
// becomes each of ours, or null); rotaryRows(heads) gives the query's and the key's
// (null: stored as they are). The Llama layout every family shares.
export function readParts(tensors, config, rotaryRows) {
  const c = config;
  for (const found of Object.values(tensors)) checkFinite(found); // NaN or infinity: refused by name
  const weight = (name, rowOrder = null) => ({ tensor: tensor(tensors, name), rowOrder });
  const layers = [];
  for (let l = 0; l < c.num_layers; l++) {
    const blk = `blk.${l}.`;
    layers.push({
      attn_norm: tensor(tensors, blk + "attn_norm.weight").toFloat32(),
      q_proj: weight(blk + "attn_q.weight", rotaryRows(c.num_heads)),
      k_proj: weight(blk + "attn_k.weight", rotaryRows(c.num_kv_heads)),
      v_proj: weight(blk + "attn_v.weight"),
      o_proj: weight(blk + "attn_output.weight"),
      ffn_norm: tensor(tensors, blk + "ffn_norm.weight").toFloat32(),
      gate_proj: weight(blk + "ffn_gate.weight"),
      up_proj: weight(blk + "ffn_up.weight"),
      down_proj: weight(blk + "ffn_down.weight"),
    });
  }
  return {
    embed: tensor(tensors, "token_embd.weight"),
    lm_head: tensors["output.weight"] || null, // null: tied to the embedding
    norm: tensor(tensors, "output_norm.weight").toFloat32(),
    // Llama 3.1 to 3.3: the rotary factors (attnlab.llama reads them as Llama3Scaling)
    rope_freqs: tensors["rope_freqs.weight"]?.toFloat32() ?? null,
    layers,
  };
}

export const family = { architecture: ARCHITECTURE, Config: LlamaConfig, configFromGguf, partsFromGguf };
