// @ts-check
// Drawing the live view: the tokens, one head's bars and weight matrix, the next-token
// prediction and the grid of every head, from the state (state.js) and the last run
// (LiveResult). The explorer's helpers (explorer.js) draw the bars as the explorer does;
// the weight matrix is a picture (renderMatrix), since a long text's is too big for a
// table. Each layer is drawn as what it is (layers.js): full and sliding-window softmax
// layers as probabilities (the window's band hatched and outlined), Gated DeltaNet layers'
// signed implicit attention on a diverging scale.
import { bar, el, shadePercent } from "../../explorer.js";
import { isAblated } from "./state.js";
import { largestMagnitude, layerNote, matrixCaption, seen, written } from "./layers.js";

export { el };

/** @typedef {import("./layers.js").LayerKind} LayerKind */
/** @typedef {import("./state.js").ViewState} ViewState */
/**
 * @typedef {object} LiveResult  the last run, as the view draws it
 * @property {number[]} ids
 * @property {string[]} tokens  each id's text (generated ones included, not yet read: T of them are)
 * @property {number} T  tokens the maps cover
 * @property {number} layers
 * @property {number} heads  the most heads a layer has
 * @property {number[]} [layerHeads]  each layer's heads (a Gated DeltaNet layer's value heads);
 *   absent: `heads` in every layer
 * @property {Float32Array} attention  the layers' maps one after the other, layer l (layerHeads[l], T, T)
 * @property {LayerKind[]} kinds  each layer's kind (layers.js)
 * @property {{id: number, token: string, probability: number}[]} top
 * @property {number} ms
 */
/** @typedef {(query: number, key: number) => number} Weights  one head's (T, T) map */

const WRITTEN_CELL = 32; // CSS px: a matrix cell this wide or wider has its weight written in it

// A token as the page shows it: newlines, tabs and a token of spaces only made visible.
/** @param {string} token */
export const shown = (token) => (/^ +$/.test(token) ? "\u2423".repeat(token.length) : token)
  .replace(/\n/g, "\u21B5").replace(/\t/g, "\u21E5");

/** @param {number} weight  in [0, 1] @returns {string} the CSS colour a weight is shaded with */
export const shade = (weight) => `color-mix(in srgb, var(--attn-color) ${shadePercent(weight)}%, transparent)`;

/**
 * A view of one head's (T, T) weights in the run's attention array.
 * @param {LiveResult} result
 * @param {number} layer
 * @param {number} head
 * @returns {Weights}
 */
export function headWeights(result, layer, head) {
  const T = result.T;
  const at = (headsBefore(result, layer) + head) * T * T;
  return (query, key) => result.attention[at + query * T + key];
}

/**
 * Layer l's heads.
 * @param {{heads: number, layerHeads?: number[]}} result
 * @param {number} layer
 */
export const headsOf = (result, layer) => (result.layerHeads ? result.layerHeads[layer] : result.heads);

/**
 * The heads of the layers before `layer` (the maps' offset, in (T, T) blocks).
 * @param {{heads: number, layerHeads?: number[]}} result
 * @param {number} layer
 */
function headsBefore(result, layer) {
  let heads = 0;
  for (let l = 0; l < layer; l++) heads += headsOf(result, l);
  return heads;
}

/**
 * @param {HTMLElement} box
 * @param {ViewState} state
 * @param {LiveResult} result
 */
export function renderTokens(box, state, result) {
  box.textContent = "";
  result.tokens.forEach((token, i) => {
    /** @type {Record<string, string>} */
    const attrs = {
      type: "button", className: "attn-explorer__token", "data-index": String(i),
      "aria-pressed": String(i === state.query), title: `token ${i}, id ${result.ids[i]}`,
    };
    if (i >= result.T) attrs.disabled = ""; // generated, not yet read by the model
    box.appendChild(el("button", attrs, [el("span", { className: "live__index", text: String(i) }), el("span", { text: shown(token) })]));
  });
}

/**
 * @typedef {object} HeadView  the elements renderHead fills (main.js builds them)
 * @property {{input: HTMLInputElement, out: HTMLElement}} layer
 * @property {{input: HTMLInputElement, out: HTMLElement}} head
 * @property {[HTMLElement, HTMLElement]} captionAndBars
 * @property {HTMLCanvasElement} matrix
 * @property {HTMLElement} matrixCaption  the caption under the matrix (layers.js matrixCaption)
 * @property {HTMLElement} legend  what the matrix's colours and marks mean for this layer
 */

