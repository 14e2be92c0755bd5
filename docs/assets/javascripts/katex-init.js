// @ts-check
// Render math with the vendored KaTeX (no network needed).
//
// Material's `document$` observable emits on the first load and after every
// instant-navigation page swap, so math renders on every page either way.
(function () {
  "use strict";

  const DELIMITERS = [
    { left: "$$", right: "$$", display: true },
    { left: "\\[", right: "\\]", display: true },
    { left: "\\(", right: "\\)", display: false },
    { left: "$", right: "$", display: false },
  ];

  // pymdownx.arithmatex (generic: true) wraps each formula in an element with
  // class "arithmatex" whose text is "\(...\)" (inline) or "\[...\]" (block).
  /** @param {ParentNode} root */
  function renderArithmatex(root) {
    root.querySelectorAll(".arithmatex").forEach(function (el) {
      if (!(el instanceof HTMLElement) || el.dataset.katexRendered) return;
      let tex = (el.textContent || "").trim();
      const display = tex.startsWith("\\[");
      if (tex.startsWith("\\(") || display) tex = tex.slice(2, -2);
      katex.render(tex, el, { displayMode: display, throwOnError: false });
      el.dataset.katexRendered = "true";
    });
  }

  // Notebook pages (mkdocs-jupyter) keep the notebook's raw $...$ / $$...$$.
  /** @param {ParentNode} root */
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
