// The Qwen2 family (`general.architecture = "qwen2"`: Qwen2, Qwen2.5), as attnlab.llama's
// families/qwen2.py reads it: Llama's layout (families/llama.js) with biases on the
// query, key and value projections (`attn_q.bias`, ...; none on the output) and the
// rotary rows stored as they are (llama.cpp's Qwen2 rotates halves, as we do).
import { LlamaConfig, configFromGguf as llamaConfig, readParts, tensor } from "./llama.js";

export const ARCHITECTURE = "qwen2";

// The config from the `qwen2.*` keys: Llama's reading, with the biases.
export function configFromGguf(metadata, tensors = {}) {
  return llamaConfig(metadata, tensors, ARCHITECTURE, { attention_bias: true });
}

// Llama's parts with the rows as stored and each layer's q/k/v biases (float32).
export function partsFromGguf(tensors, config) {
  const parts = readParts(tensors, config, () => null);
  parts.layers.forEach((layer, l) => {
    for (const name of ["q", "k", "v"]) layer[`${name}_bias`] = tensor(tensors, `blk.${l}.attn_${name}.bias`).toFloat32();
  });
  return parts;
}

export const family = { architecture: ARCHITECTURE, Config: LlamaConfig, configFromGguf, partsFromGguf };
