// Drawing the live view: the tokens, one head's bars and weight matrix, the next-token
// prediction and the grid of every head, from the state (state.js) and the last run
// ({ids, tokens, T, layers, heads, attention, top, ms}). The page's explorer helpers
// (window.attnlabExplorer, explorer.js) draw the bars as the explorer does; the weight
// matrix is a picture (renderMatrix), since a long text's is too big for a table.
import { isAblated } from "./state.js";

const HEAT_MAX = 60; // as explorer.js: sqrt(weight) x 60 % of the explorer's colour
const WRITTEN_CELL = 32; // CSS px: a matrix cell this wide or wider has its weight written in it

export const el = (tag, attrs, children) => window.attnlabExplorer.el(tag, attrs, children);

// A token as the page shows it: newlines, tabs and a token of spaces only made visible.
export const shown = (token) => (/^ +$/.test(token) ? "\u2423".repeat(token.length) : token)
  .replace(/\n/g, "\u21B5").replace(/\t/g, "\u21E5");

// How much of the explorer's colour shades a weight: sqrt(weight) x 60, in percent.
const shadePercent = (weight) => Math.round(Math.sqrt(Math.max(0, Math.min(1, weight))) * HEAT_MAX);

export const shade = (weight) => `color-mix(in srgb, var(--attn-color) ${shadePercent(weight)}%, transparent)`;

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
  const { layer, head, captionAndBars, matrix } = view;
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
  renderMatrix(matrix, state.query, result.T, w);
  matrix.setAttribute("aria-label", `Layer ${state.layer}, head ${state.head}: the weight matrix of ${result.T} queries ` +
    `(rows) over ${result.T} keys (columns), the stronger the colour, the more weight; row ${state.query} outlined.`);
}

// One head's (T, T) weights as a picture: row = query, column = key, shaded as the
// explorer's cells (shadePercent: the alpha of its colour), masked keys blank, the selected
// query's row outlined; wide enough cells have their weight written. Drawn at the device's
// pixels: T cells across the canvas's width.
export function renderMatrix(canvas, query, T, w) {
  const size = Math.round(canvas.clientWidth * (window.devicePixelRatio || 1));
  if (!size) return; // not on screen: drawn when it is
  const style = getComputedStyle(canvas);
  const colour = rgba(style.color); // var(--attn-color)
  const masked = rgba(style.borderTopColor); // Material's lightest grey
  const cells = new ImageData(T, T);
  for (let i = 0; i < T; i++) {
    for (let k = 0; k < T; k++) {
      const at = 4 * (i * T + k);
      if (k > i) {
        cells.data.set(masked, at);
      } else {
        cells.data.set(colour, at);
        cells.data[at + 3] = Math.round(2.55 * shadePercent(w(i, k)));
      }
    }
  }
  const picture = new OffscreenCanvas(T, T);
  picture.getContext("2d").putImageData(cells, 0, 0);
  canvas.width = size;
  canvas.height = size;
  canvas.dataset.queries = String(T);
  const context = canvas.getContext("2d");
  context.imageSmoothingEnabled = T > size; // sharp cells; averaged when there are more cells than pixels
  context.drawImage(picture, 0, 0, size, size);
  const cell = size / T;
  const ratio = window.devicePixelRatio || 1;
  const ink = getComputedStyle(canvas.parentElement).color;
  if (cell >= WRITTEN_CELL * ratio) { // few tokens: each weight written in its cell, as in the explorer's table
    context.fillStyle = ink;
    context.font = `${Math.round(Math.min(12 * ratio, cell / 3))}px ${getComputedStyle(canvas).fontFamily}`;
    context.textAlign = "center";
    context.textBaseline = "middle";
    for (let i = 0; i < T; i++) {
      for (let k = 0; k <= i; k++) context.fillText(w(i, k).toFixed(2), (k + 0.5) * cell, (i + 0.5) * cell);
    }
  }
  const line = Math.max(1, Math.round(ratio));
  context.strokeStyle = ink;
  context.lineWidth = line;
  context.strokeRect(line / 2, query * cell - line / 2, size - line, cell + line);
}

// A computed CSS colour, "rgb(r, g, b)" or "rgba(r, g, b, a)", as the 4 bytes of a pixel.
function rgba(cssColour) {
  const [r, g, b, a = 1] = cssColour.match(/[\d.]+/g).map(Number);
  return [r, g, b, Math.round(255 * a)];
}

// The cell under a point of the matrix (a click, a tap, the pointer): {query, key}, 0 .. T - 1.
export function matrixCell(canvas, event) {
  const box = canvas.getBoundingClientRect();
  const T = Number(canvas.dataset.queries);
  const at = (offset, length) => Math.max(0, Math.min(T - 1, Math.floor((offset / length) * T)));
  return { query: at(event.clientY - box.top, box.height), key: at(event.clientX - box.left, box.width) };
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
        ? " (it needs a text that ends with one run of tokens written twice in a row, A B C A B C, the same token ids: a word with and without a space before it is two different tokens; try Repeated random tokens)." : ".");
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
        title: `layer ${l}, head ${h}${off ? ", knocked out" : ""}: ${value.text}`,
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
