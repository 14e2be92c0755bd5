// @ts-check
// "Download as notebook" from the copy on disk (file://).
//
// Served over HTTP, the button is a plain link with a `download` attribute and needs no
// script. Opened from file://, Chromium ignores `download` and shows the notebook as raw
// JSON, and a page cannot read another file with fetch. So, from file:// only, a click
// loads the notebook's twin script `<name>.ipynb.js` (written beside it by
// hooks/chapter_notebooks.py; a <script> may load from file://), which registers the
// notebook's text in window.attnlabNotebooks, and saves that text as a file.
(function () {
  "use strict";

  if (location.protocol !== "file:") return;

  /** @param {string} name @param {string} text */
  function save(name, text) {
    const url = URL.createObjectURL(new Blob([text], { type: "application/x-ipynb+json" }));
    const link = document.createElement("a");
    link.href = url;
    link.download = name;
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(function () { URL.revokeObjectURL(url); }, 1000);
  }

  /** @param {HTMLAnchorElement} link */
  function load(link) {
    const name = link.getAttribute("download") || "";
    const known = window.attnlabNotebooks && window.attnlabNotebooks[name];
    if (known) return save(name, known);
    const script = document.createElement("script");
    script.src = link.href + ".js";
    script.onload = function () {
      script.remove();
      save(name, (window.attnlabNotebooks || {})[name] || "");
    };
    script.onerror = function () {
      script.remove();
      location.href = link.href; // no twin script: show the file as the browser would
    };
    document.head.appendChild(script);
  }

  document.addEventListener("click", function (event) {
    const link = event.target instanceof Element && event.target.closest('a[download$=".ipynb"]');
    if (!(link instanceof HTMLAnchorElement) || link.protocol !== "file:") return; // not the saving link save() clicks (blob:)
    event.preventDefault();
    load(link);
  });
})();
