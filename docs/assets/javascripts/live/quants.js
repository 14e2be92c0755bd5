// @ts-check
// Dequantisation of GGUF's tensor types, value for value as gguf-py (gguf/quants.py)
// gives it: the float32 that numpy computes, bit for bit. No imports, no build step.
//
// Each type is a block layout: `blockValues` values stored in `blockBytes` bytes.
// `QUANT_TYPES[name].block(bytes, at, out, o)` writes the block starting at byte `at`
// of `bytes` (a Uint8Array) as float32 into `out` from index `o`.
//
// Matching numpy bit for bit: gguf-py works in float32, rounding after every step.
// Every step before the last is exact in float32 (a half's 11 significant bits times a
// scale of at most 7 bits times a value of at most 6 bits fits its 24), so only the last
// step rounds: JavaScript computes it in float64, exactly or with one rounding, and the
// store into the Float32Array rounds it to the float32 that numpy gives.
//
// Layouts (QK_K = 256; "f16" is an IEEE half, little-endian):
//   Q4_0  f16 d, 16 bytes of nibbles                    d * (q - 8)
//   Q4_1  f16 d, f16 m, 16 bytes of nibbles             d * q + m
//   Q5_0  f16 d, u32 high bits, 16 bytes of nibbles     d * (q - 16)
//   Q5_1  f16 d, f16 m, u32 high bits, 16 bytes         d * q + m
//   Q8_0  f16 d, 32 int8                                d * q
//   Q4_K  f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles:
//         8 sub-blocks of 32, (d * scale) * q - dmin * min
//   Q5_K  as Q4_K with 32 bytes of fifth bits before the nibbles
//   Q6_K  128 bytes of low nibbles, 64 of high 2-bit pairs, 16 int8 scales, f16 d:
//         16 sub-blocks of 16, (d * scale) * (q - 32)

/**
 * A block decoder: writes the block at byte `at` of `bytes` as float32 into `out` from
 * index `o`. Called once per block in the hottest loop of loading, so its arguments stay
 * positional (no options object allocated per block): the conventions' one exception.
 * @typedef {(bytes: Uint8Array, at: number, out: Float32Array, o: number) => void} BlockDecoder
 */
/**
 * @typedef {object} QuantType  a GGUF tensor type's block layout
 * @property {number} id  ggml's type number
 * @property {number} blockValues
 * @property {number} blockBytes
 * @property {BlockDecoder} block
 */

/**
 * IEEE half precision bits -> number (numpy's float16 -> float32 is exact).
 * @param {number} bits
 * @returns {number}
 */
export function halfToFloat(bits) {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  if (exponent === 0) return sign * fraction * 2 ** -24;
  if (exponent === 31) return fraction ? NaN : sign * Infinity;
  return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
}

const HALF = new Float32Array(65536);
for (let h = 0; h < 65536; h++) HALF[h] = halfToFloat(h);
/** @param {Uint8Array} bytes @param {number} at @returns {number} the half at byte `at` */
const half = (bytes, at) => HALF[bytes[at] | (bytes[at + 1] << 8)];
/** @param {number} byte */
const int8 = (byte) => (byte << 24) >> 24;

// a float32 or bfloat16 from its bits, through one shared word
const WORD = new Uint32Array(1);
const WORD_FLOAT = new Float32Array(WORD.buffer);
/** @param {number} bits */
const fromBits = (bits) => {
  WORD[0] = bits;
  return WORD_FLOAT[0];
};

/** @param {Uint8Array} bytes @param {number} at @param {Float32Array} out @param {number} o */
function blockF32(bytes, at, out, o) {
  out[o] = fromBits(bytes[at] | (bytes[at + 1] << 8) | (bytes[at + 2] << 16) | (bytes[at + 3] << 24));
}

/** @param {Uint8Array} bytes @param {number} at @param {Float32Array} out @param {number} o */
function blockF16(bytes, at, out, o) {
  out[o] = half(bytes, at);
}

/** @param {Uint8Array} bytes @param {number} at @param {Float32Array} out @param {number} o */
function blockBF16(bytes, at, out, o) {
  out[o] = fromBits((bytes[at] << 16) | (bytes[at + 1] << 24));
}

// byte j of the 16 holds value j (low nibble) and value j + 16 (high nibble)
/** @param {Uint8Array} bytes @param {number} at @param {Float32Array} out @param {number} o */
function blockQ4_0(bytes, at, out, o) {
  const d = half(bytes, at);
  for (let j = 0; j < 16; j++) {
    const q = bytes[at + 2 + j];
    out[o + j] = d * ((q & 15) - 8);
    out[o + j + 16] = d * ((q >> 4) - 8);
  }
}

