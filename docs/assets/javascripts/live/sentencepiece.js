// @ts-check
// SentencePiece vocabularies in the page (`tokenizer.ggml.model = "llama"`: TinyLlama's,
// Llama 2's), giving attnlab.llama.Tokenizer's ids, which are transformers' GGUF
// tokenizer's (src/attnlab/llama/tokenizer.py, _sentencepiece):
// 1. the special (control) tokens written in the text are matched whole;
// 2. in each other stretch, spaces become "▁", and the stretch at the text's start gets
//    a "▁" before it unless it has one (Metaspace, prepend_scheme "first");
// 3. byte-pair encoding over characters with merges recovered from the scores; a
//    character without a piece becomes its UTF-8 bytes' tokens (<0xE2> ...).
// Decoding reads "▁" as a space, byte tokens as bytes, and drops the first space.

const SPACE = "\u2581";
const CONTROL = 3; // tokenizer.ggml.token_type of a special (control) token
/** @param {number} b */
const byteToken = (b) => `<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`;
const BYTE_TOKEN = /^<0x([0-9A-F]{2})>$/;
/** @param {string} left @param {string} right */
const pairKey = (left, right) => `${left}\u0000${right}`;

// transformers' generate_merges (attnlab.llama's _merges_from_scores): every split of a
// piece into two pieces, the pieces best-scored first, then longer left and right parts.
/**
 * @param {string[]} tokens
 * @param {ArrayLike<number>} scores
 * @returns {[string, string][]} the merges, first applied first
 */
export function mergesFromScores(tokens, scores) {
  const vocab = new Map(tokens.map((token, id) => [token, id]));
  /** @param {string} piece */
  const idOf = (piece) => /** @type {number} */ (vocab.get(piece));
  const scored = new Map(tokens.map((token, id) => [token, scores[id]]));
  /** @type {{left: string, right: string, score: number}[]} */
  const found = [];
  for (const [piece, score] of scored) {
    const chars = Array.from(piece);
    /** @type {{left: string, right: string, score: number}[]} */
    const local = [];
    for (let i = 1; i < chars.length; i++) {
      const left = chars.slice(0, i).join("");
      const right = chars.slice(i).join("");
      if (vocab.has(left) && vocab.has(right)) local.push({ left, right, score });
    }
    local.sort((a, b) => idOf(a.left) - idOf(b.left) || idOf(a.right) - idOf(b.right));
    found.push(...local);
  }
  /** @param {string} text */
  const length = (text) => Array.from(text).length;
  found.sort((a, b) => b.score - a.score || length(b.left) - length(a.left) || length(b.right) - length(a.right));
  return found.map(({ left, right }) => /** @type {[string, string]} */ ([left, right]));
}

// [{text, special, start}]: `text` with the special tokens cut out whole (leftmost, then
// longest), as both tokenizers split it first.
/**
 * @param {string} text
 * @param {string[]} specials
 * @returns {{text: string, special: boolean, start: number}[]}
 */
export function splitSpecial(text, specials) {
  /** @type {{text: string, special: boolean, start: number}[]} */
  const parts = [];
  let start = 0;
  while (start < text.length) {
    let best = -1;
    let bestToken = "";
    for (const special of specials) {
      const at = text.indexOf(special, start);
      if (at >= 0 && (best < 0 || at < best || (at === best && special.length > bestToken.length))) {
        best = at;
        bestToken = special;
      }
    }
    if (best < 0) break;
    if (best > start) parts.push({ text: text.slice(start, best), special: false, start });
    parts.push({ text: bestToken, special: true, start: best });
    start = best + bestToken.length;
  }
  if (start < text.length) parts.push({ text: text.slice(start), special: false, start });
  return parts;
}

/**
 * @typedef {object} SentencePieceOptions
 * @property {string[]} tokens
 * @property {ArrayLike<number>} scores
 * @property {number[]} specialIds
 * @property {number | null} bosTokenId
 * @property {number | null} eosTokenId
 * @property {string | null} [chatTemplate]
 */

export class SentencePieceTokenizer {
  /** @param {SentencePieceOptions} options */
  constructor({ tokens, scores, specialIds, bosTokenId, eosTokenId, chatTemplate = null }) {
    this.tokens = tokens;
    this.vocab = new Map(tokens.map((token, id) => [token, id]));
    this.mergeRanks = new Map(mergesFromScores(tokens, scores).map(([l, r], rank) => [pairKey(l, r), rank]));
    this.specials = specialIds.map((id) => tokens[id]);
    this.specialSet = new Set(this.specials);
    this.bos_token_id = bosTokenId;
    this.eos_token_id = eosTokenId;
    this.chat_template = chatTemplate;
    this.pre = "sentencepiece";
    this.decoder = new TextDecoder("utf-8", { fatal: true });
  }

