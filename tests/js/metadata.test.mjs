// @ts-check
// The metadata cases under Node's test runner: each small GGUF file of
// tests/llama/metadata_cases.py read by the page's family reader (families/index.js:
// config and tensors, then the tokenizer), against what attnlab.llama's load_gguf gave:
// the same config, field for field, or a refusal with the package's words. Run by
// tests/js/test_node_metadata.py, which passes METADATA_REFERENCE: a JSON file of cases
// {name, file, config} or {name, file, refusal (the package's message), expected (the
// part of it every language must say)}.
import test from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { requiredEnv } from "./env.mjs";

const LIVE = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "docs", "assets", "javascripts", "live");
/** @param {string} name */
const load = (name) => import(path.join(LIVE, name));
const { readGguf } = await load("gguf.js");
const { familyOf } = await load("families/index.js");
const { Tokenizer } = await load("tokenizer.js");

const reference = JSON.parse(fs.readFileSync(requiredEnv("METADATA_REFERENCE"), "utf-8"));

/**
 * What the page makes of a file: its config (and tokenizer), or its refusal.
 * @param {string} file
 * @returns {{config?: object, refusal?: string}}
 */
function pageAnswer(file) {
  try {
    const gguf = readGguf(new Uint8Array(fs.readFileSync(file)));
    const family = familyOf(gguf.metadata);
    const config = family.configFromGguf(gguf);
    family.partsFromGguf(gguf.tensors, config);
    Tokenizer.fromGguf(gguf.metadata);
    return { config: JSON.parse(JSON.stringify(config)) };
  } catch (error) {
    return { refusal: error instanceof Error ? error.message : String(error) };
  }
}

for (const ref of reference.cases) {
  test(`${ref.name}: the page reads it as attnlab.llama does`, () => {
    const got = pageAnswer(ref.file);
    if (ref.config) {
      assert.equal(got.refusal, undefined, `the page refused what the package loads: ${got.refusal}`);
      assert.deepEqual(got.config, ref.config);
    } else {
      assert.ok(got.refusal !== undefined, `the page loaded what the package refuses (${ref.refusal})`);
      assert.ok(got.refusal.includes(ref.expected), `the page said ${JSON.stringify(got.refusal)}; wanted ${JSON.stringify(ref.expected)} (the package: ${JSON.stringify(ref.refusal)})`);
      if (got.refusal !== ref.refusal) console.log(`${ref.name}: the page's words differ: ${got.refusal} | ${ref.refusal}`);
    }
  });
}
