// The explorer's live section (docs/explorer.md#live): the reader's own text through
// SmolLM2, in this browser, through window.attnlabLive (api.js) and nothing else.
//
// What the reader can do: type text and see its tokens; pick a layer, a head and a
// query token (bars and weight matrix drawn as the explorer draws them); see all 270
// heads at once for that query, or shaded by a score (sink, previous token,
// induction); read the top-5 prediction and append the likeliest token; click heads
// to knock them out; run the chapters' experiments in one click. Tokens, layers and
// heads count from zero, as in the code. The view lives in the URL's query string.
(function () {
  "use strict";

  var HEAT_MAX = 60; // as explorer.js: sqrt(weight) x 60 % of the explorer's colour
  var DEFAULT_TEXT = "The cat sat on the mat. The cat sat on the";
  var REPEAT_LENGTH = 10; // tokens in one copy of the induction experiment

  function el(tag, attrs, children) {
    return window.attnlabExplorer.el(tag, attrs, children);
  }

  function shown(token) {
    return token.replace(/\n/g, "\u21B5").replace(/\t/g, "\u21E5");
  }

  function shade(weight) {
    var pct = Math.round(Math.sqrt(Math.max(0, Math.min(1, weight))) * HEAT_MAX);
    return "color-mix(in srgb, var(--attn-color) " + pct + "%, transparent)";
  }

  // --- the view's state and the URL ----------------------------------------------------

  // ?live-text=...&live-layer=18&live-head=6&live-query=12&live-ablate=3.0,3.5
  // (or live-ids=0,512,... when the ids were set directly: random tokens, a greedy step).
  function readUrl() {
    var params = new URLSearchParams(location.search);
    var state = { text: DEFAULT_TEXT, ids: null, layer: 18, head: 6, query: null, ablate: {}, fromUrl: false };
    if (params.has("live-text")) {
      state.text = params.get("live-text");
      state.fromUrl = true;
    }
    if (params.has("live-ids")) {
      state.ids = params.get("live-ids").split(",").map(Number).filter(Number.isInteger);
      state.fromUrl = true;
    }
    ["layer", "head", "query"].forEach(function (name) {
      var value = Number(params.get("live-" + name));
      if (params.has("live-" + name) && Number.isInteger(value) && value >= 0) state[name] = value;
    });
    (params.get("live-ablate") || "").split(",").forEach(function (pair) {
      var parts = pair.split(".").map(Number);
      if (parts.length === 2 && parts.every(Number.isInteger)) addHead(state.ablate, parts[0], parts[1]);
    });
    return state;
  }

  function writeUrl(state) {
    var params = new URLSearchParams(location.search);
    ["live-text", "live-ids"].forEach(function (name) { params.delete(name); });
    if (state.idsSetDirectly) params.set("live-ids", state.ids.join(","));
    else params.set("live-text", state.text);
    params.set("live-layer", String(state.layer));
    params.set("live-head", String(state.head));
    params.set("live-query", String(state.query));
    var ablated = ablatedPairs(state.ablate).map(function (p) { return p[0] + "." + p[1]; });
    if (ablated.length) params.set("live-ablate", ablated.join(","));
    else params.delete("live-ablate");
    history.replaceState(history.state, "", "?" + params.toString() + location.hash);
  }

  function addHead(ablate, layer, head) {
    (ablate[layer] = ablate[layer] || []).push(head);
    ablate[layer].sort(function (a, b) { return a - b; });
  }
  function isAblated(ablate, layer, head) {
    return (ablate[layer] || []).indexOf(head) >= 0;
  }
  function toggleHead(ablate, layer, head) {
    if (isAblated(ablate, layer, head)) {
      ablate[layer] = ablate[layer].filter(function (h) { return h !== head; });
      if (!ablate[layer].length) delete ablate[layer];
    } else addHead(ablate, layer, head);
  }
  function ablatedPairs(ablate) {
    var pairs = [];
    Object.keys(ablate).forEach(function (layer) {
      ablate[layer].forEach(function (head) { pairs.push([Number(layer), head]); });
    });
    return pairs.sort(function (a, b) { return a[0] - b[0] || a[1] - b[1]; });
  }

  // --- what the chapters measure, on the current text (attnlab.llama.interpret) --------

  // A view of one head's (T, T) weights in the run's attention array.
  function headWeights(result, layer, head) {
    var T = result.T;
    var at = (layer * result.heads + head) * T * T;
    return function (query, key) { return result.attention[at + query * T + key]; };
  }

  // Mean weight on the first token (sink), on the token before (previous token), and on
  // the token after each query's earlier occurrence (induction), over the queries
  // 1 .. T-1 (induction: those whose token came before; null when none did).
  function headScores(result) {
    var T = result.T;
    var ids = result.ids;
    var earlier = []; // position of each query's latest earlier occurrence, or -1
    var last = {};
    ids.forEach(function (id, p) {
      earlier.push(last[id] === undefined ? -1 : last[id]);
      last[id] = p;
    });
    var inductionQueries = [];
    for (var q = 1; q < T; q++) if (earlier[q] >= 0) inductionQueries.push(q);
    var scores = { sink: [], previous: [], induction: [] };
    for (var layer = 0; layer < result.layers; layer++) {
      ["sink", "previous", "induction"].forEach(function (name) { scores[name].push([]); });
      for (var head = 0; head < result.heads; head++) {
        var w = headWeights(result, layer, head);
        var sink = 0;
        var previous = 0;
        for (var i = 1; i < T; i++) {
          sink += w(i, 0);
          previous += w(i, i - 1);
        }
        var induction = 0;
        inductionQueries.forEach(function (query) { induction += w(query, earlier[query] + 1); });
        scores.sink[layer].push(T > 1 ? sink / (T - 1) : null);
        scores.previous[layer].push(T > 1 ? previous / (T - 1) : null);
        scores.induction[layer].push(inductionQueries.length ? induction / inductionQueries.length : null);
      }
    }
    return scores;
  }

  function topHeads(table, k) {
    var all = [];
    table.forEach(function (row, layer) {
      row.forEach(function (score, head) { if (score !== null) all.push({ layer: layer, head: head, score: score }); });
    });
    return all.sort(function (a, b) { return b.score - a.score; }).slice(0, k);
  }

  // 10 random tokens (ids 1000 .. 49151, seeded), written twice after <|endoftext|>:
  // interpret.repeated_random_tokens's recipe (JavaScript's own generator, not torch's).
  function repeatedRandomTokens(length, seed) {
    var a = seed >>> 0;
    var copy = [];
    for (var i = 0; i < length; i++) {
      a = (a + 0x6d2b79f5) >>> 0; // mulberry32
      var t = Math.imul(a ^ (a >>> 15), 1 | a);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      copy.push(1000 + (((t ^ (t >>> 14)) >>> 0) % (49152 - 1000)));
    }
    return [0].concat(copy, copy);
  }

  // --- the view --------------------------------------------------------------------------

  function build(root) {
    var live = window.attnlabLive;
    var state = readUrl();
    var result = null; // the last run: {ids, tokens, T, layers, heads, attention, logits, top, ms}
    var scores = null;
    var running = null;

    var status = el("p", { className: "live__status", id: "live-status", "aria-live": "polite" });
    var sizeMb = Math.round((live.modelBytes || 98362432) / 1048576);
    var loadButton = el("button", {
      type: "button", className: "md-button md-button--primary", id: "live-load",
      text: "Load SmolLM2-135M, " + sizeMb + " MB",
    });
    var progress = el("progress", { id: "live-progress", max: "1", value: "0", hidden: "", "aria-label": "Model download" });
    var intro = el("div", { className: "live__intro" }, [status, loadButton, progress]);

    var textArea = el("textarea", { id: "live-text", rows: "3", maxlength: "2000", spellcheck: "false" });
    var runButton = el("button", { type: "button", className: "md-button", id: "live-run", text: "Run" });
    var textLabel = el("label", { for: "live-text", text: "Your text" });
    var form = el("div", { className: "live__form", hidden: "" }, [textLabel, textArea, runButton]);

    function range(id, label) {
      var input = el("input", { type: "range", id: id, min: "0", max: "0", step: "1", value: "0" });
      var out = el("output", { id: id + "-value", for: id });
      return { input: input, out: out, box: el("div", { className: "attn-explorer__control" }, [el("label", { for: id, text: label }), input, out]) };
    }
    var layer = range("live-layer", "Layer");
    var head = range("live-head", "Head");
    var controls = el("div", { className: "attn-explorer__controls" }, [layer.box, head.box]);
    var tokens = el("div", { className: "attn-explorer__tokens", role: "group", "aria-label": "Query token", id: "live-tokens" });
    var captionAndBars = window.attnlabExplorer.captionedBars("live-bars-caption");
    var table = el("table", { className: "attn-explorer__heatmap", id: "live-heatmap" });
    var tableWrap = el("div", {
      className: "attn-explorer__heatmap-wrap", tabindex: "0", role: "region",
      "aria-label": "The head's weight matrix (scrolls sideways)",
    }, [table]);

    var predictionList = el("ol", { className: "live__prediction", id: "live-prediction" });
    var stepButton = el("button", { type: "button", className: "md-button", id: "live-step", text: "Append the likeliest token" });
    var prediction = el("div", { className: "live__box" }, [
      el("h3", { text: "Next token" }), predictionList, stepButton,
    ]);

    var shadeSelect = el("select", { id: "live-shade", className: "attn-explorer__select" });
    [["query", "weight of the query's strongest key"], ["sink", "sink score (weight on token 0)"],
      ["previous", "previous-token score"], ["induction", "induction score"]].forEach(function (o) {
      shadeSelect.appendChild(el("option", { value: o[0], text: o[1] }));
    });
    var modeView = el("input", { type: "radio", name: "live-mode", id: "live-mode-view", value: "view", checked: "" });
    var modeAblate = el("input", { type: "radio", name: "live-mode", id: "live-mode-ablate", value: "ablate" });
    var restoreButton = el("button", { type: "button", className: "md-button", id: "live-restore", text: "Restore all heads" });
    var grid = el("table", { className: "live__heads", id: "live-heads" });
    var gridCaption = el("p", { className: "attn-explorer__caption", id: "live-heads-caption" });
    var overview = el("div", { className: "live__box" }, [
      el("h3", { text: "All heads at once" }),
      el("div", { className: "attn-explorer__controls" }, [
        el("div", { className: "attn-explorer__control" }, [el("label", { for: "live-shade", text: "Shade by" }), shadeSelect]),
        el("fieldset", { className: "live__mode" }, [
          el("legend", { text: "Clicking a head" }),
          modeView, el("label", { for: "live-mode-view", text: "shows it" }),
          modeAblate, el("label", { for: "live-mode-ablate", text: "knocks it out" }),
        ]),
        restoreButton,
      ]),
      gridCaption,
      el("div", { className: "live__heads-wrap" }, [grid]),
    ]);

    var repeatButton = el("button", { type: "button", className: "md-button", id: "live-repeat", text: "Repeated random tokens" });
    var scoreButton = el("button", { type: "button", className: "md-button", id: "live-scores", text: "Score every head" });
    var scoreOut = el("div", { id: "live-score-out", "aria-live": "polite" });
    var experiments = el("div", { className: "live__box" }, [
      el("h3", { text: "Experiments" }),
      el("p", { text: "Repeated random tokens: " + REPEAT_LENGTH + " random tokens written twice, as in " +
        "\u201CWhat trained attention does\u201D; induction heads look, from each token of the second copy, at the " +
        "token after its first occurrence. Score every head: the three measures of that chapter on the current text, " +
        "the five best heads of each." }),
      el("div", { className: "live__buttons" }, [repeatButton, scoreButton]),
      scoreOut,
    ]);
    var timing = el("p", { className: "live__timing", id: "live-timing" });

    var view = el("div", { className: "live__view", hidden: "" }, [
      tokens, controls, captionAndBars[0], captionAndBars[1], tableWrap, prediction, overview, experiments, timing,
    ]);
    root.textContent = "";
    [intro, form, view].forEach(function (node) { root.appendChild(node); });

    // --- rendering --------------------------------------------------------------------

    function renderTokens() {
      tokens.textContent = "";
      result.tokens.forEach(function (token, i) {
        var button = el("button", {
          type: "button", className: "attn-explorer__token", "data-index": String(i),
          "aria-pressed": String(i === state.query), title: "token " + i + ", id " + result.ids[i],
        }, [el("span", { className: "live__index", text: String(i) }), el("span", { text: shown(token) })]);
        tokens.appendChild(button);
      });
    }

    function renderHead() {
      var words = result.tokens.map(shown);
      var w = headWeights(result, state.layer, state.head);
      layer.input.value = String(state.layer);
      head.input.value = String(state.head);
      layer.out.textContent = String(state.layer);
      head.out.textContent = String(state.head);
      layer.input.setAttribute("aria-valuetext", "layer " + state.layer);
      head.input.setAttribute("aria-valuetext", "head " + state.head);
      var off = isAblated(state.ablate, state.layer, state.head) ? " (knocked out: its weights are shown, its output is not used)" : "";
      captionAndBars[0].textContent = "Layer " + state.layer + ", head " + state.head + ": where \u201C" +
        words[state.query].trim() + "\u201D (token " + state.query + ") attends" + off;
      var bars = captionAndBars[1];
      bars.textContent = "";
      for (var j = 0; j <= state.query; j++) {
        var weight = w(state.query, j);
        bars.appendChild(window.attnlabExplorer.bar(
          { className: "attn-bar", role: "listitem", "data-key": String(j) }, j + " " + words[j], weight, weight.toFixed(3), 1));
      }
      window.attnlabExplorer.fillHeatmap(
        table,
        "All of this head's weights: row = query, column = key, tokens counted from 0; later keys are masked (blank). The selected query's row is outlined.",
        words.map(function (word, i) { return i + " " + word; }),
        state.query,
        function (i, k) {
          if (k > i) return { attrs: { className: "is-masked", text: "" }, weight: null };
          var value = w(i, k);
          return { attrs: { text: value.toFixed(2) }, weight: value };
        },
        function (i) { return { "data-query": String(i) }; }
      );
    }

    function renderPrediction() {
      predictionList.textContent = "";
      result.top.forEach(function (entry) {
        predictionList.appendChild(el("li", {}, [
          el("span", { className: "live__token", text: shown(entry.token) }),
          el("span", { className: "live__prob", text: (100 * entry.probability).toFixed(1) + "%" }),
        ]));
      });
      stepButton.disabled = result.T >= live.info.maxTokens;
    }

    function overviewValue(layerIndex, headIndex) {
      if (state.shade && state.shade !== "query") {
        scores = scores || headScores(result);
        var score = scores[state.shade][layerIndex][headIndex];
        return { weight: score === null ? 0 : score, text: score === null ? "\u2013" : score.toFixed(2).replace(/^0/, "") };
      }
      var w = headWeights(result, layerIndex, headIndex);
      var best = 0;
      for (var k = 1; k <= state.query; k++) if (w(state.query, k) > w(state.query, best)) best = k;
      return { weight: w(state.query, best), text: String(best) };
    }

    function renderOverview() {
      var byQuery = !state.shade || state.shade === "query";
      gridCaption.textContent = byQuery
        ? "Each cell is a head (row = layer, column = head): the token that query " + state.query +
          " looks at most, shaded by its weight."
        : "Each cell is a head (row = layer, column = head): its " + shadeSelect.selectedOptions[0].text +
          " on this text, in [0, 1]" + (state.shade === "induction" && scores && scores.induction[0][0] === null
            ? " (no token of this text repeats: try the repeated random tokens)." : ".");
      grid.textContent = "";
      var headRow = el("tr", {}, [el("th", { scope: "col", text: "layer \u2193 head \u2192" })]);
      for (var h = 0; h < result.heads; h++) headRow.appendChild(el("th", { scope: "col", text: String(h) }));
      grid.appendChild(el("thead", {}, [headRow]));
      var body = el("tbody");
      for (var l = 0; l < result.layers; l++) {
        var tr = el("tr", {}, [el("th", { scope: "row", text: String(l) })]);
        for (var h2 = 0; h2 < result.heads; h2++) {
          var value = overviewValue(l, h2);
          var off = isAblated(state.ablate, l, h2);
          var selected = l === state.layer && h2 === state.head;
          var button = el("button", {
            type: "button", className: "live__head" + (off ? " is-ablated" : "") + (selected ? " is-selected" : ""),
            "data-layer": String(l), "data-head": String(h2), "aria-pressed": String(off),
            "aria-label": "layer " + l + ", head " + h2 + (off ? ", knocked out" : "") + ": " + value.text,
            text: off ? "\u00D7" : value.text,
          });
          if (!off) button.style.backgroundColor = shade(value.weight);
          tr.appendChild(el("td", {}, [button]));
        }
        body.appendChild(tr);
      }
      grid.appendChild(body);
      restoreButton.disabled = ablatedPairs(state.ablate).length === 0;
    }

    function render() {
      if (!result) return;
      if (state.query === null || state.query >= result.T) state.query = result.T - 1;
      state.layer = Math.min(state.layer, result.layers - 1);
      state.head = Math.min(state.head, result.heads - 1);
      renderTokens();
      renderHead();
      renderPrediction();
      renderOverview();
      var ablated = ablatedPairs(state.ablate);
      timing.textContent = "Forward pass: " + result.T + " tokens in " + Math.round(result.ms) + " ms (" +
        live.info.kernels + ", in a Web Worker)" +
        (ablated.length ? "; heads knocked out: " + ablated.map(function (p) { return p[0] + "." + p[1]; }).join(", ") : "") + ".";
      writeUrl(state);
    }

    // --- running the model ------------------------------------------------------------

    function setStatus(text) { status.textContent = text; }

    // Tokenise (unless the ids were set directly), run, draw. Runs one at a time; the
    // latest request wins.
    function update() {
      var request = {};
      running = request;
      setStatus("Running the model\u2026");
      var idsPromise = state.idsSetDirectly
        ? live.decode(state.ids).then(function (decoded) { return { ids: state.ids, tokens: decoded.tokens, text: decoded.text }; })
        : live.tokens(state.text);
      return idsPromise.then(function (encoded) {
        if (!encoded.ids.length) throw new Error("the text has no tokens: type something");
        if (encoded.text !== undefined) textArea.value = encoded.text;
        state.ids = encoded.ids;
        return live.run(encoded.ids, { ablate: state.ablate }).then(function (out) {
          if (running !== request) return;
          result = out;
          result.ids = encoded.ids;
          result.tokens = encoded.tokens;
          result.T = encoded.ids.length;
          result.layers = live.info.layers;
          result.heads = live.info.heads;
          scores = null;
          scoreOut.textContent = "";
          setStatus("SmolLM2-135M, computed in this browser: " + result.T + " tokens.");
          render();
        });
      }).catch(function (error) {
        if (running === request) setStatus("Could not run the model: " + error.message);
      });
    }

    function start() {
      loadButton.hidden = true;
      progress.hidden = false;
      setStatus("Loading SmolLM2-135M\u2026");
      live.load({
        onProgress: function (p) {
          progress.max = String(p.total || 1);
          progress.value = String(p.loaded);
          setStatus((p.fromCache ? "Reading the model from this browser's cache: " : "Downloading the model: ") +
            Math.round(p.loaded / 1048576) + " of " + Math.round(p.total / 1048576) + " MB");
        },
      }).then(function (info) {
        progress.hidden = true;
        form.hidden = false;
        view.hidden = false;
        textLabel.textContent = "Your text (up to " + info.maxTokens + " tokens)";
        layer.input.max = String(info.layers - 1);
        head.input.max = String(info.heads - 1);
        textArea.value = state.text;
        state.idsSetDirectly = Boolean(state.ids && state.ids.length);
        setStatus("Model ready (" + (info.fromCache ? "from this browser's cache" : "downloaded") + ", " +
          Math.round(info.loadMs) + " ms).");
        root.dataset.live = "ready";
        return update();
      }).catch(function (error) {
        progress.hidden = true;
        loadButton.hidden = false;
        var memory = /memory|allocation|Array buffer/i.test(error.message);
        setStatus((memory
          ? "This browser could not give the model the memory it needs (about 200 MB). "
          : "The model could not be loaded (" + error.message + "). ") +
          "The precomputed prompts above still work.");
      });
    }

    // --- events -------------------------------------------------------------------------

    loadButton.addEventListener("click", start);
    runButton.addEventListener("click", function () {
      state.text = textArea.value;
      state.idsSetDirectly = false;
      state.query = null;
      update();
    });
    textArea.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) runButton.click();
    });
    tokens.addEventListener("click", function (event) {
      var button = event.target.closest(".attn-explorer__token");
      if (!button) return;
      state.query = Number(button.dataset.index);
      render();
    });
    layer.input.addEventListener("input", function () { state.layer = Number(layer.input.value); render(); });
    head.input.addEventListener("input", function () { state.head = Number(head.input.value); render(); });
    shadeSelect.addEventListener("change", function () { state.shade = shadeSelect.value; render(); });
    grid.addEventListener("click", function (event) {
      var button = event.target.closest(".live__head");
      if (!button) return;
      var l = Number(button.dataset.layer);
      var h = Number(button.dataset.head);
      if (modeAblate.checked) {
        toggleHead(state.ablate, l, h);
        update();
      } else {
        state.layer = l;
        state.head = h;
        render();
      }
    });
    restoreButton.addEventListener("click", function () { state.ablate = {}; update(); });
    stepButton.addEventListener("click", function () {
      if (!result) return;
      state.ids = result.ids.concat([result.top[0].id]);
      state.idsSetDirectly = true;
      state.query = null;
      update();
    });
    var repeatSeed = 0; // each click draws new tokens; the first draw is always the same
    repeatButton.addEventListener("click", function () {
      state.ids = repeatedRandomTokens(REPEAT_LENGTH, repeatSeed++);
      state.idsSetDirectly = true;
      state.layer = 18;
      state.head = 6;
      state.query = REPEAT_LENGTH + 3; // the second copy's third token
      state.shade = "induction";
      shadeSelect.value = "induction";
      update();
    });
    scoreButton.addEventListener("click", function () {
      if (!result) return;
      scores = scores || headScores(result);
      scoreOut.textContent = "";
      [["sink", "Sink (weight on token 0)"], ["previous", "Previous token"], ["induction", "Induction"]].forEach(function (m) {
        var best = topHeads(scores[m[0]], 5);
        scoreOut.appendChild(el("p", {
          className: "live__scores", "data-score": m[0],
          text: m[1] + ": " + (best.length
            ? best.map(function (b) { return "layer " + b.layer + " head " + b.head + " (" + b.score.toFixed(2) + ")"; }).join(", ")
            : "no token of this text repeats, so there is nothing to measure"),
        }));
      });
    });

    // --- first view -----------------------------------------------------------------------

    var reason = live.unavailableReason();
    if (reason) {
      loadButton.hidden = true;
      setStatus(reason + " The precomputed prompts above still work.");
      root.dataset.live = "unavailable";
      return;
    }
    setStatus("Nothing is downloaded until you ask: the model is " + sizeMb + " MB (" +
      (live.modelBytes || 0).toLocaleString("en") + " bytes), then kept in this browser's cache for the next visit. " +
      "Phones can run it too, with about 200 MB of memory to spare.");
    root.dataset.live = "idle";
    // A shared view (state in the URL) opens by itself when the model is already cached.
    if (state.fromUrl && typeof caches !== "undefined") {
      caches.open("attnlab-live-v1").then(function (cache) { return cache.match(live.modelUrl); })
        .then(function (hit) { if (hit) start(); })
        .catch(function () {});
    }
  }

  function init() {
    var root = document.getElementById("live-explorer");
    if (!root || root.dataset.live || !window.attnlabLive || !window.attnlabExplorer) return;
    build(root);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
  if (typeof document$ !== "undefined") document$.subscribe(init);
})();
