// @ts-check
// The explorer's live section (docs/explorer.md#live): the reader's own text through the
// model, in this browser, through attnlabLive (api.js) and nothing else.
//
// What the reader can do: type text and see its tokens; pick a layer, a head and a
// query token (bars and weight matrix drawn as the explorer draws them); see every head
// at once for that query, or shaded by a score (sink, previous token, induction); read
// the top-5 prediction; generate text token by token (Generate, Stop; greedy or
// sampled, seeded; the model's chat template when it has one) and watch the maps grow a
// row per token; click heads to knock them out; run the chapters' experiments in one
// click. Tokens, layers and heads count from zero, as in the code. The view lives in
// the URL (state.js); drawing is draw.js (each layer as what it is: layers.js); the
// experiments are experiments.js.
import { api } from "../api.js";
import { captionedBars } from "../../explorer.js";
import { layerKind, seen, unseenReason, written } from "./layers.js";
import { ablatedPairs, readUrl, toggleHead, writeUrl } from "./state.js";
import {
  el, growMaps, headWeights, headsOf, matrixCell, renderHead, renderOverview, renderPrediction, renderTokens, shown,
} from "./draw.js";
import { REPEAT_LENGTH, headScores, repeatedRandomTokens, scoreLines } from "./experiments.js";

const MiB = 1048576;

/** @param {unknown} error @returns {string} its message */
const messageOf = (error) => (error instanceof Error ? error.message : String(error));

/** @typedef {import("./draw.js").LiveResult} LiveResult */
/** @typedef {import("../api.js").LiveInfo} LiveInfo */
/** @typedef {import("../api.js").Progress} Progress */

/** @param {string} id @param {string} label */
function range(id, label) {
  const input = el("input", { type: "range", id, min: "0", max: "0", step: "1", value: "0" });
  const out = el("output", { id: id + "-value", for: id });
  return { input, out, box: el("div", { className: "attn-explorer__control" }, [el("label", { for: id, text: label }), input, out]) };
}

/** @param {string} id @param {string} label @param {Record<string, string>} attrs */
function numberField(id, label, attrs) {
  const input = el("input", { type: "number", id, inputmode: "decimal", ...attrs });
  return { input, box: el("div", { className: "live__field" }, [el("label", { for: id, text: label }), input]) };
}

/**
 * The section's elements, all of them, in one object (the drawing functions take it).
 * @param {HTMLElement} root
 * @param {typeof api} live
 */
