// window.attnlabLive: the explorer page's small API over the model in its Web Worker.
//
//   attnlabLive.load()             -> Promise of {layers, heads, ..., fromCache, loadMs}
//                                     once the model is ready (downloads it the first
//                                     time, then reads the browser's cache);
//   attnlabLive.encode(text)       -> Promise of the token ids (numbers), attnlab.llama's;
//   attnlabLive.tokens(text)       -> Promise of {ids, tokens} (each token's text);
//   attnlabLive.decode(ids)        -> Promise of {text, tokens};
//   attnlabLive.run(ids, {ablate}) -> Promise of {logits, attention, ms}: logits the last
//                                     position's scores (Float32Array of V = 49,152),
//                                     attention every layer's and head's weights
//                                     (Float32Array of 30 x 9 x T x T, in that order),
//                                     ablate {layer: [heads]} as in Python; ms the
//                                     forward pass's time, top the 5 likeliest tokens.
// Bad input rejects the Promise with an Error (TypeError or RangeError) naming it.
// The page's own code (ui.js) uses nothing else. Loaded by the explorer page only.
(function () {
  "use strict";

  var script = document.currentScript;
  var base = new URL(".", script.src).href; // this folder: the worker's scripts
  var modelUrl = new URL(script.dataset.liveModel, document.baseURI).href;
  var modelBytes = Number(script.dataset.liveBytes) || 0;

  var worker = null;
  var nextId = 1;
  var pending = {}; // id -> {resolve, reject, onProgress}
  var ready = null;

  // Why the model cannot run here, or null when it can.
  function unavailableReason() {
    if (location.protocol === "file:") {
      return "The live model is off when the page is opened from a file (file://): browsers do not let a page start a Web Worker or read a large file from disk. Serve the site (make serve) to use it.";
    }
    if (typeof Worker === "undefined") return "This browser has no Web Workers, which the live model runs in.";
    if (typeof WebAssembly === "undefined" && typeof BigInt === "undefined") {
      return "This browser is too old to run the live model.";
    }
    return null;
  }

  function errorFrom(message) {
    var Kind = { TypeError: TypeError, RangeError: RangeError }[message.name] || Error;
    return new Kind(message.message);
  }

  function startWorker() {
    worker = new Worker(base + "worker.js");
    worker.onmessage = function (event) {
      var message = event.data;
      var call = pending[message.id];
      if (!call) return;
      if (message.type === "progress") {
        if (call.onProgress) call.onProgress(message);
        return;
      }
      delete pending[message.id];
      if (message.type === "error") call.reject(errorFrom(message));
      else call.resolve(message.result);
    };
    worker.onerror = function (event) {
      var error = new Error("the live model's worker failed: " + (event.message || "unknown error"));
      Object.keys(pending).forEach(function (id) { pending[id].reject(error); delete pending[id]; });
    };
  }

  function ask(message, onProgress) {
    return new Promise(function (resolve, reject) {
      message.id = nextId++;
      pending[message.id] = { resolve: resolve, reject: reject, onProgress: onProgress };
      worker.postMessage(message);
    });
  }

  // Load the model (once); options.onProgress({loaded, total, fromCache}) while it arrives.
  function load(options) {
    var reason = unavailableReason();
    if (reason) return Promise.reject(new Error(reason));
    if (!ready) {
      if (!worker) startWorker();
      var onProgress = options && options.onProgress;
      ready = ask({ type: "load", url: modelUrl }, function (progress) {
        api.lastProgress = progress;
        if (onProgress) onProgress(progress);
        document.dispatchEvent(new CustomEvent("attnlab-live-progress", { detail: progress }));
      }).then(function (info) {
        api.info = info;
        return info;
      }, function (error) {
        ready = null;
        throw error;
      });
    }
    return ready;
  }

  function loaded() {
    if (!ready) return Promise.reject(new Error("the model is not loaded: call attnlabLive.load() first"));
    return ready;
  }

  function tokens(text) {
    if (typeof text !== "string") {
      return Promise.reject(new TypeError("text must be a string; got " + (text === null ? "null" : Array.isArray(text) ? "an array" : typeof text)));
    }
    return loaded().then(function () { return ask({ type: "encode", text: text }); });
  }

  function encode(text) {
    return tokens(text).then(function (result) { return result.ids; });
  }

  // {text, tokens} of token ids.
  function decode(ids) {
    if (!Array.isArray(ids)) {
      return Promise.reject(new TypeError("ids must be an array of integer token ids; got " + (ids === null ? "null" : typeof ids)));
    }
    return loaded().then(function () { return ask({ type: "decode", ids: ids.slice() }); });
  }

  function run(ids, options) {
    if (!Array.isArray(ids)) {
      return Promise.reject(new TypeError("ids must be an array of integer token ids; got " + (ids === null ? "null" : typeof ids)));
    }
    var ablate = options && options.ablate;
    if (ablate !== undefined && ablate !== null && (typeof ablate !== "object" || Array.isArray(ablate))) {
      return Promise.reject(new TypeError("ablate must be an object {layer: [head, ...]}; got " + (Array.isArray(ablate) ? "an array" : typeof ablate)));
    }
    var message;
    try {
      message = { type: "run", ids: ids.slice(), ablate: ablate ? JSON.parse(JSON.stringify(ablate)) : null };
    } catch (error) {
      return Promise.reject(new TypeError("ids and ablate must hold plain numbers; " + error.message));
    }
    return loaded().then(function () { return ask(message); });
  }

  var api = {
    modelUrl: modelUrl,
    modelBytes: modelBytes,
    unavailableReason: unavailableReason,
    load: load,
    encode: encode,
    tokens: tokens,
    decode: decode,
    run: run,
    info: null,
    lastProgress: null,
  };
  window.attnlabLive = api;
})();
