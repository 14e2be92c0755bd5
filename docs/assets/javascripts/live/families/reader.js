// @ts-check
// One reader for every family: the config and the model's parts from a GGUF file, as
// the family's description (descriptions.js, generated from
// src/attnlab/llama/families/*.json) says, read the way attnlab.llama reads it: the
// metadata keys in the description's order, with its defaults and refusals, the same
// error words; the tensors by name, each becoming the part the description names.
// No GGUF tensor name or metadata key is written here: they are the description's.
import { checkFinite, floatText, repr, shapeText, typedRepr } from "../gguf.js";

/** @typedef {import("../gguf.js").Tensor} Tensor */
/**
 * What the reader reads of a parsed file (gguf.js's GgufFile): the metadata by key, each
 * key's GGUF value type ("uint32", "float32", "array[int32]", ...), the tensors by name.
 * @typedef {object} GgufContents
 * @property {Record<string, unknown>} metadata
 * @property {Record<string, string>} types
 * @property {Record<string, Tensor>} tensors
 */
/** @typedef {import("../layers/rotary.js").RopeScaling} RopeScaling */

/**
 * A family's description (one entry of DESCRIPTIONS); read as data.
 * @typedef {Record<string, any>} Description
 */

/**
 * The page's config: attnlab.llama.LlamaConfig's fields and values (to_dict()).
 * @typedef {object} Config
 * @property {number} vocab_size
 * @property {number} d_model
 * @property {number} num_layers
 * @property {number} num_heads
 * @property {number} num_kv_heads
 * @property {number} head_dim
 * @property {number} ffn_dim
 * @property {number} rope_theta
 * @property {number} rms_eps
 * @property {number} context_length
 * @property {number} bos_token_id
 * @property {number} eos_token_id
 * @property {string} architecture
 * @property {boolean} tie_word_embeddings
 * @property {RopeScaling | null} rope_scaling
 * @property {number | null} sliding_window
 * @property {("full_attention" | "sliding_attention" | "linear_attention")[]} layer_types
 * @property {number | null} rotary_dim
 * @property {number | null} rope_local_theta
 * @property {number | null} query_pre_attn_scalar
 * @property {number | null} linear_num_key_heads
 * @property {number | null} linear_num_value_heads
 * @property {number | null} linear_key_head_dim
 * @property {number | null} linear_value_head_dim
 * @property {number | null} linear_conv_kernel_dim
 */

/** LlamaConfig's fields and defaults (SmolLM2-135M's), in its order. */
export const CONFIG_DEFAULTS = Object.freeze({
  vocab_size: 49152, d_model: 576, num_layers: 30, num_heads: 9, num_kv_heads: 3, head_dim: 64,
  ffn_dim: 1536, rope_theta: 100000.0, rms_eps: 1e-5, context_length: 8192, bos_token_id: 1,
  eos_token_id: 2, architecture: "llama", tie_word_embeddings: true, rope_scaling: null,
  sliding_window: null, layer_types: null, rotary_dim: null, rope_local_theta: null,
  query_pre_attn_scalar: null, linear_num_key_heads: null, linear_num_value_heads: null,
  linear_key_head_dim: null, linear_value_head_dim: null, linear_conv_kernel_dim: null,
});

/**
 * A config with LlamaConfig's fields: the defaults, then `fields`; an unknown field is refused.
 * @param {Record<string, unknown>} fields
 * @returns {Readonly<Config>}
 */
export function makeConfig(fields) {
  for (const name of Object.keys(fields)) {
    if (!(name in CONFIG_DEFAULTS)) {
      throw new TypeError(`LlamaConfig has no field ${JSON.stringify(name)}; its fields are ${Object.keys(CONFIG_DEFAULTS).join(", ")}`);
    }
  }
  return Object.freeze(/** @type {Config} */ (/** @type {unknown} */ ({ ...CONFIG_DEFAULTS, ...fields })));
}

/**
 * A metadata value checked against its row's type, as attnlab.llama checks it; refused
 * naming the key. The integer types (count, token_id, natural, count_array) need a GGUF
 * integer type (a float32 128.0 is refused, as the package and llama.cpp refuse it) and
 * at most 2**53 - 1 (gguf.js gives a larger 64-bit value as a BigInt); a `number` may be
 * any numeric type (a BigInt becomes a Number). `type` is the key's GGUF value type;
 * without one (metadata built by hand) a value is typed by what it is.
 * @param {Record<string, any>} row
 * @param {string} key
 * @param {{value: unknown, type?: string}} read the value and its GGUF type
 * @returns {unknown}
 */
