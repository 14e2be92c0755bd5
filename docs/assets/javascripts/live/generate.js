// @ts-check
// Generation for model.js's LlamaModel: src/attnlab/llama/generate.py's choices, with
// the same names and defaults.
//
// temperature 0 is greedy (the most likely token); a positive temperature samples from
// softmax(logits / temperature) after the optional top-k and top-p filters, in Hugging
// Face's order and with its semantics (warpLogits = attnlab.llama.generate.warp_logits).
// The draw uses the page's one seeded generator, mulberry32 (PyTorch's generator is
// not available here: the same seed gives the same text in the page, not Python's).
import { checkIds, describe } from "./model.js";

/** @typedef {import("./model.js").LlamaModel} LlamaModel */
/** @typedef {() => number} Uint32Generator  the next uint32 of a seeded stream */
/**
 * @typedef {object} GenerateOptions  generate's keywords (the Python's names), and the page's limit
 * @property {number} [max_new_tokens]  required: refused by name when missing
 * @property {number} [temperature]
 * @property {number | null} [top_k]
 * @property {number | null} [top_p]
 * @property {number | null} [seed]
 * @property {boolean} [stop_at_eos]
 * @property {boolean} [return_attention]
 * @property {Record<number, number[]> | null} [ablate]
 * @property {number} [maxTokens]  the page's limit on prompt + new tokens
 */
/**
 * @typedef {object} GenerateStep  one new token
 * @property {number} id
 * @property {Float32Array} logits
 * @property {Float32Array | null} attention  the new query rows, layer by layer
 * @property {number} T
 * @property {number} S
 */

/**
 * The page's one seeded generator: uint32s from a 32-bit seed (mulberry32).
 * @param {number} seed
 * @returns {Uint32Generator}
 */
export function mulberry32(seed) {
  let a = seed >>> 0;
  return function next() {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return (t ^ (t >>> 14)) >>> 0;
  };
}

/** @param {Uint32Generator} next @returns {number} a float in [0, 1) */
export const uniform = (next) => next() / 4294967296;

// attnlab.llama.LlamaModel.generate's keyword arguments and their defaults.
export const GENERATE_DEFAULTS = Object.freeze({
  temperature: 0.0,
  top_k: null,
  top_p: null,
  seed: null,
  stop_at_eos: false,
});

/** @param {string} name @param {unknown} value @param {string} wanted @returns {number} */
function finite(name, value, wanted) {
  if (typeof value !== "number") throw new TypeError(`${name} must be ${wanted}; got ${describe(value)}`);
  if (!Number.isFinite(value)) throw new RangeError(`${name} must be ${wanted}; got ${value}`);
  return value;
}

// attnlab.llama.generate.Sampling: each field refused by name unless valid.
export class Sampling {
  /** @param {{temperature?: number, top_k?: number | null, top_p?: number | null, seed?: number | null}} [options] */
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
    /** @type {number} */
    this.temperature = temperature;
    /** @type {number | null} */
    this.top_k = top_k;
    /** @type {number | null} */
    this.top_p = top_p;
    /** @type {number | null} */
    this.seed = seed;
  }
  get greedy() {
    return this.temperature === 0;
  }
  /** @returns {Uint32Generator | null} the seeded generator (a random seed when seed is null); null when greedy */
  generator() {
    if (this.greedy) return null;
    return mulberry32(this.seed === null ? Math.floor(Math.random() * 4294967296) : this.seed);
  }
}

// The scores sampling draws from (float64): scaled by the temperature, then top-k, then
// top-p, the largest logit subtracted first; filtered tokens get -Infinity.
/**
 * @param {Float32Array} logits  (V,)
 * @param {Sampling} sampling
 * @returns {Float64Array}
 */
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
    /** @type {number[]} */
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
/**
 * @param {Float32Array} logits  (V,)
 * @param {Sampling} sampling
 * @param {Uint32Generator | null} generator  null when greedy
 * @returns {number}
 */
export function pickNextToken(logits, sampling, generator) {
  if (sampling.greedy) {
    let best = 0;
    for (let v = 1; v < logits.length; v++) if (logits[v] > logits[best]) best = v;
    return best;
  }
  if (!generator) throw new Error("sampling needs a generator: Sampling.generator()");
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
/** @param {unknown} value @returns {number} */
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
/**
 * @param {LlamaModel} model
 * @param {unknown} ids
 * @param {GenerateOptions} options
 * @returns {Generator<GenerateStep, void, void>}
 */
export function* generateSteps(model, ids, options) {
  const { max_new_tokens, stop_at_eos = false, return_attention = false, ablate = null, maxTokens } = options;
  const n = checkMaxNewTokens(max_new_tokens);
  const sampling = new Sampling(options);
  if (typeof stop_at_eos !== "boolean") throw new TypeError(`stop_at_eos must be a boolean; got ${describe(stop_at_eos)}`);
  const c = /** @type {import("./model.js").ModelSizes & {eos_token_id?: number | null}} */ (model.config);
  const prompt = checkIds("input_ids", ids, { vocabSize: c.vocab_size });
  if (prompt.length + n > c.context_length) {
    throw new RangeError(`input_ids plus max_new_tokens must fit the context of ${c.context_length} tokens; got ${prompt.length} + ${n}`);
  }
  if (maxTokens !== undefined && prompt.length + n > maxTokens) {
    throw new RangeError(`input_ids plus max_new_tokens must be at most ${maxTokens} tokens (the page's limit); got ${prompt.length} + ${n}`);
  }
  const generator = sampling.generator();
  const cache = model.newCache({ capacity: prompt.length + n });
  /** @type {ArrayLike<number>} */
  let step = prompt;
  for (let i = 0; i < n; i++) {
    const out = model.forward(step, { cache, return_attention, ablate });
    const id = pickNextToken(out.logits, sampling, generator);
    yield { id, logits: out.logits, attention: out.attention, T: out.T, S: out.S };
    if (stop_at_eos && id === c.eos_token_id) return;
    step = [id];
  }
}

// The new ids of generateSteps, all at once (Python's generate returns the prompt too).
/**
 * @param {LlamaModel} model
 * @param {unknown} ids
 * @param {GenerateOptions} options
 * @returns {number[]}
 */
export function generate(model, ids, options) {
  return Array.from(generateSteps(model, ids, options), (step) => step.id);
}