/** @param {Uint8Array} bytes @param {number} at @param {Float32Array} out @param {number} o */
function blockQ4_1(bytes, at, out, o) {
  const d = half(bytes, at);
  const m = half(bytes, at + 2);
  for (let j = 0; j < 16; j++) {
    const q = bytes[at + 4 + j];
    out[o + j] = d * (q & 15) + m;
    out[o + j + 16] = d * (q >> 4) + m;
  }
}

// bit j of the u32 is value j's fifth bit
/** @param {Uint8Array} bytes @param {number} at @param {Float32Array} out @param {number} o */
function blockQ5_0(bytes, at, out, o) {
  const d = half(bytes, at);
  const high = bytes[at + 2] | (bytes[at + 3] << 8) | (bytes[at + 4] << 16) | (bytes[at + 5] << 24);
  for (let j = 0; j < 16; j++) {
    const q = bytes[at + 6 + j];
    out[o + j] = d * (((q & 15) | (((high >>> j) & 1) << 4)) - 16);
    out[o + j + 16] = d * (((q >> 4) | (((high >>> (j + 16)) & 1) << 4)) - 16);
  }
}

/** @param {Uint8Array} bytes @param {number} at @param {Float32Array} out @param {number} o */
function blockQ5_1(bytes, at, out, o) {
  const d = half(bytes, at);
  const m = half(bytes, at + 2);
  const high = bytes[at + 4] | (bytes[at + 5] << 8) | (bytes[at + 6] << 16) | (bytes[at + 7] << 24);
  for (let j = 0; j < 16; j++) {
    const q = bytes[at + 8 + j];
    out[o + j] = d * ((q & 15) | (((high >>> j) & 1) << 4)) + m;
    out[o + j + 16] = d * ((q >> 4) | (((high >>> (j + 16)) & 1) << 4)) + m;
  }
}

/** @param {Uint8Array} bytes @param {number} at @param {Float32Array} out @param {number} o */
function blockQ8_0(bytes, at, out, o) {
  const d = half(bytes, at);
  for (let j = 0; j < 32; j++) out[o + j] = d * int8(bytes[at + 2 + j]);
}

// Q4_K's and Q5_K's 12 bytes: eight 6-bit scales and eight 6-bit mins (gguf-py's
// Q4_K.get_scale_min): sub-blocks 0-3 in the low 6 bits of bytes 0-3 (scales) and 4-7
// (mins); sub-blocks 4-7 from the nibbles of bytes 8-11 and the top 2 bits of 0-7.
/**
 * @param {Uint8Array} bytes
 * @param {number} s  the scales' first byte
 * @param {number} j  the sub-block
 * @returns {[number, number]} its scale and min
 */
function scaleMin(bytes, s, j) {
  if (j < 4) return [bytes[s + j] & 63, bytes[s + 4 + j] & 63];
  const i = j - 4;
  return [
    (bytes[s + 8 + i] & 15) | ((bytes[s + i] >> 2) & 0x30),
    (bytes[s + 8 + i] >> 4) | ((bytes[s + 4 + i] >> 2) & 0x30),
  ];
}

// Q4_K and Q5_K: float16 d and dmin, the 12 bytes of scales and mins, (Q5_K: 32 bytes
// of fifth bits at qh,) then 128 bytes of nibbles at qs. Sub-block 2k takes the low
// nibbles of bytes 32k .. 32k + 31, sub-block 2k + 1 the high ones; bit `sub` of high
// byte l is the fifth bit of value l of sub-block `sub` (qh < 0: none, Q4_K).
/**
 * @param {Uint8Array} bytes
 * @param {number} at
 * @param {Float32Array} out
 * @param {number} o
 * @param {number} qs  the nibbles' first byte
 * @param {number} qh  the fifth bits' first byte; -1: none (Q4_K)
 */
function blockK(bytes, at, out, o, qs, qh) {
  const d = half(bytes, at);
  const dmin = half(bytes, at + 2);
  for (let sub = 0; sub < 8; sub++) {
    const [scale, min] = scaleMin(bytes, at + 4, sub);
    const dl = d * scale;
    const ml = dmin * min;
    const base = qs + 32 * (sub >> 1);
    const shift = 4 * (sub & 1);
    for (let l = 0; l < 32; l++) {
      const fifth = qh < 0 ? 0 : ((bytes[qh + l] >> sub) & 1) << 4;
      out[o + 32 * sub + l] = dl * (((bytes[base + l] >> shift) & 15) | fifth) - ml;
    }
  }
}
/** @type {BlockDecoder} */
const blockQ4_K = (bytes, at, out, o) => blockK(bytes, at, out, o, at + 16, -1);
/** @type {BlockDecoder} */
const blockQ5_K = (bytes, at, out, o) => blockK(bytes, at, out, o, at + 48, at + 16);