function buildView(root, live) {
  const v = /** @type {Record<string, any>} */ ({});
  v.status = el("p", { className: "live__status", id: "live-status", "aria-live": "polite" });
  const sizeMiB = Math.round(live.modelBytes / MiB);
  v.loadButton = el("button", {
    type: "button", className: "md-button md-button--primary", id: "live-load", text: `Load the model, ${sizeMiB} MiB`,
  });
  v.progress = el("progress", { id: "live-progress", max: "1", value: "0", hidden: "", "aria-label": "Model download" });
  v.openInput = el("input", { type: "file", id: "live-open", accept: ".gguf" });
  const open = el("div", { className: "live__field live__open" }, [
    el("label", { for: "live-open", text: "Or open a GGUF model from your disk (read here, never uploaded; up to 2 GiB; or drop it on this section)" }),
    v.openInput,
  ]);
  v.intro = el("div", { className: "live__intro" }, [v.status, v.loadButton, v.progress, open]);

  v.textArea = el("textarea", { id: "live-text", rows: "3", maxlength: "2000", spellcheck: "false" });
  v.runButton = el("button", { type: "button", className: "md-button", id: "live-run", text: "Run" });
  v.textLabel = el("label", { for: "live-text", text: "Your text" });
  v.form = el("div", { className: "live__form", hidden: "" }, [v.textLabel, v.textArea, v.runButton]);

  v.layer = range("live-layer", "Layer");
  v.head = range("live-head", "Head");
  const controls = el("div", { className: "attn-explorer__controls" }, [v.layer.box, v.head.box]);
  v.tokens = el("div", { className: "attn-explorer__tokens", role: "group", "aria-label": "Query token", id: "live-tokens" });
  v.captionAndBars = captionedBars("live-bars-caption");
  v.captionAndBars[1].tabIndex = 0; // the list scrolls in its own box (live.css): reachable by keyboard
  v.matrix = el("canvas", { className: "live__matrix", id: "live-matrix", role: "img" });
  v.legend = el("p", { className: "live__legend", id: "live-legend", hidden: "" });
  v.matrixCaption = el("figcaption", { id: "live-matrix-caption" }); // per layer kind: layers.js matrixCaption
  const matrixBox = el("figure", { className: "live__matrix-box" }, [v.matrix, v.matrixCaption, v.legend]);

  v.predictionList = el("ol", { className: "live__prediction", id: "live-prediction" });
  v.stepButton = el("button", { type: "button", className: "md-button", id: "live-step", text: "Append the likeliest token" });
  const prediction = el("div", { className: "live__box" }, [el("h3", { text: "Next token" }), v.predictionList, v.stepButton]);

  v.newTokens = numberField("live-new-tokens", "New tokens", { min: "1", max: "256", step: "1", value: "32" });
  v.temperature = numberField("live-temperature", "Temperature (0: greedy)", { min: "0", step: "0.1", value: "0" });
  v.topK = numberField("live-top-k", "Top-k (sampling; empty: all)", { min: "1", step: "1" });
  v.topP = numberField("live-top-p", "Top-p (sampling; empty: all)", { min: "0", max: "1", step: "0.05" });
  v.seed = numberField("live-seed", "Seed (sampling)", { min: "0", step: "1", value: "0" });
  v.chat = el("input", { type: "checkbox", id: "live-chat" });
  v.chatBox = el("div", { className: "live__field live__check", hidden: "" }, [v.chat, el("label", { for: "live-chat", text: "As a chat message (Generate puts your text in the model's chat template)" })]);
  v.generateButton = el("button", { type: "button", className: "md-button md-button--primary", id: "live-generate", text: "Generate" });
  v.stopButton = el("button", { type: "button", className: "md-button", id: "live-stop", text: "Stop", disabled: "" });
  v.generated = el("p", { className: "live__generated", id: "live-generated", "aria-live": "polite" });
  v.generateTiming = el("p", { className: "live__timing", id: "live-generate-timing" });
  const generation = el("div", { className: "live__box" }, [
    el("h3", { text: "Generate" }),
    el("p", { text: "The model continues your text one token at a time, reading each new token through its KV cache; " +
      "the head's weight matrix below grows a row per token, and the query follows the last token read. " +
      "Temperature 0 takes the likeliest token; above 0 it samples, and top-k, top-p and the seed apply." }),
    el("div", { className: "live__fields" }, [v.newTokens.box, v.temperature.box, v.topK.box, v.topP.box, v.seed.box]),
    v.chatBox,
    el("div", { className: "live__buttons" }, [v.generateButton, v.stopButton]),
    v.generated, v.generateTiming,
  ]);

  v.shadeSelect = el("select", { id: "live-shade", className: "attn-explorer__select" });
  for (const [value, text] of [["query", "weight of the query's strongest key"], ["sink", "sink score (weight on token 0)"],
    ["previous", "previous-token score"], ["induction", "induction score"]]) {
    v.shadeSelect.appendChild(el("option", { value, text }));
  }
  v.modeView = el("input", { type: "radio", name: "live-mode", id: "live-mode-view", value: "view", checked: "" });
  v.modeAblate = el("input", { type: "radio", name: "live-mode", id: "live-mode-ablate", value: "ablate" });
  v.restoreButton = el("button", { type: "button", className: "md-button", id: "live-restore", text: "Restore all heads" });
  v.grid = el("table", { className: "live__heads", id: "live-heads" });
  v.gridCaption = el("p", { className: "attn-explorer__caption", id: "live-heads-caption" });
  const overview = el("div", { className: "live__box" }, [
    el("h3", { text: "All heads at once" }),
    el("div", { className: "attn-explorer__controls" }, [
      el("div", { className: "attn-explorer__control" }, [el("label", { for: "live-shade", text: "Shade by" }), v.shadeSelect]),
      el("fieldset", { className: "live__mode" }, [
        el("legend", { text: "Clicking a head" }),
        v.modeView, el("label", { for: "live-mode-view", text: "shows it" }),
        v.modeAblate, el("label", { for: "live-mode-ablate", text: "knocks it out" }),
      ]),
      v.restoreButton,
    ]),
    v.gridCaption,
    el("div", { className: "live__heads-wrap" }, [v.grid]),
  ]);

  v.repeatButton = el("button", { type: "button", className: "md-button", id: "live-repeat", text: "Repeated random tokens" });
  v.scoreButton = el("button", { type: "button", className: "md-button", id: "live-scores", text: "Score every head" });
  v.scoreOut = el("div", { id: "live-score-out", "aria-live": "polite" });
  const experiments = el("div", { className: "live__box" }, [
    el("h3", { text: "Experiments" }),
    el("p", { text: `Repeated random tokens: the start-of-text token, then ${REPEAT_LENGTH} random tokens written twice, as in ` +
      "\u201CWhat trained attention does\u201D; induction heads look, from each token of the second copy, at the " +
      "token after its first occurrence. Score every head: the three measures of that chapter on the current text, " +
      "the five best heads of each (induction: when the text ends with one run of tokens written twice in a row)." }),
    el("div", { className: "live__buttons" }, [v.repeatButton, v.scoreButton]),
    v.scoreOut,
  ]);
  v.timing = el("p", { className: "live__timing", id: "live-timing" });
  v.memory = el("p", { className: "live__timing", id: "live-memory" });

  v.view = el("div", { className: "live__view", hidden: "" }, [
    v.tokens, controls, v.captionAndBars[0], v.captionAndBars[1], matrixBox, prediction, overview, experiments, v.timing, v.memory,
  ]);
  v.form.appendChild(generation); // above the maps, so that Stop stays put while they grow
  root.textContent = "";
  for (const node of [v.intro, v.form, v.view]) root.appendChild(node);
  return /** @type {View} */ (v);
}
/** @typedef {import("./draw.js").HeadView & import("./draw.js").OverviewView & Record<string, any>} View */

