// The forward pass's hot loop in WebAssembly SIMD, assembled here from readable
// instructions (no compiler, no build step, no binary in the repository).
//
// Three functions, on a WebAssembly.Memory that also holds the GGUF file's bytes:
//   dequant_q4_1(src, blocks, dst, half): `blocks` Q4_1 blocks at src -> float32 at dst,
//       value = d * nibble + m in float32, as gguf/quants.py (half: a float16 -> float32
//       table of 65,536 entries in the same memory);
//   dequant_q8_0(src, blocks, dst, half): the same for Q8_0 (value = d * int8);
//   matmul(x, T, cols, W, rows, out): out (T, rows) = x (T, cols) @ W.T, four tokens at
//       a time, four lanes of float32 at a time (cols a multiple of 4).
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
  // params 0..5; i32 locals: r 6, t 7, c 8, wRow 9, x0 10, x1 11, x2 12, x3 13,
  // rowBytes 14, o 15, outStride 16; v128 locals: acc0..acc3 17..20, w 21.
  var X = 0, T = 1, COLS = 2, W = 3, ROWS = 4, OUT = 5;
  var R = 6, TOK = 7, C = 8, WROW = 9, X0 = 10, ROWBYTES = 14, O = 15, STRIDE = 16, ACC = 17, WV = 21;

  function hsum(acc) { // the four lanes of acc, summed: (l0 + l1) + (l2 + l3)
    return code(op.get(acc), op.lane(0), op.get(acc), op.lane(1), op.f32_add,
      op.get(acc), op.lane(2), op.get(acc), op.lane(3), op.f32_add, op.f32_add);
  }
  // acc_k += w * x_k[c .. c+3] for k < n, over the whole row (do-while: cols >= 4).
  function dotLoop(n) {
    var body = [op.get(WROW), op.get(C), op.add, op.v128_load, op.set(WV)];
    for (var k = 0; k < n; k++) {
      body.push(op.get(ACC + k), op.get(WV), op.get(X0 + k), op.get(C), op.add, op.v128_load,
        op.f32x4_mul, op.f32x4_add, op.set(ACC + k));
    }
    return code(op.i32(0), op.set(C), op.loop, body, incr(C, 16),
      op.get(C), op.get(ROWBYTES), op.lt_u, op.br_if(0), op.end);
  }
  // x_k = x + (t + k) * rowBytes; acc_k = 0; dot; out[(t + k) * rows + r] = sum(acc_k).
  function tokens(n) {
    var setup = [];
    for (var k = 0; k < n; k++) {
      setup.push(op.get(X), op.get(TOK), op.i32(k), op.add, op.get(ROWBYTES), op.mul, op.add, op.set(X0 + k),
        op.v128_zero, op.set(ACC + k));
    }
    var store = [op.get(OUT), op.get(TOK), op.get(ROWS), op.mul, op.get(R), op.add, op.i32(2), op.shl, op.add, op.set(O)];
    for (var k2 = 0; k2 < n; k2++) {
      store.push(op.get(O), hsum(ACC + k2), op.f32_store, op.get(O), op.get(STRIDE), op.add, op.set(O));
    }
    return code(setup, dotLoop(n), store, incr(TOK, n));
  }
  var matmulBody = code(
    op.get(COLS), op.i32(2), op.shl, op.set(ROWBYTES),
    op.get(ROWS), op.i32(2), op.shl, op.set(STRIDE),
    op.i32(0), op.set(R),
    op.block, op.loop, // for r in 0 .. rows - 1
    op.get(R), op.get(ROWS), op.ge_u, op.br_if(1),
    op.get(W), op.get(R), op.get(ROWBYTES), op.mul, op.add, op.set(WROW),
    op.i32(0), op.set(TOK),
    op.block, op.loop, // four tokens at a time while t + 4 <= T
    op.get(TOK), op.i32(4), op.add, op.get(T), op.gt_u, op.br_if(1),
    tokens(4), op.br(0),
    op.end, op.end,
    op.block, op.loop, // then one at a time
    op.get(TOK), op.get(T), op.ge_u, op.br_if(1),
    tokens(1), op.br(0),
    op.end, op.end,
    incr(R, 1), op.br(0),
    op.end, op.end
  );
  var matmulLocals = [[11, I32], [5, V128]];

  // --- dequant_q4_1(src, blocks, dst, half) ---------------------------------------------
  // params 0..3; i32 locals: b 4, j 5, q 6; f32 locals: d 7, m 8.
  var SRC = 0, BLOCKS = 1, DST = 2, HALF = 3, B = 4, J = 5, Q = 6, D = 7, M = 8;
  function halfAt(offset) { // half[u16 at src + offset] as f32
    return code(op.get(HALF), op.get(SRC), op.i32(offset), op.add, op.load16_u, op.i32(2), op.shl, op.add, op.f32_load);
  }
  function storeValue(dstOffset, nibble) { // dst[j + dstOffset] = d * nibble + m
    return code(op.get(DST), op.get(J), op.i32(2), op.shl, op.add, op.i32(dstOffset * 4), op.add,
      op.get(D), nibble, op.f32_from_u32, op.f32_mul, op.get(M), op.f32_add, op.f32_store);
  }
  var dequantBody = code(
    op.i32(0), op.set(B),
    op.block, op.loop, // for each block of 32 values (20 bytes)
    op.get(B), op.get(BLOCKS), op.ge_u, op.br_if(1),
    halfAt(0), op.set(D), halfAt(2), op.set(M),
    op.i32(0), op.set(J),
    op.loop, // byte j holds value j (low nibble) and value j + 16 (high nibble)
    op.get(SRC), op.get(J), op.add, op.i32(4), op.add, op.load8_u, op.set(Q),
    storeValue(0, code(op.get(Q), op.i32(15), op.and)),
    storeValue(16, code(op.get(Q), op.i32(4), op.shr_u)),
    incr(J, 1), op.get(J), op.i32(16), op.lt_u, op.br_if(0),
    op.end,
    incr(SRC, 20), incr(DST, 128), incr(B, 1), op.br(0),
    op.end, op.end
  );
  var dequantLocals = [[3, I32], [2, F32]];

  // --- dequant_q8_0(src, blocks, dst, half) ---------------------------------------------
  // Q8_0 blocks of 34 bytes: float16 d, then 32 int8; value = d * int8.
  // Same params and locals as dequant_q4_1 (q unused).
  var dequantQ8Body = code(
    op.i32(0), op.set(B),
    op.block, op.loop, // for each block of 32 values (34 bytes)
    op.get(B), op.get(BLOCKS), op.ge_u, op.br_if(1),
    halfAt(0), op.set(D),
    op.i32(0), op.set(J),
    op.loop,
    op.get(DST), op.get(J), op.i32(2), op.shl, op.add,
    op.get(D), op.get(SRC), op.get(J), op.add, op.i32(2), op.add, op.load8_s, op.f32_from_i32, op.f32_mul,
    op.f32_store,
    incr(J, 1), op.get(J), op.i32(32), op.lt_u, op.br_if(0),
    op.end,
    incr(SRC, 34), incr(DST, 128), incr(B, 1), op.br(0),
    op.end, op.end
  );

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