// Two halves of 128 values. In half h, value 64k + l (k = 0, 1; l < 64) takes nibble k of
// low byte 64h + l; value 32k + l (k < 4; l < 32) takes bits 2k, 2k + 1 of high byte 32h + l.
// Value v's scale is int8 number v / 16.
/** @param {Uint8Array} bytes @param {number} at @param {Float32Array} out @param {number} o */
function blockQ6_K(bytes, at, out, o) {
  const ql = at;
  const qh = at + 128;
  const scales = at + 192;
  const d = half(bytes, at + 208);
  for (let h = 0; h < 2; h++) {
    for (let v = 0; v < 128; v++) {
      const low = (bytes[ql + 64 * h + (v & 63)] >> (4 * (v >> 6))) & 15;
      const high = (bytes[qh + 32 * h + (v & 31)] >> (2 * (v >> 5))) & 3;
      const index = 128 * h + v;
      const dl = d * int8(bytes[scales + (index >> 4)]);
      out[o + index] = dl * ((low | (high << 4)) - 32);
    }
  }
}

// name -> {id (ggml's type number), blockValues, blockBytes, block}
/** @type {Readonly<Record<string, QuantType>>} */
export const QUANT_TYPES = Object.freeze({
  F32: { id: 0, blockValues: 1, blockBytes: 4, block: blockF32 },
  F16: { id: 1, blockValues: 1, blockBytes: 2, block: blockF16 },
  Q4_0: { id: 2, blockValues: 32, blockBytes: 18, block: blockQ4_0 },
  Q4_1: { id: 3, blockValues: 32, blockBytes: 20, block: blockQ4_1 },
  Q5_0: { id: 6, blockValues: 32, blockBytes: 22, block: blockQ5_0 },
  Q5_1: { id: 7, blockValues: 32, blockBytes: 24, block: blockQ5_1 },
  Q8_0: { id: 8, blockValues: 32, blockBytes: 34, block: blockQ8_0 },
  Q4_K: { id: 12, blockValues: 256, blockBytes: 144, block: blockQ4_K },
  Q5_K: { id: 13, blockValues: 256, blockBytes: 176, block: blockQ5_K },
  Q6_K: { id: 14, blockValues: 256, blockBytes: 210, block: blockQ6_K },
  BF16: { id: 30, blockValues: 1, blockBytes: 2, block: blockBF16 },
});

// The type of a name or a ggml type number; refuses, naming it, any other.
/**
 * @param {unknown} type  a name ("Q4_K") or a ggml type number
 * @returns {QuantType}
 */
export function quantType(type) {
  const found =
    typeof type === "string"
      ? QUANT_TYPES[type]
      : Object.values(QUANT_TYPES).find((info) => info.id === type);
  if (found === undefined) {
    const names = Object.keys(QUANT_TYPES).join(", ");
    throw new RangeError(`type must be one of ${names} (or its ggml number); got ${String(type)}`);
  }
  return found;
}

// gguf.quants.dequantize(data, type): every block of `bytes` (a Uint8Array, a whole
// number of blocks) as one Float32Array.
/**
 * @param {unknown} bytes
 * @param {string | number} type
 * @returns {Float32Array}
 */
export function dequantize(bytes, type) {
  const info = quantType(type);
  if (!(bytes instanceof Uint8Array)) {
    throw new TypeError(`bytes must be a Uint8Array; got ${bytes?.constructor?.name ?? typeof bytes}`);
  }
  if (bytes.byteLength % info.blockBytes) {
    throw new RangeError(
      `bytes must hold whole ${type} blocks of ${info.blockBytes} bytes; got ${bytes.byteLength} bytes`,
    );
  }
  const blocks = bytes.byteLength / info.blockBytes;
  const out = new Float32Array(blocks * info.blockValues);
  for (let b = 0; b < blocks; b++) info.block(bytes, b * info.blockBytes, out, b * info.blockValues);
  return out;
}

// A row reader (tensor, r, out) for gguf.js's tensors (`bytes`, `rowBytes`, `cols`):
// writes row r as float32 into `out`.
/**
 * @param {string | number} type
 * @returns {(tensor: {bytes: Uint8Array, rowBytes: number, cols: number}, r: number, out: Float32Array) => Float32Array}
 */
export function rowReader(type) {
  const { blockValues, blockBytes, block } = quantType(type);
  return (tensor, r, out) => {
    const bytes = tensor.bytes;
    let at = r * tensor.rowBytes;
    for (let o = 0; o < tensor.cols; o += blockValues, at += blockBytes) block(bytes, at, out, o);
    return out;
  };
}
