// The interactive attention explorer (docs/explorer.md).
//
// It only *draws*: every weight comes from assets/explorer-data.json, which the
// build hook hooks/explorer.py writes from explorer_data() (hooks/explorer_data.py). No
// attention arithmetic happens here, so the page cannot disagree with the package.
//
// Plain JavaScript, no dependencies. A no-op on pages without #attention-explorer.
// Works with Material's instant navigation (document$) and without it.
(function () {
  "use strict";

  // Heatmap shading: sqrt(weight) x 60 % of the explorer's colour, so small weights
  // still show and the cell text stays readable at weight 1 in both schemes.
  var HEAT_MAX = 60;

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) {
      if (name === "text") node.textContent = attrs[name];
      else if (name === "className") node.className = attrs[name];
      else node.setAttribute(name, attrs[name]);
    });
    (children || []).forEach(function (child) {
      node.appendChild(child);
    });
    return node;
  }

  function formatTemperature(t) {
    return String(t);
  }

  // A live caption and the list of bars it labels (one bar a key).
  function captionedBars(captionId) {
    return [
      el("p", { className: "attn-explorer__caption", id: captionId, "aria-live": "polite" }),
      el("div", { className: "attn-explorer__bars", role: "list", "aria-labelledby": captionId }),
    ];
  }

  // One key's bar: its label, a track filled to the weight (widthDigits after the point
  // in the CSS percentage), and the weight as text.
  function bar(attrs, label, weight, text, widthDigits) {
    var fill = el("span", { className: "attn-bar__fill" });
    fill.style.width = (100 * weight).toFixed(widthDigits) + "%";
    return el("div", attrs, [
      el("span", { className: "attn-bar__word", text: label }),
      el("span", { className: "attn-bar__track", "aria-hidden": "true" }, [fill]),
      el("span", { className: "attn-bar__value", text: text }),
    ]);
  }

  // The weight matrix as a table: row = query, column = key, the selected query's row
  // outlined. cell(i, j) gives the cell's attributes and the weight that shades it
  // (null: no shading); rowAttrs(i), if given, adds attributes to row i.
  function fillHeatmap(table, captionText, words, selected, cell, rowAttrs) {
    table.textContent = "";
    table.appendChild(el("caption", { text: captionText }));
    var headRow = el("tr", {}, [el("th", { scope: "col", text: "query \u2193 key \u2192" })]);
    words.forEach(function (word) {
      headRow.appendChild(el("th", { scope: "col", text: word }));
    });
    table.appendChild(el("thead", {}, [headRow]));
    var body = el("tbody");
    words.forEach(function (word, i) {
      var attrs = { className: i === selected ? "is-selected" : "" };
      if (rowAttrs) Object.assign(attrs, rowAttrs(i));
      var tr = el("tr", attrs);
      tr.appendChild(el("th", { scope: "row", text: word }));
      words.forEach(function (_, j) {
        var shaded = cell(i, j);
        var td = el("td", shaded.attrs);
        if (shaded.weight !== null) {
          var pct = Math.round(Math.sqrt(shaded.weight) * HEAT_MAX);
          td.style.backgroundColor =
            "color-mix(in srgb, var(--attn-color) " + pct + "%, transparent)";
        }
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    table.appendChild(body);
  }

  function build(root, data) {
    var decimals = data.decimals;
    var temps = data.temperatures;
    var state = {
      sentence: 0,
      query: 1,
      scaled: false,
      causal: false,
      temp: temps.indexOf(1) >= 0 ? temps.indexOf(1) : 0,
    };

    // --- controls -------------------------------------------------------
    var select = el("select", { id: "attn-sentence", className: "attn-explorer__select" });
    data.sentences.forEach(function (sentence, i) {
      select.appendChild(el("option", { value: String(i), text: sentence.text }));
    });
    var scaled = el("input", { type: "checkbox", id: "attn-scaled" });
    var causal = el("input", { type: "checkbox", id: "attn-causal" });
    var temp = el("input", {
      type: "range",
      id: "attn-temperature",
      min: "0",
      max: String(temps.length - 1),
      step: "1",
      value: String(state.temp),
    });
    var tempOut = el("output", { id: "attn-temperature-value", for: "attn-temperature" });

    var controls = el("div", { className: "attn-explorer__controls" }, [
      el("div", { className: "attn-explorer__control" }, [
        el("label", { for: "attn-sentence", text: "Sentence" }),
        select,
      ]),
      el("div", { className: "attn-explorer__control attn-explorer__switch" }, [
        scaled,
        el("label", { for: "attn-scaled", text: "Scale scores by 1/\u221Ad\u2096" }),
      ]),
      el("div", { className: "attn-explorer__control attn-explorer__switch" }, [
        causal,
        el("label", { for: "attn-causal", text: "Causal mask" }),
      ]),
      el("div", { className: "attn-explorer__control" }, [
        el("label", { for: "attn-temperature", text: "Softmax temperature" }),
        temp,
        tempOut,
      ]),
    ]);

    var info = el("p", { className: "attn-explorer__info", id: "attn-info" });
    var tokens = el("div", {
      className: "attn-explorer__tokens",
      role: "toolbar",
      "aria-label": "Query token (arrow keys move, Enter or Space selects)",
    });
    var captionAndBars = captionedBars("attn-bars-caption");
    var caption = captionAndBars[0];
    var bars = captionAndBars[1];
    var table = el("table", { className: "attn-explorer__heatmap" });
    var tableWrap = el("div", { className: "attn-explorer__heatmap-wrap" }, [table]);

    root.textContent = "";
    [controls, info, tokens, caption, bars, tableWrap].forEach(function (node) {
      root.appendChild(node);
    });

    // --- rendering --------------------------------------------------------
    function current() {
      var sentence = data.sentences[state.sentence];
      var matrix =
        sentence.weights[state.scaled ? "scaled" : "unscaled"][state.causal ? "causal" : "full"][
          state.temp
        ];
      return { sentence: sentence, matrix: matrix };
    }

    function masked(i, j) {
      return state.causal && j > i;
    }

    function renderTokens(sentence) {
      tokens.textContent = "";
      sentence.words.forEach(function (word, i) {
        var button = el("button", {
          type: "button",
          className: "attn-explorer__token",
          "data-index": String(i),
          "aria-pressed": i === state.query ? "true" : "false",
          tabindex: i === state.query ? "0" : "-1",
          text: word,
        });
        tokens.appendChild(button);
      });
    }

    function renderBars(sentence, row) {
      bars.textContent = "";
      row.forEach(function (weight, j) {
        var attrs = {
          className: "attn-bar" + (masked(state.query, j) ? " attn-bar--masked" : ""),
          role: "listitem",
          "data-key": String(j),
        };
        bars.appendChild(bar(attrs, sentence.words[j], weight, weight.toFixed(decimals), 2));
      });
    }

    function renderTable(sentence, matrix) {
      fillHeatmap(
        table,
        "All attention weights: row = query (who looks), column = key (looked at). " +
          "Each row sums to 1; stronger shading means more weight; the selected query's row " +
          "is outlined.",
        sentence.words,
        state.query,
        function (i, j) {
          var weight = matrix[i][j];
          var attrs = { className: masked(i, j) ? "is-masked" : "", text: weight.toFixed(decimals) };
          return { attrs: attrs, weight: weight };
        },
        function (i) {
          return { "data-query": String(i) };
        }
      );
    }

    function render() {
      var cur = current();
      var sentence = cur.sentence;
      if (state.query >= sentence.words.length) state.query = 0;
      select.value = String(state.sentence);
      scaled.checked = state.scaled;
      causal.checked = state.causal;
      temp.value = String(state.temp);
      tempOut.textContent = formatTemperature(temps[state.temp]);
      temp.setAttribute("aria-valuetext", "temperature " + formatTemperature(temps[state.temp]));
      var scale = state.scaled ? "1/\u221A" + sentence.d_k : "1";
      info.textContent =
        sentence.description +
        ". Weights = softmax(scores \u00D7 " +
        scale +
        " / " +
        formatTemperature(temps[state.temp]) +
        ")" +
        (state.causal ? ", later tokens masked." : ".");
      renderTokens(sentence);
      caption.textContent =
        "Where \u201C" +
        sentence.words[state.query] +
        "\u201D (token " +
        state.query + // counted from zero, as in the code
        ") attends";
      renderBars(sentence, cur.matrix[state.query]);
      renderTable(sentence, cur.matrix);
    }

    function selectQuery(i, focus) {
      state.query = i;
      render();
      if (focus) {
        var button = tokens.querySelector('[data-index="' + i + '"]');
        if (button) button.focus();
      }
    }

    // --- events -----------------------------------------------------------
    select.addEventListener("change", function () {
      state.sentence = Number(select.value);
      render();
    });
    scaled.addEventListener("change", function () {
      state.scaled = scaled.checked;
      render();
    });
    causal.addEventListener("change", function () {
      state.causal = causal.checked;
      render();
    });
    temp.addEventListener("input", function () {
      state.temp = Number(temp.value);
      render();
    });
    tokens.addEventListener("click", function (event) {
      var button = event.target.closest(".attn-explorer__token");
      if (button) selectQuery(Number(button.dataset.index), true);
    });
    tokens.addEventListener("keydown", function (event) {
      var button = event.target.closest(".attn-explorer__token");
      if (!button) return;
      var count = tokens.children.length;
      var i = Number(button.dataset.index);
      var next = null;
      if (event.key === "ArrowRight" || event.key === "ArrowDown") next = (i + 1) % count;
      else if (event.key === "ArrowLeft" || event.key === "ArrowUp") next = (i - 1 + count) % count;
      else if (event.key === "Home") next = 0;
      else if (event.key === "End") next = count - 1;
      if (next === null) return;
      event.preventDefault();
      // Arrows move the focus (roving tabindex); Enter or Space then selects.
      Array.prototype.forEach.call(tokens.children, function (other) {
        other.setAttribute("tabindex", "-1");
      });
      var target = tokens.children[next];
      target.setAttribute("tabindex", "0");
      target.focus();
    });

    render();
    root.dataset.ready = "true";
  }

  // --- the trained recall model (docs/explorer.md#recall) -----------------
  function bars(weights, keys, values, decimals) {
    return weights.map(function (weight, j) {
      var attrs = { className: "attn-bar", role: "listitem" };
      return bar(attrs, keys[j] + ":" + values[j], weight, weight.toFixed(decimals), 1);
    });
  }

  function buildRecall(root, data) {
    var recall = data.recall;
    var state = { sequence: 0, question: 0 };
    var select = el("select", { id: "recall-sequence", className: "attn-explorer__select" });
    recall.sequences.forEach(function (sequence, i) {
      var pairs = sequence.keys.map(function (key, j) {
        return key + ":" + sequence.values[j];
      });
      select.appendChild(el("option", { value: String(i), text: pairs.join(" ") }));
    });
    var questions = el("div", {
      className: "attn-explorer__tokens",
      role: "group",
      "aria-label": "Question: the key to look up",
    });
    var out = el("div", { "aria-live": "polite" });
    root.textContent = "";
    root.appendChild(
      el("div", { className: "attn-explorer__controls" }, [
        el("div", { className: "attn-explorer__control" }, [
          el("label", { for: "recall-sequence", text: "Stored pairs" }),
          select,
        ]),
      ])
    );
    root.appendChild(questions);
    root.appendChild(out);

    function render() {
      var sequence = recall.sequences[state.sequence];
      var q = sequence.questions[state.question];
      questions.textContent = "";
      sequence.questions.forEach(function (question, i) {
        var button = el("button", {
          type: "button",
          className: "attn-explorer__token",
          "aria-pressed": String(i === state.question),
          text: question.key + "?",
        });
        button.addEventListener("click", function () {
          state.question = i;
          render();
        });
        questions.appendChild(button);
      });
      out.textContent = "";
      [
        ["Untrained model", q.before, q.answer_before],
        ["Trained model", q.after, q.answer_after],
      ].forEach(function (row) {
        var verdict = row[2] === q.target ? "right" : "wrong";
        out.appendChild(
          el("p", {
            className: "attn-explorer__caption",
            text: row[0] + ": answers " + row[2] + " (" + verdict + "; the stored value is " +
              q.target + ")",
          })
        );
        out.appendChild(
          el("div", { role: "list", className: "recall-bars" },
            bars(row[1], sequence.keys, sequence.values, data.decimals))
        );
      });
    }

    select.addEventListener("change", function () {
      state.sequence = Number(select.value);
      state.question = 0;
      render();
    });
    render();
    root.dataset.ready = "true";
  }

  // --- the real model, SmolLM2 (docs/explorer.md#llm) ---------------------------
  // data.llm.prompts[p].weights[layer][head][query] is the row over keys 0..query,
  // stored as integers in units of 1 / data.llm.scale.
  function buildLlm(root, data) {
    var llm = data.llm;
    var scale = llm.scale;
    var decimals = llm.decimals;
    var state = { prompt: 0, layer: 18, head: 6, query: 0 };
    state.query = llm.prompts[0].tokens.length - 1;

    function range(id, max, value) {
      return el("input", {
        type: "range",
        id: id,
        min: "0",
        max: String(max),
        step: "1",
        value: String(value),
      });
    }
    var select = el("select", { id: "llm-prompt", className: "attn-explorer__select" });
    llm.prompts.forEach(function (prompt, i) {
      select.appendChild(el("option", { value: String(i), text: prompt.text }));
    });
    var layer = range("llm-layer", llm.layers - 1, state.layer);
    var layerOut = el("output", { id: "llm-layer-value", for: "llm-layer" });
    var head = range("llm-head", llm.heads - 1, state.head);
    var headOut = el("output", { id: "llm-head-value", for: "llm-head" });
    var controls = el("div", { className: "attn-explorer__controls" }, [
      el("div", { className: "attn-explorer__control" }, [
        el("label", { for: "llm-prompt", text: "Prompt" }),
        select,
      ]),
      el("div", { className: "attn-explorer__control" }, [
        el("label", { for: "llm-layer", text: "Layer" }),
        layer,
        layerOut,
      ]),
      el("div", { className: "attn-explorer__control" }, [
        el("label", { for: "llm-head", text: "Head" }),
        head,
        headOut,
      ]),
    ]);
    var tokens = el("div", {
      className: "attn-explorer__tokens",
      role: "group",
      "aria-label": "Query token",
    });
    var captionAndBars = captionedBars("llm-bars-caption");
    var caption = captionAndBars[0];
    var bars = captionAndBars[1];
    var table = el("table", { className: "attn-explorer__heatmap" });
    root.textContent = "";
    // The matrix can be wider than the page: its scrolling box takes the keyboard focus.
    var tableWrap = el(
      "div",
      {
        className: "attn-explorer__heatmap-wrap",
        tabindex: "0",
        role: "region",
        "aria-label": "The head's weight matrix (scrolls sideways)",
      },
      [table]
    );
    [controls, tokens, caption, bars, tableWrap].forEach(function (node) {
      root.appendChild(node);
    });

    function shown(token) {
      return token.replace(/\n/g, "\u21B5");
    }

    function render() {
      var prompt = llm.prompts[state.prompt];
      var words = prompt.tokens.map(shown);
      if (state.query >= words.length) state.query = words.length - 1;
      var matrix = prompt.weights[state.layer][state.head];
      select.value = String(state.prompt);
      layer.value = String(state.layer);
      head.value = String(state.head);
      layerOut.textContent = String(state.layer);
      headOut.textContent = String(state.head);
      layer.setAttribute("aria-valuetext", "layer " + state.layer);
      head.setAttribute("aria-valuetext", "head " + state.head);

      tokens.textContent = "";
      words.forEach(function (word, i) {
        var button = el("button", {
          type: "button",
          className: "attn-explorer__token",
          "aria-pressed": String(i === state.query),
          text: word,
        });
        button.addEventListener("click", function () {
          state.query = i;
          render();
        });
        tokens.appendChild(button);
      });

      caption.textContent =
        "Layer " + state.layer + ", head " + state.head + ": where \u201C" +
        words[state.query].trim() + "\u201D (token " + state.query + ") attends";
      bars.textContent = "";
      matrix[state.query].forEach(function (value, j) {
        var weight = value / scale;
        var attrs = { className: "attn-bar", role: "listitem" };
        bars.appendChild(bar(attrs, words[j], weight, weight.toFixed(decimals), 1));
      });

      fillHeatmap(
        table,
        "All of this head's weights: row = query, column = key; later keys are " +
          "masked (blank). The selected query's row is outlined.",
        words,
        state.query,
        function (i, j) {
          if (j > i) return { attrs: { className: "is-masked", text: "" }, weight: null };
          var weight = matrix[i][j] / scale;
          return { attrs: { text: weight.toFixed(2) }, weight: weight };
        }
      );
    }

    select.addEventListener("change", function () {
      state.prompt = Number(select.value);
      state.query = llm.prompts[state.prompt].tokens.length - 1;
      render();
    });
    layer.addEventListener("input", function () {
      state.layer = Number(layer.value);
      render();
    });
    head.addEventListener("input", function () {
      state.head = Number(head.value);
      render();
    });
    render();
    root.dataset.ready = "true";
  }

  // The data is inlined by the build when it can be (works from file://); else fetched.
  function loadData(link) {
    var inline = document.getElementById("explorer-data");
    if (inline) return Promise.resolve(JSON.parse(inline.textContent));
    return fetch(link.href).then(function (response) {
      if (!response.ok) throw new Error("HTTP " + response.status + " for " + link.href);
      return response.json();
    });
  }

  function init() {
    var root = document.getElementById("attention-explorer");
    var recallRoot = document.getElementById("recall-explorer");
    var llmRoot = document.getElementById("llm-explorer");
    var roots = [root, recallRoot, llmRoot];
    if (roots.every(function (node) { return !node || node.dataset.ready; })) return;
    var link = document.getElementById("explorer-data-link");
    if (!link) {
      (root || recallRoot || llmRoot).textContent =
        "The explorer's data link is missing from this page.";
      return;
    }
    loadData(link)
      .then(function (data) {
        if (root && !root.dataset.ready) build(root, data);
        if (recallRoot && !recallRoot.dataset.ready) buildRecall(recallRoot, data);
        if (llmRoot && !llmRoot.dataset.ready) buildLlm(llmRoot, data);
      })
      .catch(function (error) {
        roots.forEach(function (node) {
          if (node) node.textContent = "Could not load the explorer's data: " + error.message;
        });
      });
  }

  // The drawing helpers, shared with the live model's view (live/ui/draw.js), so both draw alike.
  window.attnlabExplorer = { el: el, bar: bar, captionedBars: captionedBars };

  if (typeof document$ !== "undefined") {
    document$.subscribe(init);
  } else if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
