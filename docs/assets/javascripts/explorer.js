// @ts-check
// The interactive attention explorer (docs/explorer.md).
//
// It only *draws*: every weight comes from assets/explorer-data.json, which the build
// hook hooks/explorer.py writes from explorer_data() (hooks/explorer_data.py). No
// attention arithmetic happens here, so the page cannot disagree with the package.
//
// An ES module with no imports and no dependencies. The build inlines it into the
// explorer page as a module script, so that it runs from file:// too (browsers load no
// module *file* from disk, but they do run an inline module); the live view
// (live/ui/draw.js) imports its drawing helpers, so both draw alike. Starting is
// idempotent (each explorer is built once), so the two copies never draw twice. A no-op
// on pages without #attention-explorer. Works with Material's document$ and without it.

/**
 * @typedef {{text: string, words: string[], description: string, d_k: number,
 *   weights: Record<"scaled" | "unscaled", Record<"causal" | "full", number[][][]>>}} Sentence
 *   weights[scaled][causal][temperature index] is the (T, T) matrix of that setting.
 * @typedef {{key: string, before: number[], after: number[], answer_before: string,
 *   answer_after: string, target: string}} RecallQuestion
 * @typedef {{keys: string[], values: string[], questions: RecallQuestion[]}} RecallSequence
 * @typedef {{text: string, tokens: string[], weights: number[][][][]}} LlmPrompt
 *   weights[layer][head][query] is the row over keys 0..query, in units of 1 / scale.
 * @typedef {{decimals: number, temperatures: number[], sentences: Sentence[],
 *   recall: {sequences: RecallSequence[]},
 *   llm: {scale: number, decimals: number, layers: number, heads: number, prompts: LlmPrompt[]}}} ExplorerData
 *   The explorer's JSON (snake_case fields: written by the Python).
 * @typedef {Record<string, string>} Attributes  an element's attributes; `text` and
 *   `className` set its text and class.
 * @typedef {{attrs: Attributes, weight: number | null}} ShadedCell  a heatmap cell's
 *   attributes and the weight that shades it (null: no shading).
 */

/** Heatmap shading: sqrt(weight) x 60 % of the explorer's colour, so small weights still
 *  show and the cell text stays readable at weight 1 in both schemes. */
export const HEAT_MAX = 60;

/**
 * How much of the explorer's colour shades a weight, in percent: sqrt(weight) x HEAT_MAX.
 * @param {number} weight  in [0, 1] (clamped)
 * @returns {number}
 */
export const shadePercent = (weight) => Math.round(Math.sqrt(Math.max(0, Math.min(1, weight))) * HEAT_MAX);

/**
 * A new element with attributes and children.
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Attributes} [attrs]
 * @param {Node[]} [children]
 * @returns {HTMLElementTagNameMap[K]}
 */
export function el(tag, attrs = {}, children = []) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "text") node.textContent = value;
    else if (name === "className") node.className = value;
    else node.setAttribute(name, value);
  }
  for (const child of children) node.appendChild(child);
  return node;
}

/**
 * A live caption and the list of bars it labels (one bar a key).
 * @param {string} captionId
 * @returns {[HTMLElement, HTMLElement]} the caption and the list
 */
export function captionedBars(captionId) {
  return [
    el("p", { className: "attn-explorer__caption", id: captionId, "aria-live": "polite" }),
    el("div", { className: "attn-explorer__bars", role: "list", "aria-labelledby": captionId }),
  ];
}

/**
 * One key's bar: its label, a track filled to the weight, and the weight as text.
 * @param {Attributes} attrs  the bar's own attributes
 * @param {{label: string, weight: number, text: string, widthDigits: number}} options
 *   weight: the filled fraction of the track, in [0, 1]; widthDigits: digits after the
 *   point in the CSS percentage
 * @returns {HTMLElement}
 */
export function bar(attrs, { label, weight, text, widthDigits }) {
  const fill = el("span", { className: "attn-bar__fill" });
  fill.style.width = (100 * weight).toFixed(widthDigits) + "%";
  return el("div", attrs, [
    el("span", { className: "attn-bar__word", text: label }),
    el("span", { className: "attn-bar__track", "aria-hidden": "true" }, [fill]),
    el("span", { className: "attn-bar__value", text }),
  ]);
}

