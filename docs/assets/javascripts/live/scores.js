// @ts-check
// The three head scores of "What trained attention does", one definition each, as
// src/attnlab/llama/interpret.py (sink_scores, previous_token_scores, induction_scores)
// on one sequence's attention: `maps` a Float32Array of the layers' (H_l, T, T) maps one
// after the other, as model.js's forward gives with return_attention, and its shape
// ({layers, heads, T}: heads a number, or each layer's). Each returns scores[layer][head].
// (The names are interpret.py's, so the two languages' lists compare.)

/**
 * @typedef {object} MapsShape  the shape of one sequence's maps
 * @property {number} layers
 * @property {number | number[]} heads  every layer's heads, or each layer's
 * @property {number} T  queries = keys
 */
/** @typedef {(query: number, key: number) => number} HeadMap  one head's (T, T) weights */

/**
 * @param {Float32Array} maps
 * @param {MapsShape} shape
 * @param {(w: HeadMap) => number} score  one head's score from its map
 * @returns {number[][]} scores[layer][head]
 */
function perHead(maps, { layers, heads, T }, score) {
  /** @type {number[][]} */
  const table = [];
  let at = 0;
  for (let layer = 0; layer < layers; layer++) {
    /** @type {number[]} */
    const row = [];
    const count = Array.isArray(heads) ? heads[layer] : heads;
    for (let head = 0; head < count; head++, at += T * T) {
      const start = at;
      row.push(score((query, key) => maps[start + query * T + key]));
    }
    table.push(row);
  }
  return table;
}

/** @param {number} T @param {number} least */
function checkTokens(T, least) {
  if (!Number.isInteger(T) || T < least) {
    throw new RangeError(`maps must cover at least ${least} tokens; got T = ${T}`);
  }
}

/**
 * Each head's mean weight on the first token, over the queries 1 .. T-1.
 * @param {Float32Array} maps
 * @param {MapsShape} shape
 */
export function sink_scores(maps, shape) {
  const { T } = shape;
  checkTokens(T, 2);
  return perHead(maps, shape, (w) => {
    let sum = 0;
    for (let i = 1; i < T; i++) sum += w(i, 0);
    return sum / (T - 1);
  });
}

// Each head's mean weight on the token just before the query, over i = 1 .. T-1.
/**
 * @param {Float32Array} maps
 * @param {MapsShape} shape
 */
export function previous_token_scores(maps, shape) {
  const { T } = shape;
  checkTokens(T, 2);
  return perHead(maps, shape, (w) => {
    let sum = 0;
    for (let i = 1; i < T; i++) sum += w(i, i - 1);
    return sum / (T - 1);
  });
}

// The last 2 * length positions hold a sequence written twice: each head's mean weight
// from a token p of the second copy to p - length + 1, the token after its first
// occurrence, over the `length` queries of the second copy.
/**
 * @param {Float32Array} maps
 * @param {MapsShape} shape
 * @param {number} length  the repeated sequence's length
 */
export function induction_scores(maps, shape, length) {
  const { T } = shape;
  checkTokens(T, 4);
  if (!Number.isInteger(length) || length < 2 || length > Math.floor(T / 2)) {
    throw new RangeError(`length must be in 2 .. T // 2 = ${Math.floor(T / 2)} for T = ${T}; got ${length}`);
  }
  return perHead(maps, shape, (w) => {
    let sum = 0;
    for (let p = T - length; p < T; p++) sum += w(p, p - length + 1);
    return sum / length;
  });
}

// The longest `length` >= 2 for which ids end with a sequence written twice, or null:
// where induction_scores can be measured on the reader's own text.
/** @param {number[]} ids @returns {number | null} */
export function repeatedLength(ids) {
  for (let length = Math.floor(ids.length / 2); length >= 2; length--) {
    const T = ids.length;
    let same = true;
    for (let i = 0; i < length && same; i++) same = ids[T - 2 * length + i] === ids[T - length + i];
    if (same) return length;
  }
  return null;
}

// The k best heads of a table: [{layer, head, score}], highest first.
/**
 * @param {number[][]} table  scores[layer][head]
 * @param {number} k
 * @returns {{layer: number, head: number, score: number}[]}
 */
export function top_heads(table, k) {
  /** @type {{layer: number, head: number, score: number}[]} */
  const all = [];
  table.forEach((row, layer) => row.forEach((score, head) => all.push({ layer, head, score })));
  return all.sort((a, b) => b.score - a.score).slice(0, k);
}
