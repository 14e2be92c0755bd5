// @ts-check
// A GGUF file's tokenizer in JavaScript: byte-level BPE read from its tokenizer.ggml.*
// metadata, giving exactly attnlab.llama.Tokenizer's ids.
//
// Text becomes ids in the same three steps as src/attnlab/llama/tokenizer.py:
// 1. the special (control) tokens written in the text are matched whole;
// 2. pre-tokenisation, named by the file's `tokenizer.ggml.pre` (PRE_TOKENIZERS below;
//    SmolLM2's "smollm": every digit alone, as tokenizers' Digits(individual_digits=True),
//    then GPT-2's pattern inside each piece); each word's UTF-8 bytes are spelled in
//    GPT-2's byte alphabet (a space is "Ġ");
// 3. byte-pair encoding: the lowest-ranked merge first, leftmost first on ties.

import { SentencePieceTokenizer, splitSpecial } from "./sentencepiece.js";
import { repr } from "./gguf.js";

const CONTROL = 3; // tokenizer.ggml.token_type of a special (control) token
// GPT-2's pre-tokenizer pattern, with Unicode's White_Space as tokenizers' \s.
export const GPT2_PATTERN =
  /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\p{White_Space}\p{L}\p{N}]+|\p{White_Space}+(?![^\p{White_Space}])|\p{White_Space}+/gu;
const DIGIT = /\p{N}/u; // Rust's char::is_numeric, what tokenizers' Digits splits on

// Split `text` on the digits: each digit its own piece (Digits' "isolated" behaviour).
/**
 * @param {string} text
 * @returns {string[]}
 */
export function splitDigits(text) {
  const pieces = [];
  let current = "";
  for (const ch of text) {
    if (DIGIT.test(ch)) {
      if (current) pieces.push(current);
      pieces.push(ch);
      current = "";
    } else current += ch;
  }
  if (current) pieces.push(current);
  return pieces;
}

/** @param {string} text @returns {string[]} */
const gpt2Words = (text) => text.match(GPT2_PATTERN) || [];

// Llama 3's pattern ("llama-bpe"), Qwen2's ("qwen2": one digit at a time) and Qwen3.5's
// ("qwen35": Qwen2's with combining marks, \p{M}, inside words), as attnlab.llama's
// PRE_TOKENIZERS writes them for tokenizers' Oniguruma: (?i:'s|...) spelled out (ſ folds
// to s), \s as Unicode's White_Space.
const contractions = "'(?:[sSſ]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD])";
/**
 * @param {string} numbers the digits' alternative
 * @param {boolean} [marks] words take combining marks (\p{M}) too
 * @returns {(text: string) => string[]}
 */
const bpeWords = (numbers, marks = false) => {
  const letters = marks ? "[\\p{L}\\p{M}]+" : "\\p{L}+";
  const other = marks ? "\\p{L}\\p{M}\\p{N}" : "\\p{L}\\p{N}";
  const pattern = new RegExp(
    `${contractions}|[^\\r\\n\\p{L}\\p{N}]?${letters}|${numbers}| ?[^\\p{White_Space}${other}]+[\\r\\n]*` +
      "|\\p{White_Space}*[\\r\\n]+|\\p{White_Space}+(?![^\\p{White_Space}])|\\p{White_Space}+",
    "gu"
  );
  return (text) => text.match(pattern) || [];
};

// tokenizer.ggml.pre -> text -> words (before the byte alphabet). Another family's
// tokenizer is one more entry here.
/** @type {Record<string, (text: string) => string[]>} */
export const PRE_TOKENIZERS = {
  smollm: (text) => splitDigits(text).flatMap(gpt2Words),
  "gpt-2": gpt2Words,
  default: gpt2Words,
  "llama-bpe": bpeWords("\\p{N}{1,3}"),
  qwen2: bpeWords("\\p{N}"),
  qwen35: bpeWords("\\p{N}", true),
};

// GPT-2's byte alphabet: printable bytes stand for themselves, the others are
// shifted to code points from 256 on (a space, byte 32, becomes "Ġ", U+0120).
function bytesToUnicode() {
  const table = new Array(256);
  let shifted = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    table[b] = String.fromCodePoint(printable ? b : 256 + shifted++);
  }
  return table;
}
const BYTE_CHARS = bytesToUnicode();
const CHAR_BYTES = new Map(BYTE_CHARS.map((ch, b) => [ch, b]));

/** @param {unknown} value @returns {string} */
function describe(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value;
}

/**
 * The fields a byte-level BPE tokenizer is built from.
 * @typedef {object} TokenizerFields
 * @property {string[]} tokens
 * @property {string[]} merges "left right", by rank
 * @property {number[]} specialIds
 * @property {number} bosTokenId
 * @property {number} eosTokenId
 * @property {string} [pre] tokenizer.ggml.pre: a PRE_TOKENIZERS name
 * @property {string | null} [chatTemplate]
 */