/**
 * The weight matrix as a table: row = query, column = key, the selected query's row
 * outlined.
 * @param {HTMLTableElement} table
 * @param {{caption: string, words: string[], selected: number,
 *   cell: (query: number, key: number) => ShadedCell,
 *   rowAttrs?: (query: number) => Attributes}} options
 */
function fillHeatmap(table, { caption, words, selected, cell, rowAttrs }) {
  table.textContent = "";
  table.appendChild(el("caption", { text: caption }));
  const headRow = el("tr", {}, [el("th", { scope: "col", text: "query \u2193 key \u2192" })]);
  for (const word of words) headRow.appendChild(el("th", { scope: "col", text: word }));
  table.appendChild(el("thead", {}, [headRow]));
  const body = el("tbody");
  words.forEach((word, i) => {
    const tr = el("tr", { className: i === selected ? "is-selected" : "", ...(rowAttrs ? rowAttrs(i) : {}) });
    tr.appendChild(el("th", { scope: "row", text: word }));
    words.forEach((_, j) => {
      const shaded = cell(i, j);
      const td = el("td", shaded.attrs);
      if (shaded.weight !== null) {
        td.style.backgroundColor = `color-mix(in srgb, var(--attn-color) ${shadePercent(shaded.weight)}%, transparent)`;
      }
      tr.appendChild(td);
    });
    body.appendChild(tr);
  });
  table.appendChild(body);
}

/**
 * A range input.
 * @param {string} id
 * @param {number} max
 * @param {number} value
 * @returns {HTMLInputElement}
 */
function range(id, max, value) {
  return el("input", { type: "range", id, min: "0", max: String(max), step: "1", value: String(value) });
}

/**
 * A labelled control box.
 * @param {string} forId
 * @param {string} label
 * @param {Node[]} controls
 */
const control = (forId, label, controls) =>
  el("div", { className: "attn-explorer__control" }, [el("label", { for: forId, text: label }), ...controls]);

/**
 * The token buttons' row, the selected one pressed.
 * @param {HTMLElement} box
 * @param {string[]} words
 * @param {{selected: number, extra?: (index: number) => Attributes}} options  the pressed
 *   button; more attributes for button `index`
 * @returns {HTMLElement[]} the buttons
 */
function tokenButtons(box, words, { selected, extra }) {
  box.textContent = "";
  return words.map((word, i) => {
    const attrs = { type: "button", className: "attn-explorer__token", "aria-pressed": String(i === selected), text: word };
    const button = el("button", { ...attrs, ...(extra ? extra(i) : {}) });
    box.appendChild(button);
    return button;
  });
}

// --- the toy sentences (docs/explorer.md, first section) ------------------------------

/**
 * @param {HTMLElement} root
 * @param {ExplorerData} data
 */
