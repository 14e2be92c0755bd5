// @ts-check
// The WebAssembly SIMD module of the forward pass's hot loop, assembled here from
// readable instructions (no compiler, no build step, no binary in the repository);
// kernels.js's WasmKernels runs it.
//
// Nine functions, on a WebAssembly.Memory that also holds the GGUF file's bytes:
//   dequant_q4_1(src, blocks, dst, half): `blocks` Q4_1 blocks at src -> float32 at dst,
//       value = d * nibble + m in float32, as gguf/quants.py (half: a float16 -> float32
//       table of 65,536 entries in the same memory);
//   dequant_q8_0(src, blocks, dst, half): the same for Q8_0 (value = d * int8);
//   matmul(x, T, cols, W, rows, out, xStride): out (T, rows) = x (T, cols) @ W.T, in tiles of
//       four rows by two tokens, four lanes of float32 at a time (cols a multiple of 4):
//       every Linear, and the attention's scores (queries @ keys.T);
//   matvec_q4_1 / matvec_q8_0(x, src, rows, blocks, half, out, xsum): one token's
//       product with quantised rows, each block's d (and m) applied to its dot product,
//       no dequantised matrix written (decoding: every weight read once);
//   matmul_nn(x, T, K, B, N, out, outStride): out (T, N) = x (T, K) @ B (K, N): the attention's
//       weights @ values;
//   softmax_rows(src, stride, T, first, scale, dst, window): the causal (sliding-window)
//       softmax of a block of scores; silu_mul(gate, up, n, out): SwiGLU's silu(gate) * up;
//       rms_norm(x, T, d, weight, eps, out): RMSNorm. The exponentials are float32 (expOf).
// jskernels.js's JsKernels does the same arithmetic in plain JavaScript; the results agree
// to float32 rounding: the sums are added in another order (matvec applies each block's
// scale to its dot product instead of to each weight), the multiply-adds may be fused,
// and exp is float64 there, float32 here (clamped: see expOf).
// --- a tiny assembler: WebAssembly's binary format, one instruction per helper -------

/**
 * Instructions as the helpers build them: bytes, or lists of them nested (code() flattens).
 * @typedef {(number | Code)[]} Code
 */

const I32 = 0x7f;
const F32 = 0x7d;
const V128 = 0x7b;

/** @param {number} n @returns {number[]} unsigned LEB128 */
function uleb(n) {
  const out = [];
  do {
    const byte = n & 0x7f;
    n >>>= 7;
    out.push(n ? byte | 0x80 : byte);
  } while (n);
  return out;
}
/** @param {number} n @returns {number[]} signed LEB128 */
function sleb(n) {
  const out = [];
  for (;;) {
    const byte = n & 0x7f;
    n >>= 7;
    const done = (n === 0 && !(byte & 0x40)) || (n === -1 && byte & 0x40);
    out.push(done ? byte : byte | 0x80);
    if (done) return out;
  }
}
/** @param {string} s @returns {number[]} a name: its UTF-8 length, then its bytes */
function str(s) {
  const bytes = Array.from(new TextEncoder().encode(s));
  return uleb(bytes.length).concat(bytes);
}
/** @param {number[][]} items @returns {number[]} a vector: the count, then the items */
function vec(items) {
  return uleb(items.length).concat(items.flat());
}
/** @param {number} id @param {number[]} body @returns {number[]} */
function section(id, body) {
  return [id].concat(uleb(body.length), body);
}

