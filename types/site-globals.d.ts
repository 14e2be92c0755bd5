// Types of the globals the site's scripts use but do not define (tsconfig.json includes
// this file; it is not part of the site). Checked by `npx tsc --noEmit -p tsconfig.json`.

/** Material for MkDocs' observable: emits the document on every page load. */
declare const document$: { subscribe(callback: () => void): unknown } | undefined;

/** The vendored KaTeX (assets/vendor/katex/katex.min.js). */
declare const katex: {
  render(tex: string, element: Element, options: { displayMode: boolean; throwOnError: boolean }): void;
};

/** KaTeX's auto-render extension (assets/vendor/katex/contrib/auto-render.min.js). */
declare function renderMathInElement(
  element: Element,
  options: {
    delimiters: { left: string; right: string; display: boolean }[];
    ignoredClasses: string[];
    throwOnError: boolean;
  },
): void;

interface Window {
  /** Notebooks' texts by file name, registered by their `<name>.ipynb.js` twins (file:// only). */
  attnlabNotebooks?: Record<string, string>;
  /** The explorer page's live-model API (live/api.js), for readers' console and the tests. */
  attnlabLive?: import("../docs/assets/javascripts/live/api.js").LiveApi;
}