/** Byte-level BPE, as attnlab.llama.Tokenizer. */
export class Tokenizer {
  /** @param {TokenizerFields} fields */
  constructor({ tokens, merges, specialIds, bosTokenId, eosTokenId, pre = "smollm", chatTemplate = null }) {
    if (typeof pre !== "string" || !Object.hasOwn(PRE_TOKENIZERS, pre)) {
      throw new RangeError(
        `tokenizer.ggml.pre must be one of ${Object.keys(PRE_TOKENIZERS).join(", ")}; got ${JSON.stringify(pre)}`
      );
    }
    this.tokens = tokens;
    this.vocab = new Map(tokens.map((token, id) => [token, id]));
    this.mergeRanks = new Map(merges.map((merge, rank) => [merge, rank])); // "left right" -> rank
    this.specials = specialIds.map((id) => tokens[id]);
    this.specialSet = new Set(this.specials);
    this.bos_token_id = bosTokenId;
    this.eos_token_id = eosTokenId;
    this.pre = pre;
    this.preTokenizer = PRE_TOKENIZERS[pre];
    this.chat_template = chatTemplate;
    this.cache = new Map(); // word -> ids
    this.encoder = new TextEncoder();
    this.decoder = new TextDecoder("utf-8");
  }

  // The tokenizer a GGUF file's metadata describes (gguf.js's readGguf(...).metadata).
  // Checked first, as attnlab.llama's Tokenizer.from_metadata does, with its words.
  /**
   * @param {Record<string, any>} metadata
   * @returns {Tokenizer | import("./sentencepiece.js").SentencePieceTokenizer}
   */
  static fromGguf(metadata) {
    const model = metadata["tokenizer.ggml.model"];
    if (model !== "gpt2" && model !== "llama") {
      throw new RangeError(`the GGUF's tokenizer.ggml.model must be 'gpt2' (byte-level BPE) or 'llama' (SentencePiece); got ${repr(model)}`);
    }
    checkVocabulary(metadata);
    const addBos = metadata["tokenizer.ggml.add_bos_token"]; // not used here; its type checked as the package's
    if (addBos !== undefined && typeof addBos !== "boolean") {
      throw new RangeError(`the GGUF's tokenizer.ggml.add_bos_token must be a bool; got ${repr(addBos)}`);
    }
    if (metadata["tokenizer.ggml.model"] === "llama") return SentencePieceTokenizer.fromGguf(metadata);
    /** @type {number[]} */
    const specialIds = [];
    (metadata["tokenizer.ggml.token_type"] ?? []).forEach((/** @type {number} */ kind, /** @type {number} */ id) => {
      if (kind === CONTROL) specialIds.push(id);
    });
    return new Tokenizer({
      tokens: metadata["tokenizer.ggml.tokens"],
      merges: metadata["tokenizer.ggml.merges"] ?? [],
      specialIds,
      bosTokenId: metadata["tokenizer.ggml.bos_token_id"],
      eosTokenId: metadata["tokenizer.ggml.eos_token_id"],
      pre: metadata["tokenizer.ggml.pre"] === "" ? "default" : metadata["tokenizer.ggml.pre"] ?? "default", // "": llama.cpp's default
      chatTemplate: metadata["tokenizer.chat_template"] || null,
    });
  }

  get vocab_size() {
    return this.tokens.length;
  }

  // Step 1: the special tokens cut out whole (sentencepiece.js's splitSpecial).
  /** @param {string} text @returns {{text: string, special: boolean, start: number}[]} */
  splitSpecial(text) {
    return splitSpecial(text, this.specials);
  }

  // Step 2: the words of a text without special tokens, in GPT-2's byte alphabet.
  /** @param {string} text @returns {string[]} */
  preTokenize(text) {
    return this.preTokenizer(text).map((word) => {
      let spelled = "";
      for (const b of this.encoder.encode(word)) spelled += BYTE_CHARS[b];
      return spelled;
    });
  }

  // Step 3: one word's ids by byte-pair encoding.
  /** @param {string} word @returns {number[]} */
  bpe(word) {
    const cached = this.cache.get(word);
    if (cached) return cached;
    const symbols = Array.from(word); // one symbol per byte character
    while (symbols.length > 1) {
      let bestRank = Infinity;
      let bestAt = -1;
      for (let i = 0; i < symbols.length - 1; i++) {
        const rank = this.mergeRanks.get(symbols[i] + " " + symbols[i + 1]);
        if (rank !== undefined && rank < bestRank) {
          bestRank = rank;
          bestAt = i;
        }
      }
      if (bestAt < 0) break;
      symbols.splice(bestAt, 2, symbols[bestAt] + symbols[bestAt + 1]);
    }
    const ids = symbols.map((symbol) => {
      const id = this.vocab.get(symbol);
      if (id === undefined) throw new Error(`tokenizer: no id for the symbol ${JSON.stringify(symbol)}`);
      return id;
    });
    if (this.cache.size < 50000) this.cache.set(word, ids);
    return ids;
  }

