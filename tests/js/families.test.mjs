// The page's model families under Node's test runner: random GGUF files of each family
// (llama tied and untied, qwen2, qwen3), every supported tensor type in each, run by the
// page's LlamaModel (plain JavaScript kernels) and compared with attnlab.llama's
// load_gguf. Run by tests/js/test_node_families.py, which passes FAMILIES_REFERENCE: a
// JSON file of cases {file, architecture, ids, logits (the last position's), attention
// (every layer's, flattened layer, head, query, key)}.
import test from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const LIVE = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "docs", "assets", "javascripts", "live");
const load = (name) => import(path.join(LIVE, name));
const { readGguf } = await load("gguf.js");
const { familyOf } = await load("families/index.js");
const { LlamaModel, JsKernels } = await load("model.js");
const { Engine } = await load("engine.js");

const reference = JSON.parse(fs.readFileSync(process.env.FAMILIES_REFERENCE, "utf-8"));

function maxAbsDiff(got, want) {
  assert.equal(got.length, want.length);
  let worst = 0;
  for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]));
  return worst;
}

for (const ref of reference.cases) {
  test(`${path.basename(ref.file)}: the page's model equals attnlab.llama's (logits 1e-3, attention 1e-4)`, () => {
    const file = readGguf(new Uint8Array(fs.readFileSync(ref.file)));
    const family = familyOf(file.metadata);
    assert.equal(family.architecture, ref.architecture);
    const config = family.configFromGguf(file.metadata, file.tensors);
    for (const [name, value] of Object.entries(ref.config)) assert.equal(config[name], value, name);
    const model = new LlamaModel(config, family.partsFromGguf(file.tensors, config), new JsKernels());
    const { logits, attention } = model.forward(ref.ids, { return_attention: true });
    const logitsDiff = maxAbsDiff(logits, ref.logits);
    const attentionDiff = maxAbsDiff(attention, ref.attention);
    console.log(`${path.basename(ref.file)}: logits ${logitsDiff.toExponential(2)}, attention ${attentionDiff.toExponential(2)}`);
    assert.ok(logitsDiff <= 1e-3, `logits differ by ${logitsDiff}`);
    assert.ok(attentionDiff <= 1e-4, `attention differs by ${attentionDiff}`);
  });
}

for (const ref of reference.cases) {
  test(`${path.basename(ref.file)}: the page's engine (WebAssembly kernels, the file's tokenizer) too`, () => {
    const engine = Engine.fromBytes(new Uint8Array(fs.readFileSync(ref.file)));
    assert.equal(engine.architecture, ref.architecture);
    const { logits, attention } = engine.model.forward(ref.ids, { return_attention: true });
    const logitsDiff = maxAbsDiff(logits, ref.logits);
    const attentionDiff = maxAbsDiff(attention, ref.attention);
    console.log(`${path.basename(ref.file)} (${engine.kernelsName}): logits ${logitsDiff.toExponential(2)}, attention ${attentionDiff.toExponential(2)}`);
    assert.ok(logitsDiff <= 1e-3, `logits differ by ${logitsDiff}`);
    assert.ok(attentionDiff <= 1e-4, `attention differs by ${attentionDiff}`);
    assert.equal(engine.tokenizer.decode(engine.tokenizer.encode("AB=C!")), "AB=C!");
  });
}

test("another architecture is refused by name", () => {
  assert.throws(() => familyOf({ "general.architecture": "gemma2" }), /general.architecture must be one of .*qwen2.*got 'gemma2'/);
});
