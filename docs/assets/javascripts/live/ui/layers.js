// @ts-check
// What each layer of the live model is, as the view draws it. `info().layer_types[l]`
// (transformers' names) says which mixer layer l has:
//
// - "full_attention": softmax attention over every earlier token: probabilities, each
//   row sums to 1, shaded in the explorer's colour.
// - "sliding_attention": softmax attention over the last `sliding_window` tokens only
//   (key k is in query i's window when i - k < sliding_window, as transformers' mask):
//   probabilities as well, zero outside the band, which the matrix hatches and outlines.
// - "linear_attention": a Gated DeltaNet layer; its map is the implicit attention matrix
//   (attnlab.gated_delta_attention_matrix): signed, its rows are not probabilities. It is
//   drawn on a diverging scale centred at zero: one colour for positive values, another
//   for negative ones, both shaded by |value| / the head's largest |value|.

/** @typedef {"full_attention" | "sliding_attention" | "linear_attention"} LayerType */

/**
 * @typedef {object} LayerKind  how layer `layer` is drawn
 * @property {LayerType} type
 * @property {number | null} window  sliding layers: the window in tokens; else null
 * @property {boolean} signed  linear layers: the values are signed, not probabilities
 */

/**
 * @typedef {object} ModelLayers  the fields of `info()` this reads (snake_case: the Python config's)
 * @property {number} num_layers
 * @property {string[]} [layer_types]  absent: every layer full attention
 * @property {number | null} [sliding_window]
 */

export const LAYER_TYPES = /** @type {const} */ (["full_attention", "sliding_attention", "linear_attention"]);

/**
 * The kind of layer `layer`.
 * @param {ModelLayers} info
 * @param {number} layer
 * @returns {LayerKind}
 */
export function layerKind(info, layer) {
  const name = info.layer_types ? info.layer_types[layer] : "full_attention";
  const type = /** @type {LayerType} */ (LAYER_TYPES.find((known) => known === name));
  if (!type) throw new RangeError(`layer_types[${layer}] must be one of ${LAYER_TYPES.join(", ")}; got ${name}`);
  if (type === "sliding_attention") {
    const window = info.sliding_window;
    if (!Number.isInteger(window) || !window || window < 1) {
      throw new RangeError(`layer ${layer} slides, so sliding_window must be a whole number >= 1; got ${window}`);
    }
    return { type, window, signed: false };
  }
  return { type, window: null, signed: type === "linear_attention" };
}

/**
 * Whether key `key` is drawn for query `query`: causal, and inside the window if any.
 * @param {LayerKind} kind
 * @param {number} query
 * @param {number} key
 */
export const seen = (kind, query, key) => key <= query && (kind.window === null || query - key < kind.window);

/**
 * Why a key is not drawn for a query ("" when it is).
 * @param {LayerKind} kind
 * @param {number} query
 * @param {number} key
 */
export const unseenReason = (kind, query, key) =>
  key > query ? "masked (a later token)" : seen(kind, query, key) ? "" : `outside the window of ${kind.window} tokens`;

/**
 * A few words on the layer, for the caption above the bars: its kind and what its numbers are.
 * @param {LayerKind} kind
 * @returns {string}
 */
export function layerNote(kind) {
  if (kind.type === "sliding_attention") {
    return `a sliding-window layer: each query sees only its last ${kind.window} tokens (itself included); ` +
      "the keys before them are outside the window, weight 0";
  }
  if (kind.type === "linear_attention") {
    return "a Gated DeltaNet (linear attention) layer: signed values, not probabilities (a row need not " +
      "sum to 1); blue for positive, orange for negative";
  }
  return "a full-attention layer: softmax weights over every earlier token, each row sums to 1";
}

/**
 * The caption under the matrix: what its colours and marks mean for this layer's kind.
 * @param {LayerKind} kind
 * @param {{heads: number, attentionHeads: number | null}} counts  this layer's heads; the heads
 *   of the model's softmax layers (null: it has none)
 * @returns {string}
 */
export function matrixCaption(kind, { heads, attentionHeads }) {
  const layout = "Row = query, column = key, both from token 0 at the top left.";
  const rest = "Later keys, above the diagonal, are masked: dotted, never coloured. " +
    "The selected query's row is outlined; click or tap a row to pick its query.";
  if (!kind.signed) {
    return `The head's whole weight matrix. ${layout} The stronger the colour, the more weight (the shade ` +
      `grows as the square root of the weight, so that small weights show). ${rest}` +
      (kind.window === null ? "" : " Keys outside the window are hatched: the legend below says more.");
  }
  const valueHeads = attentionHeads === null || attentionHeads === heads
    ? "Its heads are its value heads: each keeps its own state, so each has its own matrix."
    : `This layer has ${heads} heads where the attention layers have ${attentionHeads}: a Gated DeltaNet ` +
      "layer's heads are its value heads, and each keeps its own state, so each has its own matrix.";
  return `The head's implicit attention matrix: how much of each token's value (earlier ones and its own) goes into the ` +
    `query's output. ${layout} The values are signed and are not probabilities. Blue is positive, orange ` +
    "negative, no colour 0. The stronger the colour, the larger the value's size against the head's " +
    `largest absolute value (the shade grows as the square root of that ratio). ${rest} ${valueHeads}`;
}

/**
 * The largest |value| a head's matrix holds over the keys each query sees (1 at least
 * 1e-30, so that an all-zero head divides safely).
 * @param {(query: number, key: number) => number} w
 * @param {number} T
 * @returns {number}
 */
export function largestMagnitude(w, T) {
  let largest = 1e-30;
  for (let i = 0; i < T; i++) for (let k = 0; k <= i; k++) largest = Math.max(largest, Math.abs(w(i, k)));
  return largest;
}

/**
 * A value as written in the view: probabilities as they are, signed values with their sign.
 * @param {LayerKind} kind
 * @param {number} value
 * @param {number} digits
 */
export function written(kind, value, digits) {
  const text = Math.abs(value).toFixed(digits);
  if (!kind.signed) return value.toFixed(digits);
  return (Number(text) === 0 ? "" : value > 0 ? "+" : "\u2212") + text;
}
