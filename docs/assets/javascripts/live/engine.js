// @ts-check
// The model and its tokenizer from a GGUF file's bytes: what the Worker (worker.js) and
// the Node tests hold. The header is parsed once; the family (families/index.js, by
// general.architecture) reads the config and names the tensors; WebAssembly SIMD
// kernels where the engine has them, else plain JavaScript (the same arithmetic).
import { readGguf } from "./gguf.js";
import { Tokenizer } from "./tokenizer.js";
import { LlamaModel, JsKernels, checkIds } from "./model.js";
import { WasmKernels, simdSupported } from "./kernels.js";
import { newKernels, ThreadedKernels } from "./threads.js";
import { familyOf } from "./families/index.js";
import { generateSteps } from "./generate.js";

export const MAX_TOKENS = 1024; // the longest text the page runs, generated tokens included
export const MAX_MAP_TOKENS = 256; // the longest with every attention map (30 x 9 x 256^2 floats: 71 MB)

/**
 * What info() gives: the model's sizes with the Python config's names, and the page's.
 * @typedef {object} Info
 * @property {string} architecture
 * @property {string} name
 * @property {number} num_layers
 * @property {("full_attention" | "sliding_attention" | "linear_attention")[]} layer_types
 * @property {number[]} layer_heads each layer's maps: query heads, or a Gated DeltaNet layer's value heads
 * @property {number | null} sliding_window the window of the sliding_attention layers
 * @property {number} num_heads
 * @property {number} num_kv_heads
 * @property {number} head_dim
 * @property {number} vocab_size
 * @property {number} context_length
 * @property {number} bos_token_id
 * @property {number} eos_token_id
 * @property {boolean} chat_template
 * @property {number} max_tokens
 * @property {number} max_map_tokens
 * @property {string} kernels
 * @property {number} threads the threads that compute (threads.js; 1 where the page is not cross-origin isolated)
 * @property {number} bytes
 * @property {number} memory_bytes
 */

/** Where the file's bytes go while they arrive: WebAssembly memory when SIMD is
 * available, else a plain buffer. `bytes` is the Uint8Array to fill. */
export class FileSlot {
  /**
   * @param {number} fileLength
   * @param {boolean} [useWasm]
   * @param {WasmKernels | null} [kernels] made for this file (threads.js's ThreadedKernels in
   *   a test); by default threads.js's newKernels: threaded where the page is cross-origin isolated
   */
  constructor(fileLength, useWasm = true, kernels = null) {
    this.kernels = kernels ?? (useWasm !== false && simdSupported() ? newKernels(fileLength) : null);
    this.bytes = this.kernels ? this.kernels.bytes : new Uint8Array(fileLength);
  }
}

/** The model and its tokenizer, once the bytes are in, with the page's limits. */
export class Engine {
  /**
   * @param {FileSlot} slot
   * @param {number} [maxTokens]
   */
  constructor(slot, maxTokens = MAX_TOKENS) {
    this.maxTokens = maxTokens;
    const file = readGguf(slot.bytes);
    const family = familyOf(file.metadata);
    const config = family.configFromGguf(file); // every tensor's shape checked
    const tokenizer = Tokenizer.fromGguf(file.metadata); // checked before a weight is read
    /** @type {import("./layers/parts.js").Kernels} */
    let kernels = new JsKernels();
    if (slot.kernels) {
      const c = config;
      const linear = c.linear_num_value_heads === null ? 0
        : 2 * (c.linear_num_key_heads ?? 0) * (c.linear_key_head_dim ?? 0) + c.linear_num_value_heads * (c.linear_value_head_dim ?? 0);
      const widest = Math.max(c.ffn_dim, c.d_model, 2 * c.num_heads * c.head_dim, linear);
      const wasm = slot.kernels.reserve({
        maxMatrix: widest * c.d_model,
        maxTokens: Math.min(this.maxTokens, 128),
        maxWidth: widest,
        maxKeys: this.maxTokens,
        headDim: c.head_dim,
        queryWidth: c.num_heads * c.head_dim,
      });
      file.rebind(wasm.bytes); // the memory grew: the same tensors, views on its new buffer
      kernels = wasm;
    }
    this.file = file;
    this.architecture = family.architecture;
    this.config = config;
    this.kernelsName = kernels.name;
    this.model = new LlamaModel(config, family.partsFromGguf(file.tensors, config), kernels);
    this.tokenizer = tokenizer;
    this.fileBytes = file.bytes.byteLength;
  }