  // The token ids of `text` (no beginning-of-sequence token: SmolLM2's file adds none).
  /** @param {string} text @returns {number[]} */
  encode(text) {
    if (typeof text !== "string") throw new TypeError(`text must be a string; got ${describe(text)}`);
    /** @type {number[]} */
    const ids = [];
    for (const part of this.splitSpecial(text)) {
      if (part.special) ids.push(/** @type {number} */ (this.vocab.get(part.text)));
      else for (const word of this.preTokenize(part.text)) ids.push(...this.bpe(word));
    }
    return ids;
  }

  // The bytes of one token (special tokens are their text).
  /** @param {number} id @returns {Uint8Array} */
  tokenBytes(id) {
    const token = this.tokens[id];
    if (this.specialSet.has(token)) return this.encoder.encode(token);
    const bytes = [];
    for (const ch of token) bytes.push(CHAR_BYTES.has(ch) ? CHAR_BYTES.get(ch) : 63);
    return Uint8Array.from(bytes);
  }

  // The text of ids (UTF-8; a token that ends mid-character shows U+FFFD).
  /** @param {number[]} ids @returns {string} */
  decode(ids) {
    const all = [];
    for (const id of ids) all.push(...this.tokenBytes(id));
    return this.decoder.decode(Uint8Array.from(all));
  }

  // A user's message in the file's chat format, ready for generation, or null when
  // the file has no chat template this page can follow (ChatML's <|im_start|> turns,
  // with the template's own default system message, as Tokenizer.chat_prompt).
  /** @param {string} content @returns {string | null} */
  chatPrompt(content) {
    if (typeof content !== "string") throw new TypeError(`content must be a string; got ${describe(content)}`);
    const template = this.chat_template;
    if (!template || !template.includes("<|im_start|>")) return null;
    const system = /<\|im_start\|>system\\n(.*?)<\|im_end\|>/s.exec(template) ||
      /<\|im_start\|>system\n(.*?)<\|im_end\|>/s.exec(template);
    const opening = system && /messages\[0\]\['role'\] != 'system'/.test(template)
      ? `<|im_start|>system\n${system[1]}<|im_end|>\n` : "";
    return `${opening}<|im_start|>user\n${content}<|im_end|>\n<|im_start|>assistant\n`;
  }
}

// A short description of a metadata value (attnlab.llama's tokenizer._describe).
/** @param {unknown} value @returns {string} */
function describeValue(value) {
  if (Array.isArray(value)) {
    const kinds = [...new Set(value.map((v) => (typeof v === "string" ? "str" : Number.isInteger(v) ? "int" : typeof v === "number" ? "float" : typeof v)))].sort();
    return `an array of ${value.length} (${kinds.join(", ") || "empty"})`;
  }
  return `${typeof value} ${repr(value)}`.slice(0, 80);
}

// The token list, the arrays and ids that index it, and the merges, checked with
// attnlab.llama's words: ids inside the vocabulary (bos and eos required), one type and
// score per token, each merge two tokens whose join is a token too.
/** @param {Record<string, any>} metadata */
export function checkVocabulary(metadata) {
  const tokens = metadata["tokenizer.ggml.tokens"];
  if (!Array.isArray(tokens) || !tokens.length || !tokens.every((t) => typeof t === "string")) {
    throw new RangeError(`the GGUF's tokenizer.ggml.tokens must be a non-empty array of strings; got ${describeValue(tokens)}`);
  }
  for (const key of ["token_type", "scores"]) {
    const values = metadata[`tokenizer.ggml.${key}`];
    if (values !== undefined && (!Array.isArray(values) || values.length !== tokens.length)) {
      throw new RangeError(`the GGUF's tokenizer.ggml.${key} must hold one number per token (${tokens.length}); got ${describeValue(values)}`);
    }
  }
  for (const kind of ["bos", "eos", "padding", "unknown", "separator"]) {
    const key = `tokenizer.ggml.${kind}_token_id`;
    if (!(key in metadata) && (kind === "bos" || kind === "eos")) throw new RangeError(`the GGUF file lacks the metadata key '${key}'`);
    const value = metadata[key] ?? 0;
    if (!Number.isInteger(value) || value < 0 || value >= tokens.length) {
      throw new RangeError(`the GGUF's ${key} must be a token id in 0 .. ${tokens.length - 1} (the vocabulary); got ${repr(value)}`);
    }
  }
  const merges = metadata["tokenizer.ggml.merges"] ?? [];
  if (!Array.isArray(merges) || !merges.every((m) => typeof m === "string")) {
    throw new RangeError(`the GGUF's tokenizer.ggml.merges must be an array of strings; got ${describeValue(merges)}`);
  }
  const vocab = new Set(tokens);
  merges.forEach((merge, i) => {
    const space = merge.indexOf(" ");
    const left = space < 0 ? merge : merge.slice(0, space);
    const right = space < 0 ? "" : merge.slice(space + 1);
    const missing = [left, right, left + right].filter((t) => !vocab.has(t));
    if (space < 0 || !left || !right || missing.length) {
      const why = space < 0 || !left || !right ? "not two tokens" : `${repr(missing[0])} is not a token`;
      throw new RangeError(`the GGUF's tokenizer.ggml.merges[${i}] must be two tokens of the vocabulary whose join is one too, 'left right'; got ${repr(merge)} (${why})`);
    }
  });
}
