// @ts-check
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

// ggml's type numbers by name: the page reads the TYPES above; the others are named
// when refused. (gguf-py's GGMLQuantizationType.)
const GGML_TYPE_NAMES = [
  "F32", "F16", "Q4_0", "Q4_1", null, null, "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q2_K", "Q3_K",
  "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S",
  "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64", "IQ1_M", "BF16", null, null, null,
  "TQ1_0", "TQ2_0",
];
// GGUF metadata value types: id -> bytes of a fixed-size value (0: a string or an array)
const VALUE_BYTES = [1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8];
const STRING = 8;
const ARRAY = 9;
// GGUF metadata value types by id, as attnlab.llama's gguf_file names them
const VALUE_TYPE_NAMES = [
  "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array",
  "uint64", "int64", "float64",
];
const MAX_DIMS = 4; // ggml's GGML_MAX_DIMS
// the fewest bytes one metadata entry / one tensor entry can take
const MIN_KV_BYTES = 8 + 4 + 1;
const MIN_TENSOR_INFO_BYTES = 8 + 4 + 8 + 4 + 8;
// the most items all metadata arrays may hold together (a real vocabulary, its merges,
// scores and types: about 1.5 million), which bounds the memory the metadata takes
const MAX_ARRAY_ITEMS = 2 ** 24;

/**
 * A float as Python's repr writes it: the shortest digits that read back (as JavaScript's),
 * "30.0" for a whole number, an exponent below 1e-4 and from 1e16 on ("1e-05", "1e+16").
 * @param {number} x
 * @returns {string}
 */
export function floatText(x) {
  if (Number.isNaN(x)) return "nan";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  if (Object.is(x, -0)) return "-0.0";
  const [digits, exponent] = x.toExponential().split("e");
  const power = Number(exponent);
  if (x !== 0 && (power < -4 || power >= 16)) {
    return `${digits}e${power < 0 ? "-" : "+"}${String(Math.abs(power)).padStart(2, "0")}`;
  }
  const text = String(x);
  return text.includes(".") ? text : `${text}.0`;
}

/**
 * A metadata value as Python's repr writes the value attnlab.llama read: its GGUF type
 * (`type`: gguf.js's type names, "array[float32]" for arrays) tells a float (30.0) from an
 * int (30).
 * @param {unknown} value
 * @param {string} [type]
 * @returns {string}
 */
export function typedRepr(value, type) {
  const float = type !== undefined && /float/.test(type);
  if (float && typeof value === "number") return floatText(value);
  if (float && Array.isArray(value)) return `[${value.map((v) => (typeof v === "number" ? floatText(v) : repr(v))).join(", ")}]`;
  return repr(value);
}

/**
 * A value as Python's repr writes it, for messages worded as attnlab.llama's.
 * @param {unknown} value
 * @returns {string}
 */
export function repr(value) {
  if (typeof value === "string") return `'${value}'`;
  if (typeof value === "number") {
    if (Number.isNaN(value)) return "nan";
    if (!Number.isFinite(value)) return value > 0 ? "inf" : "-inf";
  }
  if (Array.isArray(value)) return `[${value.map(repr).join(", ")}]`;
  if (value === undefined || value === null) return "None";
  if (typeof value === "boolean") return value ? "True" : "False";
  return String(value);
}

/**
 * A shape as Python's tuple: (256,) or (64, 256).
 * @param {number[]} shape
 * @returns {string}
 */
export const shapeText = (shape) => `(${shape.join(", ")}${shape.length === 1 ? "," : ""})`;

/** @param {string} message @returns {RangeError} */
const refuse = (message) => new RangeError(message);

