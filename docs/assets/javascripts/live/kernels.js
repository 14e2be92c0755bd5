// The forward pass's hot loop in WebAssembly SIMD, assembled here from readable
// instructions (no compiler, no build step, no binary in the repository).
//
// Five functions, on a WebAssembly.Memory that also holds the GGUF file's bytes:
//   dequant_q4_1(src, blocks, dst, half): `blocks` Q4_1 blocks at src -> float32 at dst,
//       value = d * nibble + m in float32, as gguf/quants.py (half: a float16 -> float32
//       table of 65,536 entries in the same memory);
//   dequant_q8_0(src, blocks, dst, half): the same for Q8_0 (value = d * int8);
//   matmul(x, T, cols, W, rows, out): out (T, rows) = x (T, cols) @ W.T, in tiles of
//       two rows by three tokens, four lanes of float32 at a time (cols a multiple of 4);
//   matvec_q4_1 / matvec_q8_0(x, src, rows, blocks, half, out, xsum): one token's
//       product with quantised rows, each block's d (and m) applied to its dot product,
//       no dequantised matrix written (decoding: every weight read once).
// model.js's matmulTransposed is the same product in plain JavaScript; the results agree
// to float32 rounding (the sums are added in another order).
import { HALF_TABLE } from "./gguf.js";
import { JsKernels } from "./model.js";

// --- a tiny assembler: WebAssembly's binary format, one instruction per helper -------

const I32 = 0x7f;
const F32 = 0x7d;
const V128 = 0x7b;

function uleb(n) {
  let out = [];
  do {
    let byte = n & 0x7f;
    n >>>= 7;
    out.push(n ? byte | 0x80 : byte);
  } while (n);
  return out;
}
function sleb(n) {
  let out = [];
  for (;;) {
    let byte = n & 0x7f;
    n >>= 7;
    let done = (n === 0 && !(byte & 0x40)) || (n === -1 && byte & 0x40);
    out.push(done ? byte : byte | 0x80);
    if (done) return out;
  }
}
function str(s) {
  let bytes = Array.from(new TextEncoder().encode(s));
  return uleb(bytes.length).concat(bytes);
}
function vec(items) {
  return uleb(items.length).concat([].concat.apply([], items));
}
function section(id, body) {
  return [id].concat(uleb(body.length), body);
}

const op = {
  block: [0x02, 0x40], loop: [0x03, 0x40], end: [0x0b],
  br: function (depth) { return [0x0c].concat(uleb(depth)); },
  br_if: function (depth) { return [0x0d].concat(uleb(depth)); },
  get: function (local) { return [0x20].concat(uleb(local)); },
  set: function (local) { return [0x21].concat(uleb(local)); },
  i32: function (n) { return [0x41].concat(sleb(n)); },
  add: [0x6a], mul: [0x6c], shl: [0x74], shr_u: [0x76], and: [0x71],
  lt_u: [0x49], ge_u: [0x4f], gt_u: [0x4b],
  load8_u: [0x2d, 0, 0], load8_s: [0x2c, 0, 0], load16_u: [0x2f, 1, 0],
  f32_load: [0x2a, 2, 0], f32_store: [0x38, 2, 0],
  f32_add: [0x92], f32_mul: [0x94], f32_zero: [0x43, 0, 0, 0, 0], f32_from_u32: [0xb3], f32_from_i32: [0xb2],
  v128_load: [0xfd, 0x00, 2, 0], v128_zero: [0xfd, 0x0c].concat(new Array(16).fill(0)),
  f32x4_add: [0xfd, 0xe4, 0x01], f32x4_mul: [0xfd, 0xe6, 0x01],
  lane: function (i) { return [0xfd, 0x1f, i]; }, // f32x4.extract_lane
  v128_store: [0xfd, 0x0b, 2, 0], f32x4_splat: [0xfd, 0x13], i8x16_splat: [0xfd, 0x0f],
  v128_and: [0xfd, 0x4e], i8x16_shr_u: [0xfd, 0x6d],
  // widen the low or high half of the lanes: 8 -> 16 bits, 16 -> 32 bits (s/u: signed or not)
  i16_low_u: [0xfd, 0x89, 0x01], i16_high_u: [0xfd, 0x8a, 0x01],
  i16_low_s: [0xfd, 0x87, 0x01], i16_high_s: [0xfd, 0x88, 0x01],
  i32_low_u: [0xfd, 0xa9, 0x01], i32_high_u: [0xfd, 0xaa, 0x01],
  i32_low_s: [0xfd, 0xa7, 0x01], i32_high_s: [0xfd, 0xa8, 0x01],
  f32x4_from_u32: [0xfd, 0xfb, 0x01], f32x4_from_i32: [0xfd, 0xfa, 0x01],
};
function code() { // flatten instructions (arrays of bytes, nested) into one array
  let out = [];
  (function walk(items) {
    items.forEach(function (item) { if (Array.isArray(item)) walk(item); else out.push(item); });
  })(Array.prototype.slice.call(arguments));
  return out;
}
// acc + a * b on f32x4 lanes: a multiply and an add, or one fused multiply-add
// (relaxed SIMD's f32x4.relaxed_madd) in modules built with `relaxed` where the engine
// has it (Chromium; Node 20 has not): the same sums, rounded once instead of twice.
let RELAXED = false;
function madd(acc, a, b) {
  return RELAXED ? code(a, b, acc, [0xfd, 0x85, 0x02]) : code(acc, a, b, op.f32x4_mul, op.f32x4_add);
}
// v128.load at a constant byte offset from the address on the stack.
const vload = (offset) => [0xfd, 0x00, 2].concat(uleb(offset));
function incr(local, n) { return code(op.get(local), op.i32(n), op.add, op.set(local)); }

