// The live view's state and the page's address: what the reader chose (text or ids,
// layer, head, query, knocked-out heads) is kept in the URL's query string, so a view
// can be shared.
//   ?live-text=...&live-layer=18&live-head=6&live-query=12&live-ablate=3.0,3.5
// (or live-ids=0,512,... when the ids were set directly: random tokens, generated text).

export const DEFAULT_TEXT = "The cat sat on the mat. The cat sat on the";

export function addHead(ablate, layer, head) {
  (ablate[layer] = ablate[layer] || []).push(head);
  ablate[layer].sort((a, b) => a - b);
}

export const isAblated = (ablate, layer, head) => (ablate[layer] || []).includes(head);

export function toggleHead(ablate, layer, head) {
  if (isAblated(ablate, layer, head)) {
    ablate[layer] = ablate[layer].filter((h) => h !== head);
    if (!ablate[layer].length) delete ablate[layer];
  } else addHead(ablate, layer, head);
}

// [[layer, head], ...] in order.
export function ablatedPairs(ablate) {
  const pairs = [];
  for (const layer of Object.keys(ablate)) for (const head of ablate[layer]) pairs.push([Number(layer), head]);
  return pairs.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
}

export function readUrl() {
  const params = new URLSearchParams(location.search);
  const state = { text: DEFAULT_TEXT, ids: null, layer: 18, head: 6, query: null, ablate: {}, shade: "query", fromUrl: false };
  if (params.has("live-text")) {
    state.text = params.get("live-text");
    state.fromUrl = true;
  }
  if (params.has("live-ids")) {
    state.ids = params.get("live-ids").split(",").map(Number).filter(Number.isInteger);
    state.fromUrl = true;
  }
  for (const name of ["layer", "head", "query"]) {
    const value = Number(params.get("live-" + name));
    if (params.has("live-" + name) && Number.isInteger(value) && value >= 0) state[name] = value;
  }
  for (const pair of (params.get("live-ablate") || "").split(",")) {
    const parts = pair.split(".").map(Number);
    if (parts.length === 2 && parts.every(Number.isInteger)) addHead(state.ablate, parts[0], parts[1]);
  }
  return state;
}

export function writeUrl(state) {
  const params = new URLSearchParams(location.search);
  params.delete("live-text");
  params.delete("live-ids");
  if (state.idsSetDirectly) params.set("live-ids", state.ids.join(","));
  else params.set("live-text", state.text);
  params.set("live-layer", String(state.layer));
  params.set("live-head", String(state.head));
  params.set("live-query", String(state.query));
  const ablated = ablatedPairs(state.ablate).map(([l, h]) => `${l}.${h}`);
  if (ablated.length) params.set("live-ablate", ablated.join(","));
  else params.delete("live-ablate");
  history.replaceState(history.state, "", "?" + params.toString() + location.hash);
}