// A cursor over the file's header (little-endian throughout): every field checked
// against the bytes left before anything is allocated or looped over, as
// attnlab.llama.open_gguf does, with its words.
class Cursor {
  /** @param {Uint8Array} bytes */
  constructor(bytes) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.bytes = bytes;
    this.size = bytes.byteLength;
    this.offset = 0;
    this.items = 0; // array items read so far
    this.itemType = 0; // the item type of the array read last
    this.decoder = new TextDecoder("utf-8", { fatal: true });
  }
  left() {
    return this.size - this.offset;
  }
  /**
   * Reserve n bytes for `what`; their offset.
   * @param {number} n
   * @param {string} what
   * @returns {number}
   */
  take(n, what) {
    if (n > this.left()) {
      throw refuse(`the GGUF file is truncated: ${what} at byte ${this.offset} needs ${n} bytes, ${this.left()} are left`);
    }
    const at = this.offset;
    this.offset += n;
    return at;
  }
  /** @param {string} what @returns {number} */
  u32(what) {
    return this.view.getUint32(this.take(4, what), true);
  }
  /** @param {string} what @returns {bigint} */
  u64(what) {
    return this.view.getBigUint64(this.take(8, what), true); // a BigInt: exact
  }
  /**
   * A uint64 count of items of at least itemBytes each, checked to fit (a Number).
   * @param {string} what
   * @param {number} itemBytes
   * @returns {number}
   */
  count(what, itemBytes) {
    const n = this.u64(what);
    if (n * BigInt(itemBytes) > BigInt(this.left())) {
      throw refuse(`the GGUF file's ${what} is ${n}, more than the ${this.left()} bytes left can hold (${itemBytes} bytes or more each): the file is truncated or corrupt`);
    }
    return Number(n);
  }
  /** @param {string} what @returns {string} */
  string(what) {
    const length = this.count(`length of ${what}`, 1);
    const at = this.take(length, what);
    try {
      const view = this.bytes.subarray(at, at + length);
      // a shared memory's bytes (threads.js) are copied out: browsers decode no shared view
      return this.decoder.decode(view.buffer instanceof ArrayBuffer ? view : view.slice());
    } catch {
      throw refuse(`the GGUF file's ${what} is not UTF-8 text`);
    }
  }
  /**
   * One metadata value of GGUF value type `type`.
   * @param {number} type
   * @param {string} what
   * @returns {unknown}
   */
  value(type, what) {
    if (!(type >= 0 && type < VALUE_BYTES.length)) {
      throw refuse(`the GGUF file's ${what} has value type ${type}; GGUF's types are 0 to 12`);
    }
    if (type === STRING) return this.string(what);
    if (type === ARRAY) return this.array(what);
    const v = this.view;
    const at = this.take(VALUE_BYTES[type], what);
    switch (type) {
      case 0: return v.getUint8(at);
      case 1: return v.getInt8(at);
      case 2: return v.getUint16(at, true);
      case 3: return v.getInt16(at, true);
      case 4: return v.getUint32(at, true);
      case 5: return v.getInt32(at, true);
      case 6: return v.getFloat32(at, true);
      case 7: return v.getUint8(at) !== 0;
      case 10: return safeNumber(v.getBigUint64(at, true));
      case 11: return safeNumber(v.getBigInt64(at, true));
      default: return v.getFloat64(at, true);
    }
  }
  /** @param {string} what @returns {unknown[]} */
  array(what) {
    const itemType = this.u32(`item type of ${what}`);
    this.itemType = itemType; // the last array's (arrays hold no arrays): its type's name
    if (!(itemType >= 0 && itemType < VALUE_BYTES.length) || itemType === ARRAY) {
      throw refuse(`the GGUF file's ${what} is an array of value type ${itemType}; arrays hold types 0 to 8 or 10 to 12`);
    }
    const itemBytes = itemType === STRING ? 8 : VALUE_BYTES[itemType];
    const n = this.count(`array length of ${what}`, itemBytes); // at most the bytes left
    this.items += n;
    if (this.items > MAX_ARRAY_ITEMS) {
      throw refuse(`the GGUF file's array length of ${what} is ${n}, past the ${MAX_ARRAY_ITEMS} items the metadata's arrays may hold in all`);
    }
    const items = new Array(n);
    for (let i = 0; i < n; i++) items[i] = this.value(itemType, itemType === STRING ? `${what}[${i}]` : what);
    return items;
  }
}

