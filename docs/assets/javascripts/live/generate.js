// Generation for model.js's LlamaModel: src/attnlab/llama/generate.py's choices, with
// the same names and defaults.
//
// temperature 0 is greedy (the most likely token); a positive temperature samples from
// softmax(logits / temperature) after the optional top-k and top-p filters, in Hugging
// Face's order and with its semantics (warpLogits = attnlab.llama.generate.warp_logits).
// The draw uses the page's one seeded generator, mulberry32 (PyTorch's generator is
// not available here: the same seed gives the same text in the page, not Python's).
import { checkIds, describe } from "./model.js";

// The page's one seeded generator: uint32s from a 32-bit seed (mulberry32).
export function mulberry32(seed) {
  let a = seed >>> 0;
  return function next() {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return (t ^ (t >>> 14)) >>> 0;
  };
}

// A float in [0, 1) from a uint32 generator.
export const uniform = (next) => next() / 4294967296;

// attnlab.llama.LlamaModel.generate's keyword arguments and their defaults.
export const GENERATE_DEFAULTS = Object.freeze({
  temperature: 0.0,
  top_k: null,
  top_p: null,
  seed: null,
  stop_at_eos: false,
});

function finite(name, value, wanted) {
  if (typeof value !== "number") throw new TypeError(`${name} must be ${wanted}; got ${describe(value)}`);
  if (!Number.isFinite(value)) throw new RangeError(`${name} must be ${wanted}; got ${value}`);
  return value;
}

// attnlab.llama.generate.Sampling: each field refused by name unless valid.
export class Sampling {
  constructor({ temperature = 0.0, top_k = null, top_p = null, seed = null } = {}) {
    finite("temperature", temperature, "a finite number >= 0");
    if (temperature < 0) throw new RangeError(`temperature must be a finite number >= 0; got ${temperature}`);
    if (top_k !== null) {
      if (typeof top_k !== "number" || !Number.isInteger(top_k)) throw new TypeError(`top_k must be a positive int; got ${describe(top_k)} ${JSON.stringify(top_k)}`);
      if (top_k < 1) throw new RangeError(`top_k must be a positive int; got ${top_k}`);
    }
    if (top_p !== null) {
      if (typeof top_p !== "number") throw new TypeError(`top_p must be a float in [0, 1]; got ${describe(top_p)}`);
      if (!(top_p >= 0 && top_p <= 1)) throw new RangeError(`top_p must be in [0, 1]; got ${top_p}`);
    }
    if (seed !== null) {
      if (typeof seed !== "number" || !Number.isInteger(seed)) throw new TypeError(`seed must be an int in 0 .. 2**32 - 1; got ${describe(seed)} ${JSON.stringify(seed)}`);
      if (seed < 0 || seed > 4294967295) throw new RangeError(`seed must be an int in 0 .. 2**32 - 1; got ${seed}`);
    }
    if (temperature === 0 && (top_k !== null || top_p !== null)) {
      const [name, value] = top_k !== null ? ["top_k", top_k] : ["top_p", top_p];
      throw new RangeError(
        `${name} filters sampling, which needs temperature > 0; got ${name}=${value} with temperature=0 (greedy decoding, which would ignore it)`
      );
    }
    Object.assign(this, { temperature, top_k, top_p, seed });
  }
  get greedy() {
    return this.temperature === 0;
  }
  // The seeded generator (a random seed when seed is null); null when greedy.
  generator() {
    if (this.greedy) return null;
    return mulberry32(this.seed === null ? Math.floor(Math.random() * 4294967296) : this.seed);
  }
}

