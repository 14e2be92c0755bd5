// The model and its tokenizer from a GGUF file's bytes: what the Worker (worker.js) and
// the Node tests hold. The header is parsed once; the family (families/index.js, by
// general.architecture) reads the config and names the tensors; WebAssembly SIMD
// kernels where the engine has them, else plain JavaScript (the same arithmetic).
import { readGguf } from "./gguf.js";
import { Tokenizer } from "./tokenizer.js";
import { LlamaModel, JsKernels, checkIds } from "./model.js";
import { WasmKernels, simdSupported } from "./kernels.js";
import { familyOf } from "./families/index.js";
import { generateSteps } from "./generate.js";

export const MAX_TOKENS = 1024; // the longest text the page runs, generated tokens included
export const MAX_MAP_TOKENS = 256; // the longest with every attention map (30 x 9 x 256^2 floats: 71 MB)

// Where the file's bytes go while they arrive: WebAssembly memory when SIMD is
// available, else a plain buffer. `bytes` is the Uint8Array to fill.
export class FileSlot {
  constructor(fileLength, useWasm = true) {
    this.kernels = useWasm !== false && simdSupported() ? new WasmKernels(fileLength) : null;
    this.bytes = this.kernels ? this.kernels.bytes : new Uint8Array(fileLength);
  }
}

export class Engine {
  // The engine once the bytes are in: the model, the tokenizer and the page's limits.
  constructor(slot, maxTokens = MAX_TOKENS) {
    this.maxTokens = maxTokens;
    const file = readGguf(slot.bytes);
    const family = familyOf(file.metadata);
    const config = family.configFromGguf(file.metadata, file.tensors); // every tensor's shape checked
    const tokenizer = Tokenizer.fromGguf(file.metadata); // checked before a weight is read
    let kernels = new JsKernels();
    if (slot.kernels) {
      const widest = Math.max(config.ffn_dim, config.d_model, config.num_heads * config.head_dim);
      kernels = slot.kernels.reserve(widest * config.d_model, Math.min(this.maxTokens, 128), widest, {
        maxKeys: this.maxTokens,
        headDim: config.head_dim,
        queryWidth: config.num_heads * config.head_dim,
      });
      file.rebind(kernels.bytes); // the memory grew: the same tensors, views on its new buffer
    }
    this.file = file;
    this.architecture = family.architecture;
    this.config = config;
    this.kernelsName = kernels.name;
    this.model = new LlamaModel(config, family.partsFromGguf(file.tensors, config), kernels);
    this.tokenizer = tokenizer;
    this.fileBytes = file.bytes.byteLength;
  }

  static fromBytes(bytes, { wasm = true, maxTokens = MAX_TOKENS } = {}) {
    const slot = new FileSlot(bytes.length, wasm);
    slot.bytes.set(bytes);
    return new Engine(slot, maxTokens);
  }

  // The model's sizes with the Python config's names (attnlab.llama.LlamaConfig).
  info() {
    const c = this.config;
    return {
      architecture: this.architecture,
      name: this.file.metadata["general.name"] || this.architecture,
      num_layers: c.num_layers,
      num_heads: c.num_heads,
      num_kv_heads: c.num_kv_heads,
      head_dim: c.head_dim,
      vocab_size: c.vocab_size,
      context_length: c.context_length,
      eos_token_id: c.eos_token_id,
      chat_template: this.tokenizer.chat_template !== null,
      max_tokens: this.maxTokens,
      max_map_tokens: MAX_MAP_TOKENS,
      kernels: this.kernelsName,
      bytes: this.fileBytes,
      memory_bytes: this.memoryBytes(),
    };
  }

  // What the model holds in memory: the WebAssembly memory (the file's bytes, still
  // quantised, and the workspace) or the file's buffer, and the norms' float32 weights.
  memoryBytes() {
    const k = this.model.kernels;
    const norms = (this.config.num_layers * 2 + 1) * this.config.d_model * 4;
    return (k.memory ? k.memory.buffer.byteLength : this.fileBytes) + norms;
  }

  // {ids, tokens}: the text's ids and each token's own text.
  encode(text) {
    const ids = this.tokenizer.encode(text);
    return { ids, tokens: ids.map((id) => this.tokenizer.decode([id])) };
  }

  // {text, tokens} of ids.
  decode(ids) {
    const list = Array.from(checkIds("ids", ids, this.config.vocab_size));
    return { text: this.tokenizer.decode(list), tokens: list.map((id) => this.tokenizer.decode([id])) };
  }

  // {logits, attention, T, S}: model.forward with the page's limit.
  run(ids, { ablate = null, return_attention = false, cache = null } = {}) {
    if (return_attention === true && Array.isArray(ids) && ids.length > MAX_MAP_TOKENS) {
      throw new RangeError(`input_ids must be at most ${MAX_MAP_TOKENS} tokens long with return_attention (the page's limit for every map); got ${ids.length}`);
    }
    return this.model.forward(ids, { ablate, return_attention, cache, maxTokens: this.maxTokens });
  }

  // generate.js's steps with the page's limit: one {id, logits, attention} per token.
  steps(ids, options = {}) {
    return generateSteps(this.model, ids, { ...options, maxTokens: this.maxTokens });
  }
}