  /**
   * @param {Uint8Array} bytes a whole GGUF file
   * @param {{wasm?: boolean, maxTokens?: number}} [options]
   * @returns {Engine}
   */
  static fromBytes(bytes, { wasm = true, maxTokens = MAX_TOKENS } = {}) {
    const slot = new FileSlot(bytes.length, wasm);
    slot.bytes.set(bytes);
    return new Engine(slot, maxTokens);
  }

  /**
   * The model's sizes with the Python config's names (attnlab.llama.LlamaConfig).
   * @returns {Info}
   */
  info() {
    const c = this.config;
    return {
      architecture: this.architecture,
      name: this.file.metadata["general.name"] || this.architecture,
      num_layers: c.num_layers,
      layer_types: [...c.layer_types],
      layer_heads: [...this.model.layerHeads],
      sliding_window: c.sliding_window,
      num_heads: c.num_heads,
      num_kv_heads: c.num_kv_heads,
      head_dim: c.head_dim,
      vocab_size: c.vocab_size,
      context_length: c.context_length,
      bos_token_id: c.bos_token_id,
      eos_token_id: c.eos_token_id,
      chat_template: this.tokenizer.chat_template !== null,
      max_tokens: this.maxTokens,
      max_map_tokens: MAX_MAP_TOKENS,
      kernels: this.kernelsName,
      threads: this.model.kernels instanceof ThreadedKernels ? this.model.kernels.threads : 1,
      bytes: this.fileBytes,
      memory_bytes: this.memoryBytes(),
    };
  }

  // What the model holds in memory: the WebAssembly memory (the file's bytes, still
  // quantised, and the workspace) or the file's buffer, and the norms' float32 weights.
  /** @returns {number} */
  memoryBytes() {
    const k = this.model.kernels;
    const norms = (this.config.num_layers * 2 + 1) * this.config.d_model * 4;
    return (k instanceof WasmKernels ? k.memory.buffer.byteLength : this.fileBytes) + norms;
  }

  /**
   * The text's ids and each token's own text.
   * @param {string} text
   * @returns {{ids: number[], tokens: string[]}}
   */
  encode(text) {
    const ids = this.tokenizer.encode(text);
    return { ids, tokens: ids.map((id) => this.tokenizer.decode([id])) };
  }

  /**
   * The text of ids, and each token's.
   * @param {unknown} ids
   * @returns {{text: string, tokens: string[]}}
   */
  decode(ids) {
    const list = Array.from(checkIds("ids", ids, { vocabSize: this.config.vocab_size }));
    return { text: this.tokenizer.decode(list), tokens: list.map((id) => this.tokenizer.decode([id])) };
  }

  /**
   * model.forward with the page's limit.
   * @param {unknown} ids
   * @param {{ablate?: object | null, return_attention?: boolean, cache?: import("./model.js").LayerCache[] | null}} [options]
   * @returns {import("./model.js").ForwardResult}
   */
  run(ids, { ablate = null, return_attention = false, cache = null } = {}) {
    if (return_attention === true && Array.isArray(ids) && ids.length > MAX_MAP_TOKENS) {
      throw new RangeError(`input_ids must be at most ${MAX_MAP_TOKENS} tokens long with return_attention (the page's limit for every map); got ${ids.length}`);
    }
    return this.model.forward(ids, { ablate, return_attention, cache, maxTokens: this.maxTokens });
  }

  /**
   * generate.js's steps with the page's limit: one {id, logits, attention} per token.
   * @param {unknown} ids
   * @param {Record<string, unknown>} [options] generate's keywords
   */
  steps(ids, options = {}) {
    return generateSteps(this.model, ids, { ...options, maxTokens: this.maxTokens });
  }
}