// The scores sampling draws from (float64): scaled by the temperature, then top-k, then
// top-p, the largest logit subtracted first; filtered tokens get -Infinity.
export function warpLogits(logits, sampling) {
  const V = logits.length;
  let max = -Infinity;
  for (let v = 0; v < V; v++) if (logits[v] > max) max = logits[v];
  const scores = new Float64Array(V);
  for (let v = 0; v < V; v++) scores[v] = Math.fround(Math.fround(logits[v] - max) / sampling.temperature);
  if (sampling.top_k !== null && sampling.top_k < V) {
    const kthBest = Float64Array.from(scores).sort()[V - sampling.top_k];
    for (let v = 0; v < V; v++) if (scores[v] < kthBest) scores[v] = -Infinity;
  }
  if (sampling.top_p !== null) {
    const order = Array.from(scores.keys()).sort((a, b) => scores[a] - scores[b]); // least likely first
    let total = 0;
    for (let v = 0; v < V; v++) total += Math.exp(scores[v]); // the max is 0: no overflow
    let massBelow = 0;
    const drop = [];
    for (let i = 0; i < V - 1; i++) { // the most likely token always stays
      massBelow += Math.exp(scores[order[i]]) / total;
      if (massBelow <= 1 - sampling.top_p) drop.push(order[i]);
      else break;
    }
    for (const v of drop) scores[v] = -Infinity;
  }
  return scores;
}

// The next token: the most likely (greedy) or one drawn by `generator`.
export function pickNextToken(logits, sampling, generator) {
  if (sampling.greedy) {
    let best = 0;
    for (let v = 1; v < logits.length; v++) if (logits[v] > logits[best]) best = v;
    return best;
  }
  const scores = warpLogits(logits, sampling);
  let total = 0;
  for (let v = 0; v < scores.length; v++) total += scores[v] === -Infinity ? 0 : Math.exp(scores[v]);
  let u = uniform(generator) * total;
  let last = 0;
  for (let v = 0; v < scores.length; v++) {
    if (scores[v] === -Infinity) continue;
    last = v;
    u -= Math.exp(scores[v]);
    if (u < 0) return v;
  }
  return last; // rounding left a sliver of mass: the last token kept
}

// max_new_tokens as attnlab.llama's check_length: an int >= 0.
export function checkMaxNewTokens(value) {
  if (typeof value !== "number" || !Number.isInteger(value)) {
    throw new TypeError(`max_new_tokens must be an int >= 0; got ${describe(value)} ${JSON.stringify(value)}`);
  }
  if (value < 0) throw new RangeError(`max_new_tokens must be an int >= 0; got ${value}`);
  return value;
}

// Continue `ids` one token at a time through one KVCache per layer, as
// attnlab.llama.generate_tokens: the prompt is read in one pass that fills the cache,
// each step then feeds the token just chosen. Yields, per new token, {id, logits,
// attention: the new query rows (num_layers, H, T, S) with return_attention, T, S}.
export function* generateSteps(model, ids, options = {}) {
  const { max_new_tokens, stop_at_eos = false, return_attention = false, ablate = null, maxTokens } = options;
  const n = checkMaxNewTokens(max_new_tokens);
  const sampling = new Sampling(options);
  if (typeof stop_at_eos !== "boolean") throw new TypeError(`stop_at_eos must be a boolean; got ${describe(stop_at_eos)}`);
  const c = model.config;
  ids = checkIds("input_ids", ids, c.vocab_size);
  if (ids.length + n > c.context_length) {
    throw new RangeError(`input_ids plus max_new_tokens must fit the context of ${c.context_length} tokens; got ${ids.length} + ${n}`);
  }
  if (maxTokens !== undefined && ids.length + n > maxTokens) {
    throw new RangeError(`input_ids plus max_new_tokens must be at most ${maxTokens} tokens (the page's limit); got ${ids.length} + ${n}`);
  }
  const generator = sampling.generator();
  const cache = model.new_cache(ids.length + n);
  let step = ids;
  for (let i = 0; i < n; i++) {
    const out = model.forward(step, { cache, return_attention, ablate });
    const id = pickNextToken(out.logits, sampling, generator);
    yield { id, logits: out.logits, attention: out.attention, T: out.T, S: out.S };
    if (stop_at_eos && id === c.eos_token_id) return;
    step = [id];
  }
}

// The new ids of generateSteps, all at once (Python's generate returns the prompt too).
export function generate(model, ids, options) {
  return Array.from(generateSteps(model, ids, options), (step) => step.id);
}