/**
 * One head: its bars for the selected query and its whole matrix, as its layer's kind says.
 * @param {HeadView} view
 * @param {ViewState} state
 * @param {LiveResult} result
 */
export function renderHead(view, state, result) {
  const words = result.tokens.map(shown);
  const w = headWeights(result, state.layer, state.head);
  const kind = result.kinds[state.layer];
  const query = state.query ?? result.T - 1;
  const { layer, head, captionAndBars, matrix } = view;
  layer.input.value = String(state.layer);
  head.input.value = String(state.head);
  layer.out.textContent = String(state.layer);
  head.out.textContent = String(state.head);
  layer.input.setAttribute("aria-valuetext", `layer ${state.layer}`);
  head.input.setAttribute("aria-valuetext", `head ${state.head}`);
  const off = isAblated(state.ablate, state.layer, state.head) ? " (knocked out: its weights are shown, its output is not used)" : "";
  // the kind is named whenever the model has more than one (a model of full layers only: nothing)
  const mixed = result.kinds.some((other) => other.type !== "full_attention");
  const what = mixed ? ` \u2014 ${layerNote(kind)}` : "";
  const reads = kind.signed ? "what \u201C{w}\u201D (token {q}) takes from each earlier token's value"
    : "where \u201C{w}\u201D (token {q}) attends";
  captionAndBars[0].textContent = `Layer ${state.layer}, head ${state.head}: ` +
    reads.replace("{w}", words[query].trim()).replace("{q}", String(query)) + off + what;
  const bars = captionAndBars[1];
  bars.textContent = "";
  const largest = kind.signed ? largestMagnitude(w, result.T) : 1;
  for (let j = 0; j <= query; j++) {
    const value = w(query, j);
    const className = "attn-bar" + (seen(kind, query, j) ? "" : " attn-bar--masked") +
      (kind.signed ? " attn-bar--signed" + (value < 0 ? " attn-bar--negative" : "") : "");
    bars.appendChild(bar({ className, role: "listitem", "data-key": String(j) }, {
      label: `${j} ${words[j]}`, weight: Math.abs(value) / largest, text: written(kind, value, 3), widthDigits: 1,
    }));
  }
  renderMatrix(matrix, { query, T: result.T, w, kind });
  renderLegend(view.legend, kind, { largest, T: result.T });
  const attentionLayer = result.kinds.findIndex((other) => !other.signed);
  view.matrixCaption.textContent = matrixCaption(kind, {
    heads: headsOf(result, state.layer), attentionHeads: attentionLayer < 0 ? null : headsOf(result, attentionLayer),
  });
  const meaning = kind.signed
    ? "signed values, blue for positive and orange for negative, the stronger the colour the larger the value's " +
      `size (the largest is ${largest.toFixed(3)})`
    : "the stronger the colour, the more weight";
  matrix.setAttribute("aria-label", `Layer ${state.layer}, head ${state.head}: the ${kind.signed ? "implicit attention" : "weight"} ` +
    `matrix of ${result.T} queries (rows) over ${result.T} keys (columns), ${meaning}; later keys masked (dotted)` +
    (kind.window === null ? "" : `; keys more than ${kind.window - 1} tokens back are outside the window (hatched)`) +
    `; row ${query} outlined.`);
}

/**
 * The legend under the matrix: nothing for full attention; the window's marks for a
 * sliding layer; the diverging scale for a linear layer.
 * @param {HTMLElement} legend
 * @param {LayerKind} kind
 * @param {{largest: number, T: number}} drawn  a linear layer's largest |value| (the
 *   scale's ends); the tokens drawn
 */
export function renderLegend(legend, kind, { largest, T }) {
  legend.textContent = "";
  legend.hidden = kind.type === "full_attention";
  legend.dataset.kind = kind.type;
  if (kind.type === "sliding_attention") {
    legend.append(
      el("span", { className: "live__swatch live__swatch--hatched", "aria-hidden": "true" }),
      el("span", { text: `outside the window (more than ${Number(kind.window) - 1} tokens back): weight 0; ` +
        (Number(kind.window) < T ? "the dashed line is the window's edge"
          : `none here: the ${T} tokens fit in the window`) }),
    );
  } else if (kind.type === "linear_attention") {
    const end = largest.toFixed(3);
    legend.append(
      el("span", { className: "live__scale-end", text: `\u2212${end}` }),
      el("span", { className: "live__scale", "aria-hidden": "true" }),
      el("span", { className: "live__scale-end", text: `+${end}` }),
      el("span", { className: "live__scale-note", text: "signed values, centred at 0 (no colour): not probabilities" }),
    );
  }
}