const op = {
  block: [0x02, 0x40], loop: [0x03, 0x40], end: [0x0b],
  br: function (/** @type {number} */ depth) { return [0x0c].concat(uleb(depth)); },
  br_if: function (/** @type {number} */ depth) { return [0x0d].concat(uleb(depth)); },
  get: function (/** @type {number} */ local) { return [0x20].concat(uleb(local)); },
  set: function (/** @type {number} */ local) { return [0x21].concat(uleb(local)); },
  i32: function (/** @type {number} */ n) { return [0x41].concat(sleb(n)); },
  add: [0x6a], sub: [0x6b], mul: [0x6c], shl: [0x74], shr_u: [0x76], and: [0x71],
  lt_u: [0x49], ge_u: [0x4f], gt_u: [0x4b],
  load8_u: [0x2d, 0, 0], load8_s: [0x2c, 0, 0], load16_u: [0x2f, 1, 0],
  f32_load: [0x2a, 2, 0], f32_store: [0x38, 2, 0],
  f32_add: [0x92], f32_mul: [0x94], f32_zero: [0x43, 0, 0, 0, 0], f32_from_u32: [0xb3], f32_from_i32: [0xb2],
  v128_load: [0xfd, 0x00, 2, 0], v128_zero: [0xfd, 0x0c].concat(new Array(16).fill(0)),
  f32x4_add: [0xfd, 0xe4, 0x01], f32x4_mul: [0xfd, 0xe6, 0x01],
  lane: function (/** @type {number} */ i) { return [0xfd, 0x1f, i]; }, // f32x4.extract_lane
  v128_store: [0xfd, 0x0b, 2, 0], f32x4_splat: [0xfd, 0x13], i8x16_splat: [0xfd, 0x0f],
  v128_and: [0xfd, 0x4e], i8x16_shr_u: [0xfd, 0x6d],
  // widen the low or high half of the lanes: 8 -> 16 bits, 16 -> 32 bits (s/u: signed or not)
  i16_low_u: [0xfd, 0x89, 0x01], i16_high_u: [0xfd, 0x8a, 0x01],
  i16_low_s: [0xfd, 0x87, 0x01], i16_high_s: [0xfd, 0x88, 0x01],
  i32_low_u: [0xfd, 0xa9, 0x01], i32_high_u: [0xfd, 0xaa, 0x01],
  i32_low_s: [0xfd, 0xa7, 0x01], i32_high_s: [0xfd, 0xa8, 0x01],
  f32x4_from_u32: [0xfd, 0xfb, 0x01], f32x4_from_i32: [0xfd, 0xfa, 0x01],
  f32x4_sub: [0xfd, 0xe5, 0x01], f32x4_div: [0xfd, 0xe7, 0x01], f32x4_neg: [0xfd, 0xe1, 0x01],
  f32x4_min: [0xfd, 0xe8, 0x01], f32x4_max: [0xfd, 0xe9, 0x01], f32x4_nearest: [0xfd, 0x6a],
  i32x4_from_f32: [0xfd, 0xf8, 0x01], i32x4_add: [0xfd, 0xae, 0x01], i32x4_shl: [0xfd, 0xab, 0x01],
  i32x4_splat: [0xfd, 0x11], i32x4_lt_s: [0xfd, 0x39], f32x4_gt: [0xfd, 0x44], bitselect: [0xfd, 0x52],
  f32_sub: [0x93], f32_div: [0x95], f32_max: [0x97], f32_sqrt: [0x91],
  f32_const: function (/** @type {number} */ n) { return [0x43].concat(Array.from(new Uint8Array(Float32Array.of(n).buffer))); },
  f32x4_const: function (/** @type {number} */ n) { // v128.const with four equal float32 lanes
    return [0xfd, 0x0c].concat(...Array(4).fill(Array.from(new Uint8Array(Float32Array.of(n).buffer))));
  },
  i32x4_const: function (/** @type {number} */ a, /** @type {number} */ b, /** @type {number} */ c, /** @type {number} */ d) { return [0xfd, 0x0c].concat(Array.from(new Uint8Array(Int32Array.of(a, b, c, d).buffer))); },
};
/**
 * Flatten instructions (arrays of bytes, nested) into one array.
 * @param {...(number | Code)} items
 * @returns {number[]}
 */
function code(...items) {
  /** @type {number[]} */
  const out = [];
  (function walk(/** @type {Code} */ list) {
    list.forEach(function (item) { if (Array.isArray(item)) walk(item); else out.push(item); });
  })(items);
  return out;
}
// acc + a * b on f32x4 lanes: a multiply and an add, or, in modules built with `relaxed`
// where the engine has relaxed SIMD (Chromium; Node 20 behind
// --experimental-wasm-relaxed-simd, which the tests leave off, so Node tests the other
// path), f32x4.relaxed_madd: one fused multiply-add where the CPU has one (V8 on x86-64
// with FMA3, ARM64), rounded once instead of twice; the spec also allows the two steps.
let RELAXED = false;
/** @param {Code} acc @param {Code} a @param {Code} b @returns {number[]} */
function madd(acc, a, b) {
  return RELAXED ? code(a, b, acc, [0xfd, 0x85, 0x02]) : code(acc, a, b, op.f32x4_mul, op.f32x4_add);
}
// v128.load, v128.store and v128.load32_splat (one float32 in every lane) at a constant
// byte offset from the address on the stack.
const vload = (/** @type {number} */ offset) => [0xfd, 0x00, 2].concat(uleb(offset));
const vstore = (/** @type {number} */ offset) => [0xfd, 0x0b, 2].concat(uleb(offset));
const splatLoad = (/** @type {number} */ offset) => [0xfd, 0x09, 2].concat(uleb(offset));
/** @param {number} local @param {number} n @returns {number[]} local += n */
function incr(local, n) { return code(op.get(local), op.i32(n), op.add, op.set(local)); }

// --- matmul(x, T, cols, W, rows, out, xStride) -----------------------------------------
// Tiles of TILE_ROWS weight rows x TILE_TOKENS tokens: each weight vector loaded once
// serves every token of the tile, each token vector every row (8 products, 6 loads).
// x's rows are xStride floats apart (cols, or wider: one head of the queries).
// params 0..6; i32 locals: r, t, c, wRow, x_k (one per token of a tile), rowBytes, o,
// outStride, xRowBytes, w_i (one per row of a tile); v128 locals: acc (row i, token k),
// w_i, then the token vector being used.
const X = 0, T = 1, COLS = 2, W = 3, ROWS = 4, OUT = 5, XSTRIDE = 6;
// Measured on the shared 2-core machine (Zen 4, Node 20, T = 128, 1536 x 576 and
// 576 x 1536, CPU time), in GMAC/s with relaxed SIMD's multiply-add / without:
// 4 x 2 25.0 / 19.4, 2 x 4 24.8 / 18.7, 3 x 3 25.0 / 10.8, 2 x 3 19.7 / 18.0, 3 x 4
// 12.1 / 12.8. Eight accumulators hide the multiply-add's latency on two pipes; more
// than the 15 vector registers V8 allocates (accumulators + weights + one token
// vector) spill. Loading a token's vector once per step, not once per row, is what
// keeps 4 x 2 in registers: V8 hoists every load of the step before its first product.
const TILE_ROWS = 4;
const TILE_TOKENS = 2;
const R = 7, TOK = 8, C = 9, WROW = 10, X0 = 11, ROWBYTES = 11 + TILE_TOKENS, O = 12 + TILE_TOKENS, STRIDE = 13 + TILE_TOKENS;
const XROWBYTES = 14 + TILE_TOKENS;
const WP = 15 + TILE_TOKENS; // row i of the tile starts at w_i = wRow + i * rowBytes
const ACC = WP + TILE_ROWS, WV = ACC + TILE_ROWS * TILE_TOKENS, XV = WV + TILE_ROWS;

