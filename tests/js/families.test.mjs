// @ts-check
// The page's model families under Node's test runner: random GGUF files of each family
// (llama tied and untied, qwen2, qwen3, Llama 3.1's factors) and tiny Gemma 3 (its
// global layers also linearly scaled) and Qwen3.5 files, run by the page's model and
// compared with attnlab.llama's load_gguf. Run by tests/js/test_node_families.py, which
// passes FAMILIES_REFERENCE: a JSON file of cases {file, architecture, config (the
// package's to_dict()), ids, logits (the last position's), attention (every layer's
// maps, flattened layer, head, query, key), layer_heads}.
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
const { LlamaModel, JsKernels, ropeFrequencies } = await load("model.js");
const { Engine } = await load("engine.js");

const reference = JSON.parse(fs.readFileSync(requiredEnv("FAMILIES_REFERENCE"), "utf-8"));

/**
 * @param {ArrayLike<number>} got
 * @param {ArrayLike<number>} want
 * @returns {number}
 */
function maxAbsDiff(got, want) {
  assert.equal(got.length, want.length);
  let worst = 0;
  for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]));
  return worst;
}

/**
 * The worst difference of each layer's maps.
 * @param {any} model
 * @param {Float32Array} attention
 * @param {any} ref
 * @returns {number[]}
 */
function perLayer(model, attention, ref) {
  const T = ref.ids.length;
  let at = 0;
  return ref.layer_heads.map((/** @type {number} */ heads, /** @type {number} */ l) => {
    const mine = attention.subarray(model.attentionOffset(l, T, T), model.attentionOffset(l + 1, T, T));
    const theirs = ref.attention.slice(at, at + heads * T * T);
    at += heads * T * T;
    return maxAbsDiff(mine, theirs);
  });
}

for (const ref of reference.cases) {
  const name = path.basename(ref.file);
  test(`${name}: the page's config is the package's, field for field`, () => {
    const file = readGguf(new Uint8Array(fs.readFileSync(ref.file)));
    const family = familyOf(file.metadata);
    assert.equal(family.architecture, ref.architecture);
    const config = family.configFromGguf(file);
    assert.deepEqual(JSON.parse(JSON.stringify(config)), ref.config);
  });

  test(`${name}: the page's model equals attnlab.llama's (logits 1e-3, every layer's attention 1e-4)`, () => {
    const file = readGguf(new Uint8Array(fs.readFileSync(ref.file)));
    const family = familyOf(file.metadata);
    const config = family.configFromGguf(file);
    const model = new LlamaModel(config, family.partsFromGguf(file.tensors, config), new JsKernels());
    assert.deepEqual(model.layerHeads, ref.layer_heads);
    const { logits, attention } = model.forward(ref.ids, { return_attention: true });
    const logitsDiff = maxAbsDiff(logits, ref.logits);
    const layers = perLayer(model, attention, ref);
    const attentionDiff = Math.max(...layers);
    console.log(`${name}: logits ${logitsDiff.toExponential(2)}, attention ${attentionDiff.toExponential(2)} (${config.layer_types.join(" ")})`);
    assert.ok(logitsDiff <= 1e-3, `logits differ by ${logitsDiff}`);
    layers.forEach((diff, l) => assert.ok(diff <= 1e-4, `layer ${l} (${config.layer_types[l]}) attention differs by ${diff}`));
  });

  test(`${name}: the page's engine (WebAssembly kernels, the file's tokenizer) too, and cached decoding equals the full pass`, () => {
    const engine = Engine.fromBytes(new Uint8Array(fs.readFileSync(ref.file)));
    assert.equal(engine.architecture, ref.architecture);
    assert.deepEqual(engine.info().layer_types, ref.config.layer_types);
    const model = engine.model;
    const whole = model.forward(ref.ids, { return_attention: true });
    const logitsDiff = maxAbsDiff(whole.logits, ref.logits);
    const attentionDiff = Math.max(...perLayer(model, whole.attention, ref));
    console.log(`${name} (${engine.kernelsName}): logits ${logitsDiff.toExponential(2)}, attention ${attentionDiff.toExponential(2)}`);
    assert.ok(logitsDiff <= 1e-3, `logits differ by ${logitsDiff}`);
    assert.ok(attentionDiff <= 1e-4, `attention differs by ${attentionDiff}`);
    const T = ref.ids.length;
    const split = Math.min(4, T - 1);
    const cache = model.newCache({ capacity: 2 });
    model.forward(ref.ids.slice(0, split), { cache, return_attention: true });
    for (let t = split; t < T; t++) {
      const step = model.forward(ref.ids.slice(t, t + 1), { cache, return_attention: true });
      for (let l = 0; l < model.layerHeads.length; l++) { // each head's new row: the full pass's row t
        for (let h = 0; h < model.layerHeads[l]; h++) {
          const row = step.attention.subarray(model.attentionOffset(l, 1, t + 1) + h * (t + 1), model.attentionOffset(l, 1, t + 1) + (h + 1) * (t + 1));
          const at = model.attentionOffset(l, T, T) + (h * T + t) * T;
          assert.ok(maxAbsDiff(row, whole.attention.subarray(at, at + t + 1)) <= 1e-5, `cached row ${t}, layer ${l}, head ${h}`);
        }
      }
      if (t === T - 1) assert.ok(maxAbsDiff(step.logits, whole.logits) <= 1e-4, "cached logits");
    }
    assert.equal(engine.tokenizer.decode(engine.tokenizer.encode("AB=C!")), "AB=C!");
  });
}

test("a Gated DeltaNet layer: no ablation (as the package); its maps after a cache need the cache's first pass to ask", () => {
  const ref = reference.cases.find((/** @type {any} */ c) => c.architecture === "qwen35");
  const file = readGguf(new Uint8Array(fs.readFileSync(ref.file)));
  const family = familyOf(file.metadata);
  const config = family.configFromGguf(file);
  const model = new LlamaModel(config, family.partsFromGguf(file.tensors, config), new JsKernels());
  const linear = config.layer_types.indexOf("linear_attention");
  const full = config.layer_types.indexOf("full_attention");
  assert.throws(() => model.forward(ref.ids, { ablate: { [linear]: [0] } }), /a linear_attention \(Gated DeltaNet\) layer takes no ablate_heads/);
  const off = model.forward(ref.ids, { ablate: { [full]: [0] } });
  assert.ok(maxAbsDiff(off.logits, ref.logits) > 1e-6); // a softmax layer's head is switched off
  const cache = model.newCache();
  model.forward(ref.ids.slice(0, 3), { cache });
  assert.throws(() => model.forward(ref.ids.slice(3, 4), { cache, return_attention: true }), /needs the linear layers' history/);
});

test("the rotary frequencies of every scaling a config carries are attnlab.rope_frequencies'", () => {
  for (const { dim, theta, scaling, inv_freq: invFreq, attention_factor: factor } of reference.frequencies) {
    const got = ropeFrequencies(dim, theta, scaling);
    const label = JSON.stringify(scaling);
    const worst = Math.max(...invFreq.map((/** @type {number} */ f, /** @type {number} */ i) => Math.abs(got.invFreq[i] - f) / f));
    assert.ok(worst <= 1e-6, `${label}: inv_freq differ by ${worst} (relative)`);
    assert.ok(Math.abs(got.attentionFactor - factor) <= 1e-12, `${label}: attention factor ${got.attentionFactor} vs ${factor}`);
  }
});

test("another architecture is refused by name", () => {
  assert.throws(() => familyOf({ "general.architecture": "gemma2" }), /general.architecture must be one of .*qwen35.*got 'gemma2'/);
});
