// @ts-check
// The module Worker that holds the model and runs it, so that the page keeps answering.
//
// Messages in (from api.js), each with an `id` that its answer repeats:
//   {type: "load", url}            -> progress messages, then {type: "result", result: info}
//   {type: "encode", text}         -> {ids, tokens}
//   {type: "decode", ids}          -> {text, tokens}
//   {type: "chat", text}           -> the text as a user's chat message (null: no template)
//   {type: "run", ids, options}    -> {logits, attention, T, S, ms, top} (arrays transferred;
//                                     options: ablate, return_attention)
//   {type: "generate", ids, options} -> a {type: "token"} message per new token ({id,
//                                     token, T, S, attention: with return_attention, the
//                                     weights of the T queries fed in that step (num_layers,
//                                     H, T, S): the prompt's, then one row), then {ids, ms};
//   {type: "open", file}           -> the model of the reader's own GGUF (File or ArrayBuffer)
//   {type: "stop", target}          -> the generation `target` stops after its current token.
// A failure answers {type: "error", name, message}: bad input is refused before any
// arithmetic, with the message the Python would give.
import { openCache } from "./cache.js";
import { Engine, FileSlot } from "./engine.js";
import { topK } from "./model.js";
import { startThreads, ThreadedKernels } from "./threads.js";

/** @type {Engine | null} */
let engine = null;
/** @type {Promise<object> | null} */
let loading = null;
/** @type {Set<number>} */
const stopped = new Set(); // ids of generations asked to stop

/**
 * The worker's side of its channel (the DOM library types `self` as a Window).
 * @typedef {object} WorkerScope
 * @property {(message: unknown, transfer: Transferable[]) => void} postMessage
 * @property {((event: MessageEvent) => void) | null} onmessage
 */
const scope = /** @type {WorkerScope} */ (/** @type {unknown} */ (self));

/** @param {object} message @param {Transferable[]} [transfer] */
const post = (message, transfer = []) => scope.postMessage(message, transfer);

/** @returns {Engine} the model loaded, or an error that says none is */
function current() {
  if (!engine) throw new Error("the model is not loaded: call attnlabLive.load() first");
  return engine;
}

/** @param {unknown} error @returns {{name: string, message: string}} */
const named = (error) => (error instanceof Error
  ? { name: error.name || "Error", message: String(error.message || error) }
  : { name: "Error", message: String(error) });

/**
 * Read a response's body into a FileSlot, reporting progress as the bytes arrive.
 * @param {Response} response
 * @param {number} id  the load's message id
 * @param {boolean} fromCache
 * @returns {Promise<FileSlot>}
 */
async function readInto(response, id, fromCache) {
  const total = Number(response.headers.get("Content-Length")) || 0;
  if (!total || !response.body) {
    const buffer = await response.arrayBuffer();
    const slot = new FileSlot(buffer.byteLength);
    slot.bytes.set(new Uint8Array(buffer));
    post({ type: "progress", id, loaded: buffer.byteLength, total: buffer.byteLength, fromCache });
    return slot;
  }
  const slot = new FileSlot(total);
  const reader = response.body.getReader();
  let loaded = 0;
  let lastPost = 0;
  for (;;) {
    const chunk = await reader.read();
    if (chunk.done) break;
    if (loaded + chunk.value.length > total) throw new Error("the model's file is longer than its Content-Length");
    slot.bytes.set(chunk.value, loaded);
    loaded += chunk.value.length;
    if (loaded - lastPost > total / 100) {
      lastPost = loaded;
      post({ type: "progress", id, loaded, total, fromCache });
    }
  }
  if (loaded !== total) throw new Error(`the model's download stopped at ${loaded} of ${total} bytes`);
  post({ type: "progress", id, loaded, total, fromCache });
  return slot;
}

/**
 * Progress messages for a stream's bytes as they pass.
 * @param {ReadableStream<Uint8Array>} body
 * @param {number} total
 * @param {number} id
 * @returns {ReadableStream<Uint8Array>}
 */
function counted(body, total, id) {
  let loaded = 0;
  let lastPost = 0;
  return body.pipeThrough(new TransformStream(/** @type {Transformer<Uint8Array, Uint8Array>} */ ({
    transform(chunk, controller) {
      loaded += chunk.length;
      if (loaded - lastPost > total / 100 || loaded === total) {
        lastPost = loaded;
        post({ type: "progress", id, loaded, total, fromCache: false });
      }
      controller.enqueue(chunk);
    },
  })));
}

// Download the file. With Cache Storage, the bytes stream to the cache (kept for the
// next visit) and are then read back from it: the page never holds two copies, which
// matters on a phone. Where the cache refuses (a full disk), download again without it.
/**
 * @param {string} url
 * @param {number} id
 * @param {Cache | null} cache
 * @returns {Promise<FileSlot>}
 */
async function download(url, id, cache) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`HTTP ${response.status} for ${url}`);
  const total = Number(response.headers.get("Content-Length")) || 0;
  if (!cache || !response.body || !total || typeof TransformStream === "undefined") {
    return readInto(response, id, false);
  }
  const again = async () => readInto(await fetch(url), id, false);
  try {
    await cache.put(url, new Response(counted(response.body, total, id), { headers: response.headers }));
    const hit = await cache.match(url);
    return hit ? readInto(hit, id, false) : again();
  } catch {
    return again();
  }
}

/** @typedef {ReturnType<Engine["info"]> & {fromCache: boolean, readMs: number, loadMs: number}} LoadedInfo */

/**
 * @param {{url: string, id: number, maxTokens?: number}} message
 * @returns {Promise<LoadedInfo>}
 */