/** @param {number} acc a v128 local @returns {number[]} */
function hsum(acc) { // the four lanes of acc, summed: (l0 + l1) + (l2 + l3)
  return code(op.get(acc), op.lane(0), op.get(acc), op.lane(1), op.f32_add,
    op.get(acc), op.lane(2), op.get(acc), op.lane(3), op.f32_add, op.f32_add);
}
// acc(i, k) += w_i * x_k[c .. c+3] for rows i < nRows, tokens k < nTok, over the whole
// row (do-while: cols >= 4); row i's weights start at wRow + i * rowBytes.
/** @param {number} nRows @param {number} nTok @returns {number[]} */
function dotLoop(nRows, nTok) {
  const body = [];
  for (let i = 0; i < nRows; i++) body.push(op.get(WP + i), op.get(C), op.add, op.v128_load, op.set(WV + i));
  for (let k = 0; k < nTok; k++) { // token k's four values, loaded once for every row
    body.push(op.get(X0 + k), op.get(C), op.add, op.v128_load, op.set(XV));
    for (let i2 = 0; i2 < nRows; i2++) {
      const acc = ACC + TILE_TOKENS * i2 + k;
      body.push(madd(op.get(acc), op.get(WV + i2), op.get(XV)), op.set(acc));
    }
  }
  return code(op.i32(0), op.set(C), op.loop, body, incr(C, 16),
    op.get(C), op.get(ROWBYTES), op.lt_u, op.br_if(0), op.end);
}
// x_k = x + (t + k) * xRowBytes; acc = 0; dot; out[(t + k) * rows + r + i] = sum(acc(i, k)).
/** @param {number} nRows @param {number} nTok @returns {number[]} */
function tile(nRows, nTok) {
  const setup = [];
  for (let k = 0; k < nTok; k++) {
    setup.push(op.get(X), op.get(TOK), op.i32(k), op.add, op.get(XROWBYTES), op.mul, op.add, op.set(X0 + k));
    for (let i = 0; i < nRows; i++) setup.push(op.v128_zero, op.set(ACC + TILE_TOKENS * i + k));
  }
  const store = [op.get(OUT), op.get(TOK), op.get(ROWS), op.mul, op.get(R), op.add, op.i32(2), op.shl, op.add, op.set(O)];
  for (let k2 = 0; k2 < nTok; k2++) {
    for (let i2 = 0; i2 < nRows; i2++) {
      store.push(op.get(O), op.i32(4 * i2), op.add, hsum(ACC + TILE_TOKENS * i2 + k2), op.f32_store);
    }
    store.push(op.get(O), op.get(STRIDE), op.add, op.set(O));
  }
  return code(setup, dotLoop(nRows, nTok), store, incr(TOK, nTok));
}
// For the rows r .. r + nRows - 1: every token, four at a time, then one at a time.
/** @param {number} nRows @returns {number[]} */
function rowsPass(nRows) {
  return code(
    op.get(W), op.get(R), op.get(ROWBYTES), op.mul, op.add, op.set(WROW),
    Array.from({ length: nRows }, (_, i) => [op.get(WROW), op.get(ROWBYTES), op.i32(i), op.mul, op.add, op.set(WP + i)]),
    op.i32(0), op.set(TOK),
    op.block, op.loop, // while t + TILE_TOKENS <= T
    op.get(TOK), op.i32(TILE_TOKENS), op.add, op.get(T), op.gt_u, op.br_if(1),
    tile(nRows, TILE_TOKENS), op.br(0),
    op.end, op.end,
    op.block, op.loop, // while t < T
    op.get(TOK), op.get(T), op.ge_u, op.br_if(1),
    tile(nRows, 1), op.br(0),
    op.end, op.end,
    incr(R, nRows)
  );
}
const matmulBody = () => code(
  op.get(COLS), op.i32(2), op.shl, op.set(ROWBYTES),
  op.get(XSTRIDE), op.i32(2), op.shl, op.set(XROWBYTES),
  op.get(ROWS), op.i32(2), op.shl, op.set(STRIDE),
  op.i32(0), op.set(R),
  op.block, op.loop, // TILE_ROWS rows at a time while r + TILE_ROWS <= rows
  op.get(R), op.i32(TILE_ROWS), op.add, op.get(ROWS), op.gt_u, op.br_if(1),
  rowsPass(TILE_ROWS), op.br(0),
  op.end, op.end,
  op.block, op.loop, // then one row at a time
  op.get(R), op.get(ROWS), op.ge_u, op.br_if(1),
  rowsPass(1), op.br(0),
  op.end, op.end
);
const matmulLocals = [[8 + TILE_TOKENS + TILE_ROWS, I32], [TILE_ROWS * TILE_TOKENS + TILE_ROWS + 1, V128]];

