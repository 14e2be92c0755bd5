// Reading a GGUF file (llama.cpp's format) in JavaScript: its metadata, its tensors,
// and the dequantisation of one row, exactly as the Python `gguf` package does it
// (gguf/quants.py: Q4_1 and Q8_0 blocks of 32 values, float16 scales).
//
// The weights stay quantised in memory (the file's own bytes, about 94 MB); a matrix
// row becomes float32 only when a matrix product needs it (model.js).
//
// A classic script: in a page or Worker it adds `AttnlabLive.gguf`; in Node
// `require("./gguf.js")` returns the same object.
(function (root) {
  "use strict";

  var GGUF_MAGIC = 0x46554747; // "GGUF", little-endian
  var DEFAULT_ALIGNMENT = 32;
  // ggml_type ids used by SmolLM2's file, with each block's values and bytes.
  var TYPES = {
    0: { name: "F32", blockValues: 1, blockBytes: 4 },
    1: { name: "F16", blockValues: 1, blockBytes: 2 },
    3: { name: "Q4_1", blockValues: 32, blockBytes: 20 }, // f16 d, f16 m, 16 bytes of nibbles
    8: { name: "Q8_0", blockValues: 32, blockBytes: 34 }, // f16 d, 32 int8
  };

  // IEEE half precision to a number (what numpy's float16 -> float32 gives).
  function halfToFloat(bits) {
    var sign = bits & 0x8000 ? -1 : 1;
    var exponent = (bits >> 10) & 0x1f;
    var fraction = bits & 0x3ff;
    if (exponent === 0) return sign * fraction * Math.pow(2, -24);
    if (exponent === 31) return fraction ? NaN : sign * Infinity;
    return sign * (1 + fraction / 1024) * Math.pow(2, exponent - 15);
  }

  // A cursor over the file's header (little-endian throughout).
  function Cursor(bytes) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.bytes = bytes;
    this.offset = 0;
    this.decoder = new TextDecoder("utf-8");
  }
  Cursor.prototype.u32 = function () {
    var value = this.view.getUint32(this.offset, true);
    this.offset += 4;
    return value;
  };
  Cursor.prototype.u64 = function () {
    var low = this.view.getUint32(this.offset, true);
    var high = this.view.getUint32(this.offset + 4, true);
    this.offset += 8;
    return high * 4294967296 + low; // exact below 2**53: every size in a GGUF header
  };
  Cursor.prototype.string = function () {
    var length = this.u64();
    var text = this.decoder.decode(this.bytes.subarray(this.offset, this.offset + length));
    this.offset += length;
    return text;
  };
  // One metadata value of GGUF value type `type`.
  Cursor.prototype.value = function (type) {
    var v = this.view;
    var at = this.offset;
    switch (type) {
      case 0: this.offset += 1; return v.getUint8(at);
      case 1: this.offset += 1; return v.getInt8(at);
      case 2: this.offset += 2; return v.getUint16(at, true);
      case 3: this.offset += 2; return v.getInt16(at, true);
      case 4: return this.u32();
      case 5: this.offset += 4; return v.getInt32(at, true);
      case 6: this.offset += 4; return v.getFloat32(at, true);
      case 7: this.offset += 1; return v.getUint8(at) !== 0;
      case 8: return this.string();
      case 9: {
        var itemType = this.u32();
        var count = this.u64();
        var items = new Array(count);
        for (var i = 0; i < count; i++) items[i] = this.value(itemType);
        return items;
      }
      case 10: return this.u64();
      case 11: this.offset += 8; return Number(v.getBigInt64(at, true));
      case 12: this.offset += 8; return v.getFloat64(at, true);
      default: throw new Error("GGUF: unknown metadata value type " + type);
    }
  };

  // A quantised matrix of `rows` x `cols` (GGUF dims are innermost first: [cols, rows]).
  // `row(r, out)` writes row r as float32 into `out` (length cols).
  function Tensor(name, dims, type, bytes) {
    var info = TYPES[type];
    if (!info) throw new Error("GGUF: tensor " + name + " has unsupported type " + type);
    this.name = name;
    this.type = info.name;
    this.cols = dims[0];
    this.rows = dims.length > 1 ? dims[1] : 1;
    this.bytes = bytes; // Uint8Array over the file's own buffer
    this.rowBytes = (this.cols / info.blockValues) * info.blockBytes;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.int8 = new Int8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    // float16 -> number for every possible bit pattern: scale lookups cost one read.
    this.half = HALF_TABLE;
  }

  var HALF_TABLE = new Float32Array(65536);
  for (var h = 0; h < 65536; h++) HALF_TABLE[h] = halfToFloat(h);

  // Q4_1: value = d * nibble + m; byte j holds value j (low nibble) and j + 16 (high).
  function rowQ4_1(tensor, r, out) {
    var bytes = tensor.bytes;
    var half = tensor.half;
    var at = r * tensor.rowBytes;
    for (var block = 0; block < tensor.cols; block += 32) {
      var d = half[bytes[at] | (bytes[at + 1] << 8)];
      var m = half[bytes[at + 2] | (bytes[at + 3] << 8)];
      var qs = at + 4;
      for (var j = 0; j < 16; j++) {
        var q = bytes[qs + j];
        // Math.fround: numpy rounds d * q to float32 before adding m; so do we.
        out[block + j] = Math.fround(d * (q & 15)) + m;
        out[block + j + 16] = Math.fround(d * (q >> 4)) + m;
      }
      at += 20;
    }
  }

  // Q8_0: value = d * int8.
  function rowQ8_0(tensor, r, out) {
    var bytes = tensor.bytes;
    var int8 = tensor.int8;
    var half = tensor.half;
    var at = r * tensor.rowBytes;
    for (var block = 0; block < tensor.cols; block += 32) {
      var d = half[bytes[at] | (bytes[at + 1] << 8)];
      for (var j = 0; j < 32; j++) out[block + j] = d * int8[at + 2 + j];
      at += 34;
    }
  }

  function rowF32(tensor, r, out) {
    var at = r * tensor.rowBytes;
    for (var j = 0; j < tensor.cols; j++) out[j] = tensor.view.getFloat32(at + 4 * j, true);
  }

  function rowF16(tensor, r, out) {
    var at = r * tensor.rowBytes;
    for (var j = 0; j < tensor.cols; j++) out[j] = tensor.half[tensor.view.getUint16(at + 2 * j, true)];
  }

  var ROW_READERS = { Q4_1: rowQ4_1, Q8_0: rowQ8_0, F32: rowF32, F16: rowF16 };

  Tensor.prototype.row = function (r, out) {
    ROW_READERS[this.type](this, r, out);
    return out;
  };

  // The whole tensor as float32 (used for the small ones: norms' weights).
  Tensor.prototype.toFloat32 = function () {
    var out = new Float32Array(this.rows * this.cols);
    for (var r = 0; r < this.rows; r++) this.row(r, out.subarray(r * this.cols, (r + 1) * this.cols));
    return out;
  };

  // Parse a whole GGUF file held in an ArrayBuffer or a Uint8Array: {version, metadata,
  // tensors}; the tensors are views on those bytes (nothing is copied).
  function readGguf(file) {
    var bytes = file instanceof Uint8Array ? file : new Uint8Array(file);
    var cursor = new Cursor(bytes);
    if (bytes.byteLength < 24 || cursor.u32() !== GGUF_MAGIC) {
      throw new Error("GGUF: not a GGUF file (bad magic)");
    }
    var version = cursor.u32();
    if (version < 2) throw new Error("GGUF: version " + version + " is not supported");
    var tensorCount = cursor.u64();
    var kvCount = cursor.u64();
    var metadata = {};
    for (var k = 0; k < kvCount; k++) {
      var key = cursor.string();
      metadata[key] = cursor.value(cursor.u32());
    }
    var infos = [];
    for (var t = 0; t < tensorCount; t++) {
      var name = cursor.string();
      var nDims = cursor.u32();
      var dims = [];
      for (var d = 0; d < nDims; d++) dims.push(cursor.u64());
      infos.push({ name: name, dims: dims, type: cursor.u32(), offset: cursor.u64() });
    }
    var alignment = metadata["general.alignment"] || DEFAULT_ALIGNMENT;
    var dataStart = Math.ceil(cursor.offset / alignment) * alignment;
    var tensors = {};
    infos.forEach(function (info) {
      var typeInfo = TYPES[info.type];
      if (!typeInfo) throw new Error("GGUF: tensor " + info.name + " has unsupported type " + info.type);
      var values = info.dims.reduce(function (a, b) { return a * b; }, 1);
      var byteLength = (values / typeInfo.blockValues) * typeInfo.blockBytes;
      var start = dataStart + info.offset;
      if (start + byteLength > bytes.byteLength) throw new Error("GGUF: file is truncated");
      tensors[info.name] = new Tensor(info.name, info.dims, info.type, bytes.subarray(start, start + byteLength));
    });
    return { version: version, metadata: metadata, tensors: tensors };
  }

  var api = { readGguf: readGguf, halfToFloat: halfToFloat, Tensor: Tensor };
  if (typeof module === "object" && module.exports) module.exports = api;
  else {
    root.AttnlabLive = root.AttnlabLive || {};
    root.AttnlabLive.gguf = api;
  }
})(typeof self !== "undefined" ? self : this);