// A 64-bit integer as a Number where exact, else as the BigInt (refused where used).
/** @param {bigint} big @returns {number | bigint} */
const safeNumber = (big) => (big <= BigInt(Number.MAX_SAFE_INTEGER) && big >= -BigInt(Number.MAX_SAFE_INTEGER) ? Number(big) : big);

/**
 * Where a tensor lies in its file: new Tensor's options.
 * @typedef {object} TensorPlace
 * @property {string} name
 * @property {number[]} dims innermost first
 * @property {number} typeId ggml's type number
 * @property {number} offset bytes from the file's start
 * @property {number} byteLength
 * @property {Uint8Array} file the whole file's bytes
 */

/** A tensor of the file: `rows` x `cols` (GGUF dims are innermost first: [cols, rows]),
 * its bytes a view on the file's. `row(r, out)` writes row r as float32 into `out`. */
export class Tensor {
  /** @param {TensorPlace} options */
  constructor({ name, dims, typeId, offset, byteLength, file }) {
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
    this.bytes = file.subarray(offset, offset + byteLength);
    this.view = new DataView(this.bytes.buffer, this.bytes.byteOffset, byteLength);
    this.int8 = new Int8Array(this.bytes.buffer, this.bytes.byteOffset, byteLength);
  }

  /**
   * Views on `file` (a Uint8Array of the whole file): again after its buffer moves.
   * @param {Uint8Array} file
   */
  bind(file) {
    this.bytes = file.subarray(this.offset, this.offset + this.byteLength);
    this.view = new DataView(this.bytes.buffer, this.bytes.byteOffset, this.byteLength);
    this.int8 = new Int8Array(this.bytes.buffer, this.bytes.byteOffset, this.byteLength);
  }
  /**
   * Row r as float32, written into `out` (cols values).
   * @param {number} r
   * @param {Float32Array} out
   * @returns {Float32Array} out
   */
  row(r, out) {
    this.reader(this, r, out);
    return out;
  }

  /**
   * The whole tensor as float32 (used for the small ones: norms' weights, biases).
   * @returns {Float32Array}
   */
  toFloat32() {
    const out = new Float32Array(this.rows * this.cols);
    for (let r = 0; r < this.rows; r++) this.row(r, out.subarray(r * this.cols, (r + 1) * this.cols));
    return out;
  }
}

// A parsed GGUF file: {version, metadata, types, tensors (name -> Tensor), bytes}; `types`
// holds each metadata key's GGUF value type ("uint32", "float32", "array[int32]", ...), as
// attnlab.llama knows a value's type from the value it read. `rebind`
// moves every tensor's views to a new copy of the same bytes (WebAssembly memory that
// grew) without reading the header again.
export class GgufFile {
  /**
   * @param {{version: number, metadata: Record<string, any>, types: Record<string, string>, tensors: Record<string, Tensor>, bytes: Uint8Array}} options
   *   the GGUF version, the metadata by key, each key's value type, the tensors by name,
   *   and the whole file's bytes
   */
  constructor({ version, metadata, types, tensors, bytes }) {
    this.version = version;
    this.metadata = metadata;
    this.types = types;
    this.tensors = tensors;
    this.bytes = bytes;
    this.byteLength = bytes.byteLength;
  }
  /**
   * @param {Uint8Array} bytes the same bytes, elsewhere
   * @returns {GgufFile}
   */
  rebind(bytes) {
    if (bytes.byteLength !== this.byteLength) throw new RangeError("GGUF: rebind needs the same bytes");
    this.bytes = bytes;
    for (const tensor of Object.values(this.tensors)) tensor.bind(bytes);
    return this;
  }
}

