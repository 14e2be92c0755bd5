// The model and its tokenizer from a GGUF file's bytes: what the Worker (worker.js)
// and the Node tests hold. WebAssembly SIMD kernels where the engine has them, else
// plain JavaScript (the same arithmetic; see kernels.js and model.js).
//
// A classic script: in a page or Worker it adds `AttnlabLive.engine`; in Node
// `require("./engine.js")` returns the same object.
(function (root) {
  "use strict";

  var live = typeof module === "object" && module.exports
    ? {
        gguf: require("./gguf.js"),
        tokenizer: require("./tokenizer.js"),
        model: require("./model.js"),
        kernels: require("./kernels.js"),
      }
    : root.AttnlabLive;

  var MAX_TOKENS = 256; // the longest prompt the page allows ("a few hundred tokens")

  // Where the file's bytes go while they arrive: WebAssembly memory when SIMD is
  // available, else a plain buffer. fileBytes() is the Uint8Array to fill.
  function FileSlot(fileLength, useWasm) {
    var wasm = useWasm !== false && live.kernels.simdSupported();
    this.kernels = wasm ? new live.kernels.WasmKernels(fileLength) : null;
    this.bytes = wasm ? this.kernels.bytes : new Uint8Array(fileLength);
  }

  // The engine once the bytes are in: the model, the tokenizer and the page's limits.
  function Engine(slot, maxTokens) {
    this.maxTokens = maxTokens || MAX_TOKENS;
    var header = live.gguf.readGguf(slot.bytes);
    var m = header.metadata;
    var widest = Math.max(m["llama.feed_forward_length"], m["llama.embedding_length"]);
    var kernels = null;
    var file = header;
    if (slot.kernels) {
      kernels = slot.kernels.reserve(widest * m["llama.embedding_length"], this.maxTokens, widest);
      file = live.gguf.readGguf(kernels.bytes); // the memory grew: views on its new buffer
    }
    this.kernelsName = kernels ? "WebAssembly SIMD" : "JavaScript";
    this.model = new live.model.LlamaModel(file, kernels || undefined);
    this.tokenizer = live.tokenizer.Tokenizer.fromGguf(file.metadata);
    this.config = this.model.config;
  }

  Engine.fromBytes = function (bytes, options) {
    options = options || {};
    var slot = new FileSlot(bytes.length, options.wasm);
    slot.bytes.set(bytes);
    return new Engine(slot, options.maxTokens);
  };

  // {ids, tokens}: the text's ids and each token's own text.
  Engine.prototype.encode = function (text) {
    var ids = this.tokenizer.encode(text);
    var tokenizer = this.tokenizer;
    return { ids: ids, tokens: ids.map(function (id) { return tokenizer.decode([id]); }) };
  };

  // {logits, attention} for ids, with options.ablate ({layer: [head, ...]}).
  Engine.prototype.run = function (ids, options) {
    options = options || {};
    return this.model.forward(ids, { ablate: options.ablate, maxTokens: this.maxTokens });
  };

  var api = { Engine: Engine, FileSlot: FileSlot, MAX_TOKENS: MAX_TOKENS };
  if (typeof module === "object" && module.exports) module.exports = api;
  else {
    root.AttnlabLive = root.AttnlabLive || {};
    root.AttnlabLive.engine = api;
  }
})(typeof self !== "undefined" ? self : this);
