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

let engine = null;
let loading = null;
const stopped = new Set(); // ids of generations asked to stop

const post = (message, transfer = []) => self.postMessage(message, transfer);

// Read a response's body into a FileSlot, reporting progress as the bytes arrive.
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

// Progress messages for a stream's bytes as they pass.
function counted(body, total, id) {
  let loaded = 0;
  let lastPost = 0;
  return body.pipeThrough(new TransformStream({
    transform(chunk, controller) {
      loaded += chunk.length;
      if (loaded - lastPost > total / 100 || loaded === total) {
        lastPost = loaded;
        post({ type: "progress", id, loaded, total, fromCache: false });
      }
      controller.enqueue(chunk);
    },
  }));
}

// Download the file. With Cache Storage, the bytes stream to the cache (kept for the
// next visit) and are then read back from it: the page never holds two copies, which
// matters on a phone. Where the cache refuses (a full disk), download again without it.
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

async function load({ url, id, maxTokens }) {
  const started = performance.now();
  const cache = await openCache();
  const hit = cache ? await cache.match(url) : null;
  const slot = hit ? await readInto(hit, id, true) : await download(url, id, cache);
  const read = performance.now();
  engine = new Engine(slot, maxTokens);
  return { ...engine.info(), fromCache: Boolean(hit), readMs: read - started, loadMs: performance.now() - started };
}

export const MAX_OPEN_BYTES = 2 * 1024 ** 3; // the largest file open() reads (2 GiB)

// Another model from the reader's own file (a File or an ArrayBuffer, never uploaded):
// read here, in the worker; the model in use stays until the new one is built, and
// stays if it cannot be (the refusal names what is unsupported).
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
    throw new RangeError(`this browser could not give a file of ${Math.round(size / 1048576)} MB the memory it needs (${error.message})`);
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
  const opened = new Engine(slot, maxTokens); // throws, naming what it cannot read
  engine = opened;
  return { ...engine.info(), fromCache: false, readMs: 0, loadMs: performance.now() - started };
}

const withTokens = (entries) => entries.map((entry) => ({ ...entry, token: engine.tokenizer.decode([entry.id]) }));

function run({ ids, options = {} }) {
  const started = performance.now();
  const result = engine.run(ids, { ablate: options.ablate, return_attention: options.return_attention });
  return { ...result, ms: performance.now() - started, top: withTokens(topK(result.logits, 5)) };
}

async function generate({ id, ids, options = {} }) {
  const started = performance.now();
  const steps = engine.steps(ids, options);
  const newIds = [];
  let stepStart = performance.now();
  let firstMs = null;
  for (const step of steps) {
    const now = performance.now();
    if (firstMs === null) firstMs = now - stepStart;
    newIds.push(step.id);
    const attention = step.attention; // (num_layers, H, T, S): the queries fed in this step
    post({
      type: "token", id, index: newIds.length - 1, token_id: step.id, token: engine.tokenizer.decode([step.id]),
      T: step.T, S: step.S, attention, ms: now - stepStart,
    }, attention ? [attention.buffer] : []);
    await new Promise((resolve) => setTimeout(resolve, 0)); // let a "stop" message in
    if (stopped.delete(id)) break;
    stepStart = performance.now();
  }
  const ms = performance.now() - started;
  return { ids: newIds, ms, prefill_ms: firstMs, decode_ms: ms - (firstMs || 0) };
}

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

self.onmessage = async (event) => {
  const message = event.data;
  try {
    const result = await answer(message);
    const transfer = [];
    if (result && result.logits) transfer.push(result.logits.buffer);
    if (result && result.attention) transfer.push(result.attention.buffer);
    post({ type: "result", id: message.id, result }, transfer);
  } catch (error) {
    post({ type: "error", id: message.id, name: error.name || "Error", message: String(error.message || error) });
  }
};
