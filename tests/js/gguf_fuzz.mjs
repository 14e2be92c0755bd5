// @ts-check
// The page's reader on every GGUF variant of tests/llama/test_gguf_fuzz.py, in one Node
// process: GGUF_FUZZ names a JSON file {valid, ids, variants: [{name, file}]}. Each
// variant is opened as the page opens a reader's own file (Engine: header, config,
// tensors, tokenizer, weights); the outcome is printed as JSON, one entry per variant:
// {name, error ("RangeError: ..."), or logits (the last position's), ms}. The valid
// file's engine answers again at the end: a refusal leaves the model in use untouched.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { requiredEnv } from "./env.mjs";

const LIVE = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "docs", "assets", "javascripts", "live");
const { Engine } = await import(path.join(LIVE, "engine.js"));

/** @type {{valid: string, ids: number[], variants: {name: string, file: string}[]}} */
const job = JSON.parse(fs.readFileSync(requiredEnv("GGUF_FUZZ"), "utf-8"));
/** @param {{run: (ids: number[]) => {logits: Float32Array}}} engine */
const lastLogits = (engine) => Array.from(engine.run(job.ids).logits);
const inUse = Engine.fromBytes(new Uint8Array(fs.readFileSync(job.valid)), { wasm: false });
const before = lastLogits(inUse);
const results = [];
for (const { name, file } of job.variants) {
  const started = performance.now();
  /** @type {{name: string, logits?: number[], error?: string, ms?: number}} */
  const entry = { name };
  try {
    const engine = Engine.fromBytes(new Uint8Array(fs.readFileSync(file)), { wasm: false });
    entry.logits = lastLogits(engine);
  } catch (error) {
    entry.error = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  }
  entry.ms = performance.now() - started;
  results.push(entry);
}
const after = lastLogits(inUse);
console.log(JSON.stringify({ before, after, results }));
