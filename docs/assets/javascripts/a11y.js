// @ts-check
// Small accessibility repairs to markup that Material and mkdocs-jupyter generate,
// found by the axe-core browser tests (tests/browser):
//
// - Material's search overlay is a role="dialog" without a name: name it.
// - Material's code-annotation markers are links whose number is drawn by CSS, so
//   they have no text for a screen reader: label them.
// - Boxes that scroll sideways (wide tables, wide formulas, notebook cells) must be
//   reachable by keyboard to be scrolled: make the ones that overflow focusable.
//
// Runs on every page load and instant-navigation swap (Material's document$), and
// again when the content changes (annotations are mounted and moved by Material).
(function () {
  "use strict";

  const SCROLLERS =
    ".md-typeset__scrollwrap, .katex-display, .highlight-ipynb, " +
    ".jp-OutputArea-output, .jp-RenderedText, .md-typeset pre";
  const FOCUSABLE = "a[href], button, input, select, textarea, [tabindex]";

  /** @param {Element} el @returns {boolean} whether the box overflows and scrolls */
  function scrolls(el) {
    const style = getComputedStyle(el);
    const x = /(auto|scroll)/.test(style.overflowX) && el.scrollWidth > el.clientWidth + 1;
    const y = /(auto|scroll)/.test(style.overflowY) && el.scrollHeight > el.clientHeight + 1;
    return x || y;
  }

  function repair() {
    const search = document.querySelector('.md-search[role="dialog"]');
    if (search && !search.hasAttribute("aria-label")) search.setAttribute("aria-label", "Search");

    document.querySelectorAll("a.md-annotation__index").forEach(function (link) {
      if (link.hasAttribute("aria-label")) return;
      const marker = link.querySelector("[data-md-annotation-id]");
      const id = marker ? marker.getAttribute("data-md-annotation-id") : "";
      link.setAttribute("aria-label", "Code annotation " + id);
    });

    document.querySelectorAll(SCROLLERS).forEach(function (el) {
      if (el.hasAttribute("tabindex") || !scrolls(el)) return;
      if (el.querySelector(FOCUSABLE)) return;
      el.setAttribute("tabindex", "0");
    });
  }

  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    setTimeout(function () {
      pending = false;
      repair();
    }, 50);
  }

  function start() {
    repair();
    const content = document.querySelector(".md-content");
    if (content instanceof HTMLElement && !content.dataset.a11yObserved) {
      content.dataset.a11yObserved = "true";
      new MutationObserver(schedule).observe(content, { childList: true, subtree: true });
    }
  }

  if (typeof document$ !== "undefined") {
    document$.subscribe(start);
  } else if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
  window.addEventListener("load", schedule);
  window.addEventListener("resize", schedule);
})();