function build(root, data) {
  const { decimals, temperatures: temps } = data;
  const state = { sentence: 0, query: 1, scaled: false, causal: false, temp: Math.max(0, temps.indexOf(1)) };

  const select = el("select", { id: "attn-sentence", className: "attn-explorer__select" });
  data.sentences.forEach((sentence, i) => select.appendChild(el("option", { value: String(i), text: sentence.text })));
  const scaled = el("input", { type: "checkbox", id: "attn-scaled" });
  const causal = el("input", { type: "checkbox", id: "attn-causal" });
  const temp = range("attn-temperature", temps.length - 1, state.temp);
  const tempOut = el("output", { id: "attn-temperature-value", for: "attn-temperature" });
  const controls = el("div", { className: "attn-explorer__controls" }, [
    control("attn-sentence", "Sentence", [select]),
    el("div", { className: "attn-explorer__control attn-explorer__switch" }, [
      scaled, el("label", { for: "attn-scaled", text: "Scale scores by 1/\u221Ad\u2096" }),
    ]),
    el("div", { className: "attn-explorer__control attn-explorer__switch" }, [
      causal, el("label", { for: "attn-causal", text: "Causal mask" }),
    ]),
    control("attn-temperature", "Softmax temperature", [temp, tempOut]),
  ]);
  const info = el("p", { className: "attn-explorer__info", id: "attn-info" });
  const tokens = el("div", {
    className: "attn-explorer__tokens", role: "toolbar", "aria-label": "Query token (arrow keys move, Enter or Space selects)",
  });
  const [caption, bars] = captionedBars("attn-bars-caption");
  const table = el("table", { className: "attn-explorer__heatmap" });
  const tableWrap = el("div", { className: "attn-explorer__heatmap-wrap" }, [table]);
  root.textContent = "";
  for (const node of [controls, info, tokens, caption, bars, tableWrap]) root.appendChild(node);

  /** @param {number} i @param {number} j */
  const masked = (i, j) => state.causal && j > i;

  function render() {
    const sentence = data.sentences[state.sentence];
    const matrix = sentence.weights[state.scaled ? "scaled" : "unscaled"][state.causal ? "causal" : "full"][state.temp];
    if (state.query >= sentence.words.length) state.query = 0;
    select.value = String(state.sentence);
    scaled.checked = state.scaled;
    causal.checked = state.causal;
    temp.value = String(state.temp);
    tempOut.textContent = String(temps[state.temp]);
    temp.setAttribute("aria-valuetext", "temperature " + String(temps[state.temp]));
    const scale = state.scaled ? "1/\u221A" + sentence.d_k : "1";
    info.textContent = `${sentence.description}. Weights = softmax(scores \u00D7 ${scale} / ${temps[state.temp]})` +
      (state.causal ? ", later tokens masked." : ".");
    tokenButtons(tokens, sentence.words, {
      selected: state.query,
      extra: (i) => ({ "data-index": String(i), tabindex: i === state.query ? "0" : "-1" }),
    });
    // the token counted from zero, as in the code
    caption.textContent = `Where \u201C${sentence.words[state.query]}\u201D (token ${state.query}) attends`;
    bars.textContent = "";
    matrix[state.query].forEach((weight, j) => {
      const attrs = {
        className: "attn-bar" + (masked(state.query, j) ? " attn-bar--masked" : ""), role: "listitem", "data-key": String(j),
      };
      bars.appendChild(bar(attrs, { label: sentence.words[j], weight, text: weight.toFixed(decimals), widthDigits: 2 }));
    });
    fillHeatmap(table, {
      caption: "All attention weights: row = query (who looks), column = key (looked at). " +
        "Each row sums to 1; stronger shading means more weight; the selected query's row is outlined.",
      words: sentence.words,
      selected: state.query,
      cell: (i, j) => ({
        attrs: { className: masked(i, j) ? "is-masked" : "", text: matrix[i][j].toFixed(decimals) }, weight: matrix[i][j],
      }),
      rowAttrs: (i) => ({ "data-query": String(i) }),
    });
  }

  /** @param {number} i @param {boolean} focus */
  function selectQuery(i, focus) {
    state.query = i;
    render();
    const button = tokens.querySelector(`[data-index="${i}"]`);
    if (focus && button instanceof HTMLElement) button.focus();
  }

  select.addEventListener("change", () => { state.sentence = Number(select.value); render(); });
  scaled.addEventListener("change", () => { state.scaled = scaled.checked; render(); });
  causal.addEventListener("change", () => { state.causal = causal.checked; render(); });
  temp.addEventListener("input", () => { state.temp = Number(temp.value); render(); });
  /** @param {Event} event @returns {HTMLElement | null} the token button under the event */
  const tokenOf = (event) => (event.target instanceof Element ? event.target.closest(".attn-explorer__token") : null);
  tokens.addEventListener("click", (event) => {
    const button = tokenOf(event);
    if (button) selectQuery(Number(button.dataset.index), true);
  });
  tokens.addEventListener("keydown", (event) => {
    const button = tokenOf(event);
    if (!button) return;
    const count = tokens.children.length;
    const i = Number(button.dataset.index);
    /** @type {Record<string, number>} */
    const moves = { ArrowRight: (i + 1) % count, ArrowDown: (i + 1) % count, ArrowLeft: (i - 1 + count) % count,
      ArrowUp: (i - 1 + count) % count, Home: 0, End: count - 1 };
    if (!(event.key in moves)) return;
    event.preventDefault();
    // Arrows move the focus (roving tabindex); Enter or Space then selects.
    for (const other of tokens.children) other.setAttribute("tabindex", "-1");
    const target = /** @type {HTMLElement} */ (tokens.children[moves[event.key]]);
    target.setAttribute("tabindex", "0");
    target.focus();
  });

  render();
  root.dataset.ready = "true";
}