// --- dequant_q4_1(src, blocks, dst, half) and dequant_q8_0 -----------------------------
// params 0..3; i32 local: b 4; v128 locals: d 5, m 6, bytes 7, half16 8.
// Sixteen bytes widen to sixteen float32 lanes in four steps of four:
// u8/i8 x16 -> (low, high) 16-bit x8 -> (low, high) 32-bit x4 -> float32 x4.
const SRC = 0, BLOCKS = 1, DST = 2, HALF = 3, B = 4, DV = 5, MV = 6, BYTES = 7, HALF16 = 8;
/** @param {number} offset @returns {number[]} */
function halfAt(offset) { // half[u16 at src + offset] as f32
  return code(op.get(HALF), op.get(SRC), op.i32(offset), op.add, op.load16_u, op.i32(2), op.shl, op.add, op.f32_load);
}
// dst[offset .. offset + 15] = d * bytes + (m) for the 16 bytes in local BYTES.
/** @param {number} offset @param {boolean} signed @param {boolean} withMinimum @returns {number[]} */
function widenStore(offset, signed, withMinimum) {
  const to16 = signed ? [op.i16_low_s, op.i16_high_s] : [op.i16_low_u, op.i16_high_u];
  const to32 = signed ? [op.i32_low_s, op.i32_high_s] : [op.i32_low_u, op.i32_high_u];
  const toFloat = op.f32x4_from_i32; // exact for bytes; the unsigned conversion is slow on x86
  const out = [];
  for (let half = 0; half < 2; half++) {
    out.push(op.get(BYTES), to16[half], op.set(HALF16));
    for (let quarter = 0; quarter < 2; quarter++) {
      out.push(op.get(DST), op.i32(4 * (offset + 8 * half + 4 * quarter)), op.add,
        op.get(HALF16), to32[quarter], toFloat, op.get(DV), op.f32x4_mul);
      if (withMinimum) out.push(op.get(MV), op.f32x4_add);
      out.push(op.v128_store);
    }
  }
  return code(out);
}
/** @param {number} blockBytes @param {Code} body @returns {number[]} */
function blockLoop(blockBytes, body) { // for b in 0 .. blocks - 1: body; src += blockBytes; dst += 32 floats
  return code(
    op.i32(0), op.set(B),
    op.block, op.loop,
    op.get(B), op.get(BLOCKS), op.ge_u, op.br_if(1),
    body,
    incr(SRC, blockBytes), incr(DST, 128), incr(B, 1), op.br(0),
    op.end, op.end
  );
}
// Q4_1 (20 bytes): float16 d, float16 m, then byte j = value j (low nibble), j + 16 (high).
const dequantBody = blockLoop(20, code(
  halfAt(0), op.f32x4_splat, op.set(DV), halfAt(2), op.f32x4_splat, op.set(MV),
  op.get(SRC), op.i32(4), op.add, op.v128_load, op.i32(15), op.i8x16_splat, op.v128_and, op.set(BYTES),
  widenStore(0, false, true),
  op.get(SRC), op.i32(4), op.add, op.v128_load, op.i32(4), op.i8x16_shr_u, op.set(BYTES),
  widenStore(16, false, true)
));
// Q8_0 (34 bytes): float16 d, then 32 int8; value = d * int8.
const dequantQ8Body = blockLoop(34, code(
  halfAt(0), op.f32x4_splat, op.set(DV),
  op.get(SRC), op.i32(2), op.add, op.v128_load, op.set(BYTES), widenStore(0, true, false),
  op.get(SRC), op.i32(18), op.add, op.v128_load, op.set(BYTES), widenStore(16, true, false)
));
const dequantLocals = [[1, I32], [4, V128]];

