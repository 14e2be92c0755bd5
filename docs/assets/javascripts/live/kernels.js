// The forward pass's hot loop in WebAssembly SIMD, assembled here from readable
// instructions (no compiler, no build step, no binary in the repository).
//
// Three functions, on a WebAssembly.Memory that also holds the GGUF file's bytes:
//   dequant_q4_1(src, blocks, dst, half): `blocks` Q4_1 blocks at src -> float32 at dst,
//       value = d * nibble + m in float32, as gguf/quants.py (half: a float16 -> float32
//       table of 65,536 entries in the same memory);
//   dequant_q8_0(src, blocks, dst, half): the same for Q8_0 (value = d * int8);
//   matmul(x, T, cols, W, rows, out): out (T, rows) = x (T, cols) @ W.T, in tiles of
//       three rows by two tokens, four lanes of float32 at a time (cols a multiple of 4).
// model.js's matmulTransposed is the same product in plain JavaScript; the results agree
// to float32 rounding (the sums are added in another order).
//
// A classic script: in a page or Worker it adds `AttnlabLive.kernels`; in Node
// `require("./kernels.js")` returns the same object.
(function (root) {
  "use strict";

  var gguf = typeof module === "object" && module.exports ? require("./gguf.js") : root.AttnlabLive.gguf;

  // --- a tiny assembler: WebAssembly's binary format, one instruction per helper -------

  var I32 = 0x7f;
  var F32 = 0x7d;
  var V128 = 0x7b;

  function uleb(n) {
    var out = [];
    do {
      var byte = n & 0x7f;
      n >>>= 7;
      out.push(n ? byte | 0x80 : byte);
    } while (n);
    return out;
  }
  function sleb(n) {
    var out = [];
    for (;;) {
      var byte = n & 0x7f;
      n >>= 7;
      var done = (n === 0 && !(byte & 0x40)) || (n === -1 && byte & 0x40);
      out.push(done ? byte : byte | 0x80);
      if (done) return out;
    }
  }
  function str(s) {
    var bytes = Array.from(new TextEncoder().encode(s));
    return uleb(bytes.length).concat(bytes);
  }
  function vec(items) {
    return uleb(items.length).concat([].concat.apply([], items));
  }
  function section(id, body) {
    return [id].concat(uleb(body.length), body);
  }

  var op = {
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
    f32_add: [0x92], f32_mul: [0x94], f32_from_u32: [0xb3], f32_from_i32: [0xb2],
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
    var out = [];
    (function walk(items) {
      items.forEach(function (item) { if (Array.isArray(item)) walk(item); else out.push(item); });
    })(Array.prototype.slice.call(arguments));
    return out;
  }
  function incr(local, n) { return code(op.get(local), op.i32(n), op.add, op.set(local)); }

  // --- matmul(x, T, cols, W, rows, out) --------------------------------------------------
  // Tiles of TILE_ROWS weight rows x TILE_TOKENS tokens: each weight vector loaded once
  // serves every token of the tile, each token vector every row (6 products, 5 loads).
  // params 0..5; i32 locals: r, t, c, wRow, x_k (one per token of a tile), rowBytes, o,
  // outStride; v128 locals: acc (row i, token k), then w_i (one per row of a tile).
  var X = 0, T = 1, COLS = 2, W = 3, ROWS = 4, OUT = 5;
  // Measured on the 2-core machine (Node 20, T = 32, a 1536 x 576 matrix): 3 x 2 gave
  // 6-9 GMAC/s, 1 x 4 5-7.5, 2 x 2 and 2 x 4 less (more accumulators than registers).
  var TILE_ROWS = 3;
  var TILE_TOKENS = 2;
  var R = 6, TOK = 7, C = 8, WROW = 9, X0 = 10, ROWBYTES = 10 + TILE_TOKENS, O = 11 + TILE_TOKENS, STRIDE = 12 + TILE_TOKENS;
  var ACC = 13 + TILE_TOKENS, WV = ACC + TILE_ROWS * TILE_TOKENS;

  function hsum(acc) { // the four lanes of acc, summed: (l0 + l1) + (l2 + l3)
    return code(op.get(acc), op.lane(0), op.get(acc), op.lane(1), op.f32_add,
      op.get(acc), op.lane(2), op.get(acc), op.lane(3), op.f32_add, op.f32_add);
  }
  // acc(i, k) += w_i * x_k[c .. c+3] for rows i < nRows, tokens k < nTok, over the whole
  // row (do-while: cols >= 4); row i's weights start at wRow + i * rowBytes.
  function dotLoop(nRows, nTok) {
    var body = [];
    for (var i = 0; i < nRows; i++) {
      var rowOffset = i ? [op.get(ROWBYTES), op.i32(i), op.mul, op.add] : []; // + i * rowBytes
      body.push(op.get(WROW), op.get(C), op.add, rowOffset, op.v128_load, op.set(WV + i));
    }
    for (var k = 0; k < nTok; k++) {
      for (var i2 = 0; i2 < nRows; i2++) {
        var acc = ACC + TILE_TOKENS * i2 + k;
        body.push(op.get(acc), op.get(WV + i2), op.get(X0 + k), op.get(C), op.add, op.v128_load,
          op.f32x4_mul, op.f32x4_add, op.set(acc));
      }
    }
    return code(op.i32(0), op.set(C), op.loop, body, incr(C, 16),
      op.get(C), op.get(ROWBYTES), op.lt_u, op.br_if(0), op.end);
  }
  // x_k = x + (t + k) * rowBytes; acc = 0; dot; out[(t + k) * rows + r + i] = sum(acc(i, k)).
  function tile(nRows, nTok) {
    var setup = [];
    for (var k = 0; k < nTok; k++) {
      setup.push(op.get(X), op.get(TOK), op.i32(k), op.add, op.get(ROWBYTES), op.mul, op.add, op.set(X0 + k));
      for (var i = 0; i < nRows; i++) setup.push(op.v128_zero, op.set(ACC + TILE_TOKENS * i + k));
    }
    var store = [op.get(OUT), op.get(TOK), op.get(ROWS), op.mul, op.get(R), op.add, op.i32(2), op.shl, op.add, op.set(O)];
    for (var k2 = 0; k2 < nTok; k2++) {
      for (var i2 = 0; i2 < nRows; i2++) {
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
  var matmulBody = code(
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
  var matmulLocals = [[7 + TILE_TOKENS, I32], [TILE_ROWS * TILE_TOKENS + TILE_ROWS, V128]];

  // --- dequant_q4_1(src, blocks, dst, half) and dequant_q8_0 -----------------------------
  // params 0..3; i32 local: b 4; v128 locals: d 5, m 6, bytes 7, half16 8.
  // Sixteen bytes widen to sixteen float32 lanes in four steps of four:
  // u8/i8 x16 -> (low, high) 16-bit x8 -> (low, high) 32-bit x4 -> float32 x4.
  var SRC = 0, BLOCKS = 1, DST = 2, HALF = 3, B = 4, DV = 5, MV = 6, BYTES = 7, HALF16 = 8;
  function halfAt(offset) { // half[u16 at src + offset] as f32
    return code(op.get(HALF), op.get(SRC), op.i32(offset), op.add, op.load16_u, op.i32(2), op.shl, op.add, op.f32_load);
  }
  // dst[offset .. offset + 15] = d * bytes + (m) for the 16 bytes in local BYTES.
  function widenStore(offset, signed, withMinimum) {
    var to16 = signed ? [op.i16_low_s, op.i16_high_s] : [op.i16_low_u, op.i16_high_u];
    var to32 = signed ? [op.i32_low_s, op.i32_high_s] : [op.i32_low_u, op.i32_high_u];
    var toFloat = signed ? op.f32x4_from_i32 : op.f32x4_from_u32;
    var out = [];
    for (var half = 0; half < 2; half++) {
      out.push(op.get(BYTES), to16[half], op.set(HALF16));
      for (var quarter = 0; quarter < 2; quarter++) {
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
  var dequantBody = blockLoop(20, code(
    halfAt(0), op.f32x4_splat, op.set(DV), halfAt(2), op.f32x4_splat, op.set(MV),
    op.get(SRC), op.i32(4), op.add, op.v128_load, op.i32(15), op.i8x16_splat, op.v128_and, op.set(BYTES),
    widenStore(0, false, true),
    op.get(SRC), op.i32(4), op.add, op.v128_load, op.i32(4), op.i8x16_shr_u, op.set(BYTES),
    widenStore(16, false, true)
  ));
  // Q8_0 (34 bytes): float16 d, then 32 int8; value = d * int8.
  var dequantQ8Body = blockLoop(34, code(
    halfAt(0), op.f32x4_splat, op.set(DV),
    op.get(SRC), op.i32(2), op.add, op.v128_load, op.set(BYTES), widenStore(0, true, false),
    op.get(SRC), op.i32(18), op.add, op.v128_load, op.set(BYTES), widenStore(16, true, false)
  ));
  var dequantLocals = [[1, I32], [4, V128]];

  function functionBody(locals, body) {
    var bytes = vec(locals.map(function (l) { return uleb(l[0]).concat([l[1]]); })).concat(body, op.end);
    return uleb(bytes.length).concat(bytes);
  }

  // The module's bytes: imports env.memory, exports matmul, dequant_q4_1, dequant_q8_0.
  function moduleBytes() {
    var types = vec([
      [0x60].concat(vec([[I32], [I32], [I32], [I32], [I32], [I32]]), vec([])), // matmul
      [0x60].concat(vec([[I32], [I32], [I32], [I32]]), vec([])), // dequant_q4_1
    ]);
    var imports = vec([str("env").concat(str("memory"), [0x02, 0x00], uleb(1))]);
    var functions = vec([uleb(0), uleb(1), uleb(1)]);
    var exports = vec([
      str("matmul").concat([0x00], uleb(0)),
      str("dequant_q4_1").concat([0x00], uleb(1)),
      str("dequant_q8_0").concat([0x00], uleb(2)),
    ]);
    var bodies = vec([
      functionBody(matmulLocals, matmulBody),
      functionBody(dequantLocals, dequantBody),
      functionBody(dequantLocals, dequantQ8Body),
    ]);
    return new Uint8Array([0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00].concat(
      section(1, types), section(2, imports), section(3, functions), section(7, exports), section(10, bodies)));
  }

  function simdSupported() {
    try {
      return typeof WebAssembly === "object" && WebAssembly.validate(moduleBytes());
    } catch (error) {
      return false;
    }
  }

  var PAGE = 65536;
  function align(n, to) { return Math.ceil(n / to) * to; }

  // A WebAssembly memory for the file's bytes (from offset 0; fill `bytes`, e.g. while
  // downloading) and, once `reserve` is called, a workspace after them; the kernels;
  // `linear`, which model.js's Linear calls.
  function WasmKernels(fileLength) {
    this.fileLength = fileLength;
    this.memory = new WebAssembly.Memory({ initial: Math.ceil(fileLength / PAGE) });
    var instance = new WebAssembly.Instance(new WebAssembly.Module(moduleBytes()), { env: { memory: this.memory } });
    this.exports = instance.exports;
    this.bytes = new Uint8Array(this.memory.buffer, 0, fileLength);
  }

  // Room after the file for: the float16 table, one dequantised matrix of maxMatrix
  // values, and x and out of maxTokens x maxWidth values each. Growing the memory
  // replaces its buffer: read `bytes` again afterwards (readGguf(kernels.bytes)).
  WasmKernels.prototype.reserve = function (maxMatrix, maxTokens, maxWidth) {
    this.halfAt = align(this.fileLength, 16);
    this.weightAt = this.halfAt + 65536 * 4;
    this.xAt = this.weightAt + maxMatrix * 4;
    this.outAt = this.xAt + maxTokens * maxWidth * 4;
    var end = this.outAt + maxTokens * maxWidth * 4;
    var pages = Math.ceil(end / PAGE) - this.memory.buffer.byteLength / PAGE;
    if (pages > 0) this.memory.grow(pages);
    this.bytes = new Uint8Array(this.memory.buffer, 0, this.fileLength);
    this.f32 = new Float32Array(this.memory.buffer);
    var half = new Float32Array(this.memory.buffer, this.halfAt, 65536);
    for (var h = 0; h < 65536; h++) half[h] = gguf.halfToFloat(h);
    this.maxTokens = maxTokens;
    this.maxMatrix = maxMatrix;
    return this;
  };

  // x (T, cols) @ W.T for a Linear (model.js) over a Q4_1 tensor of this memory:
  // each stored row is dequantised once (in its unpermuted place), then one matmul.
  WasmKernels.prototype.linear = function (linear, x, T) {
    var tensor = linear.tensor;
    var rows = linear.rows;
    var cols = linear.cols;
    var blocks = cols / 32;
    var src = tensor.bytes.byteOffset;
    if (tensor.type === "Q4_1" && !linear.rowOrder) { // the rows in stored order: one call
      this.exports.dequant_q4_1(src, rows * blocks, this.weightAt, this.halfAt);
    } else for (var r = 0; r < rows; r++) {
      var stored = linear.rowOrder ? linear.rowOrder[r] : r;
      var dst = this.weightAt + r * cols * 4;
      if (tensor.type === "Q4_1") this.exports.dequant_q4_1(src + stored * tensor.rowBytes, blocks, dst, this.halfAt);
      else tensor.row(stored, this.f32.subarray(dst / 4, dst / 4 + cols)); // other types: gguf.js
    }
    this.f32.set(x.subarray(0, T * cols), this.xAt / 4);
    this.exports.matmul(this.xAt, T, cols, this.weightAt, rows, this.outAt);
    return this.f32.slice(this.outAt / 4, this.outAt / 4 + T * rows);
  };

  // The tied logits: vector (d_model) . every row of the Q8_0 embedding (V, d_model),
  // a chunk of rows at a time through the dequantised-weight buffer.
  WasmKernels.prototype.tiedLogits = function (tensor, vector) {
    var cols = tensor.cols;
    var chunk = Math.floor(this.maxMatrix / cols);
    var logits = new Float32Array(tensor.rows);
    this.f32.set(vector, this.xAt / 4);
    for (var start = 0; start < tensor.rows; start += chunk) {
      var rows = Math.min(chunk, tensor.rows - start);
      this.exports.dequant_q8_0(tensor.bytes.byteOffset + start * tensor.rowBytes, rows * cols / 32, this.weightAt, this.halfAt);
      this.exports.matmul(this.xAt, 1, cols, this.weightAt, rows, this.outAt);
      logits.set(this.f32.subarray(this.outAt / 4, this.outAt / 4 + rows), start);
    }
    return logits;
  };

  var api = { WasmKernels: WasmKernels, moduleBytes: moduleBytes, simdSupported: simdSupported };
  if (typeof module === "object" && module.exports) module.exports = api;
  else {
    root.AttnlabLive = root.AttnlabLive || {};
    root.AttnlabLive.kernels = api;
  }
})(typeof self !== "undefined" ? self : this);
