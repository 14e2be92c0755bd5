// @ts-check
// eslint's settings for the site's JavaScript and its Node tests (flat config).
// `npx eslint docs/assets/javascripts tests/js`; `make lint` and tests/js/test_js_lint.py run it.
import js from "@eslint/js";
import globals from "globals";

export default [
  { ignores: ["node_modules/", "site/", "docs/assets/vendor/", ".cache/"] },
  js.configs.recommended,
  {
    languageOptions: { ecmaVersion: 2023, sourceType: "module" },
    linterOptions: { reportUnusedDisableDirectives: "error" },
    rules: {
      "no-unused-vars": ["error", { args: "after-used", argsIgnorePattern: "^_", caughtErrors: "none" }],
      "no-var": "error",
      "prefer-const": "error",
      eqeqeq: ["error", "always"],
      "no-implicit-globals": "error",
      // more than three arguments go in one options object (the conventions)
      "max-params": ["error", 3],
      "no-shadow": "off",
    },
  },
  {
    files: ["docs/assets/javascripts/**/*.js"],
    languageOptions: { globals: { ...globals.browser, ...globals.worker, document$: "readonly" } },
  },
  {
    // Classic scripts on every page: they must run from file://, where browsers load no module.
    files: [
      "docs/assets/javascripts/a11y.js",
      "docs/assets/javascripts/figure-zoom.js",
      "docs/assets/javascripts/katex-init.js",
      "docs/assets/javascripts/notebook-download.js",
    ],
    languageOptions: { sourceType: "script", globals: { katex: "readonly", renderMathInElement: "readonly" } },
  },
  {
    // Numeric kernels called per block, row or vector in the hottest loops keep positional
    // arguments: an options object would be allocated on every call.
    files: [
      "docs/assets/javascripts/live/quants.js",
      "docs/assets/javascripts/live/jskernels.js",
      "docs/assets/javascripts/live/kernels.js",
      "docs/assets/javascripts/live/threads.js",
      "docs/assets/javascripts/live/wasm-module.js",
      "docs/assets/javascripts/live/layers/rotary.js",
    ],
    rules: { "max-params": "off" },
  },
  {
    files: ["tests/js/**/*.mjs", "eslint.config.js"],
    languageOptions: { globals: { ...globals.node } },
    rules: { "max-params": "off" }, // test helpers (assertClose(actual, expected, tolerance, what))
  },
];