/**
 * @typedef {object} MatrixOptions
 * @property {number} query  the selected query (its row outlined)
 * @property {number} T  queries and keys
 * @property {Weights} w  the head's map
 * @property {LayerKind} kind  the layer's kind
 */

/**
 * One head's (T, T) map as a picture: row = query, column = key, shaded as the
 * explorer's cells (shadePercent: the alpha of its colour; a linear layer's values by
 * |value| / the largest, in the positive or the negative colour), later keys masked
 * (left clear and dotted: a texture, never a colour, so never read as a weight, in either
 * scheme), a sliding layer's keys outside the window hatched and the window's edge dashed,
 * the selected query's row outlined; wide enough cells have their value written. Drawn
 * at the device's pixels: T cells across the canvas's width.
 * @param {HTMLCanvasElement} canvas
 * @param {MatrixOptions} options
 */
export function renderMatrix(canvas, { query, T, w, kind }) {
  const ratio = window.devicePixelRatio || 1;
  const size = Math.round(canvas.clientWidth * ratio);
  if (!size) return; // not on screen: drawn when it is
  const style = getComputedStyle(canvas);
  const colour = rgba(style.color); // var(--attn-color)
  const negative = rgba(style.columnRuleColor); // var(--attn-negative-color), live.css
  const largest = kind.signed ? largestMagnitude(w, T) : 1;
  const cells = new ImageData(T, T);
  for (let i = 0; i < T; i++) {
    for (let k = 0; k < T; k++) {
      const at = 4 * (i * T + k);
      if (seen(kind, i, k)) {
        const value = w(i, k);
        cells.data.set(value < 0 ? negative : colour, at);
        cells.data[at + 3] = Math.round(2.55 * shadePercent(Math.abs(value) / largest));
      } // later keys: clear, dotted below; outside the window: clear, hatched below
    }
  }
  const picture = new OffscreenCanvas(T, T);
  const pictureContext = picture.getContext("2d");
  if (!pictureContext) return;
  pictureContext.putImageData(cells, 0, 0);
  canvas.width = size;
  canvas.height = size;
  canvas.dataset.queries = String(T);
  canvas.dataset.layerType = kind.type;
  const context = canvas.getContext("2d");
  if (!context) return;
  context.imageSmoothingEnabled = T > size; // sharp cells; averaged when there are more cells than pixels
  context.drawImage(picture, 0, 0, size, size);
  const cell = size / T;
  const ink = getComputedStyle(canvas.parentElement ?? canvas).color;
  drawMasked(context, { T, cell, ink, ratio });
  if (kind.window !== null && kind.window < T) drawWindow(context, { T, cell, span: kind.window, ink, ratio });
  if (cell >= WRITTEN_CELL * ratio) { // few tokens: each value written in its cell, as in the explorer's table
    context.fillStyle = ink;
    context.font = `${Math.round(Math.min(12 * ratio, cell / 3))}px ${style.fontFamily}`;
    context.textAlign = "center";
    context.textBaseline = "middle";
    for (let i = 0; i < T; i++) {
      for (let k = 0; k <= i; k++) {
        if (seen(kind, i, k)) context.fillText(written(kind, w(i, k), 2), (k + 0.5) * cell, (i + 0.5) * cell);
      }
    }
  }
  const line = Math.max(1, Math.round(ratio));
  context.strokeStyle = ink;
  context.lineWidth = line;
  context.setLineDash([]);
  context.strokeRect(line / 2, query * cell - line / 2, size - line, cell + line);
}

/**
 * The later keys (row i: keys i + 1 .. T - 1), masked: clear, with a sparse grid of dots in
 * the ink's colour. A texture that covers a few percent of the cell reads as "nothing here",
 * unlike a flat grey, which a dark scheme shows lighter than a weight near 0.
 * @param {CanvasRenderingContext2D} context
 * @param {{T: number, cell: number, ink: string, ratio: number}} options
 */
function drawMasked(context, { T, cell, ink, ratio }) {
  if (T < 2) return;
  const above = new Path2D(); // the staircase region above the diagonal
  above.moveTo(cell, 0);
  above.lineTo(T * cell, 0);
  above.lineTo(T * cell, (T - 1) * cell);
  for (let j = T - 1; j >= 1; j--) { // left along row j - 1's lower edge, then up to row j - 1's top
    above.lineTo(j * cell, j * cell);
    above.lineTo(j * cell, (j - 1) * cell);
  }
  above.closePath();
  const step = Math.max(4, Math.round(5 * ratio)); // the dots' spacing, device px
  const dot = Math.max(1, Math.round(1.2 * ratio));
  const tile = new OffscreenCanvas(step, step);
  const tileContext = tile.getContext("2d");
  if (!tileContext) return;
  tileContext.fillStyle = ink;
  tileContext.fillRect(0, 0, dot, dot);
  const pattern = context.createPattern(tile, "repeat");
  if (!pattern) return;
  context.save();
  context.globalAlpha = 0.45;
  context.fillStyle = pattern;
  context.fill(above);
  context.restore();
}

