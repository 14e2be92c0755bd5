// @ts-check
// Figures open full size on a tap (or a click, or Enter on the focused figure).
//
// hooks/figures.py wraps each figure image in a link to its own SVG (the light one in
// the light scheme, the dark one in the dark scheme). On a phone the page scales a figure
// down to the screen width, its text with it; this opens the same SVG at its drawn size
// in a dialog over the page, in the page's own colours (so the dark figure, drawn for a
// dark page, sits on one), scrollable both ways. Escape, the Close button or a tap
// beside the figure closes it. Without JavaScript the link opens the SVG itself.
// A notebook page's plots (mkdocs-jupyter's output images) get the same link here.
//
// Plain JavaScript, no dependencies, nothing loaded from another host. One listener on
// the document, so it works with Material's instant navigation and without it.
(function () {
  "use strict";

  const ZOOM_LINK = "a.figure-zoom";
  const NOTEBOOK_PLOTS = ".jupyter-wrapper .jp-RenderedImage img";

  // Wrap each notebook plot not yet in a link in one to its own image.
  function linkNotebookPlots() {
    document.querySelectorAll(NOTEBOOK_PLOTS).forEach(function (image) {
      if (image.closest("a") || !image.parentNode) return;
      const link = document.createElement("a");
      link.className = "figure-zoom";
      link.href = image.getAttribute("src") || "";
      image.parentNode.insertBefore(link, image);
      link.appendChild(image);
    });
  }

  function buildDialog() {
    const dialog = document.createElement("dialog");
    dialog.className = "figure-zoom__dialog";
    dialog.setAttribute("aria-label", "Figure at full size");

    const close = document.createElement("button");
    close.type = "button";
    close.className = "figure-zoom__close";
    close.textContent = "Close";
    close.addEventListener("click", function () {
      dialog.close();
    });

    const frame = document.createElement("div");
    frame.className = "figure-zoom__frame";
    frame.tabIndex = 0; // it scrolls: arrow keys pan a figure wider than the screen
    const image = document.createElement("img");
    image.className = "figure-zoom__image";
    frame.appendChild(image);

    dialog.appendChild(close);
    dialog.appendChild(frame);
    // a tap on the backdrop or beside the figure (not on it) closes the dialog
    dialog.addEventListener("click", function (event) {
      if (event.target === dialog || event.target === frame) dialog.close();
    });
    document.body.appendChild(dialog);
    return dialog;
  }

  /** @returns {HTMLDialogElement} */
  function dialogFor() {
    const dialog = document.querySelector("dialog.figure-zoom__dialog");
    return dialog instanceof HTMLDialogElement ? dialog : buildDialog();
  }

  /** @param {HTMLAnchorElement} link */
  function open(link) {
    const dialog = dialogFor();
    const image = dialog.querySelector("img.figure-zoom__image");
    const shown = link.querySelector("img");
    if (!(image instanceof HTMLImageElement)) return;
    image.src = link.href;
    image.alt = shown ? shown.alt : "";
    if (!dialog.open) dialog.showModal();
    dialog.querySelector(".figure-zoom__frame")?.scrollTo(0, 0);
  }

  document.addEventListener("click", function (event) {
    if (event.defaultPrevented || event.button !== 0) return;
    if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    const link = event.target instanceof Element ? event.target.closest(ZOOM_LINK) : null;
    if (!(link instanceof HTMLAnchorElement) || typeof HTMLDialogElement === "undefined") return;
    event.preventDefault();
    open(link);
  });

  if (typeof document$ !== "undefined") {
    document$.subscribe(linkNotebookPlots); // Material: every page load, instant or not
  } else if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", linkNotebookPlots);
  } else {
    linkNotebookPlots();
  }
})();