// --- the trained recall model (docs/explorer.md#recall) --------------------------------

/**
 * @param {HTMLElement} root
 * @param {ExplorerData} data
 */
function buildRecall(root, data) {
  const recall = data.recall;
  const state = { sequence: 0, question: 0 };
  const select = el("select", { id: "recall-sequence", className: "attn-explorer__select" });
  recall.sequences.forEach((sequence, i) => {
    const pairs = sequence.keys.map((key, j) => key + ":" + sequence.values[j]);
    select.appendChild(el("option", { value: String(i), text: pairs.join(" ") }));
  });
  const questions = el("div", { className: "attn-explorer__tokens", role: "group", "aria-label": "Question: the key to look up" });
  const out = el("div", { "aria-live": "polite" });
  root.textContent = "";
  root.appendChild(el("div", { className: "attn-explorer__controls" }, [control("recall-sequence", "Stored pairs", [select])]));
  root.appendChild(questions);
  root.appendChild(out);

  function render() {
    const sequence = recall.sequences[state.sequence];
    const q = sequence.questions[state.question];
    const keys = sequence.questions.map((question) => question.key + "?");
    const buttons = tokenButtons(questions, keys, { selected: state.question });
    buttons.forEach((button, i) => button.addEventListener("click", () => { state.question = i; render(); }));
    out.textContent = "";
    for (const [name, weights, answer] of /** @type {[string, number[], string][]} */ ([
      ["Untrained model", q.before, q.answer_before],
      ["Trained model", q.after, q.answer_after],
    ])) {
      const verdict = answer === q.target ? "right" : "wrong";
      out.appendChild(el("p", {
        className: "attn-explorer__caption",
        text: `${name}: answers ${answer} (${verdict}; the stored value is ${q.target})`,
      }));
      out.appendChild(el("div", { role: "list", className: "recall-bars" }, weights.map((weight, j) =>
        bar({ className: "attn-bar", role: "listitem" }, {
          label: sequence.keys[j] + ":" + sequence.values[j], weight, text: weight.toFixed(data.decimals), widthDigits: 1,
        }))));
    }
  }

  select.addEventListener("change", () => { state.sequence = Number(select.value); state.question = 0; render(); });
  render();
  root.dataset.ready = "true";
}

// --- the real model, SmolLM2 (docs/explorer.md#llm) ------------------------------------

/**
 * @param {HTMLElement} root
 * @param {ExplorerData} data
 */