// Parse a whole GGUF file held in an ArrayBuffer or a Uint8Array (nothing is copied).
// Every count, length, type, rank, dimension, offset and the alignment is checked
// before anything is allocated or looped over; a refusal names the field and its value
// in attnlab.llama.open_gguf's words.
/**
 * @param {ArrayBuffer | Uint8Array} file
 * @returns {GgufFile}
 */
export function readGguf(file) {
  const bytes = file instanceof Uint8Array ? file : new Uint8Array(file);
  const cursor = new Cursor(bytes);
  if (bytes.byteLength < 4 || cursor.u32("the magic") !== GGUF_MAGIC) {
    const start = [...bytes.subarray(0, 4)].map((b) => b.toString(16).padStart(2, "0")).join(" ");
    throw new TypeError(`the file is not a GGUF file: it starts with the bytes [${start}], not 'GGUF'`);
  }
  const version = cursor.u32("the version");
  if (version !== 2 && version !== 3) throw refuse(`the GGUF file's version is ${version}; GGUF versions 2 and 3 are read`);
  const tensorCount = cursor.u64("tensor_count");
  const kvCount = cursor.count("kv_count", MIN_KV_BYTES);
  if (tensorCount * BigInt(MIN_TENSOR_INFO_BYTES) > BigInt(cursor.left())) {
    throw refuse(`the GGUF file's tensor_count is ${tensorCount}, more than the ${cursor.left()} bytes left can hold (${MIN_TENSOR_INFO_BYTES} bytes or more each): the file is truncated or corrupt`);
  }
  const metadata = Object.create(null);
  /** @type {Record<string, string>} */
  const types = Object.create(null);
  for (let k = 0; k < kvCount; k++) {
    const key = cursor.string(`metadata key #${k}`);
    if (key in metadata) throw refuse(`the GGUF file's metadata key ${repr(key)} appears twice`);
    const type = cursor.u32(`value type of ${repr(key)}`);
    metadata[key] = cursor.value(type, repr(key));
    types[key] = type === ARRAY ? `array[${VALUE_TYPE_NAMES[cursor.itemType]}]` : VALUE_TYPE_NAMES[type];
  }
  const alignment = metadata["general.alignment"] ?? DEFAULT_ALIGNMENT;
  if (!Number.isInteger(alignment) || alignment < 1 || (alignment & (alignment - 1)) !== 0 || alignment > 2 ** 30) {
    throw refuse(`the GGUF file's general.alignment must be a power of two (at most 2**30); got ${repr(alignment)}`);
  }
  const infos = [];
  const names = new Set();
  for (let t = 0; t < Number(tensorCount); t++) {
    const name = cursor.string(`tensor #${t}'s name`);
    if (names.has(name)) throw refuse(`the GGUF file's tensor name ${repr(name)} appears twice`);
    names.add(name);
    const nDims = cursor.u32(`tensor ${repr(name)}'s n_dims`);
    if (nDims < 1 || nDims > MAX_DIMS) throw refuse(`the GGUF file's tensor ${repr(name)} has n_dims ${nDims}; GGUF tensors have 1 to ${MAX_DIMS}`);
    const dims = [];
    for (let d = 0; d < nDims; d++) dims.push(cursor.u64(`tensor ${repr(name)}'s dims`));
    if (dims.some((d) => d < 1n)) throw refuse(`the GGUF file's tensor ${repr(name)} has dims [${dims.join(", ")}]; each must be >= 1`);
    const values = dims.reduce((a, b) => a * b, 1n);
    if (values >= 2n ** 63n) throw refuse(`the GGUF file's tensor ${repr(name)} has dims [${dims.join(", ")}], whose element count overflows 64 bits`);
    const type = cursor.u32(`tensor ${repr(name)}'s type`);
    infos.push({ name, dims, values, type, offset: cursor.u64(`tensor ${repr(name)}'s offset`) });
  }
  const dataStart = BigInt(Math.ceil(cursor.offset / alignment) * alignment);
  const tensors = Object.create(null);
  for (const info of infos) {
    const name = repr(info.name);
    const typeInfo = TYPES[info.type];
    if (!typeInfo) {
      const known = Object.values(TYPES).map((t) => t.name).join(", ");
      const typeName = GGML_TYPE_NAMES[info.type];
      if (!typeName) throw refuse(`the GGUF file's tensor ${name} has type id ${info.type}, not a ggml type`);
      throw refuse(`the GGUF file's tensor ${name} has type ${typeName}, which is not supported; the page reads ${known}`);
    }
    if (info.dims[0] % BigInt(typeInfo.blockValues) !== 0n) {
      throw refuse(`the GGUF file's tensor ${name} (${typeInfo.name}) has rows of ${info.dims[0]} values, not a whole number of ${typeInfo.blockValues}-value blocks`);
    }
    const byteLength = (info.values / BigInt(typeInfo.blockValues)) * BigInt(typeInfo.blockBytes);
    if (info.offset % BigInt(alignment) !== 0n) {
      throw refuse(`the GGUF file's tensor ${name} has offset ${info.offset}, not a multiple of general.alignment ${alignment}`);
    }
    const start = dataStart + info.offset;
    if (start + byteLength > BigInt(bytes.byteLength)) {
      throw refuse(`the GGUF file is truncated: tensor ${name} needs bytes ${start} to ${start + byteLength} of a file of ${bytes.byteLength} bytes`);
    }
    const dims = info.dims.map(Number);
    tensors[info.name] = new Tensor({
      name: info.name, dims, typeId: info.type, offset: Number(start), byteLength: Number(byteLength), file: bytes,
    });
  }
  const placed = Object.values(tensors).sort((a, b) => a.offset - b.offset);
  for (let i = 1; i < placed.length; i++) {
    const [before, after] = [placed[i - 1], placed[i]];
    if (after.offset < before.offset + before.byteLength) {
      throw refuse(`the GGUF file's tensors ${repr(before.name)} and ${repr(after.name)} overlap: bytes ${before.offset} to ${before.offset + before.byteLength} and ${after.offset} on`);
    }
  }
  return new GgufFile({ version, metadata, types, tensors, bytes });
}

