// @ts-check
// The live view's state and the page's address: what the reader chose (text or ids,
// layer, head, query, knocked-out heads) is kept in the URL's query string, so a view
// can be shared.
//   ?live-text=...&live-layer=18&live-head=6&live-query=12&live-ablate=3.0,3.5
// (or live-ids=0,512,... when the ids were set directly: random tokens, generated text).

export const DEFAULT_TEXT = "The cat sat on the mat. The cat sat on the";

/** @typedef {Record<number, number[]>} Ablated  knocked-out heads: layer -> its heads, sorted */
/**
 * @typedef {object} ViewState  what the reader chose
 * @property {string} text
 * @property {number[] | null} ids  the ids run (null: not yet, or the text's)
 * @property {boolean} [idsSetDirectly]  the ids are not the text's tokens (random tokens, generated text)
 * @property {number} layer
 * @property {number} head
 * @property {number | null} query  null: the last token
 * @property {Ablated} ablate
 * @property {"query" | "sink" | "previous" | "induction"} shade  what the grid of heads shows
 * @property {boolean} fromUrl  the view came in the address (a shared view)
 */

/** @param {Ablated} ablate @param {number} layer @param {number} head */
export function addHead(ablate, layer, head) {
  (ablate[layer] = ablate[layer] || []).push(head);
  ablate[layer].sort((a, b) => a - b);
}

/** @param {Ablated} ablate @param {number} layer @param {number} head @returns {boolean} */
export const isAblated = (ablate, layer, head) => (ablate[layer] || []).includes(head);

/** @param {Ablated} ablate @param {number} layer @param {number} head */
export function toggleHead(ablate, layer, head) {
  if (isAblated(ablate, layer, head)) {
    ablate[layer] = ablate[layer].filter((h) => h !== head);
    if (!ablate[layer].length) delete ablate[layer];
  } else addHead(ablate, layer, head);
}

/**
 * @param {Ablated} ablate
 * @returns {[number, number][]} [[layer, head], ...] in order
 */
export function ablatedPairs(ablate) {
  /** @type {[number, number][]} */
  const pairs = [];
  for (const layer of Object.keys(ablate).map(Number)) for (const head of ablate[layer]) pairs.push([Number(layer), head]);
  return pairs.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
}

/** @returns {ViewState} the view in the address, or the default one */
export function readUrl() {
  const params = new URLSearchParams(location.search);
  /** @type {ViewState} */
  const state = { text: DEFAULT_TEXT, ids: null, layer: 18, head: 6, query: null, ablate: {}, shade: "query", fromUrl: false };
  if (params.has("live-text")) {
    state.text = params.get("live-text") ?? DEFAULT_TEXT;
    state.fromUrl = true;
  }
  if (params.has("live-ids")) {
    state.ids = (params.get("live-ids") ?? "").split(",").map(Number).filter(Number.isInteger);
    state.fromUrl = true;
  }
  for (const name of /** @type {const} */ (["layer", "head", "query"])) {
    const value = Number(params.get("live-" + name));
    if (params.has("live-" + name) && Number.isInteger(value) && value >= 0) state[name] = value;
  }
  for (const pair of (params.get("live-ablate") || "").split(",")) {
    const parts = pair.split(".").map(Number);
    if (parts.length === 2 && parts.every(Number.isInteger)) addHead(state.ablate, parts[0], parts[1]);
  }
  return state;
}

/** @param {ViewState} state */
export function writeUrl(state) {
  const params = new URLSearchParams(location.search);
  params.delete("live-text");
  params.delete("live-ids");
  if (state.idsSetDirectly && state.ids) params.set("live-ids", state.ids.join(","));
  else params.set("live-text", state.text);
  params.set("live-layer", String(state.layer));
  params.set("live-head", String(state.head));
  params.set("live-query", String(state.query));
  const ablated = ablatedPairs(state.ablate).map(([l, h]) => `${l}.${h}`);
  if (ablated.length) params.set("live-ablate", ablated.join(","));
  else params.delete("live-ablate");
  history.replaceState(history.state, "", "?" + params.toString() + location.hash);
}