function buildLlm(root, data) {
  const { llm } = data;
  const { scale, decimals } = llm;
  const state = { prompt: 0, layer: 18, head: 6, query: llm.prompts[0].tokens.length - 1 };
  const select = el("select", { id: "llm-prompt", className: "attn-explorer__select" });
  llm.prompts.forEach((prompt, i) => select.appendChild(el("option", { value: String(i), text: prompt.text })));
  const layer = range("llm-layer", llm.layers - 1, state.layer);
  const layerOut = el("output", { id: "llm-layer-value", for: "llm-layer" });
  const head = range("llm-head", llm.heads - 1, state.head);
  const headOut = el("output", { id: "llm-head-value", for: "llm-head" });
  const controls = el("div", { className: "attn-explorer__controls" }, [
    control("llm-prompt", "Prompt", [select]),
    control("llm-layer", "Layer", [layer, layerOut]),
    control("llm-head", "Head", [head, headOut]),
  ]);
  const tokens = el("div", { className: "attn-explorer__tokens", role: "group", "aria-label": "Query token" });
  const [caption, bars] = captionedBars("llm-bars-caption");
  const table = el("table", { className: "attn-explorer__heatmap" });
  // The matrix can be wider than the page: its scrolling box takes the keyboard focus.
  const tableWrap = el("div", {
    className: "attn-explorer__heatmap-wrap", tabindex: "0", role: "region",
    "aria-label": "The head's weight matrix (scrolls sideways)",
  }, [table]);
  root.textContent = "";
  for (const node of [controls, tokens, caption, bars, tableWrap]) root.appendChild(node);

  function render() {
    const prompt = llm.prompts[state.prompt];
    const words = prompt.tokens.map((token) => token.replace(/\n/g, "\u21B5"));
    if (state.query >= words.length) state.query = words.length - 1;
    const matrix = prompt.weights[state.layer][state.head];
    select.value = String(state.prompt);
    layer.value = String(state.layer);
    head.value = String(state.head);
    layerOut.textContent = String(state.layer);
    headOut.textContent = String(state.head);
    layer.setAttribute("aria-valuetext", "layer " + state.layer);
    head.setAttribute("aria-valuetext", "head " + state.head);
    const buttons = tokenButtons(tokens, words, { selected: state.query });
    buttons.forEach((button, i) => button.addEventListener("click", () => { state.query = i; render(); }));
    caption.textContent = `Layer ${state.layer}, head ${state.head}: where \u201C${words[state.query].trim()}\u201D ` +
      `(token ${state.query}) attends`;
    bars.textContent = "";
    matrix[state.query].forEach((value, j) => {
      const weight = value / scale;
      bars.appendChild(bar({ className: "attn-bar", role: "listitem" }, {
        label: words[j], weight, text: weight.toFixed(decimals), widthDigits: 1,
      }));
    });
    fillHeatmap(table, {
      caption: "All of this head's weights: row = query, column = key; later keys are " +
        "masked (blank). The selected query's row is outlined.",
      words,
      selected: state.query,
      cell: (i, j) => {
        /** @type {ShadedCell} */
        const shaded = j > i
          ? { attrs: { className: "is-masked", text: "" }, weight: null }
          : { attrs: { text: (matrix[i][j] / scale).toFixed(2) }, weight: matrix[i][j] / scale };
        return shaded;
      },
    });
  }

  select.addEventListener("change", () => {
    state.prompt = Number(select.value);
    state.query = llm.prompts[state.prompt].tokens.length - 1;
    render();
  });
  layer.addEventListener("input", () => { state.layer = Number(layer.value); render(); });
  head.addEventListener("input", () => { state.head = Number(head.value); render(); });
  render();
  root.dataset.ready = "true";
}

// --- start ------------------------------------------------------------------------------

/**
 * The data, inlined by the build when it can be (works from file://); else fetched.
 * @param {HTMLAnchorElement} link
 * @returns {Promise<ExplorerData>}
 */
async function loadData(link) {
  const inline = document.getElementById("explorer-data");
  if (inline) return JSON.parse(inline.textContent || "null");
  const response = await fetch(link.href);
  if (!response.ok) throw new Error("HTTP " + response.status + " for " + link.href);
  return response.json();
}

/** Build each explorer on the page not built yet (by this copy of the module or another). */
export function startExplorer() {
  const roots = ["attention-explorer", "recall-explorer", "llm-explorer"].map((id) => document.getElementById(id));
  const [root, recallRoot, llmRoot] = roots;
  if (roots.every((node) => !node || node.dataset.ready)) return;
  const link = document.getElementById("explorer-data-link");
  if (!(link instanceof HTMLAnchorElement)) {
    const first = roots.find((node) => node);
    if (first) first.textContent = "The explorer's data link is missing from this page.";
    return;
  }
  loadData(link)
    .then((data) => {
      if (root && !root.dataset.ready) build(root, data);
      if (recallRoot && !recallRoot.dataset.ready) buildRecall(recallRoot, data);
      if (llmRoot && !llmRoot.dataset.ready) buildLlm(llmRoot, data);
    })
    .catch((error) => {
      for (const node of roots) if (node) node.textContent = "Could not load the explorer's data: " + error.message;
    });
}

if (typeof document === "undefined") {
  // imported outside a page (the Node tests import the live view's drawing): nothing to start
} else if (typeof document$ !== "undefined") document$.subscribe(startExplorer);
else if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", startExplorer);
else startExplorer();
