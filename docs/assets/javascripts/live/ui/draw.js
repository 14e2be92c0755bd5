// Drawing the live view: the tokens, one head's bars and weight matrix, the next-token
// prediction and the grid of every head, from the state (state.js) and the last run
// ({ids, tokens, T, layers, heads, attention, top, ms}). The page's explorer helpers
// (window.attnlabExplorer, explorer.js) draw bars and matrices as the explorer does.
import { isAblated } from "./state.js";

const HEAT_MAX = 60; // as explorer.js: sqrt(weight) x 60 % of the explorer's colour

export const el = (tag, attrs, children) => window.attnlabExplorer.el(tag, attrs, children);

export const shown = (token) => token.replace(/\n/g, "\u21B5").replace(/\t/g, "\u21E5");

export function shade(weight) {
  const pct = Math.round(Math.sqrt(Math.max(0, Math.min(1, weight))) * HEAT_MAX);
  return `color-mix(in srgb, var(--attn-color) ${pct}%, transparent)`;
}

// A view of one head's (T, T) weights in the run's attention array.
export function headWeights(result, layer, head) {
  const T = result.T;
  const at = (layer * result.heads + head) * T * T;
  return (query, key) => result.attention[at + query * T + key];
}

export function renderTokens(box, state, result) {
  box.textContent = "";
  result.tokens.forEach((token, i) => {
    const attrs = {
      type: "button", className: "attn-explorer__token", "data-index": String(i),
      "aria-pressed": String(i === state.query), title: `token ${i}, id ${result.ids[i]}`,
    };
    if (i >= result.T) attrs.disabled = ""; // generated, not yet read by the model
    box.appendChild(el("button", attrs, [el("span", { className: "live__index", text: String(i) }), el("span", { text: shown(token) })]));
  });
}

export function renderHead(view, state, result) {
  const words = result.tokens.map(shown);
  const w = headWeights(result, state.layer, state.head);
  const { layer, head, captionAndBars, table } = view;
  layer.input.value = String(state.layer);
  head.input.value = String(state.head);
  layer.out.textContent = String(state.layer);
  head.out.textContent = String(state.head);
  layer.input.setAttribute("aria-valuetext", `layer ${state.layer}`);
  head.input.setAttribute("aria-valuetext", `head ${state.head}`);
  const off = isAblated(state.ablate, state.layer, state.head) ? " (knocked out: its weights are shown, its output is not used)" : "";
  captionAndBars[0].textContent = `Layer ${state.layer}, head ${state.head}: where \u201C${words[state.query].trim()}\u201D (token ${state.query}) attends${off}`;
  const bars = captionAndBars[1];
  bars.textContent = "";
  for (let j = 0; j <= state.query; j++) {
    const weight = w(state.query, j);
    bars.appendChild(window.attnlabExplorer.bar(
      { className: "attn-bar", role: "listitem", "data-key": String(j) }, `${j} ${words[j]}`, weight, weight.toFixed(3), 1));
  }
  window.attnlabExplorer.fillHeatmap(
    table,
    "All of this head's weights: row = query, column = key, tokens counted from 0; later keys are masked (blank). The selected query's row is outlined.",
    words.slice(0, result.T).map((word, i) => `${i} ${word}`),
    state.query,
    (i, k) => {
      if (k > i) return { attrs: { className: "is-masked", text: "" }, weight: null };
      const value = w(i, k);
      return { attrs: { text: value.toFixed(2) }, weight: value };
    },
    (i) => ({ "data-query": String(i) })
  );
}

export function renderPrediction(list, result) {
  list.textContent = "";
  for (const entry of result.top || []) {
    list.appendChild(el("li", {}, [
      el("span", { className: "live__token", text: shown(entry.token) }),
      el("span", { className: "live__prob", text: `${(100 * entry.probability).toFixed(1)}%` }),
    ]));
  }
}

// One cell of the grid: the query's strongest key, or the head's score (scores: headScores).
function overviewValue(state, result, scores, layer, head) {
  if (state.shade !== "query") {
    const table = scores[state.shade];
    const score = table ? table[layer][head] : null;
    return { weight: score === null ? 0 : score, text: score === null ? "\u2013" : score.toFixed(2).replace(/^0/, "") };
  }
  const w = headWeights(result, layer, head);
  let best = 0;
  for (let k = 1; k <= state.query; k++) if (w(state.query, k) > w(state.query, best)) best = k;
  return { weight: w(state.query, best), text: String(best) };
}

export function renderOverview(view, state, result, scores) {
  const { grid, gridCaption, shadeSelect } = view;
  gridCaption.textContent = state.shade === "query"
    ? `Each cell is a head (row = layer, column = head): the token that query ${state.query} looks at most, shaded by its weight.`
    : `Each cell is a head (row = layer, column = head): its ${shadeSelect.selectedOptions[0].text} on this text, in [0, 1]` +
      (state.shade === "induction" && !scores.induction
        ? " (the text does not end with a sequence written twice: try the repeated random tokens)." : ".");
  grid.textContent = "";
  const headRow = el("tr", {}, [el("th", { scope: "col", text: "layer \u2193 head \u2192" })]);
  for (let h = 0; h < result.heads; h++) headRow.appendChild(el("th", { scope: "col", text: String(h) }));
  grid.appendChild(el("thead", {}, [headRow]));
  const body = el("tbody");
  for (let l = 0; l < result.layers; l++) {
    const tr = el("tr", {}, [el("th", { scope: "row", text: String(l) })]);
    for (let h = 0; h < result.heads; h++) {
      const value = overviewValue(state, result, scores, l, h);
      const off = isAblated(state.ablate, l, h);
      const selected = l === state.layer && h === state.head;
      const button = el("button", {
        type: "button", className: "live__head" + (off ? " is-ablated" : "") + (selected ? " is-selected" : ""),
        "data-layer": String(l), "data-head": String(h), "aria-pressed": String(off),
        "aria-label": `layer ${l}, head ${h}${off ? ", knocked out" : ""}: ${value.text}`,
        text: off ? "\u00D7" : value.text,
      });
      if (!off) button.style.backgroundColor = shade(value.weight);
      tr.appendChild(el("td", {}, [button]));
    }
    body.appendChild(tr);
  }
  grid.appendChild(body);
}

// The run's maps grown by blocks of query rows, copied once however many blocks came:
// block k's `rows` (num_layers, H, n_k, S_k) are the queries T_k .. T_k + n_k - 1, where
// T_k = T + n_0 + ... + n_(k-1) and S_k = T_k + n_k (the maps growing as tokens are generated).
export function growMaps(result, blocks) {
  const { layers, heads, T } = result;
  const S = blocks.reduce((total, block) => total + block.n, T);
  const grown = new Float32Array(layers * heads * S * S);
  for (let b = 0; b < layers * heads; b++) {
    for (let i = 0; i < T; i++) {
      grown.set(result.attention.subarray((b * T + i) * T, (b * T + i + 1) * T), (b * S + i) * S);
    }
    let first = T;
    for (const { rows, n } of blocks) {
      const width = first + n;
      for (let i = 0; i < n; i++) {
        grown.set(rows.subarray((b * n + i) * width, (b * n + i + 1) * width), (b * S + first + i) * S);
      }
      first = width;
    }
  }
  return grown;
}