// --- matmul(x, T, cols, W, rows, out) --------------------------------------------------
// Tiles of TILE_ROWS weight rows x TILE_TOKENS tokens: each weight vector loaded once
// serves every token of the tile, each token vector every row (8 products, 6 loads).
// params 0..5; i32 locals: r, t, c, wRow, x_k (one per token of a tile), rowBytes, o,
// outStride; v128 locals: acc (row i, token k), w_i (one per row of a tile), then the
// token vector being used.
const X = 0, T = 1, COLS = 2, W = 3, ROWS = 4, OUT = 5;
// Measured on the shared 2-core machine (Zen 4, Node 20, T = 128, 1536 x 576 and
// 576 x 1536, CPU time), in GMAC/s with relaxed SIMD's fused multiply-add / without:
// 4 x 2 25.0 / 19.4, 2 x 4 24.8 / 18.7, 3 x 3 25.0 / 10.8, 2 x 3 19.7 / 18.0, 3 x 4
// 12.1 / 12.8. Eight accumulators hide the multiply-add's latency on two pipes; more
// than the 15 vector registers V8 allocates (accumulators + weights + one token
// vector) spill. Loading a token's vector once per step, not once per row, is what
// keeps 4 x 2 in registers: V8 hoists every load of the step before its first product.
const TILE_ROWS = 4;
const TILE_TOKENS = 2;
const R = 6, TOK = 7, C = 8, WROW = 9, X0 = 10, ROWBYTES = 10 + TILE_TOKENS, O = 11 + TILE_TOKENS, STRIDE = 12 + TILE_TOKENS;
const WP = 13 + TILE_TOKENS; // row i of the tile starts at w_i = wRow + i * rowBytes
const ACC = WP + TILE_ROWS, WV = ACC + TILE_ROWS * TILE_TOKENS, XV = WV + TILE_ROWS;

