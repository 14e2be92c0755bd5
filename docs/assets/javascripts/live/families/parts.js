// @ts-check
// A GGUF file's tensors as the model's parts (model.js's ModelParts), as the family's
// description names them: each tensor row gives the part it becomes, and the
// description's `layer` entry gives each layer type's mixer (softmax attention with its
// positions, mask, scale and gate, or Gated DeltaNet), norms and feed-forward.
// llama.cpp's layouts are read, not rewritten: the rotary rows of a "neighbour_pairs"
// family become a row order; Qwen3.5's tiled value heads are computed as stored, with
// the order that maps them to transformers' heads.
import { checkFinite } from "../gguf.js";
import { expectedTensors } from "./reader.js";

/** @typedef {import("./reader.js").Config} Config */
/** @typedef {import("./reader.js").Description} Description */
/** @typedef {import("../gguf.js").Tensor} Tensor */
/** @typedef {import("../model.js").ModelParts} ModelParts */
/** @typedef {import("../model.js").LayerParts} LayerParts */

/**
 * attnlab.llama.unpermute_rotary_rows as an index: our row r of a head is GGUF row 2i
 * (r = i < D/2) or 2i + 1 (r = i + D/2) of that head.
 * @param {number} numHeads
 * @param {number} D
 * @returns {Int32Array}
 */
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

/**
 * The stored value head that is each of transformers' (grouped by key head): the
 * converter tiled them [v0 of k0, v0 of k1, ..., v1 of k0, ...]; our head p = kh r + m is
 * stored at m Hk + kh.
 * @param {number} numKeyHeads
 * @param {number} numValueHeads
 * @returns {Int32Array | null} null when every key head has one value head
 */
export function untiledValueHeads(numKeyHeads, numValueHeads) {
  const r = numValueHeads / numKeyHeads;
  if (r === 1) return null;
  return Int32Array.from({ length: numValueHeads }, (_, p) => (p % r) * numKeyHeads + Math.floor(p / r));
}

/**
 * The config's number for a description's field name.
 * @param {Config} config
 * @param {string} field
 * @returns {any}
 */
const fieldOf = (config, field) => /** @type {Record<string, unknown>} */ (config)[field];

/**
 * A softmax or Gated DeltaNet mixer's settings from the description's `layer` entry.
 * @param {Record<string, any>} mixer
 * @param {Config} c
 * @returns {Record<string, any>}
 */
function mixerSettings(mixer, c) {
  if (mixer.kind === "gated_deltanet") {
    return { kind: "gated_deltanet", valueHeadOrder: untiledValueHeads(c.linear_num_key_heads ?? 1, c.linear_num_value_heads ?? 1) };
  }
  const positions = mixer.positions;
  const scaleBy = mixer.scale.split(" ")[0]; // "head_dim ** -0.5" or "query_pre_attn_scalar ** -0.5"
  return {
    kind: "attention",
    gated: mixer.output_gate,
    window: mixer.mask.includes("window") ? c.sliding_window : null,
    rotary: positions
      ? { theta: fieldOf(c, positions.theta), dim: fieldOf(c, positions.dim) ?? c.head_dim, scaling: positions.scaling ? fieldOf(c, positions.scaling) : null }
      : null,
    scale: fieldOf(c, scaleBy) ** -0.5,
  };
}

/**
 * A GGUF file's tensors -> the model's parts, as the description names them. NaN or
 * infinity in any tensor is refused by name.
 * @param {Description} description
 * @param {Record<string, Tensor>} tensors
 * @param {Config} config
 * @returns {ModelParts}
 */
export function readParts(description, tensors, config) {
  const c = config;
  for (const found of Object.values(tensors)) checkFinite(found);
  const activation = description.constants.ffn_activation;
  /** @type {Record<string, any>} */
  const model = { layers: c.layer_types.map((type) => ({ kind: type, attn: mixerSettings(description.layer[type].mixer, c), ffn: { activation } })) };
  for (const [name, { row, layer }] of expectedTensors(description, c)) {
    const tensor = tensors[name];
    const target = layer === null ? model : model.layers[layer];
    const part = row.part.split(" + ")[0];
    if (part === "attn.A_log") {
      const A = tensor.toFloat32();
      if (!A.every((a) => a < 0)) {
        throw new RangeError(`the GGUF file's tensor '${name}' must be negative (-exp(A_log)); got a largest entry of ${Math.max(...A)}`);
      }
      target.attn.A = A;
      continue;
    }
    const [path, kind] = [part.split("."), part.split(".").pop()];
    // "unpermute_rotary_rows(num_heads)": llama.cpp's neighbour pairs, undone as a row order
    const unpermute = /^unpermute_rotary_rows\((\w+)\)$/.exec(row.transform ?? "");
    const heads = unpermute ? fieldOf(c, unpermute[1]) : 0;
    const isMatrix = tensor.dims.length === 2 && kind === "weight" && !part.endsWith("norm.weight") && part !== "attn.conv1d.weight";
    const whole = layer === null && isMatrix; // the embedding and the unembedding: read a row at a time
    const value = whole ? tensor : isMatrix ? { tensor, rowOrder: heads ? unpermuteRotaryRows(heads, c.head_dim) : null } : tensor.toFloat32();
    place(target, path, value);
  }
  const parts = /** @type {ModelParts} */ ({
    embed: model.embed, lm_head: model.lm_head ?? null, norm: model.norm,
    embed_scale: description.embedding_scale ? Math.sqrt(c.d_model) : null,
    layers: model.layers,
  });
  return parts;
}

/**
 * Put a tensor's value where its part path says, in the model's part names: "attn.q_proj.weight"
 * -> attn.q_proj, "attn.q_proj.bias" -> attn.q_bias, "attn_norm.weight" -> attn_norm.
 * @param {Record<string, any>} target
 * @param {string[]} path
 * @param {unknown} value
 */
function place(target, path, value) {
  const last = path[path.length - 1];
  const names = path.slice(0, -1);
  if (last === "bias" && names[names.length - 1].endsWith("_proj") && names[0] === "attn" && names.length === 2) {
    target.attn[`${names[1][0]}_bias`] = value; // attn.q_proj.bias -> attn.q_bias
    return;
  }
  if (last !== "weight") names.push(last); // attn.dt_bias
  let at = target;
  for (const name of names.slice(0, -1)) at = at[name] ??= {};
  at[names[names.length - 1]] = value;
}
