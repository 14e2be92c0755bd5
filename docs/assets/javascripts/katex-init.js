// Render math with the vendored KaTeX (no network needed).
//
// Material's `document$` observable emits on the first load and after every
// instant-navigation page swap, so math renders on every page either way.
(function () {
  "use strict";

  var DELIMITERS = [
    { left: "$$", right: "$$", display: true },
    { left: "\\[", right: "\\]", display: true },
    { left: "\\(", right: "\\)", display: false },
    { left: "$", right: "$", display: false },
  ];

  // pymdownx.arithmatex (generic: true) wraps each formula in an element with
  // class "arithmatex" whose text is "\(...\)" (inline) or "\[...\]" (block).
  function renderArithmatex(root) {
    root.querySelectorAll(".arithmatex").forEach(function (el) {
      if (el.dataset.katexRendered) return;
      var tex = el.textContent.trim();
      var display = tex.startsWith("\\[");
      if (tex.startsWith("\\(") || display) tex = tex.slice(2, -2);
      katex.render(tex, el, { displayMode: display, throwOnError: false });
      el.dataset.katexRendered = "true";
    });
  }

  // Notebook pages (mkdocs-jupyter) keep the notebook's raw $...$ / $$...$$.
  function renderNotebooks(root) {
    root.querySelectorAll(".jupyter-wrapper").forEach(function (wrapper) {
      renderMathInElement(wrapper, {
        delimiters: DELIMITERS,
        ignoredClasses: ["arithmatex"],
        throwOnError: false,
      });
    });
  }

  function renderAll() {
    renderArithmatex(document);
    renderNotebooks(document);
  }

  if (typeof document$ !== "undefined") {
    document$.subscribe(renderAll);
  } else {
    document.addEventListener("DOMContentLoaded", renderAll);
  }
})();