/**
 * A sliding layer's keys outside the window (row i: keys 0 .. i - window) hatched in the
 * ink's colour, and the window's lower edge dashed.
 * @param {CanvasRenderingContext2D} context
 * @param {{T: number, cell: number, span: number, ink: string, ratio: number}} options  span: the window, tokens
 */
function drawWindow(context, { T, cell, span, ink, ratio }) {
  const edge = new Path2D(); // the staircase between the last key outside and the first inside
  edge.moveTo(0, span * cell);
  for (let i = span; i < T; i++) {
    edge.lineTo((i - span + 1) * cell, i * cell);
    edge.lineTo((i - span + 1) * cell, (i + 1) * cell);
  }
  const outside = new Path2D(edge);
  outside.lineTo(0, T * cell);
  outside.closePath();
  const step = Math.max(4, Math.round(6 * ratio)); // the hatching's spacing, device px
  context.save();
  context.clip(outside);
  context.strokeStyle = ink;
  context.globalAlpha = 0.35;
  context.lineWidth = Math.max(1, ratio);
  context.beginPath();
  for (let d = -T * cell; d < T * cell; d += step) { // lines going up to the right
    context.moveTo(d, T * cell);
    context.lineTo(d + T * cell, 0);
  }
  context.stroke();
  context.restore();
  context.save();
  context.strokeStyle = ink;
  context.lineWidth = Math.max(1.5, 2 * ratio);
  context.setLineDash([4 * ratio, 3 * ratio]);
  context.stroke(edge);
  context.restore();
}

/**
 * A computed CSS colour, "rgb(r, g, b)" or "rgba(r, g, b, a)", as the 4 bytes of a pixel.
 * @param {string} cssColour
 * @returns {number[]}
 */
function rgba(cssColour) {
  const [r, g, b, a = 1] = (cssColour.match(/[\d.]+/g) || ["0", "0", "0", "0"]).map(Number);
  return [r, g, b, Math.round(255 * a)];
}

/**
 * The cell under a point of the matrix (a click, a tap, the pointer).
 * @param {HTMLCanvasElement} canvas
 * @param {MouseEvent} event
 * @returns {{query: number, key: number}}  0 .. T - 1
 */
export function matrixCell(canvas, event) {
  const box = canvas.getBoundingClientRect();
  const T = Number(canvas.dataset.queries);
  /** @param {number} offset @param {number} length */
  const at = (offset, length) => Math.max(0, Math.min(T - 1, Math.floor((offset / length) * T)));
  return { query: at(event.clientY - box.top, box.height), key: at(event.clientX - box.left, box.width) };
}

/**
 * @param {HTMLElement} list
 * @param {LiveResult} result
 */
export function renderPrediction(list, result) {
  list.textContent = "";
  for (const entry of result.top || []) {
    list.appendChild(el("li", {}, [
      el("span", { className: "live__token", text: shown(entry.token) }),
      el("span", { className: "live__prob", text: `${(100 * entry.probability).toFixed(1)}%` }),
    ]));
  }
}

/** @typedef {import("./experiments.js").HeadScores} HeadScores */
/** @typedef {{state: ViewState, result: LiveResult, scores: HeadScores}} GridData  what the grid shows */

/**
 * One cell of the grid: the query's strongest key, or the head's score (scores:
 * headScores). A linear layer's signed values are no weights: its cell names the key of
 * the largest |value|, unshaded (weight null).
 * @param {GridData} data
 * @param {{layer: number, head: number}} at
 * @returns {{weight: number | null, text: string}}
 */
function overviewValue({ state, result, scores }, { layer, head }) {
  if (state.shade !== "query") {
    const table = scores[state.shade];
    const score = table ? table[layer][head] : null;
    return { weight: score === null ? 0 : score, text: score === null ? "\u2013" : score.toFixed(2).replace(/^0/, "") };
  }
  const w = headWeights(result, layer, head);
  const query = state.query ?? result.T - 1;
  const signed = result.kinds[layer].signed;
  /** @param {number} k */
  const size = (k) => (signed ? Math.abs(w(query, k)) : w(query, k));
  let best = 0;
  for (let k = 1; k <= query; k++) if (size(k) > size(best)) best = k;
  return { weight: signed ? null : w(query, best), text: String(best) };
}

