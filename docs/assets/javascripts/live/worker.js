// The Web Worker that holds SmolLM2 and runs it, so that the page never freezes.
//
// Messages in (from api.js), each with an `id` that its answer repeats:
//   {type: "load", url}           -> progress messages, then {type: "ready", info}
//   {type: "encode", text}        -> {ids, tokens}
//   {type: "decode", ids}         -> {text, tokens}
//   {type: "run", ids, ablate}    -> {logits, attention} (Float32Arrays, transferred),
//                                    ms (the forward pass's time), top (the 5 likeliest)
// A failure answers {type: "error", name, message}: bad input is refused before any
// arithmetic, with the message the Python would give.
/* global importScripts, AttnlabLive */
importScripts("gguf.js", "tokenizer.js", "model.js", "kernels.js", "engine.js");

var CACHE_NAME = "attnlab-live-v1";
var engine = null;
var loading = null;

function post(message, transfer) {
  self.postMessage(message, transfer || []);
}

// The browser's Cache Storage (kept across visits), where it exists: secure contexts
// (https, or http on 127.0.0.1 / localhost).
function openCache() {
  if (typeof caches === "undefined") return Promise.resolve(null);
  return caches.open(CACHE_NAME).catch(function () { return null; });
}

// Read a response's body into a FileSlot, reporting progress as the bytes arrive.
function readInto(response, id, fromCache) {
  var total = Number(response.headers.get("Content-Length")) || 0;
  if (!total || !response.body) {
    return response.arrayBuffer().then(function (buffer) {
      var slot = new AttnlabLive.engine.FileSlot(buffer.byteLength);
      slot.bytes.set(new Uint8Array(buffer));
      post({ type: "progress", id: id, loaded: buffer.byteLength, total: buffer.byteLength, fromCache: fromCache });
      return slot;
    });
  }
  var slot = new AttnlabLive.engine.FileSlot(total);
  var reader = response.body.getReader();
  var loaded = 0;
  var lastPost = 0;
  function pump() {
    return reader.read().then(function (chunk) {
      if (chunk.done) {
        if (loaded !== total) throw new Error("the model's download stopped at " + loaded + " of " + total + " bytes");
        post({ type: "progress", id: id, loaded: loaded, total: total, fromCache: fromCache });
        return slot;
      }
      if (loaded + chunk.value.length > total) throw new Error("the model's file is longer than its Content-Length");
      slot.bytes.set(chunk.value, loaded);
      loaded += chunk.value.length;
      if (loaded - lastPost > total / 100) {
        lastPost = loaded;
        post({ type: "progress", id: id, loaded: loaded, total: total, fromCache: fromCache });
      }
      return pump();
    });
  }
  return pump();
}

// Progress messages for a stream's bytes as they pass.
function counted(body, total, id) {
  var loaded = 0;
  var lastPost = 0;
  return body.pipeThrough(new TransformStream({
    transform: function (chunk, controller) {
      loaded += chunk.length;
      if (loaded - lastPost > total / 100 || loaded === total) {
        lastPost = loaded;
        post({ type: "progress", id: id, loaded: loaded, total: total, fromCache: false });
      }
      controller.enqueue(chunk);
    },
  }));
}

// Download the file. With Cache Storage, the bytes stream to the cache (kept for the
// next visit) and are then read back from it: the page never holds two copies, which
// matters on a phone. Where the cache refuses (a full disk), download again without it.
function download(url, id, cache) {
  return fetch(url).then(function (response) {
    if (!response.ok) throw new Error("HTTP " + response.status + " for " + url);
    var total = Number(response.headers.get("Content-Length")) || 0;
    if (!cache || !response.body || !total || typeof TransformStream === "undefined") {
      return readInto(response, id, false);
    }
    var stored = new Response(counted(response.body, total, id), { headers: response.headers });
    return cache.put(url, stored)
      .then(function () { return cache.match(url); })
      .then(function (hit) {
        return hit ? readInto(hit, id, false) : fetch(url).then(function (again) { return readInto(again, id, false); });
      }, function () {
        return fetch(url).then(function (again) { return readInto(again, id, false); });
      });
  });
}

function load(message) {
  var started = performance.now();
  var fromCache = false;
  return openCache().then(function (cache) {
    var cached = cache ? cache.match(message.url) : Promise.resolve(null);
    return cached.then(function (hit) {
      if (hit) {
        fromCache = true;
        return readInto(hit, message.id, true);
      }
      return download(message.url, message.id, cache);
    });
  }).then(function (slot) {
    var downloaded = performance.now();
    engine = new AttnlabLive.engine.Engine(slot, message.maxTokens);
    var c = engine.config;
    return {
      layers: c.num_layers,
      heads: c.num_heads,
      kvHeads: c.num_kv_heads,
      vocabSize: c.vocab_size,
      maxTokens: engine.maxTokens,
      kernels: engine.kernelsName,
      fromCache: fromCache,
      bytes: slot.kernels ? slot.kernels.fileLength : slot.bytes.length,
      readMs: downloaded - started,
      loadMs: performance.now() - started,
    };
  });
}

// {text, tokens}: the ids' text and each token's own text.
function decode(ids) {
  var checked = AttnlabLive.model.checkIds("ids", ids, engine.config.vocab_size);
  var list = Array.from(checked);
  return {
    text: engine.tokenizer.decode(list),
    tokens: list.map(function (id) { return engine.tokenizer.decode([id]); }),
  };
}

function answer(message) {
  if (message.type === "load") {
    if (!loading) loading = load(message);
    return loading.catch(function (error) {
      loading = null; // a later load() may try again
      throw error;
    });
  }
  if (!engine) return Promise.reject(new Error("the model is not loaded: call attnlabLive.load() first"));
  if (message.type === "encode") return Promise.resolve(engine.encode(message.text));
  if (message.type === "decode") return Promise.resolve(decode(message.ids));
  if (message.type === "run") {
    var started = performance.now();
    var result = engine.run(message.ids, { ablate: message.ablate });
    result.ms = performance.now() - started;
    result.top = AttnlabLive.model.topK(result.logits, 5).map(function (entry) {
      entry.token = engine.tokenizer.decode([entry.id]);
      return entry;
    });
    return Promise.resolve(result);
  }
  return Promise.reject(new Error("unknown message type " + JSON.stringify(message.type)));
}

self.onmessage = function (event) {
  var message = event.data;
  Promise.resolve()
    .then(function () { return answer(message); })
    .then(function (result) {
      var transfer = [];
      if (result && result.logits) transfer.push(result.logits.buffer);
      if (result && result.attention) transfer.push(result.attention.buffer);
      post({ type: "result", id: message.id, result: result }, transfer);
    })
    .catch(function (error) {
      post({ type: "error", id: message.id, name: error.name || "Error", message: String(error.message || error) });
    });
};