// --- matvec_q4_1 / matvec_q8_0(x, src, rows, blocks, half, out, xsum) ----------------
// One token's product with a quantised matrix without writing the dequantised weights:
// out[r] = sum over blocks of d * (q . x_block) (+ m * sum(x_block) for Q4_1), the
// block sums of x given at xsum. The decoding step (T = 1) reads every weight once.
// params 0..6; i32 locals r 7, b 8, xp 9, sp 10; v128 acc 11, dv 12, bytes 13,
// half16 14, bv 15; f32 macc 16.
const MX = 0, MSRC = 1, MROWS = 2, MBLOCKS = 3, MHALF = 4, MOUT = 5, MXSUM = 6;
const MR = 7, MB = 8, XP = 9, SP = 10, MACC = 11, MDV = 12, MBYTES = 13, MHALF16 = 14, BV = 15, MMACC = 16;
/** @param {number} offset @returns {number[]} */
function mHalfAt(offset) { // half[u16 at src + offset] as f32
  return code(op.get(MHALF), op.get(MSRC), op.i32(offset), op.add, op.load16_u, op.i32(2), op.shl, op.add, op.f32_load);
}
// bv += float(16 bytes of MBYTES, widened) * x[xp + xOffset ..] (16 values)
/** @param {number} xOffset @param {boolean} signed @returns {number[]} */
function widenDot(xOffset, signed) {
  const to16 = signed ? [op.i16_low_s, op.i16_high_s] : [op.i16_low_u, op.i16_high_u];
  const to32 = signed ? [op.i32_low_s, op.i32_high_s] : [op.i32_low_u, op.i32_high_u];
  const toFloat = op.f32x4_from_i32; // exact for bytes either way; the unsigned conversion is slow on x86
  const out = [];
  for (let half = 0; half < 2; half++) {
    out.push(op.get(MBYTES), to16[half], op.set(MHALF16));
    for (let quarter = 0; quarter < 2; quarter++) {
      out.push(madd(op.get(BV), [op.get(MHALF16), to32[quarter], toFloat],
        [op.get(XP), vload(4 * (xOffset + 8 * half + 4 * quarter))]), op.set(BV));
    }
  }
  return code(out);
}
/** @param {number} blockBytes @param {Code} blockCode @returns {number[]} */
function matvecBody(blockBytes, blockCode) {
  return code(
    op.i32(0), op.set(MR),
    op.block, op.loop,
    op.get(MR), op.get(MROWS), op.ge_u, op.br_if(1),
    op.v128_zero, op.set(MACC), op.f32_zero, op.set(MMACC),
    op.get(MX), op.set(XP), op.get(MXSUM), op.set(SP), op.i32(0), op.set(MB),
    op.block, op.loop,
    op.get(MB), op.get(MBLOCKS), op.ge_u, op.br_if(1),
    op.v128_zero, op.set(BV),
    blockCode,
    op.get(MACC), op.get(BV), op.get(MDV), op.f32x4_mul, op.f32x4_add, op.set(MACC),
    incr(MSRC, blockBytes), incr(XP, 128), incr(SP, 4), incr(MB, 1), op.br(0),
    op.end, op.end,
    op.get(MOUT), op.get(MR), op.i32(2), op.shl, op.add, hsum(MACC), op.get(MMACC), op.f32_add, op.f32_store,
    incr(MR, 1), op.br(0),
    op.end, op.end
  );
}
const matvecQ4Body = () => matvecBody(20, code(
  mHalfAt(0), op.f32x4_splat, op.set(MDV),
  op.get(MMACC), mHalfAt(2), op.get(SP), op.f32_load, op.f32_mul, op.f32_add, op.set(MMACC),
  op.get(MSRC), op.i32(4), op.add, op.v128_load, op.i32(15), op.i8x16_splat, op.v128_and, op.set(MBYTES),
  widenDot(0, false),
  op.get(MSRC), op.i32(4), op.add, op.v128_load, op.i32(4), op.i8x16_shr_u, op.set(MBYTES),
  widenDot(16, false)
));
const matvecQ8Body = () => matvecBody(34, code(
  mHalfAt(0), op.f32x4_splat, op.set(MDV),
  op.get(MSRC), op.i32(2), op.add, op.v128_load, op.set(MBYTES), widenDot(0, true),
  op.get(MSRC), op.i32(18), op.add, op.v128_load, op.set(MBYTES), widenDot(16, true)
));
const matvecLocals = [[4, I32], [5, V128], [1, F32]];

// --- exp on four float32 lanes --------------------------------------------------------
// Cephes' expf, as most SIMD libraries write it: exp(x) = 2^n * exp(r) with n the
// nearest integer to x / ln 2 and |r| <= ln 2 / 2, exp(r) = 1 + r + r^2 P(r) with P of
// degree 5 (within 2 ulp of the exact value). x is clamped to [-87.34, 88] first, where
// 2^n stays a normal float32, and a lane below -87.34 gives 0 (as float32 exp does
// below -103.9: a softmax weight under 1.2e-38 is zero either way).
const LOG2E = Math.LOG2E;
const LN2_HIGH = 0.693359375; // ln 2 = LN2_HIGH + LN2_LOW, the high part exact in float32
const LN2_LOW = -2.12194440e-4;
const EXP_POLY = [1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1];
const vconst = op.f32x4_const;
// exp of the v128 local x (overwritten), left on the stack; n and r: v128 scratch locals.
/** @param {number} x @param {number} n @param {number} r @returns {number[]} */
function expOf(x, n, r) {
  return code(
    op.get(x), vconst(88), op.f32x4_min, vconst(-87.33654), op.f32x4_max, op.set(x),
    op.get(x), vconst(LOG2E), op.f32x4_mul, op.f32x4_nearest, op.set(n),
    op.get(x), op.get(n), vconst(LN2_HIGH), op.f32x4_mul, op.f32x4_sub,
    op.get(n), vconst(LN2_LOW), op.f32x4_mul, op.f32x4_sub, op.set(r),
    vconst(EXP_POLY[0]), EXP_POLY.slice(1).map((c) => [op.get(r), op.f32x4_mul, vconst(c), op.f32x4_add]),
    op.get(r), op.get(r), op.f32x4_mul, op.f32x4_mul, op.get(r), op.f32x4_add, vconst(1), op.f32x4_add,
    // times 2^n: n + 127 in the exponent's bits
    op.get(n), op.i32x4_from_f32, op.i32x4_const(127, 127, 127, 127), op.i32x4_add, op.i32(23), op.i32x4_shl,
    op.f32x4_mul,
    op.get(x), vconst(-87.33654), op.f32x4_gt, op.v128_and // zero where x was clamped from below (or NaN)
  );
}

