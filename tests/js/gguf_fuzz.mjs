// The page's reader on every GGUF variant of tests/llama/test_gguf_fuzz.py, in one Node
// process: GGUF_FUZZ names a JSON file {valid, ids, variants: [{name, file}]}. Each
// variant is opened as the page opens a reader's own file (Engine: header, config,
// tensors, tokenizer, weights); the outcome is printed as JSON, one entry per variant:
// {name, error ("RangeError: ..."), or logits (the last position's), ms}. The valid
// file's engine answers again at the end: a refusal leaves the model in use untouched.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const LIVE = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "docs", "assets", "javascripts", "live");
const { Engine } = await import(path.join(LIVE, "engine.js"));

const job = JSON.parse(fs.readFileSync(process.env.GGUF_FUZZ, "utf-8"));
const lastLogits = (engine) => Array.from(engine.run(job.ids).logits);
const inUse = Engine.fromBytes(new Uint8Array(fs.readFileSync(job.valid)), { wasm: false });
const before = lastLogits(inUse);
const results = [];
for (const { name, file } of job.variants) {
  const started = performance.now();
  const entry = { name };
  try {
    const engine = Engine.fromBytes(new Uint8Array(fs.readFileSync(file)), { wasm: false });
    entry.logits = lastLogits(engine);
  } catch (error) {
    entry.error = `${error.name}: ${error.message}`;
  }
  entry.ms = performance.now() - started;
  results.push(entry);
}
const after = lastLogits(inUse);
console.log(JSON.stringify({ before, after, results }));
