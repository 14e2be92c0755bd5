// The Qwen3 family (`general.architecture = "qwen3"`: Qwen3's dense models), as
// attnlab.llama's families/qwen3.py reads it: Llama's layout (families/llama.js) with an
// RMSNorm on each query and key head before the rotation (`attn_q_norm.weight`,
// `attn_k_norm.weight`: one weight of width D shared by the heads), no biases, and the
// rotary rows stored as they are.
import { LlamaConfig, configFromGguf as llamaConfig, readParts, tensor } from "./llama.js";

export const ARCHITECTURE = "qwen3";

// The config from the `qwen3.*` keys: Llama's reading, with the norms.
export function configFromGguf(metadata, tensors = {}) {
  return llamaConfig(metadata, tensors, ARCHITECTURE, { qk_norm: true });
}

// Llama's parts with the rows as stored and each layer's q/k norms (float32).
export function partsFromGguf(tensors, config) {
  const parts = readParts(tensors, config, () => null);
  parts.layers.forEach((layer, l) => {
    for (const name of ["q", "k"]) layer[`${name}_norm`] = tensor(tensors, `blk.${l}.attn_${name}_norm.weight`).toFloat32();
  });
  return parts;
}

export const family = { architecture: ARCHITECTURE, Config: LlamaConfig, configFromGguf, partsFromGguf };