// --- silu_mul(gate, up, n, out): out = silu(gate) * up, n values (a multiple of 4) -------
// silu(g) = g / (1 + exp(-g)), SwiGLU's hidden layer. params 0..3; i32 local: byte 4;
// v128 locals: g 5, x 6, n 7, r 8.
const SG = 0, SU = 1, SN = 2, SO = 3, SI = 4, SGV = 5, SX = 6, SNV = 7, SR = 8;
const siluBody = () => code(
  op.get(SN), op.i32(2), op.shl, op.set(SN), op.i32(0), op.set(SI),
  op.block, op.loop,
  op.get(SI), op.get(SN), op.ge_u, op.br_if(1),
  op.get(SG), op.get(SI), op.add, op.v128_load, op.set(SGV),
  op.get(SGV), op.f32x4_neg, op.set(SX),
  op.get(SO), op.get(SI), op.add,
  op.get(SGV), vconst(1), expOf(SX, SNV, SR), op.f32x4_add, op.f32x4_div,
  op.get(SU), op.get(SI), op.add, op.v128_load, op.f32x4_mul,
  op.v128_store,
  incr(SI, 16), op.br(0),
  op.end, op.end
);
const siluLocals = [[1, I32], [4, V128]];

// --- softmax_rows(src, stride, T, first, scale, dst, window): the causal softmax ------
// T rows of scores, `stride` floats apart (a multiple of 4) in src and dst; row i keeps
// its first `first + i` entries (the keys up to the query's position), and of those the
// last `window` (a sliding window; a huge window keeps them all): dst = softmax of those
// entries times `scale`, and zeros elsewhere. Four lanes at a time; the lanes outside a
// row's keys are masked (to -inf for the maximum, to 0 after the exponential).
// params 0..6 (scale f32); i32 locals i 7, n 8, e 9, sp 10, dp 11, strideBytes 12;
// v128 locals v 13, max 14, sum 15, expN 16, expR 17; f32 local total 18.
const PS = 0, PSTRIDE = 1, PT = 2, PFIRST = 3, PSCALE = 4, PD = 5, PWIN = 6;
const PI = 7, PN = 8, PE = 9, PSP = 10, PDP = 11, PSB = 12, PV = 13, PMAX = 14, PSUM = 15, PXN = 16, PXR = 17, PTOT = 18;
// the lanes e .. e + 3 that are keys of this row (all ones) or not (zeros): n - window <= lane < n
const laneIndex = () => code(op.get(PE), op.i32x4_splat, op.i32x4_const(0, 1, 2, 3), op.i32x4_add);
const keyLanes = () => code(laneIndex(), op.get(PN), op.i32x4_splat, op.i32x4_lt_s,
  op.get(PN), op.get(PWIN), op.sub, op.i32(1), op.sub, op.i32x4_splat, laneIndex(), op.i32x4_lt_s, op.v128_and);
// for e = 0, 4, ... while e < limit (a local): body
/** @param {number} limit @param {Code} body @returns {number[]} */
function lanesLoop(limit, body) {
  return code(op.i32(0), op.set(PE), op.block, op.loop,
    op.get(PE), op.get(limit), op.ge_u, op.br_if(1), body, incr(PE, 4), op.br(0), op.end, op.end);
}
const scaled = () => code(op.get(PSP), op.get(PE), op.i32(2), op.shl, op.add, op.v128_load,
  op.get(PSCALE), op.f32x4_splat, op.f32x4_mul);
const dstAt = () => code(op.get(PDP), op.get(PE), op.i32(2), op.shl, op.add);
const softmaxBody = () => code(
  op.get(PSTRIDE), op.i32(2), op.shl, op.set(PSB),
  op.get(PS), op.set(PSP), op.get(PD), op.set(PDP), op.get(PFIRST), op.set(PN), op.i32(0), op.set(PI),
  op.block, op.loop,
  op.get(PI), op.get(PT), op.ge_u, op.br_if(1),
  // the row's maximum
  vconst(-Infinity), op.set(PMAX),
  lanesLoop(PN, code(op.get(PMAX), scaled(), vconst(-Infinity), keyLanes(), op.bitselect, op.f32x4_max, op.set(PMAX))),
  op.get(PMAX), op.lane(0), op.get(PMAX), op.lane(1), op.f32_max,
  op.get(PMAX), op.lane(2), op.get(PMAX), op.lane(3), op.f32_max, op.f32_max, op.f32x4_splat, op.set(PMAX),
  // the exponentials, and their sum
  op.v128_zero, op.set(PSUM),
  lanesLoop(PN, code(scaled(), op.get(PMAX), op.f32x4_sub, op.set(PV),
    expOf(PV, PXN, PXR), keyLanes(), op.v128_and, op.set(PV),
    dstAt(), op.get(PV), op.v128_store, op.get(PSUM), op.get(PV), op.f32x4_add, op.set(PSUM))),
  hsum(PSUM), op.set(PTOT),
  // divided by the sum; zeros after the row's keys
  lanesLoop(PN, code(dstAt(), dstAt(), op.v128_load, op.get(PTOT), op.f32x4_splat, op.f32x4_div, op.v128_store)),
  op.block, op.loop, // e continues from the first group past the keys
  op.get(PE), op.get(PSTRIDE), op.ge_u, op.br_if(1),
  dstAt(), op.v128_zero, op.v128_store, incr(PE, 4), op.br(0),
  op.end, op.end,
  op.get(PSP), op.get(PSB), op.add, op.set(PSP), op.get(PDP), op.get(PSB), op.add, op.set(PDP),
  incr(PN, 1), incr(PI, 1), op.br(0),
  op.end, op.end
);
const softmaxLocals = [[6, I32], [5, V128], [1, F32]];