  /** @param {Record<string, any>} metadata  the GGUF's, by key */
  static fromGguf(metadata) {
    const scores = metadata["tokenizer.ggml.scores"];
    if (!scores) throw new RangeError("the GGUF's SentencePiece tokenizer lacks tokenizer.ggml.scores");
    /** @type {number[]} */
    const specialIds = [];
    /** @type {number[]} */ (metadata["tokenizer.ggml.token_type"]).forEach((kind, id) => {
      if (kind === CONTROL) specialIds.push(id);
    });
    return new SentencePieceTokenizer({
      tokens: metadata["tokenizer.ggml.tokens"],
      scores,
      specialIds,
      bosTokenId: metadata["tokenizer.ggml.bos_token_id"],
      eosTokenId: metadata["tokenizer.ggml.eos_token_id"],
      chatTemplate: metadata["tokenizer.chat_template"] || null,
    });
  }

  get vocab_size() {
    return this.tokens.length;
  }

  /** @param {string} text */
  splitSpecial(text) {
    return splitSpecial(text, this.specials);
  }

  // One stretch's ids: characters (or their bytes' tokens), merged lowest rank first,
  // leftmost first on ties.
  /** @param {string} word @returns {number[]} */
  bpe(word) {
    /** @type {string[]} */
    const symbols = [];
    for (const ch of word) {
      if (this.vocab.has(ch)) symbols.push(ch);
      else for (const b of new TextEncoder().encode(ch)) if (this.vocab.has(byteToken(b))) symbols.push(byteToken(b));
    }
    while (symbols.length > 1) {
      let bestRank = Infinity;
      let bestAt = -1;
      for (let i = 0; i < symbols.length - 1; i++) {
        const rank = this.mergeRanks.get(pairKey(symbols[i], symbols[i + 1]));
        if (rank !== undefined && rank < bestRank) {
          bestRank = rank;
          bestAt = i;
        }
      }
      if (bestAt < 0) break;
      symbols.splice(bestAt, 2, symbols[bestAt] + symbols[bestAt + 1]);
    }
    return symbols.map((symbol) => /** @type {number} */ (this.vocab.get(symbol)));
  }

  // The token ids of `text` (no beginning-of-sequence token, as Tokenizer.encode).
  /** @param {unknown} text @returns {number[]} */
  encode(text) {
    if (typeof text !== "string") throw new TypeError(`text must be a string; got ${text === null ? "null" : typeof text}`);
    /** @type {number[]} */
    const ids = [];
    for (const part of this.splitSpecial(text)) {
      if (part.special) {
        ids.push(/** @type {number} */ (this.vocab.get(part.text)));
        continue;
      }
      let word = part.text.replaceAll(" ", SPACE);
      if (part.start === 0 && !word.startsWith(SPACE)) word = SPACE + word;
      ids.push(...this.bpe(word));
    }
    return ids;
  }

  // The text of ids: "▁" a space, runs of byte tokens read as UTF-8 (U+FFFD per byte
  // where they are not), the first space dropped.
  /** @param {Iterable<number>} ids @returns {string} */
  decode(ids) {
    let text = "";
    /** @type {number[]} */
    let bytes = [];
    const flush = () => {
      if (!bytes.length) return;
      try {
        text += this.decoder.decode(Uint8Array.from(bytes));
      } catch {
        text += "\ufffd".repeat(bytes.length);
      }
      bytes = [];
    };
    for (const id of ids) {
      const token = this.tokens[id];
      const byte = BYTE_TOKEN.exec(token);
      if (byte && !this.specialSet.has(token)) {
        bytes.push(parseInt(byte[1], 16));
        continue;
      }
      flush();
      text += token.replaceAll(SPACE, " ");
    }
    flush();
    return text.startsWith(" ") ? text.slice(1) : text;
  }

  // No chat format for SentencePiece files here (the page follows ChatML only).
  /** @param {unknown} content @returns {null} */
  chatPrompt(content) {
    if (typeof content !== "string") throw new TypeError(`content must be a string; got ${typeof content}`);
    return null;
  }
}