/**
 * @typedef {object} OverviewView  the elements renderOverview fills
 * @property {HTMLElement} grid
 * @property {HTMLElement} gridCaption
 * @property {HTMLSelectElement} shadeSelect
 */

/**
 * The grid of every head.
 * @param {OverviewView} view
 * @param {GridData} data
 */
export function renderOverview(view, data) {
  const { state, result, scores } = data;
  const { grid, gridCaption, shadeSelect } = view;
  const byQuery = state.shade === "query";
  const linear = !result.kinds.some((kind) => kind.signed) ? ""
    : byQuery ? " In a linear (Gated DeltaNet) layer the number is in italics and unshaded: it is the key whose " +
      "value is largest in size, positive or negative, since its values are signed, not weights."
      : " Linear (Gated DeltaNet) layers show \u2013: the scores are defined on weights, and their values are signed.";
  const fewer = new Set(result.kinds.map((_, layer) => headsOf(result, layer))).size > 1
    ? " A row with fewer cells is a layer with fewer heads (a Gated DeltaNet layer counts its value heads)." : "";
  gridCaption.textContent = (byQuery
    ? `Each cell is a head (row = layer, column = head): the key that query ${state.query} looks at most, shaded by its weight.`
    : `Each cell is a head (row = layer, column = head): its ${shadeSelect.selectedOptions[0].text} on this text, in [0, 1]` +
      (state.shade === "induction" && !scores.induction
        ? " (it needs a text that ends with one run of tokens written twice in a row, A B C A B C, the same token ids: a word with and without a space before it is two different tokens; try Repeated random tokens)." : ".")) + linear + fewer;
  grid.textContent = "";
  const headRow = el("tr", {}, [el("th", { scope: "col", text: "layer \u2193 head \u2192" })]);
  for (let h = 0; h < result.heads; h++) headRow.appendChild(el("th", { scope: "col", text: String(h) }));
  grid.appendChild(el("thead", {}, [headRow]));
  const body = el("tbody");
  for (let l = 0; l < result.layers; l++) {
    const tr = el("tr", {}, [el("th", { scope: "row", text: String(l) })]);
    for (let h = 0; h < result.heads; h++) {
      if (h >= headsOf(result, l)) { // a layer with fewer heads: an empty cell
        tr.appendChild(el("td", { className: "live__no-head" }));
        continue;
      }
      const value = overviewValue(data, { layer: l, head: h });
      const signed = !result.kinds[l].signed ? ""
        : byQuery ? " (linear layer: the key whose value is largest in size, unshaded)" : " (linear layer: no score)";
      const off = isAblated(state.ablate, l, h);
      const selected = l === state.layer && h === state.head;
      const button = el("button", {
        type: "button", className: "live__head" + (off ? " is-ablated" : "") + (selected ? " is-selected" : ""),
        "data-layer": String(l), "data-head": String(h), "aria-pressed": String(off),
        "aria-label": `layer ${l}, head ${h}${off ? ", knocked out" : ""}: ${value.text}${signed}`,
        title: `layer ${l}, head ${h}${off ? ", knocked out" : ""}: ${value.text}${signed}`,
        text: off ? "\u00D7" : value.text,
      });
      if (!off && value.weight !== null) button.style.backgroundColor = shade(value.weight);
      if (signed) button.classList.add("is-signed");
      tr.appendChild(el("td", {}, [button]));
    }
    body.appendChild(tr);
  }
  grid.appendChild(body);
}

// The run's maps grown by blocks of query rows, copied once however many blocks came:
// block k's `rows` (num_layers, H, n_k, S_k) are the queries T_k .. T_k + n_k - 1, where
// T_k = T + n_0 + ... + n_(k-1) and S_k = T_k + n_k (the maps growing as tokens are generated).
/**
 * @param {{layers: number, heads: number, layerHeads?: number[], T: number, attention: Float32Array}} result
 * @param {{rows: Float32Array, n: number}[]} blocks
 * @returns {Float32Array}  the layers' maps, layer l (layerHeads[l], S, S)
 */
export function growMaps(result, blocks) {
  const { layers, T } = result;
  const S = blocks.reduce((total, block) => total + block.n, T);
  const maps = headsBefore(result, layers); // every layer's heads
  const grown = new Float32Array(maps * S * S);
  for (let b = 0; b < maps; b++) {
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