// The generation options from the fields (empty: the default), as attnlabLive.generate takes them.
/** @param {View} v @returns {import("../generate.js").GenerateOptions & {max_new_tokens: number}} */
function generationOptions(v) {
  /** @param {{input: HTMLInputElement}} field */
  const number = (field) => (field.input.value.trim() === "" ? null : Number(field.input.value));
  const temperature = number(v.temperature) ?? 0;
  /** @type {import("../generate.js").GenerateOptions & {max_new_tokens: number}} */
  const options = { max_new_tokens: number(v.newTokens) ?? 32, temperature };
  if (temperature > 0) {
    options.top_k = number(v.topK);
    options.top_p = number(v.topP);
    options.seed = number(v.seed);
  }
  return options;
}

/** @param {HTMLElement} root */
function build(root) {
  const live = api;
  const state = readUrl();
  const v = buildView(root, live);
  /** @type {LiveResult | null} */
  let result = null; // the last run
  /** @type {import("./experiments.js").HeadScores | null} */
  let scores = null;
  let running = null;
  let generating = false;
  let pageModel = true; // the page's own model, not a file the reader opened
  const sizeMiB = Math.round(live.modelBytes / MiB);
  /** @param {string} text */
  const setStatus = (text) => { v.status.textContent = text; };
  const modelName = () => live.info().name;

  function render() {
    if (!result) return;
    if (state.query === null || state.query >= result.T) state.query = result.T - 1;
    state.layer = Math.min(state.layer, result.layers - 1);
    state.head = Math.min(state.head, headsOf(result, state.layer) - 1);
    v.head.input.max = String(headsOf(result, state.layer) - 1);
    scores = scores || headScores(result);
    renderTokens(v.tokens, state, result);
    renderHead(v, state, result);
    renderPrediction(v.predictionList, result);
    renderOverview(v, { state, result, scores });
    const ablated = ablatedPairs(state.ablate);
    v.restoreButton.disabled = generating || ablated.length === 0;
    v.stepButton.disabled = generating || result.T >= live.info().max_map_tokens;
    const knockedOut = ablated.map(([l, h]) => `layer ${l} head ${h}`).join(", ");
    v.timing.textContent = (generating
      ? `Generating through the KV cache: ${result.T} tokens read so far`
      : `Forward pass: ${result.T} tokens in ${Math.round(result.ms)} ms (${live.info().kernels}, in a Web Worker)`) +
      (ablated.length ? `; heads knocked out: ${knockedOut}` : "") + ".";
    if (!generating) writeUrl(state); // once the text is whole: history calls are slow and rate-limited
  }

  /**
   * @param {{attention: Float32Array | null, top: LiveResult["top"], ms: number}} out
   * @param {{ids: number[], tokens: string[]}} encoded
   * @returns {LiveResult}
   */
  const newResult = (out, encoded) => {
    const info = live.info();
    const kinds = Array.from({ length: info.num_layers }, (_, layer) => layerKind(info, layer));
    const layerHeads = info.layer_heads ?? Array(info.num_layers).fill(info.num_heads);
    return {
      ...out, attention: out.attention ?? new Float32Array(0), ids: encoded.ids, tokens: encoded.tokens, T: encoded.ids.length,
      layers: info.num_layers, heads: Math.max(...layerHeads), layerHeads, kinds,
    };
  };

  // Tokenise (unless the ids were set directly), run, draw. One at a time; the latest wins.
  async function update() {
    if (generating) return; // the generation's own view comes first (setGenerating)
    const request = {};
    running = request;
    setStatus("Running the model\u2026");
    try {
      /** @type {{ids: number[], tokens: string[], text?: string}} */
      const encoded = state.idsSetDirectly && state.ids
        ? { ids: state.ids, ...(await live.decode(state.ids)) }
        : await live.tokens(state.text);
      if (!encoded.ids.length) throw new Error("the text has no tokens: type something");
      const most = live.info().max_map_tokens;
      if (encoded.ids.length > most) throw new Error(`your text is ${encoded.ids.length} tokens; this view shows ${most} at most: shorten it`);
      if (state.idsSetDirectly) v.textArea.value = encoded.text ?? "";
      state.ids = encoded.ids;
      const out = await live.run(encoded.ids, { ablate: state.ablate, return_attention: true });
      if (running !== request) return;
      result = newResult(out, encoded);
      scores = null;
      v.scoreOut.textContent = "";
      setStatus(`${modelName()}, computed in this browser: ${result.T} tokens.`);
      render();
    } catch (error) {
      if (running === request) setStatus(`Could not run the model: ${messageOf(error)}`);
    }
  }

  // While tokens stream in, nothing else may run the model or change what it runs:
  // update() waits, and the controls that call it are off.
  /** @param {boolean} on */
  function setGenerating(on) {
    generating = on;
    v.generateButton.disabled = on;
    v.stopButton.disabled = !on;
    for (const control of [v.runButton, v.stepButton, v.restoreButton, v.repeatButton, v.modeAblate, v.openInput]) {
      control.disabled = on;
    }
  }

  // Generate from the text (or its chat prompt): the tokens stream in, the maps grow.
  async function generate() {
    if (generating) return;
    const options = generationOptions(v);
    state.text = v.textArea.value;
    setGenerating(true);
    v.generated.textContent = "";
    v.generateTiming.textContent = "";
    running = {}; // a run started before is no longer drawn
    try {
      if (!Number.isInteger(options.max_new_tokens) || options.max_new_tokens < 1) { // the field's name, not the API's
        throw new Error(`New tokens must be a whole number of at least 1; got ${v.newTokens.input.value}`);
      }
      const text = (v.chat.checked && (await live.chatPrompt(state.text))) || state.text;
      const encoded = await live.tokens(text);
      if (!encoded.ids.length) throw new Error("the text has no tokens: type something");
      // the maps of every token fit the page's limit: fewer new tokens when the text is long
      const room = live.info().max_map_tokens - encoded.ids.length;
      if (room <= 0) throw new Error(`your text fills the ${live.info().max_map_tokens} tokens the page keeps maps for`);
      const limited = options.max_new_tokens > room;
      options.max_new_tokens = Math.max(0, Math.min(options.max_new_tokens, room));
      /** @type {string[]} */
      const pieces = [];
      /** @type {number[]} */
      const times = [];
      // Tokens can come faster than the maps can be drawn: each token's rows wait in
      // `pending`, and one draw adds all that came since the last. After each draw the
      // page rests as long as that draw took (painting included), so it keeps answering
      // (Stop included) however fast the model decodes and however slow the device.
      /** @type {{index: number, token_id: number, token: string, attention: Float32Array, T: number, ms: number}[]} */
      const pending = [];
      /** @type {ReturnType<typeof setTimeout> | undefined} */
      let draw; // the timer of the draw to come
      let rest = 0; // ms: how long the last draw took
      const drawPending = () => {
        draw = undefined;
        if (!pending.length) return;
        const started = performance.now();
        requestAnimationFrame(() => setTimeout(() => { rest = performance.now() - started; }));
        const steps = pending.splice(0);
        if (steps[0].index === 0) { // the prompt's pass: its maps start the view
          const { attention, ms } = steps[0];
          result = newResult({ attention, top: [], ms }, { ids: encoded.ids.slice(), tokens: encoded.tokens.slice() });
        }
        if (!result) return; // the prompt's pass comes first
        const blocks = steps.filter((step) => step.index > 0).map((step) => ({ rows: step.attention, n: step.T }));
        if (blocks.length) {
          result.attention = growMaps(result, blocks);
          result.T += blocks.reduce((total, block) => total + block.n, 0);
        }
        for (const step of steps) { // each chosen token, shown greyed out until it is read
          result.ids.push(step.token_id);
          result.tokens.push(step.token);
        }
        v.generated.textContent = pieces.join("");
        state.query = null;
        scores = null;
        render();
      };
      setStatus("Generating\u2026");
      const newIds = await live.generate(encoded.ids, {
        ...options,
        stop_at_eos: v.chat.checked,
        return_attention: true,
        ablate: state.ablate,
        /** @param {typeof pending[number]} step */
        onToken(step) {
          pieces.push(step.token);
          if (step.index > 0) times.push(step.ms);
          pending.push(step);
          draw = draw ?? setTimeout(drawPending, rest);
        },
      });
      clearTimeout(draw);
      drawPending();
      const perToken = times.length ? times.reduce((a, b) => a + b, 0) / times.length : null;
      v.generateTiming.textContent = `${newIds.length} tokens` +
        (limited && newIds.length === options.max_new_tokens
          ? ` (the page keeps every map for ${live.info().max_map_tokens} tokens at most)` : "") +
        (perToken ? `; ${(1000 / perToken).toFixed(1)} tokens/s while decoding (${perToken.toFixed(0)} ms a token, through the KV cache)` : "") + ".";
      v.chat.checked = false; // the text is now the whole chat: Generate again continues it as it is
      state.ids = encoded.ids.concat(newIds);
      state.idsSetDirectly = true;
      state.query = null;
      setGenerating(false);
      await update(); // the whole text's maps, and the next token's prediction
    } catch (error) {
      setGenerating(false);
      setStatus(`Could not generate: ${messageOf(error)}`);
    }
  }

  /** @param {Progress} p */
  function onProgress(p) {
    v.progress.max = p.total || 1;
    v.progress.value = p.loaded;
    setStatus(`${p.fromCache ? "Reading the model from this browser's cache: " : "Reading the model: "}` +
      `${Math.round(p.loaded / MiB)} of ${Math.round(p.total / MiB)} MiB`);
  }

  // The reader's own GGUF file: the model in use stays if it cannot be read.
  /** @param {File | undefined} file */
  async function openFile(file) {
    if (!file || generating) return;
    v.progress.hidden = false;
    try {
      const info = await live.open(file, { onProgress });
      v.loadButton.hidden = true;
      await showModel(info, true);
    } catch (error) {
      v.progress.hidden = true;
      setStatus(`Could not open ${file.name}: ${messageOf(error)} ${result ? "The model in use is unchanged." : ""}`);
    }
  }

  async function start() {
    v.loadButton.hidden = true;
    v.progress.hidden = false;
    setStatus("Loading the model\u2026");
    try {
      await showModel(await live.load({ onProgress }));
    } catch (error) {
      v.progress.hidden = true;
      v.loadButton.hidden = false;
      const memory = /memory|allocation|Array buffer/i.test(messageOf(error));
      setStatus((memory
        ? "This browser could not give the model the memory it needs. "
        : `The model could not be loaded (${messageOf(error)}). `) + "The precomputed prompts above still work.");
    }
  }

  // The view for a loaded model (the site's, or the reader's own file).
  /** @param {LiveInfo} info @param {boolean} [ownFile] */
  async function showModel(info, ownFile = false) {
    pageModel = !ownFile;
    v.progress.hidden = true;
    v.form.hidden = false;
    v.view.hidden = false;
    v.chatBox.hidden = !info.chat_template;
    v.textLabel.textContent = `Your text (up to ${info.max_map_tokens} tokens)`;
    v.layer.input.max = String(info.num_layers - 1);
    v.head.input.max = String(info.num_heads - 1);
    if (ownFile) { // another vocabulary and other heads: the text again, nothing knocked out
      state.text = v.textArea.value || state.text;
      state.ids = null;
      state.ablate = {};
    }
    v.textArea.value = state.text;
    state.idsSetDirectly = Boolean(state.ids && state.ids.length);
    const how = ownFile ? "read from your file" : info.fromCache ? "from this browser's cache" : "downloaded";
    setStatus(`${info.name} ready (${how}, ${Math.round(info.loadMs)} ms).`);
    v.memory.textContent = `The model: ${info.name} (${info.architecture}, ${info.num_layers} layers of ` +
      `${info.num_heads} heads), a ${Math.round(info.bytes / MiB)} MiB file; ${Math.round(info.memory_bytes / MiB)} MiB ` +
      "of memory in its worker, the weights kept quantised as in the file.";
    root.dataset.live = "ready";
    scores = null;
    await update();
  }

  // --- events -------------------------------------------------------------------------

  v.loadButton.addEventListener("click", start);
  v.openInput.addEventListener("change", () => openFile(v.openInput.files?.[0]));
  root.addEventListener("dragover", (event) => event.preventDefault());
  root.addEventListener("drop", (event) => {
    event.preventDefault();
    openFile(event.dataTransfer?.files[0]);
  });
  v.runButton.addEventListener("click", () => {
    state.text = v.textArea.value;
    state.idsSetDirectly = false;
    state.query = null;
    update();
  });
  v.textArea.addEventListener("keydown", (/** @type {KeyboardEvent} */ event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) v.runButton.click();
  });
  /** @param {Event} event @param {string} selector @returns {HTMLElement | null} */
  const under = (event, selector) => (event.target instanceof Element ? event.target.closest(selector) : null);
  v.tokens.addEventListener("click", (/** @type {MouseEvent} */ event) => {
    const button = under(event, ".attn-explorer__token");
    if (!button) return;
    state.query = Number(button.dataset.index);
    render();
  });
  v.matrix.addEventListener("click", (/** @type {MouseEvent} */ event) => { state.query = matrixCell(v.matrix, event).query; render(); });
  v.matrix.addEventListener("pointermove", (/** @type {PointerEvent} */ event) => { // the cell's weight, as a tooltip
    const current = result;
    if (!current) return;
    const { query, key } = matrixCell(v.matrix, event);
    /** @param {number} i */
    const word = (i) => `${i} \u201C${shown(current.tokens[i]).trim()}\u201D`;
    const kind = current.kinds[state.layer];
    v.matrix.title = `query ${word(query)}, key ${word(key)}: ` +
      (seen(kind, query, key) ? written(kind, headWeights(current, state.layer, state.head)(query, key), 3) : unseenReason(kind, query, key));
  });
  // The matrix is drawn at the device's pixels in the scheme's colours: again when either changes.
  const redrawMatrix = () => { if (result) renderHead(v, state, result); };
  new ResizeObserver(redrawMatrix).observe(v.matrix);
  new MutationObserver(redrawMatrix).observe(document.body, { attributes: true, attributeFilter: ["data-md-color-scheme"] });
  v.layer.input.addEventListener("input", () => { state.layer = Number(v.layer.input.value); render(); });
  v.head.input.addEventListener("input", () => { state.head = Number(v.head.input.value); render(); });
  v.shadeSelect.addEventListener("change", () => {
    state.shade = /** @type {import("./state.js").ViewState["shade"]} */ (v.shadeSelect.value);
    render();
  });
  v.grid.addEventListener("click", (event) => {
    const button = under(event, ".live__head");
    if (!button) return;
    const l = Number(button.dataset.layer);
    const h = Number(button.dataset.head);
    if (v.modeAblate.checked) {
      if (generating) return;
      if (result && result.kinds[l].signed) { // as in the package: a Gated DeltaNet layer takes no ablate_heads
        setStatus(`Layer ${l} is a linear (Gated DeltaNet) layer: its heads cannot be knocked out, in the package either.`);
        return;
      }
      toggleHead(state.ablate, l, h);
      update();
    } else {
      state.layer = l;
      state.head = h;
      render();
    }
  });
  v.restoreButton.addEventListener("click", () => { state.ablate = {}; update(); });
  v.stepButton.addEventListener("click", () => {
    if (!result) return;
    state.ids = result.ids.concat([result.top[0].id]);
    state.idsSetDirectly = true;
    state.query = null;
    update();
  });
  v.generateButton.addEventListener("click", generate);
  v.stopButton.addEventListener("click", () => live.stop());
  let repeatSeed = 0; // each click draws new tokens; the first draw is always the same
  v.repeatButton.addEventListener("click", () => {
    const info = live.info();
    // the page's model starts with its end-of-text token 0, as Python's recipe; another with its start token
    const firstToken = pageModel ? 0 : info.bos_token_id;
    state.ids = repeatedRandomTokens(REPEAT_LENGTH, repeatSeed++, { vocabSize: info.vocab_size, firstToken });
    state.idsSetDirectly = true;
    if (pageModel) [state.layer, state.head] = [18, 6]; // the page's model's induction head; elsewhere: Score every head
    state.query = REPEAT_LENGTH + 3; // the second copy's third token
    state.shade = "induction";
    v.shadeSelect.value = "induction";
    update();
  });
  v.scoreButton.addEventListener("click", () => {
    if (!result) return;
    scores = scores || headScores(result);
    v.scoreOut.textContent = "";
    for (const line of scoreLines(scores)) {
      v.scoreOut.appendChild(el("p", { className: "live__scores", "data-score": line.key, text: line.text }));
    }
  });

  // --- first view -----------------------------------------------------------------------

  const reason = live.unavailableReason();
  if (reason) {
    v.loadButton.hidden = true;
    setStatus(`${reason} The precomputed prompts above still work.`);
    root.dataset.live = "unavailable";
    return;
  }
  const bytes = `${sizeMiB} MiB (${live.modelBytes.toLocaleString("en")} bytes)`;
  if (live.saveData()) {
    v.loadButton.textContent = `Download ${sizeMiB} MiB and load the model`;
    setStatus(`Your browser asks to save data: this will download ${bytes}. Nothing is downloaded until you press the button; ` +
      "the file is then kept in this browser's cache for the next visit.");
  } else {
    setStatus(`Nothing is downloaded until you ask: the model is ${bytes}, then kept in this browser's cache for the next visit. ` +
      "Phones can run it too.");
  }
  root.dataset.live = "idle";
  // Already in this browser's cache: the button says so, and a shared view (state in the
  // URL) opens by itself (never on a metered connection: reading the cache costs nothing,
  // but ask anyway).
  live.isCached().then((hit) => {
    if (!hit || root.dataset.live !== "idle") return;
    v.loadButton.textContent = "Load the model from this browser's cache";
    if (state.fromUrl && !live.saveData()) start();
  }).catch(() => {});
}

function init() {
  const root = document.getElementById("live-explorer");
  if (!root || root.dataset.live) return;
  build(root);
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
else init();
if (typeof document$ !== "undefined") document$.subscribe(init);