function hsum(acc) { // the four lanes of acc, summed: (l0 + l1) + (l2 + l3)
  return code(op.get(acc), op.lane(0), op.get(acc), op.lane(1), op.f32_add,
    op.get(acc), op.lane(2), op.get(acc), op.lane(3), op.f32_add, op.f32_add);
}
// acc(i, k) += w_i * x_k[c .. c+3] for rows i < nRows, tokens k < nTok, over the whole
// row (do-while: cols >= 4); row i's weights start at wRow + i * rowBytes.
function dotLoop(nRows, nTok) {
  let body = [];
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
// x_k = x + (t + k) * rowBytes; acc = 0; dot; out[(t + k) * rows + r + i] = sum(acc(i, k)).
function tile(nRows, nTok) {
  let setup = [];
  for (let k = 0; k < nTok; k++) {
    setup.push(op.get(X), op.get(TOK), op.i32(k), op.add, op.get(ROWBYTES), op.mul, op.add, op.set(X0 + k));
    for (let i = 0; i < nRows; i++) setup.push(op.v128_zero, op.set(ACC + TILE_TOKENS * i + k));
  }
  let store = [op.get(OUT), op.get(TOK), op.get(ROWS), op.mul, op.get(R), op.add, op.i32(2), op.shl, op.add, op.set(O)];
  for (let k2 = 0; k2 < nTok; k2++) {
    for (let i2 = 0; i2 < nRows; i2++) {
      store.push(op.get(O), op.i32(4 * i2), op.add, hsum(ACC + TILE_TOKENS * i2 + k2), op.f32_store);
    }
    store.push(op.get(O), op.get(STRIDE), op.add, op.set(O));
  }
  return code(setup, dotLoop(nRows, nTok), store, incr(TOK, nTok));
}
// For the rows r .. r + nRows - 1: every token, four at a time, then one at a time.
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
const matmulLocals = [[7 + TILE_TOKENS + TILE_ROWS, I32], [TILE_ROWS * TILE_TOKENS + TILE_ROWS + 1, V128]];

// --- dequant_q4_1(src, blocks, dst, half) and dequant_q8_0 -----------------------------
// params 0..3; i32 local: b 4; v128 locals: d 5, m 6, bytes 7, half16 8.
// Sixteen bytes widen to sixteen float32 lanes in four steps of four:
// u8/i8 x16 -> (low, high) 16-bit x8 -> (low, high) 32-bit x4 -> float32 x4.
const SRC = 0, BLOCKS = 1, DST = 2, HALF = 3, B = 4, DV = 5, MV = 6, BYTES = 7, HALF16 = 8;
function halfAt(offset) { // half[u16 at src + offset] as f32
  return code(op.get(HALF), op.get(SRC), op.i32(offset), op.add, op.load16_u, op.i32(2), op.shl, op.add, op.f32_load);
}
// dst[offset .. offset + 15] = d * bytes + (m) for the 16 bytes in local BYTES.
function widenStore(offset, signed, withMinimum) {
  let to16 = signed ? [op.i16_low_s, op.i16_high_s] : [op.i16_low_u, op.i16_high_u];
  let to32 = signed ? [op.i32_low_s, op.i32_high_s] : [op.i32_low_u, op.i32_high_u];
  const toFloat = op.f32x4_from_i32; // exact for bytes; the unsigned conversion is slow on x86
  let out = [];
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
function mHalfAt(offset) { // half[u16 at src + offset] as f32
  return code(op.get(MHALF), op.get(MSRC), op.i32(offset), op.add, op.load16_u, op.i32(2), op.shl, op.add, op.f32_load);
}
// bv += float(16 bytes of MBYTES, widened) * x[xp + xOffset ..] (16 values)
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

// --- attention: scores(q, k, S, D, out) and mix(w, v, S, D, out) ----------------------
// scores: out[j] = q . k_j for the S keys stored one after another (D floats each);
// mix: out (D) = sum_j w[j] * v_j. The softmax between them stays in JavaScript
// (Math.exp, float64), as in model.js's JsKernels.attention.
const AQ = 0, AK = 1, AS = 2, AD = 3, AOUT = 4, AJ = 5, AE = 6, AP = 7, ADB = 8, AACC = 9;
const scoresBody = () => code(
  op.get(AD), op.i32(2), op.shl, op.set(ADB),
  op.i32(0), op.set(AJ), op.get(AK), op.set(AP),
  op.block, op.loop,
  op.get(AJ), op.get(AS), op.ge_u, op.br_if(1),
  op.v128_zero, op.set(AACC), op.i32(0), op.set(AE),
  op.loop,
  madd(op.get(AACC), [op.get(AQ), op.get(AE), op.add, op.v128_load], [op.get(AP), op.get(AE), op.add, op.v128_load]),
  op.set(AACC),
  incr(AE, 16), op.get(AE), op.get(ADB), op.lt_u, op.br_if(0),
  op.end,
  op.get(AOUT), op.get(AJ), op.i32(2), op.shl, op.add, hsum(AACC), op.f32_store,
  op.get(AP), op.get(ADB), op.add, op.set(AP), incr(AJ, 1), op.br(0),
  op.end, op.end
);
// mix's params: w 0, v 1, S 2, D 3, out 4 (same locals)
const mixBody = () => code(
  op.get(AD), op.i32(2), op.shl, op.set(ADB),
  op.i32(0), op.set(AE),
  op.block, op.loop,
  op.get(AE), op.get(ADB), op.ge_u, op.br_if(1),
  op.v128_zero, op.set(AACC), op.i32(0), op.set(AJ), op.get(AK), op.get(AE), op.add, op.set(AP),
  op.block, op.loop,
  op.get(AJ), op.get(AS), op.ge_u, op.br_if(1),
  madd(op.get(AACC), [op.get(AQ), op.get(AJ), op.i32(2), op.shl, op.add, op.f32_load, op.f32x4_splat],
  [op.get(AP), op.v128_load]), op.set(AACC),
  op.get(AP), op.get(ADB), op.add, op.set(AP), incr(AJ, 1), op.br(0),
  op.end, op.end,
  op.get(AOUT), op.get(AE), op.add, op.get(AACC), op.v128_store,
  incr(AE, 16), op.br(0),
  op.end, op.end
);
const attentionLocals = [[4, I32], [1, V128]];

function functionBody(locals, body) {
  let bytes = vec(locals.map(function (l) { return uleb(l[0]).concat([l[1]]); })).concat(body, op.end);
  return uleb(bytes.length).concat(bytes);
}

// The module's bytes: imports env.memory, exports matmul, dequant_q4_1, dequant_q8_0.
export function moduleBytes(relaxed = false) {
  RELAXED = relaxed;
  let types = vec([
    [0x60].concat(vec([[I32], [I32], [I32], [I32], [I32], [I32]]), vec([])), // matmul
    [0x60].concat(vec([[I32], [I32], [I32], [I32]]), vec([])), // dequant_q4_1
    [0x60].concat(vec([[I32], [I32], [I32], [I32], [I32], [I32], [I32]]), vec([])), // matvec_q4_1
    [0x60].concat(vec([[I32], [I32], [I32], [I32], [I32]]), vec([])), // scores, mix
  ]);
  let imports = vec([str("env").concat(str("memory"), [0x02, 0x00], uleb(1))]);
  let functions = vec([uleb(0), uleb(1), uleb(1), uleb(2), uleb(2), uleb(3), uleb(3)]);
  let exports = vec([
    str("matmul").concat([0x00], uleb(0)),
    str("dequant_q4_1").concat([0x00], uleb(1)),
    str("dequant_q8_0").concat([0x00], uleb(2)),
    str("matvec_q4_1").concat([0x00], uleb(3)),
    str("matvec_q8_0").concat([0x00], uleb(4)),
    str("scores").concat([0x00], uleb(5)),
    str("mix").concat([0x00], uleb(6)),
  ]);
  let bodies = vec([
    functionBody(matmulLocals, matmulBody()),
    functionBody(dequantLocals, dequantBody),
    functionBody(dequantLocals, dequantQ8Body),
    functionBody(matvecLocals, matvecQ4Body()),
    functionBody(matvecLocals, matvecQ8Body()),
    functionBody(attentionLocals, scoresBody()),
    functionBody(attentionLocals, mixBody()),
  ]);
  return new Uint8Array([0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00].concat(
    section(1, types), section(2, imports), section(3, functions), section(7, exports), section(10, bodies)));
}

// Whether the engine has relaxed SIMD's fused multiply-add.
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

const PAGE = 65536;
const FUSED = new Set(["Q4_1", "Q8_0"]); // the types matvec reads
const align = (n, to) => Math.ceil(n / to) * to;

// A WebAssembly memory for the file's bytes (from offset 0; fill `bytes`, e.g. while
// downloading) and, once `reserve` is called, a workspace after them; the kernels;
// `linear` and `logits`, which model.js calls.
export class WasmKernels {
  constructor(fileLength, relaxed = true) {
    this.name = "WebAssembly SIMD";
    this.fileLength = fileLength;
    this.memory = new WebAssembly.Memory({ initial: Math.ceil(fileLength / PAGE) });
    this.relaxed = relaxed && relaxedSupported();
    if (this.relaxed) this.name = "WebAssembly SIMD, fused multiply-add";
    const instance = new WebAssembly.Instance(new WebAssembly.Module(moduleBytes(this.relaxed)), { env: { memory: this.memory } });
    this.exports = instance.exports;
    this.bytes = new Uint8Array(this.memory.buffer, 0, fileLength);
    this.fallback = new JsKernels(); // attention beyond the workspace
  }

  // Room after the file for: the float16 table, one dequantised matrix of maxMatrix
  // values, and x and out of maxTokens x maxWidth values each. Growing the memory
  // replaces its buffer: rebind the file's tensors to `bytes` afterwards.
  reserve(maxMatrix, maxTokens, maxWidth, { maxKeys = 0, queryWidth = 0, kvWidth = 0 } = {}) {
    this.halfAt = align(this.fileLength, 16);
    this.weightAt = this.halfAt + 65536 * 4;
    this.xAt = this.weightAt + maxMatrix * 4;
    this.outAt = this.xAt + maxTokens * maxWidth * 4;
    this.xsumAt = this.outAt + Math.max(maxTokens * maxWidth, maxMatrix / maxWidth) * 4;
    // attention: the queries and context vectors (maxKeys, queryWidth), keys and values
    // (maxKeys, kvWidth), one row of scores and weights (maxKeys)
    this.maxKeys = maxKeys;
    this.qAt = align(this.xsumAt + maxWidth * 4, 16);
    this.ctxAt = this.qAt + maxKeys * queryWidth * 4;
    this.kAt = this.ctxAt + maxKeys * queryWidth * 4;
    this.vAt = this.kAt + maxKeys * kvWidth * 4;
    this.scoresAt = this.vAt + maxKeys * kvWidth * 4;
    this.wAt = this.scoresAt + maxKeys * 4;
    const end = this.wAt + maxKeys * 4;
    const pages = Math.ceil(end / PAGE) - this.memory.buffer.byteLength / PAGE;
    if (pages > 0) this.memory.grow(pages);
    this.bytes = new Uint8Array(this.memory.buffer, 0, this.fileLength);
    this.f32 = new Float32Array(this.memory.buffer);
    this.f32.set(HALF_TABLE, this.halfAt / 4);
    this.maxTokens = maxTokens;
    this.maxMatrix = maxMatrix;
    return this;
  }

  // Stored row `stored` of `tensor` as float32 at byte `dst` of the memory.
  dequantRow(tensor, stored, dst) {
    const cols = tensor.cols;
    const src = tensor.bytes.byteOffset + stored * tensor.rowBytes;
    if (tensor.type === "Q4_1") this.exports.dequant_q4_1(src, cols / 32, dst, this.halfAt);
    else if (tensor.type === "Q8_0") this.exports.dequant_q8_0(src, cols / 32, dst, this.halfAt);
    else tensor.row(stored, this.f32.subarray(dst / 4, dst / 4 + cols)); // other types: gguf.js
  }

  // One token (x: cols values) times every row of a Q4_1 or Q8_0 tensor, fused (no
  // dequantised matrix written): rows `start` .. `start + rows - 1`, at `outAt`.
  matvec(tensor, vector, start, rows) {
    const cols = tensor.cols;
    const blocks = cols / 32;
    this.f32.set(vector.subarray(0, cols), this.xAt / 4);
    const xsum = this.f32.subarray(this.xsumAt / 4, this.xsumAt / 4 + blocks);
    for (let b = 0; b < blocks; b++) {
      let sum = 0;
      for (let j = 0; j < 32; j++) sum += vector[b * 32 + j];
      xsum[b] = sum;
    }
    const kernel = tensor.type === "Q4_1" ? this.exports.matvec_q4_1 : this.exports.matvec_q8_0;
    kernel(this.xAt, tensor.bytes.byteOffset + start * tensor.rowBytes, rows, blocks, this.halfAt, this.outAt, this.xsumAt);
    return this.f32.subarray(this.outAt / 4, this.outAt / 4 + rows);
  }

  // x (T, cols) @ W.T for a Linear (model.js) over a tensor of this memory: one token
  // through matvec; more, each stored row dequantised once (in its unpermuted place),
  // then one matmul.
  linear(linear, x, T) {
    const { tensor, rows, cols } = linear;
    if (T === 1 && FUSED.has(tensor.type)) {
      const stored = this.matvec(tensor, x, 0, rows);
      if (!linear.rowOrder) return stored.slice();
      const out = new Float32Array(rows);
      for (let r = 0; r < rows; r++) out[r] = stored[linear.rowOrder[r]];
      return out;
    }
    if (T > this.maxTokens) return this.inChunks(linear, x, T);
    const src = tensor.bytes.byteOffset;
    if (tensor.type === "Q4_1" && !linear.rowOrder) { // the rows in stored order: one call
      this.exports.dequant_q4_1(src, rows * cols / 32, this.weightAt, this.halfAt);
    } else if (tensor.type === "Q8_0" && !linear.rowOrder) {
      this.exports.dequant_q8_0(src, rows * cols / 32, this.weightAt, this.halfAt);
    } else {
      for (let r = 0; r < rows; r++) this.dequantRow(tensor, linear.rowOrder ? linear.rowOrder[r] : r, this.weightAt + r * cols * 4);
    }
    this.f32.set(x.subarray(0, T * cols), this.xAt / 4);
    this.exports.matmul(this.xAt, T, cols, this.weightAt, rows, this.outAt);
    return this.f32.slice(this.outAt / 4, this.outAt / 4 + T * rows);
  }

  // model.js's JsKernels.attention, its dot products and mixing in WebAssembly: per
  // key/value head, that head's cached keys and values are copied into the workspace.
  attention(args) {
    const { queries, T, H, group, D, past, cache, ablateHeads, attnWeights, contextVecs } = args;
    const S = cache.length;
    if (S > this.maxKeys || D % 4) return this.fallback.attention(args);
    const f32 = this.f32;
    const { scores, mix } = this.exports;
    const scale = 1 / Math.sqrt(D);
    f32.set(queries.subarray(0, T * H * D), this.qAt / 4);
    f32.fill(0, this.ctxAt / 4, this.ctxAt / 4 + T * H * D);
    const row = f32.subarray(this.scoresAt / 4, this.scoresAt / 4 + S);
    const weights = f32.subarray(this.wAt / 4, this.wAt / 4 + S);
    const e = new Float64Array(S);
    let copied = -1;
    for (let h = 0; h < H; h++) {
      const ablated = ablateHeads.has(h);
      if (ablated && !attnWeights) continue;
      const kv = Math.floor(h / group);
      if (kv !== copied) { // this key/value head's S keys and values, one after another
        const from = kv * cache.capacity * D;
        f32.set(cache.keys.subarray(from, from + S * D), this.kAt / 4);
        f32.set(cache.values.subarray(from, from + S * D), this.vAt / 4);
        copied = kv;
      }
      for (let i = 0; i < T; i++) {
        const n = past + i + 1; // causal: keys up to the query's own position
        scores(this.qAt + (i * H + h) * D * 4, this.kAt, n, D, this.scoresAt);
        let max = -Infinity;
        for (let j = 0; j < n; j++) {
          e[j] = row[j] * scale;
          if (e[j] > max) max = e[j];
        }
        let sum = 0;
        for (let j = 0; j < n; j++) {
          e[j] = Math.exp(e[j] - max);
          sum += e[j];
        }
        for (let j = 0; j < n; j++) weights[j] = e[j] / sum;
        if (attnWeights) attnWeights.set(weights.subarray(0, n), (h * T + i) * S);
        if (!ablated) mix(this.wAt, this.vAt, n, D, this.ctxAt + (i * H + h) * D * 4);
      }
    }
    contextVecs.set(f32.subarray(this.ctxAt / 4, this.ctxAt / 4 + T * H * D));
  }

  // More tokens than the workspace holds: maxTokens at a time.
  inChunks(linear, x, T) {
    const out = new Float32Array(T * linear.rows);
    for (let t = 0; t < T; t += this.maxTokens) {
      const n = Math.min(this.maxTokens, T - t);
      out.set(this.linear(linear, x.subarray(t * linear.cols, (t + n) * linear.cols), n), t * linear.rows);
    }
    return out;
  }

  // vector (d_model) . every row of `tensor` (V, d_model): the logits, a chunk of rows
  // at a time through the dequantised-weight buffer.
  logits(tensor, vector) {
    const cols = tensor.cols;
    if (FUSED.has(tensor.type)) {
      const logits = new Float32Array(tensor.rows);
      const chunk = Math.floor((this.xsumAt - this.outAt) / 4);
      for (let start = 0; start < tensor.rows; start += chunk) {
        const rows = Math.min(chunk, tensor.rows - start);
        logits.set(this.matvec(tensor, vector, start, rows), start);
      }
      return logits;
    }
    const chunk = Math.floor(this.maxMatrix / cols);
    const logits = new Float32Array(tensor.rows);
    this.f32.set(vector, this.xAt / 4);
    for (let start = 0; start < tensor.rows; start += chunk) {
      const rows = Math.min(chunk, tensor.rows - start);
      const src = tensor.bytes.byteOffset + start * tensor.rowBytes;
      if (tensor.type === "Q8_0") this.exports.dequant_q8_0(src, rows * cols / 32, this.weightAt, this.halfAt);
      else if (tensor.type === "Q4_1") this.exports.dequant_q4_1(src, rows * cols / 32, this.weightAt, this.halfAt);
      else for (let r = 0; r < rows; r++) this.dequantRow(tensor, start + r, this.weightAt + r * cols * 4);
      this.exports.matmul(this.xAt, 1, cols, this.weightAt, rows, this.outAt);
      logits.set(this.f32.subarray(this.outAt / 4, this.outAt / 4 + rows), start);
    }
    return logits;
  }
}
