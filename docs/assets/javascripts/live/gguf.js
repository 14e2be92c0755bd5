// Reading a GGUF file (llama.cpp's format) in JavaScript: its metadata and its tensors,
// parsed once; a tensor's rows dequantised on demand by quants.js, exactly as the Python
// `gguf` package does it (gguf/quants.py).
//
// The weights stay quantised in memory (the file's own bytes); a matrix row becomes
// float32 only when a matrix product needs it (model.js, kernels.js). Nothing here
// knows a model family: families/*.js read the metadata and name the tensors.

import { QUANT_TYPES, halfToFloat, rowReader } from "./quants.js";

export { halfToFloat };
export const GGUF_MAGIC = 0x46554747; // "GGUF", little-endian
const DEFAULT_ALIGNMENT = 32;

// float16 -> number for every bit pattern (the kernels' scale table).
export const HALF_TABLE = new Float32Array(65536);
for (let h = 0; h < 65536; h++) HALF_TABLE[h] = halfToFloat(h);

// ggml type number -> {name, blockValues, blockBytes, row}: every type quants.js
// dequantises (bit for bit as gguf-py), with its row reader.
export const TYPES = Object.fromEntries(
  Object.entries(QUANT_TYPES).map(([name, info]) => [
    info.id,
    { name, blockValues: info.blockValues, blockBytes: info.blockBytes, row: rowReader(name) },
  ])
);

// A cursor over the file's header (little-endian throughout).
class Cursor {
  constructor(bytes) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.bytes = bytes;
    this.offset = 0;
    this.decoder = new TextDecoder("utf-8");
  }
  need(n) {
    if (this.offset + n > this.bytes.byteLength) throw new RangeError("GGUF: the header is truncated");
  }
  u32() {
    this.need(4);
    const value = this.view.getUint32(this.offset, true);
    this.offset += 4;
    return value;
  }
  u64() {
    this.need(8);
    const low = this.view.getUint32(this.offset, true);
    const high = this.view.getUint32(this.offset + 4, true);
    this.offset += 8;
    return high * 4294967296 + low; // exact below 2**53: every size in a GGUF header
  }
  string() {
    const length = this.u64();
    this.need(length);
    const text = this.decoder.decode(this.bytes.subarray(this.offset, this.offset + length));
    this.offset += length;
    return text;
  }
  // One metadata value of GGUF value type `type`.
  value(type) {
    const v = this.view;
    const at = this.offset;
    const fixed = { 0: 1, 1: 1, 2: 2, 3: 2, 5: 4, 6: 4, 7: 1, 11: 8, 12: 8 }[type];
    if (fixed) this.need(fixed);
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
        const itemType = this.u32();
        const count = this.u64();
        const items = new Array(count);
        for (let i = 0; i < count; i++) items[i] = this.value(itemType);
        return items;
      }
      case 10: return this.u64();
      case 11: this.offset += 8; return Number(v.getBigInt64(at, true));
      case 12: this.offset += 8; return v.getFloat64(at, true);
      default: throw new Error(`GGUF: unknown metadata value type ${type}`);
    }
  }
}

// A tensor of the file: `rows` x `cols` (GGUF dims are innermost first: [cols, rows]),
// its bytes a view on the file's. `row(r, out)` writes row r as float32 into `out`.
export class Tensor {
  constructor(name, dims, typeId, offset, byteLength, file) {
    const info = TYPES[typeId];
    this.name = name;
    this.dims = dims;
    this.typeId = typeId;
    this.type = info.name;
    this.cols = dims[0];
    this.rows = dims.slice(1).reduce((a, b) => a * b, 1);
    this.offset = offset; // in the file
    this.byteLength = byteLength;
    this.rowBytes = (this.cols / info.blockValues) * info.blockBytes;
    this.reader = info.row;
    this.bind(file);
  }
  // Views on `file` (a Uint8Array of the whole file): again after its buffer moves.
  bind(file) {
    this.bytes = file.subarray(this.offset, this.offset + this.byteLength);
    this.view = new DataView(this.bytes.buffer, this.bytes.byteOffset, this.byteLength);
    this.int8 = new Int8Array(this.bytes.buffer, this.bytes.byteOffset, this.byteLength);
  }
  row(r, out) {
    this.reader(this, r, out);
    return out;
  }
  // The whole tensor as float32 (used for the small ones: norms' weights, biases).
  toFloat32() {
    const out = new Float32Array(this.rows * this.cols);
    for (let r = 0; r < this.rows; r++) this.row(r, out.subarray(r * this.cols, (r + 1) * this.cols));
    return out;
  }
}

// A parsed GGUF file: {version, metadata, tensors (name -> Tensor), bytes}. `rebind`
// moves every tensor's views to a new copy of the same bytes (WebAssembly memory that
// grew) without reading the header again.
export class GgufFile {
  constructor(version, metadata, tensors, bytes) {
    this.version = version;
    this.metadata = metadata;
    this.tensors = tensors;
    this.bytes = bytes;
    this.byteLength = bytes.byteLength;
  }
  rebind(bytes) {
    if (bytes.byteLength !== this.byteLength) throw new RangeError("GGUF: rebind needs the same bytes");
    this.bytes = bytes;
    for (const tensor of Object.values(this.tensors)) tensor.bind(bytes);
    return this;
  }
}

// Parse a whole GGUF file held in an ArrayBuffer or a Uint8Array (nothing is copied).
// Refuses, naming what is wrong: not GGUF, an old version, a truncated file, a tensor
// type this reader does not know.
export function readGguf(file) {
  const bytes = file instanceof Uint8Array ? file : new Uint8Array(file);
  const cursor = new Cursor(bytes);
  if (bytes.byteLength < 24 || cursor.u32() !== GGUF_MAGIC) {
    throw new TypeError("GGUF: not a GGUF file (it does not start with the bytes 'GGUF')");
  }
  const version = cursor.u32();
  if (version < 2) throw new RangeError(`GGUF: version ${version} is not supported (2 or 3 are)`);
  const tensorCount = cursor.u64();
  const kvCount = cursor.u64();
  const metadata = {};
  for (let k = 0; k < kvCount; k++) {
    const key = cursor.string();
    metadata[key] = cursor.value(cursor.u32());
  }
  const infos = [];
  for (let t = 0; t < tensorCount; t++) {
    const name = cursor.string();
    const nDims = cursor.u32();
    const dims = [];
    for (let d = 0; d < nDims; d++) dims.push(cursor.u64());
    infos.push({ name, dims, type: cursor.u32(), offset: cursor.u64() });
  }
  const alignment = metadata["general.alignment"] || DEFAULT_ALIGNMENT;
  const dataStart = Math.ceil(cursor.offset / alignment) * alignment;
  const tensors = {};
  for (const info of infos) {
    const typeInfo = TYPES[info.type];
    if (!typeInfo) {
      const known = Object.values(TYPES).map((t) => t.name).join(", ");
      throw new RangeError(`GGUF: tensor ${info.name} has ggml type ${info.type}, which this page cannot read (it reads ${known})`);
    }
    const values = info.dims.reduce((a, b) => a * b, 1);
    const byteLength = (values / typeInfo.blockValues) * typeInfo.blockBytes;
    const start = dataStart + info.offset;
    if (start + byteLength > bytes.byteLength) throw new RangeError("GGUF: the file is truncated");
    tensors[info.name] = new Tensor(info.name, info.dims, info.type, start, byteLength, bytes);
  }
  return new GgufFile(version, metadata, tensors, bytes);
}
