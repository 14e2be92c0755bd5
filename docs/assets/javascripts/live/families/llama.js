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
// attnlab.llama's families/llama.py reads it. The page does not stretch rotary
// frequencies: a file that asks for it is refused by name.
export function configFromGguf(metadata, tensors = {}, arch = ARCHITECTURE) {
  const scaling = metadata[`${arch}.rope.scaling.type`];
  if (scaling !== undefined && scaling !== "none") {
    throw new RangeError(`${arch}.rope.scaling.type must be "none" here (the page does not scale rotary frequencies); got ${JSON.stringify(scaling)}`);
  }
  const key = (name) => {
    const value = metadata[`${arch}.${name}`];
    if (value === undefined) throw new RangeError(`the GGUF's metadata has no ${arch}.${name}`);
    return value;
  };
  const numHeads = key("attention.head_count");
  const dModel = key("embedding_length");
  const headDim = metadata[`${arch}.rope.dimension_count`] ?? metadata[`${arch}.attention.key_length`] ?? dModel / numHeads;
  return new LlamaConfig({
    // the embedding's rows, as attnlab.llama reads it (a token list may be shorter)
    vocab_size: metadata[`${arch}.vocab_size`] ?? tensors["token_embd.weight"]?.rows ?? metadata["tokenizer.ggml.tokens"].length,
    d_model: dModel,
    num_layers: key("block_count"),
    num_heads: numHeads,
    num_kv_heads: metadata[`${arch}.attention.head_count_kv`] ?? numHeads,
    head_dim: headDim,
    ffn_dim: key("feed_forward_length"),
    rope_theta: metadata[`${arch}.rope.freq_base`] ?? 10000.0,
    rms_eps: key("attention.layer_norm_rms_epsilon"),
    context_length: key("context_length"),
    bos_token_id: metadata["tokenizer.ggml.bos_token_id"],
    eos_token_id: metadata["tokenizer.ggml.eos_token_id"],
    architecture: arch,
    tie_word_embeddings: !tensors["output.weight"],
  });
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