async function load({ url, id, maxTokens }) {
  const started = performance.now();
  const cache = await openCache();
  const hit = cache ? await cache.match(url) : null;
  const slot = hit ? await readInto(hit, id, true) : await download(url, id, cache);
  const read = performance.now();
  await startThreads(slot.kernels); // threads.js: kernel threads where the page is cross-origin isolated
  engine = new Engine(slot, maxTokens);
  return { ...engine.info(), fromCache: Boolean(hit), readMs: read - started, loadMs: performance.now() - started };
}

export const MAX_OPEN_BYTES = 2 * 1024 ** 3; // the largest file open() reads (2 GiB)

// Another model from the reader's own file (a File or an ArrayBuffer, never uploaded):
// read here, in the worker; the model in use stays until the new one is built, and
// stays if it cannot be (the refusal names what is unsupported).
/**
 * @param {{file: File | ArrayBuffer, id: number, maxTokens?: number}} message
 * @returns {Promise<LoadedInfo>}
 */
async function open({ file, id, maxTokens }) {
  const started = performance.now();
  const size = file instanceof ArrayBuffer ? file.byteLength : file.size;
  if (size > MAX_OPEN_BYTES) {
    throw new RangeError(`file must be at most ${MAX_OPEN_BYTES / 1024 ** 3} GiB (the page's limit); got ${(size / 1024 ** 3).toFixed(2)} GiB`);
  }
  let slot;
  try {
    slot = new FileSlot(size);
  } catch (error) {
    throw new RangeError(`this browser could not give a file of ${Math.round(size / 1048576)} MB the memory it needs (${named(error).message})`, { cause: error });
  }
  if (file instanceof ArrayBuffer) slot.bytes.set(new Uint8Array(file));
  else {
    const reader = file.stream().getReader();
    let loaded = 0;
    for (;;) {
      const chunk = await reader.read();
      if (chunk.done) break;
      slot.bytes.set(chunk.value, loaded);
      loaded += chunk.value.length;
      post({ type: "progress", id, loaded, total: size, fromCache: false });
    }
  }
  await startThreads(slot.kernels);
  let opened;
  try {
    opened = new Engine(slot, maxTokens); // throws, naming what it cannot read
  } catch (error) {
    if (slot.kernels instanceof ThreadedKernels) slot.kernels.stopThreads();
    throw error;
  }
  const previous = engine?.model.kernels;
  if (previous instanceof ThreadedKernels) previous.stopThreads(); // the old model's threads
  engine = opened;
  return { ...engine.info(), fromCache: false, readMs: 0, loadMs: performance.now() - started };
}

/**
 * @template {{id: number}} E
 * @param {E[]} entries
 */
const withTokens = (entries) => entries.map((entry) => ({ ...entry, token: current().tokenizer.decode([entry.id]) }));

/** @param {{ids: number[], options?: {ablate?: Record<number, number[]> | null, return_attention?: boolean}}} message */
function run({ ids, options = {} }) {
  const started = performance.now();
  const result = current().run(ids, { ablate: options.ablate, return_attention: options.return_attention });
  return { ...result, ms: performance.now() - started, top: withTokens(topK(result.logits, 5)) };
}

/**
 * @param {{id: number, ids: number[], options?: Omit<import("./generate.js").GenerateOptions, "maxTokens">}} message
 */
async function generate({ id, ids, options = {} }) {
  const started = performance.now();
  const steps = current().steps(ids, options);
  const newIds = [];
  let stepStart = performance.now();
  let firstMs = null;
  for (const step of steps) {
    const now = performance.now();
    if (firstMs === null) firstMs = now - stepStart;
    newIds.push(step.id);
    const attention = step.attention; // (num_layers, H, T, S): the queries fed in this step
    post({
      type: "token", id, index: newIds.length - 1, token_id: step.id, token: current().tokenizer.decode([step.id]),
      T: step.T, S: step.S, attention, ms: now - stepStart,
    }, attention ? [attention.buffer] : []);
    await new Promise((resolve) => setTimeout(resolve, 0)); // let a "stop" message in
    if (stopped.delete(id)) break;
    stepStart = performance.now();
  }
  const ms = performance.now() - started;
  return { ids: newIds, ms, prefillMs: firstMs, decodeMs: ms - (firstMs || 0) };
}

/**
 * The answer to one message of api.js (see the header).
 * @param {any} message
 * @returns {unknown}
 */
function answer(message) {
  if (message.type === "load") {
    if (!loading) loading = load(message).catch((error) => { loading = null; throw error; });
    return loading;
  }
  if (message.type === "open") return open(message);
  if (message.type === "stop") {
    stopped.add(message.target);
    return true;
  }
  if (!engine) throw new Error("the model is not loaded: call attnlabLive.load() first");
  if (message.type === "encode") return engine.encode(message.text);
  if (message.type === "decode") return engine.decode(message.ids);
  if (message.type === "chat") return engine.tokenizer.chatPrompt(message.text);
  if (message.type === "run") return run(message);
  if (message.type === "generate") return generate(message);
  throw new Error(`unknown message type ${JSON.stringify(message.type)}`);
}

/** @param {MessageEvent} event */
scope.onmessage = async (event) => {
  const message = event.data;
  try {
    const result = /** @type {{logits?: Float32Array, attention?: Float32Array | null} | null} */ (await answer(message));
    /** @type {Transferable[]} */
    const transfer = [];
    if (result && result.logits) transfer.push(result.logits.buffer);
    if (result && result.attention) transfer.push(result.attention.buffer);
    post({ type: "result", id: message.id, result }, transfer);
  } catch (error) {
    post({ type: "error", id: message.id, ...named(error) });
  }
};