// --- matmul_nn(x, T, K, B, N, out, outStride): out (T, N) = x (T, K) @ B (K, N) ----------
// B not transposed (the values (S, D) of the attention's mixing; N a multiple of 4);
// out's rows outStride floats apart (N, or wider: one head of the context vectors).
// Tiles of two tokens x sixteen columns: step k loads B's four vectors of row k once
// and each token's x[t, k] once, splat to four lanes (8 products, 6 loads).
// params 0..6; i32 locals c0 7, t 8, k 9, bp 10, x_0 11, x_1 12, rowBytesB 13,
// rowBytesX 14, o 15, rowBytesOut 16; v128 locals acc 17..24 (token j, vector v:
// 17 + 4j + v), b 25..28, s 29..30.
const NX = 0, NT = 1, NK = 2, NB = 3, NN = 4, NO = 5, NOS = 6;
const NC0 = 7, NTOK = 8, NKK = 9, NBP = 10, NX0 = 11, NRB = 13, NRX = 14, NOP = 15, NRO = 16, NACC = 17, NBV = 25, NS = 29;
/** @param {number} nTok @param {number} nVec @returns {number[]} */
function tileNN(nTok, nVec) {
  const acc = (/** @type {number} */ j, /** @type {number} */ v) => NACC + 4 * j + v;
  const out = [];
  for (let j = 0; j < nTok; j++) {
    out.push(op.get(NX), op.get(NTOK), op.i32(j), op.add, op.get(NRX), op.mul, op.add, op.set(NX0 + j));
    for (let v = 0; v < nVec; v++) out.push(op.v128_zero, op.set(acc(j, v)));
  }
  out.push(op.get(NB), op.get(NC0), op.i32(2), op.shl, op.add, op.set(NBP), op.i32(0), op.set(NKK), op.loop);
  for (let v = 0; v < nVec; v++) out.push(op.get(NBP), vload(16 * v), op.set(NBV + v));
  for (let j = 0; j < nTok; j++) out.push(op.get(NX0 + j), op.get(NKK), op.add, splatLoad(0), op.set(NS + j));
  for (let j = 0; j < nTok; j++) {
    for (let v = 0; v < nVec; v++) out.push(madd(op.get(acc(j, v)), op.get(NS + j), op.get(NBV + v)), op.set(acc(j, v)));
  }
  out.push(op.get(NBP), op.get(NRB), op.add, op.set(NBP), incr(NKK, 4),
    op.get(NKK), op.get(NRX), op.lt_u, op.br_if(0), op.end);
  out.push(op.get(NO), op.get(NTOK), op.get(NRO), op.mul, op.add, op.get(NC0), op.i32(2), op.shl, op.add, op.set(NOP));
  for (let j = 0; j < nTok; j++) {
    for (let v = 0; v < nVec; v++) out.push(op.get(NOP), op.get(acc(j, v)), vstore(16 * v));
    if (j === 0 && nTok > 1) out.push(op.get(NOP), op.get(NRO), op.add, op.set(NOP));
  }
  return code(out, incr(NTOK, nTok));
}
/** @param {number} nVec @returns {number[]} */
function columnsPass(nVec) { // columns c0 .. c0 + 4 nVec - 1: every token, two at a time
  return code(
    op.i32(0), op.set(NTOK),
    op.block, op.loop, op.get(NTOK), op.i32(2), op.add, op.get(NT), op.gt_u, op.br_if(1), tileNN(2, nVec), op.br(0), op.end, op.end,
    op.block, op.loop, op.get(NTOK), op.get(NT), op.ge_u, op.br_if(1), tileNN(1, nVec), op.br(0), op.end, op.end,
    incr(NC0, 4 * nVec)
  );
}
const matmulNNBody = () => code(
  op.get(NN), op.i32(2), op.shl, op.set(NRB), op.get(NK), op.i32(2), op.shl, op.set(NRX),
  op.get(NOS), op.i32(2), op.shl, op.set(NRO),
  op.i32(0), op.set(NC0),
  op.block, op.loop, op.get(NC0), op.i32(16), op.add, op.get(NN), op.gt_u, op.br_if(1), columnsPass(4), op.br(0), op.end, op.end,
  op.block, op.loop, op.get(NC0), op.i32(4), op.add, op.get(NN), op.gt_u, op.br_if(1), columnsPass(1), op.br(0), op.end, op.end
);
const matmulNNLocals = [[10, I32], [14, V128]];

