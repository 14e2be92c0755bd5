// The three head scores of "What trained attention does", one definition each, as
// src/attnlab/llama/interpret.py (sink_scores, previous_token_scores, induction_scores)
// on one sequence's attention: `maps` a Float32Array (num_layers, H, T, T), as
// model.js's forward gives with return_attention. Each returns scores[layer][head].

function perHead(maps, numLayers, numHeads, T, score) {
  const table = [];
  for (let layer = 0; layer < numLayers; layer++) {
    const row = [];
    for (let head = 0; head < numHeads; head++) {
      const at = (layer * numHeads + head) * T * T;
      row.push(score((query, key) => maps[at + query * T + key]));
    }
    table.push(row);
  }
  return table;
}

function checkTokens(T, least) {
  if (!Number.isInteger(T) || T < least) {
    throw new RangeError(`maps must cover at least ${least} tokens; got T = ${T}`);
  }
}

// Each head's mean weight on the first token, over the queries 1 .. T-1.
export function sink_scores(maps, numLayers, numHeads, T) {
  checkTokens(T, 2);
  return perHead(maps, numLayers, numHeads, T, (w) => {
    let sum = 0;
    for (let i = 1; i < T; i++) sum += w(i, 0);
    return sum / (T - 1);
  });
}

// Each head's mean weight on the token just before the query, over i = 1 .. T-1.
export function previous_token_scores(maps, numLayers, numHeads, T) {
  checkTokens(T, 2);
  return perHead(maps, numLayers, numHeads, T, (w) => {
    let sum = 0;
    for (let i = 1; i < T; i++) sum += w(i, i - 1);
    return sum / (T - 1);
  });
}

// The last 2 * length positions hold a sequence written twice: each head's mean weight
// from a token p of the second copy to p - length + 1, the token after its first
// occurrence, over the `length` queries of the second copy.
export function induction_scores(maps, numLayers, numHeads, T, length) {
  checkTokens(T, 4);
  if (!Number.isInteger(length) || length < 2 || length > Math.floor(T / 2)) {
    throw new RangeError(`length must be in 2 .. T // 2 = ${Math.floor(T / 2)} for T = ${T}; got ${length}`);
  }
  return perHead(maps, numLayers, numHeads, T, (w) => {
    let sum = 0;
    for (let p = T - length; p < T; p++) sum += w(p, p - length + 1);
    return sum / length;
  });
}

// The longest `length` >= 2 for which ids end with a sequence written twice, or null:
// where induction_scores can be measured on the reader's own text.
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
export function top_heads(table, k) {
  const all = [];
  table.forEach((row, layer) => row.forEach((score, head) => all.push({ layer, head, score })));
  return all.sort((a, b) => b.score - a.score).slice(0, k);
}