// The bytes of each type's float16 fields in a block (scales, minimums): a weight is
// finite exactly when these are (the rest are small integers), or, for the float
// types, when every value is.
/** @type {Record<string, number[]>} */
const HALF_FIELDS = { Q8_0: [0], Q4_0: [0], Q4_1: [0, 2], Q5_0: [0], Q5_1: [0, 2], Q4_K: [0, 2], Q5_K: [0, 2], Q6_K: [208] };

// Refuse a tensor holding NaN or infinity (a block scale counts), by name, in
// attnlab.llama's words; read from the raw bytes, nothing dequantised.
/** @param {Tensor} tensor */
export function checkFinite(tensor) {
  const { bytes, view } = tensor;
  const info = TYPES[tensor.typeId];
  let bad = -1;
  if (tensor.type === "F32") {
    for (let i = 0; i < tensor.byteLength && bad < 0; i += 4) if ((view.getUint32(i, true) & 0x7f800000) === 0x7f800000) bad = i / 4;
  } else if (tensor.type === "F16" || tensor.type === "BF16") {
    const mask = tensor.type === "F16" ? 0x7c00 : 0x7f80;
    for (let i = 0; i < tensor.byteLength && bad < 0; i += 2) if ((view.getUint16(i, true) & mask) === mask) bad = i / 2;
  } else {
    const fields = HALF_FIELDS[tensor.type];
    for (let at = 0, block = 0; at < bytes.byteLength && bad < 0; at += info.blockBytes, block++) {
      for (const field of fields) if ((view.getUint16(at + field, true) & 0x7c00) === 0x7c00) bad = block * info.blockValues;
    }
  }
  if (bad >= 0) {
    throw refuse(`the GGUF file's tensor ${repr(tensor.name)} (${tensor.type}) holds NaN or infinity at flat index ${bad}; weights must be finite, block scales included`);
  }
}
