// @ts-check
// quants.js under Node's test runner: every GGUF type it reads dequantised bit for bit
// as gguf-py does. Run by tests/js/test_node_quants.py, which passes QUANTS_REFERENCE:
// a JSON file of random blocks per type (base64) and gguf-py's float32 values (their bits,
// base64), and the row layout of one small tensor per type.
import test from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { requiredEnv } from "./env.mjs";

const LIVE = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "docs", "assets", "javascripts", "live");
const { QUANT_TYPES, dequantize, quantType, rowReader } = await import(path.join(LIVE, "quants.js"));

/** @type {{types: Record<string, {id: number, bytes: string, values: string}>}} */
const reference = JSON.parse(fs.readFileSync(requiredEnv("QUANTS_REFERENCE"), "utf-8"));
/** @param {string} text base64 */
const decode = (text) => new Uint8Array(Buffer.from(text, "base64"));
/** @param {Float32Array} floats */
const bitsOf = (floats) => new Uint32Array(floats.buffer, floats.byteOffset, floats.length);

// Bit-equal, except that any NaN equals any NaN (numpy keeps a NaN's payload bits,
// JavaScript need not): returns the first index that differs, or -1.
/**
 * @param {Float32Array} got
 * @param {Float32Array} want
 * @returns {number}
 */
function firstDifference(got, want) {
  const gotBits = bitsOf(got);
  const wantBits = bitsOf(want);
  for (let i = 0; i < want.length; i++) {
    if (Number.isNaN(want[i]) ? !Number.isNaN(got[i]) : gotBits[i] !== wantBits[i]) return i;
  }
  return -1;
}

test("the reference covers every type quants.js reads", () => {
  assert.deepEqual(Object.keys(reference.types).sort(), Object.keys(QUANT_TYPES).sort());
});

for (const [name, data] of Object.entries(reference.types)) {
  test(`${name}: random blocks dequantised bit for bit as gguf-py`, () => {
    const bytes = decode(data.bytes);
    const want = new Float32Array(decode(data.values).buffer);
    const got = dequantize(bytes, name);
    assert.equal(got.length, want.length);
    const i = firstDifference(got, want);
    assert.equal(i, -1, `${name}: value ${i} is ${got[i]}, gguf-py gives ${want[i]}`);
    assert.equal(quantType(data.id), QUANT_TYPES[name], "the ggml type number names the same type");
  });

  test(`${name}: a row reader gives the same rows`, () => {
    const bytes = decode(data.bytes);
    const want = new Float32Array(decode(data.values).buffer);
    const { blockValues, blockBytes } = QUANT_TYPES[name];
    const cols = 2 * 256; // two K-quant blocks, sixteen blocks of 32
    const rowBytes = (cols / blockValues) * blockBytes;
    const tensor = { bytes, rowBytes, cols };
    const read = rowReader(name);
    const rows = Math.floor(bytes.byteLength / rowBytes);
    assert.ok(rows >= 2);
    for (let r = 0; r < rows; r++) {
      const row = read(tensor, r, new Float32Array(cols));
      const i = firstDifference(row, want.subarray(r * cols, (r + 1) * cols));
      assert.equal(i, -1, `${name}: row ${r} value ${i}`);
    }
  });
}

test("an unknown type or bad bytes are refused by name", () => {
  assert.throws(() => dequantize(new Uint8Array(18), "Q3_K"), /type must be one of .*got Q3_K/);
  assert.throws(() => quantType(99), /type must be one of .*got 99/);
  assert.throws(() => dequantize([1, 2], "Q8_0"), /bytes must be a Uint8Array; got Array/);
  assert.throws(() => dequantize(new Uint8Array(35), "Q8_0"), /whole Q8_0 blocks of 34 bytes; got 35/);
});