// --- rms_norm(x, T, d, weight, eps, out): weight * x / sqrt(mean(x^2) + eps), per row ----
// d a multiple of 4. params 0..5 (eps f32); i32 locals t 6, e 7, rowBytes 8, xp 9, op 10;
// v128 locals acc 11, inv 12.
const RX = 0, RT = 1, RD = 2, RW = 3, REPS = 4, RO = 5, RTK = 6, RE = 7, RRB = 8, RXP = 9, ROP = 10, RACC = 11, RINV = 12;
const rmsNormBody = () => code(
  op.get(RD), op.i32(2), op.shl, op.set(RRB), op.get(RX), op.set(RXP), op.get(RO), op.set(ROP), op.i32(0), op.set(RTK),
  op.block, op.loop,
  op.get(RTK), op.get(RT), op.ge_u, op.br_if(1),
  op.v128_zero, op.set(RACC), op.i32(0), op.set(RE),
  op.loop,
  op.get(RXP), op.get(RE), op.add, op.v128_load, op.set(RINV),
  madd(op.get(RACC), op.get(RINV), op.get(RINV)), op.set(RACC),
  incr(RE, 16), op.get(RE), op.get(RRB), op.lt_u, op.br_if(0),
  op.end,
  // inv = 1 / sqrt(sum / d + eps), in every lane (torch.rsqrt)
  op.f32_const(1), hsum(RACC), op.get(RD), op.f32_from_i32, op.f32_div, op.get(REPS), op.f32_add, op.f32_sqrt, op.f32_div,
  op.f32x4_splat, op.set(RINV),
  op.i32(0), op.set(RE),
  op.loop,
  op.get(ROP), op.get(RE), op.add,
  op.get(RW), op.get(RE), op.add, op.v128_load,
  op.get(RXP), op.get(RE), op.add, op.v128_load, op.get(RINV), op.f32x4_mul, op.f32x4_mul,
  op.v128_store,
  incr(RE, 16), op.get(RE), op.get(RRB), op.lt_u, op.br_if(0),
  op.end,
  op.get(RXP), op.get(RRB), op.add, op.set(RXP), op.get(ROP), op.get(RRB), op.add, op.set(ROP), incr(RTK, 1), op.br(0),
  op.end, op.end
);
const rmsNormLocals = [[5, I32], [2, V128]];

/** @param {number[][]} locals @param {number[]} body @returns {number[]} */
function functionBody(locals, body) {
  const bytes = vec(locals.map(function (/** @type {number[]} */ l) { return uleb(l[0]).concat([l[1]]); })).concat(body, op.end);
  return uleb(bytes.length).concat(bytes);
}

// The module's bytes: imports env.memory, exports the kernels above.
/** @type {[string, number, number[][], () => number[]][]} */
const KERNELS = [ // name, type (an index into TYPES), locals, body
  ["matmul", 0, matmulLocals, matmulBody],
  ["dequant_q4_1", 1, dequantLocals, () => dequantBody],
  ["dequant_q8_0", 1, dequantLocals, () => dequantQ8Body],
  ["matvec_q4_1", 0, matvecLocals, matvecQ4Body],
  ["matvec_q8_0", 0, matvecLocals, matvecQ8Body],
  ["silu_mul", 1, siluLocals, siluBody],
  ["softmax_rows", 3, softmaxLocals, softmaxBody],
  ["matmul_nn", 0, matmulNNLocals, matmulNNBody],
  ["rms_norm", 2, rmsNormLocals, rmsNormBody],
];
const TYPES = [ // parameters (no results)
  [I32, I32, I32, I32, I32, I32, I32],
  [I32, I32, I32, I32],
  [I32, I32, I32, I32, F32, I32],
  [I32, I32, I32, I32, F32, I32, I32],
];
// shared: the memory import is declared shared (limits flag 0x03, with the largest
// maximum, 4 GiB), as a WebAssembly.Memory({shared: true}) of threads.js must be.
export const MAX_PAGES = 65536;
export function moduleBytes(relaxed = false, shared = false) {
  RELAXED = relaxed;
  const types = vec(TYPES.map((params) => [0x60].concat(vec(params.map((t) => [t])), vec([]))));
  const limits = shared ? [0x03].concat(uleb(1), uleb(MAX_PAGES)) : [0x00].concat(uleb(1));
  const imports = vec([str("env").concat(str("memory"), [0x02], limits)]);
  const functions = vec(KERNELS.map(([, type]) => uleb(type)));
  const exports = vec(KERNELS.map(([name], i) => str(name).concat([0x00], uleb(i))));
  const bodies = vec(KERNELS.map(([, , locals, body]) => functionBody(locals, body())));
  return new Uint8Array([0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00].concat(
    section(1, types), section(2, imports), section(3, functions), section(7, exports), section(10, bodies)));
}

// Whether the engine has relaxed SIMD's multiply-add.
export function relaxedSupported() {
  try {
    return typeof WebAssembly === "object" && WebAssembly.validate(moduleBytes(true));
  } catch (error) {
    return false;
  }
}

export function simdSupported() {
  try {
    return typeof WebAssembly === "object" && WebAssembly.validate(moduleBytes());
  } catch (error) {
    return false;
  }
}