function checkType(row, key, { value, type }) {
  const show = () => typedRepr(value, type);
  const intType = type === undefined || /^u?int/.test(type);
  const isInt = (/** @type {unknown} */ v) => typeof v === "number" && Number.isInteger(v);
  const tooLarge = (/** @type {unknown} */ v) => typeof v === "bigint" && v > 0n;
  if (["count", "token_id", "natural"].includes(row.type) && tooLarge(value)) {
    throw new RangeError(`the GGUF's ${key} must be at most 2**53 - 1; got ${show()}`);
  }
  if (row.type === "count_array" && Array.isArray(value) && value.some(tooLarge)) {
    throw new RangeError(`the GGUF's ${key} must hold ints of at most 2**53 - 1; got ${show()}`);
  }
  if (row.type === "count" && !(intType && isInt(value) && /** @type {number} */ (value) >= 1)) {
    throw new RangeError(`the GGUF's ${key} must be a positive int; got ${show()}`);
  }
  if (row.type === "number") {
    const number = typeof value === "bigint" ? Number(value) : value;
    if (typeof number !== "number" || !(number > 0)) throw new RangeError(`the GGUF's ${key} must be a number > 0; got ${show()}`);
    if (!Number.isFinite(number)) throw new RangeError(`the GGUF's ${key} must be finite; got ${show()}`);
    return number;
  }
  if (row.type === "token_id" && !(intType && isInt(value) && /** @type {number} */ (value) >= 0)) {
    // the range (the vocabulary) is the tokenizer's check (tokenizer.js's checkVocabulary)
    throw new RangeError(`the GGUF's ${key} must be a token id (an int >= 0); got ${show()}`);
  }
  if (row.type === "natural" && !(intType && isInt(value) && /** @type {number} */ (value) >= 0)) {
    throw new RangeError(`the GGUF's ${key} must be an int >= 0; got ${show()}`);
  }
  if (row.type === "string" && typeof value !== "string") throw new RangeError(`the GGUF's ${key} must be a string; got ${show()}`);
  const intItems = type === undefined || /^array\[u?int/.test(type);
  if (row.type === "count_array" && !(Array.isArray(value) && value.every((v) => intItems && isInt(v) && v >= 0))) {
    throw new RangeError(`the GGUF's ${key} must be an array of ints >= 0; got ${show()}`);
  }
  return value;
}

/**
 * A row with `refuse`: "present" refuses any value, "nonzero" one that is not 0; a
 * "nonzero" row's value must still be of its type (natural: an integer; number: not a bool).
 * @param {Record<string, any>} row
 * @param {{key: string, arch: string}} names the row's full key and the family
 * @param {{value: unknown, type?: string}} read
 */
function checkRefused(row, { key, arch }, read) {
  if (row.refuse === "nonzero") {
    if (row.type === "natural") checkType(row, key, read);
    else if (typeof read.value !== "number" && typeof read.value !== "bigint") {
      throw new RangeError(`the GGUF's ${key} must be a number; got ${typedRepr(read.value, read.type)}`);
    }
    if (read.value === 0) return;
  }
  throw new RangeError(
    `the GGUF's ${key} is ${typedRepr(read.value, read.type)}; attnlab.llama's ${arch} family does not read it (${row.refuse === "present" ? "it must be absent" : "only 0"})`
  );
}

/**
 * Every metadata row in the description's order: its value (or default) by field name,
 * and the rope-scaling group's values by the key's last part.
 * @param {Description} description
 * @param {GgufContents} file
 * @returns {{values: Record<string, any>, keyOf: Record<string, string>}} by each row's field
 *   or name: its value, and the full key it came from (for messages; a value taken from an
 *   earlier field: that field's key)
 */
function readRows(description, { metadata, types, tensors }) {
  const arch = description["general.architecture"];
  /** @type {Record<string, any>} */
  const values = {};
  /** @type {Record<string, string>} */
  const keyOf = {};
  for (const row of description.metadata) {
    const key = row.key.replace("{arch}", arch);
    let value = metadata[key];
    const present = value !== undefined;
    if (row.refuse) {
      if (present) checkRefused(row, { key, arch }, { value, type: types[key] });
      continue;
    }
    if (present) value = checkType(row, key, { value, type: types[key] });
    else if (!row.default) throw new RangeError(`the GGUF file lacks the metadata key '${key}'`);
    else value = defaultOf(row.default, { values, keyOf, key }, { metadata, tensors });
    if (row.allowed && !row.allowed.includes(value)) {
      // a number row's values are floats to attnlab.llama: 10000.0
      const show = (/** @type {unknown} */ v) => (row.type === "number" && typeof v === "number" ? floatText(v) : repr(v));
      throw new RangeError(`the GGUF's ${key} is ${show(value)}; attnlab.llama's ${arch} family reads ${row.allowed.map(show).join(", ")}`);
    }
    const label = row.field || row.name;
    const source = !present && row.default && "field" in row.default ? keyOf[row.default.field] : key;
    if (label) [values[label], keyOf[label]] = [value, source];
  }
  return { values, keyOf };
}

/**
 * A row's default: a value, an earlier field's value, a quotient of two, a tensor's rows.
 * @param {Record<string, any>} rule
 * @param {{values: Record<string, any>, keyOf: Record<string, string>, key: string}} read so far, and the row's key
 * @param {{metadata: Record<string, unknown>, tensors: Record<string, Tensor>}} file
 * @returns {unknown}
 */
function defaultOf(rule, { values, keyOf, key }, { metadata, tensors }) {
  if ("value" in rule) return rule.value;
  if ("field" in rule) return values[rule.field];
  if ("quotient" in rule) {
    const [a, b] = rule.quotient;
    if (values[a] % values[b]) {
      throw new RangeError(
        `the GGUF's ${keyOf[a]} (${values[a]}) must be a multiple of ${keyOf[b]} (${values[b]}) when the file states no ${key}`
      );
    }
    return values[a] / values[b];
  }
  if ("tensor_rows" in rule) {
    const tokens = metadata["tokenizer.ggml.tokens"];
    const rows = tensors[rule.tensor_rows]?.rows ?? (Array.isArray(tokens) ? tokens.length : 0);
    return checkType({ type: "count" }, key, { value: rows });
  }
  throw new Error(`a description's default must be value, field, quotient or tensor_rows; got ${JSON.stringify(rule)}`);
}

/**
 * The rope_scaling the rope-scaling rows (and a rope_freqs tensor) give, or null.
 * @param {Description} description
 * @param {{values: Record<string, any>, keyOf: Record<string, string>}} read
 * @param {Record<string, Tensor>} tensors
 * @returns {RopeScaling | null}
 */
function ropeScaling(description, { values, keyOf }, tensors) {
  const type = values.scaling_type;
  const factor = values.scaling_factor;
  const freqs = description.rope_freqs ? tensors[description.rope_freqs.tensor] : undefined;
  /** @type {RopeScaling | null} */
  let scaling = null;
  if (type !== undefined && type !== "none" && factor !== undefined && factor !== 1) {
    if (factor < 1) { // refused by name before a scaling is built, as attnlab.llama
      throw new RangeError(`the GGUF's ${keyOf.scaling_factor} must be at least 1 (a scaling stretches the positions); got ${floatText(factor)}`);
    }
    if (type === "yarn" && !(values.yarn_beta_fast > values.yarn_beta_slow)) {
      throw new RangeError(
        `the GGUF's ${keyOf.yarn_beta_fast} (${floatText(values.yarn_beta_fast)}) must be greater than ${keyOf.yarn_beta_slow} (${floatText(values.yarn_beta_slow)})`
      );
    }
    scaling = type === "linear" ? { type: "linear", factor }
      : {
        type: "yarn", factor, original_length: values.scaling_original_length, beta_fast: values.yarn_beta_fast,
        beta_slow: values.yarn_beta_slow, attention_factor: null, mscale: null, mscale_all_dim: null, truncate: true,
      };
  }
  if (!freqs) return scaling;
  if (scaling) {
    throw new RangeError(
      `the GGUF file has both ${description.rope_freqs.tensor} and ${keyOf.scaling_type} ${repr(type)} (factor ${factor}); attnlab.llama reads one rotary scaling`
    );
  }
  const name = description.rope_freqs.tensor;
  const [got, wanted] = [[...freqs.dims].reverse(), [values.head_dim / 2]];
  if (got.join() !== wanted.join()) {
    throw new RangeError(`the GGUF file's tensor '${name}' has shape ${shapeText(got)}; the file's ${description["general.architecture"]}.* keys imply ${shapeText(wanted)}`);
  }
  checkFinite(freqs); // attnlab.llama reads this tensor first: refused by name if not finite
  return llama3Scaling(freqs.toFloat32(), { headDim: values.head_dim, theta: values.rope_theta, name });
}

/**
 * Llama 3.1's scaling from the factors llama.cpp's converter wrote (attnlab.llama's
 * llama3_scaling): Llama3Scaling(the largest factor, 1, 4, 8192), whose factors must be
 * the file's, else refused.
 * @param {Float32Array} factors (head_dim / 2) the file's, one per rotary pair
 * @param {{headDim: number, theta: number, name: string}} options the model's head_dim and
 *   rope_theta, and the factors' tensor name (for the refusal)
 * @returns {RopeScaling}
 */
function llama3Scaling(factors, { headDim, theta, name }) {
  const factor = Math.max(...factors);
  if (!(factor >= 1)) {
    throw new RangeError(`the GGUF file's ${name} must hold factors >= 1 (Llama 3.1's rotary scaling); got a largest factor of ${floatText(factor)}`);
  }
  const s = { factor, low_freq_factor: 1.0, high_freq_factor: 4.0, original_length: 8192 };
  for (let i = 0; i < headDim / 2; i++) {
    const wavelen = (2 * Math.PI) / Math.fround(1 / Math.fround(theta ** Math.fround((2 * i) / headDim)));
    let want = 1;
    if (wavelen > s.original_length / s.low_freq_factor) want = factor;
    else if (wavelen >= s.original_length / s.high_freq_factor) {
      const smooth = (s.original_length / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      want = 1 / ((1 - smooth) / factor + smooth);
    }
    if (Math.abs(factors[i] - want) > 1e-5 * Math.abs(want) + 1e-8) {
      throw new RangeError(
        `the GGUF file's ${name} are not Llama 3.1's rotary scaling (factor ${factor}, low_freq_factor 1, high_freq_factor 4, 8192 positions), the one attnlab.llama reads`
      );
    }
  }
  return { type: "llama3", ...s };
}

/**
 * Each layer's type by the description's rule.
 * @param {Description} description
 * @param {Record<string, any>} values
 * @returns {Config["layer_types"]}
 */
function layerTypes(description, values) {
  const rule = description.layer_types;
  const n = values.num_layers;
  if (rule.rule === "all") return Array(n).fill(rule.value);
  if (rule.rule === "sliding_pattern") {
    return Array.from({ length: n }, (_, i) =>
      values.sliding_window === null || (i + 1) % rule.pattern === 0 ? "full_attention" : "sliding_attention");
  }
  if (rule.rule === "interval") {
    const interval = values.interval;
    return Array.from({ length: n }, (_, i) => ((i + 1) % interval === 0 ? "full_attention" : "linear_attention"));
  }
  throw new Error(`a description's layer_types rule must be all, sliding_pattern or interval; got ${JSON.stringify(rule.rule)}`);
}

/**
 * The config a GGUF file's metadata (and its tensors' names) describe, as attnlab.llama
 * reads it for this family; every tensor the config implies is checked present with its
 * shape, none unused (a file of no tensors is refused as the package refuses it).
 * @param {Description} description
 * @param {GgufContents} file the parsed file (gguf.js's GgufFile)
 * @returns {Readonly<Config>}
 */
export function readConfig(description, file) {
  const arch = description["general.architecture"];
  const { metadata, tensors } = file;
  const read = readRows(description, file);
  const { values, keyOf } = read;
  /** @type {Record<string, any>} */
  const fields = Object.fromEntries(Object.entries(values).filter(([name]) => name in CONFIG_DEFAULTS));
  const blocks = new Set(Object.keys(tensors).filter((name) => name.startsWith("blk.")).map((name) => name.split(".")[1]));
  if (fields.num_layers !== blocks.size) {
    throw new RangeError(`the GGUF's ${keyOf.num_layers} is ${fields.num_layers}, but the file holds tensors of ${blocks.size} block(s)`);
  }
  const mtp = values.mtp_layers ?? 0; // Qwen3.5's prediction layers: counted in block_count, not read
  if (mtp >= fields.num_layers) {
    throw new RangeError(`the GGUF's ${keyOf.mtp_layers} (${mtp}) must be less than ${keyOf.num_layers} (${fields.num_layers})`);
  }
  for (let block = fields.num_layers - mtp; block < fields.num_layers; block++) { // each MTP block: llama.cpp's tensors
    for (const row of description.mtp_blocks?.required ?? []) {
      const name = row.replace("{i}", String(block));
      if (!(name in tensors)) {
        throw new RangeError(`the GGUF's ${keyOf.mtp_layers} is ${mtp}, so block ${block} is a multi-token-prediction block; it lacks its tensor '${name}'`);
      }
    }
  }
  fields.num_layers -= mtp;
  values.num_layers = fields.num_layers;
  if (fields.num_heads % fields.num_kv_heads) {
    throw new RangeError(`the GGUF's ${keyOf.num_heads} (${fields.num_heads}) must be a multiple of ${keyOf.num_kv_heads} (${fields.num_kv_heads})`);
  }
  if (fields.head_dim % 2) throw new RangeError(`the GGUF's head width must be even (rotary pairs); got ${fields.head_dim}`);
  const valueLength = values.value_length;
  if (valueLength !== undefined && valueLength !== fields.head_dim) {
    throw new RangeError(`the GGUF's ${keyOf.value_length} (${valueLength}) must equal the head width ${fields.head_dim}; attnlab.llama reads equal widths`);
  }
  const rotary = fields.rotary_dim;
  if (description.rotary_rows.order === "neighbour_pairs" && rotary !== fields.head_dim) {
    throw new RangeError(`the GGUF's ${keyOf.rotary_dim} (${rotary}) must equal the head width ${fields.head_dim} (llama.cpp refuses it too: invalid n_rot)`);
  }
  if (rotary % 2 || rotary > fields.head_dim) {
    throw new RangeError(`the GGUF's ${keyOf.rotary_dim} must be even and at most the head width ${fields.head_dim}; got ${rotary}`);
  }
  const inner = values.inner_size;
  if (inner !== undefined) { // Gated DeltaNet's sizes
    const Hk = fields.linear_num_key_heads;
    const Hv = fields.linear_num_value_heads;
    if (Hv % Hk) throw new RangeError(`the GGUF's ${keyOf.linear_num_value_heads} (${Hv}) must be a multiple of ${keyOf.linear_num_key_heads} (${Hk})`);
    if (inner % Hv) throw new RangeError(`the GGUF's ${keyOf.inner_size} (${inner}) must be a multiple of ${keyOf.linear_num_value_heads} (${Hv})`);
    fields.linear_value_head_dim = inner / Hv;
  }
  const tokens = metadata["tokenizer.ggml.tokens"];
  if (Array.isArray(tokens) && tokens.length > fields.vocab_size) {
    throw new RangeError(`the GGUF's tokenizer.ggml.tokens holds ${tokens.length} tokens, more than the model's vocabulary of ${fields.vocab_size} (the embedding's rows)`);
  }
  const output = description.tensors.model.find((/** @type {any} */ row) => row.optional);
  const config = makeConfig({
    ...fields,
    architecture: arch,
    tie_word_embeddings: !(output && output.name in tensors),
    rope_scaling: ropeScaling(description, read, tensors),
    layer_types: layerTypes(description, values),
    query_pre_attn_scalar: description.query_pre_attn_scalar
      ? (fields.num_layers === 62 ? fields.d_model / fields.num_heads : fields.head_dim)
      : null,
  });
  checkTensors(description, tensors, config);
  return config;
}

/**
 * Every tensor this config implies: name -> {row, part path, shape (outermost first)}.
 * @param {Description} description
 * @param {Config} c
 * @returns {Map<string, {row: Record<string, any>, layer: number | null, shape: number[]}>}
 */
export function expectedTensors(description, c) {
  /** @type {Map<string, {row: Record<string, any>, layer: number | null, shape: number[]}>} */
  const out = new Map();
  for (const row of description.tensors.model) {
    if (row.optional && c.tie_word_embeddings) continue;
    out.set(row.name, { row, layer: null, shape: partShape(row.part, c, null) });
  }
  c.layer_types.forEach((type, i) => {
    const mixer = description.layer[type].mixer;
    for (const row of description.tensors.layer[type]) {
      out.set(row.name.replace("{i}", String(i)), { row, layer: i, shape: partShape(row.part, c, mixer) });
    }
  });
  return out;
}

/**
 * A part's shape (outermost first) from the config's sizes.
 * @param {string} part
 * @param {Config} c
 * @param {Record<string, any> | null} mixer
 * @returns {number[]}
 */
function partShape(part, c, mixer) {
  const d = c.d_model, H = c.num_heads, Hkv = c.num_kv_heads, D = c.head_dim, F = c.ffn_dim;
  const Hk = c.linear_num_key_heads ?? 0, Hv = c.linear_num_value_heads ?? 0;
  const Dk = c.linear_key_head_dim ?? 0, Dv = c.linear_value_head_dim ?? 0;
  const convDim = 2 * Hk * Dk + Hv * Dv;
  /** @type {Record<string, number[]>} */
  const shapes = {
    "embed.weight": [c.vocab_size, d], "lm_head.weight": [c.vocab_size, d], "norm.weight": [d],
    "attn.q_proj.weight": [(mixer?.output_gate ? 2 : 1) * H * D, d], "attn.k_proj.weight": [Hkv * D, d],
    "attn.v_proj.weight": [Hkv * D, d], "attn.o_proj.weight": [d, H * D], "attn.q_proj.bias": [H * D],
    "attn.k_proj.bias": [Hkv * D], "attn.v_proj.bias": [Hkv * D], "attn.q_norm.weight": [D], "attn.k_norm.weight": [D],
    "ffn.gate_proj.weight": [F, d], "ffn.up_proj.weight": [F, d], "ffn.down_proj.weight": [d, F],
    "attn.in_proj_qkv.weight": [convDim, d], "attn.in_proj_z.weight": [Hv * Dv, d], "attn.in_proj_b.weight": [Hv, d],
    "attn.in_proj_a.weight": [Hv, d], "attn.A_log": [Hv], "attn.dt_bias": [Hv],
    "attn.conv1d.weight": [convDim, c.linear_conv_kernel_dim ?? 0], "attn.norm.weight": [Dv], "attn.out_proj.weight": [d, Hv * Dv],
  };
  const name = part.split(" + ")[0];
  if (name.endsWith("norm.weight") && !(name in shapes)) return [d]; // a layer's norms
  const shape = shapes[name];
  if (!shape) throw new Error(`the description names a part the page does not know: ${part}`);
  return shape;
}

/**
 * attnlab.llama's checks of a file's tensors against its config, with its words.
 * @param {Description} description
 * @param {Record<string, Tensor>} tensors
 * @param {Config} c
 */
function checkTensors(description, tensors, c) {
  const expected = expectedTensors(description, c);
  const missing = [...expected.keys()].filter((name) => !(name in tensors));
  if (missing.length) {
    throw new RangeError(`the GGUF file lacks ${missing.length} tensor(s) of the ${c.architecture} family, e.g. '${missing[0]}'`);
  }
  const predictionBlock = (/** @type {string} */ name) => { // blk.N.* with N >= num_layers: not read
    const block = name.startsWith("blk.") ? name.split(".")[1] : "";
    return /^\d+$/.test(block) && Number(block) >= c.num_layers;
  };
  const extra = Object.keys(tensors)
    .filter((name) => !expected.has(name) && name !== description.rope_freqs?.tensor && !predictionBlock(name))
    .sort();
  if (extra.length) {
    throw new RangeError(`the GGUF file has tensor(s) the ${c.architecture} family does not use, e.g. '${extra[0]}'`);
  }
  const shapes = new Map([...expected].map(([name, { shape }]) => [name, shape]));
  if (description.rope_freqs?.tensor in tensors) shapes.set(description.rope_freqs.tensor, [(c.rotary_dim ?? c.head_dim) / 2]);
  for (const [name, wanted] of shapes) {
    const got = [...tensors[name].dims].reverse();
    if (got.join() !== wanted.join()) {
      throw new RangeError(`the GGUF file's tensor '${name}' has shape ${shapeText(got)}; the file's ${c.architecture}.* keys imply ${shapeText(wanted)}`);
    }
  }
}
