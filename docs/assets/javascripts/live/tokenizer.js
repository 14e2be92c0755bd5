// SmolLM2's tokenizer in JavaScript: byte-level BPE read from the GGUF file's
// tokenizer.ggml.* metadata, giving exactly attnlab.llama.Tokenizer's ids.
//
// Text becomes ids in the same three steps as src/attnlab/llama/tokenizer.py:
// 1. the special (control) tokens written in the text are matched whole;
// 2. pre-tokenisation: every digit alone (tokenizers' Digits(individual_digits=True)),
//    then GPT-2's pattern inside each piece, and each word's UTF-8 bytes spelled in
//    GPT-2's byte alphabet (a space is "Ġ");
// 3. byte-pair encoding: the lowest-ranked merge first, leftmost first on ties.
(function (root) {
  "use strict";

  var CONTROL = 3; // tokenizer.ggml.token_type of a special (control) token
  // GPT-2's pre-tokenizer pattern, with Unicode's White_Space as tokenizers' \s.
  var GPT2_PATTERN =
    /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\p{White_Space}\p{L}\p{N}]+|\p{White_Space}+(?![^\p{White_Space}])|\p{White_Space}+/gu;
  var DIGIT = /\p{N}/u; // Rust's char::is_numeric, what tokenizers' Digits splits on

  // GPT-2's byte alphabet: printable bytes stand for themselves, the others are
  // shifted to code points from 256 on (a space, byte 32, becomes "Ġ", U+0120).
  function bytesToUnicode() {
    var table = new Array(256);
    var shifted = 0;
    for (var b = 0; b < 256; b++) {
      var printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      table[b] = String.fromCodePoint(printable ? b : 256 + shifted++);
    }
    return table;
  }
  var BYTE_CHARS = bytesToUnicode();
  var CHAR_BYTES = {};
  BYTE_CHARS.forEach(function (ch, b) { CHAR_BYTES[ch] = b; });

  // Split `text` on the digits: each digit its own piece (Digits' "isolated" behaviour).
  function splitDigits(text) {
    var pieces = [];
    var current = "";
    for (var ch of text) {
      if (DIGIT.test(ch)) {
        if (current) pieces.push(current);
        pieces.push(ch);
        current = "";
      } else current += ch;
    }
    if (current) pieces.push(current);
    return pieces;
  }

  function Tokenizer(tokens, merges, specialIds, bosTokenId, eosTokenId) {
    this.tokens = tokens;
    this.vocab = new Map();
    for (var i = 0; i < tokens.length; i++) this.vocab.set(tokens[i], i);
    // "left right" -> rank (priority; lower merges first).
    this.mergeRanks = new Map();
    for (var r = 0; r < merges.length; r++) this.mergeRanks.set(merges[r], r);
    this.specials = specialIds.map(function (id) { return tokens[id]; });
    this.bosTokenId = bosTokenId;
    this.eosTokenId = eosTokenId;
    this.cache = new Map(); // word -> ids
    this.encoder = new TextEncoder();
    this.decoder = new TextDecoder("utf-8");
  }

  // The tokenizer a GGUF file's metadata describes (gguf.js's readGguf(...).metadata).
  Tokenizer.fromGguf = function (metadata) {
    if (metadata["tokenizer.ggml.model"] !== "gpt2") {
      throw new Error("the GGUF's tokenizer.ggml.model must be 'gpt2' (byte-level BPE); got " +
        JSON.stringify(metadata["tokenizer.ggml.model"]));
    }
    var types = metadata["tokenizer.ggml.token_type"];
    var specialIds = [];
    types.forEach(function (kind, id) { if (kind === CONTROL) specialIds.push(id); });
    return new Tokenizer(
      metadata["tokenizer.ggml.tokens"],
      metadata["tokenizer.ggml.merges"],
      specialIds,
      metadata["tokenizer.ggml.bos_token_id"],
      metadata["tokenizer.ggml.eos_token_id"]
    );
  };

  Object.defineProperty(Tokenizer.prototype, "vocabSize", {
    get: function () { return this.tokens.length; },
  });

  // Step 1: [{text, special}] with the special tokens cut out whole (leftmost, then longest).
  Tokenizer.prototype.splitSpecial = function (text) {
    var parts = [];
    var start = 0;
    while (start < text.length) {
      var best = -1;
      var bestToken = null;
      for (var s = 0; s < this.specials.length; s++) {
        var at = text.indexOf(this.specials[s], start);
        if (at >= 0 && (best < 0 || at < best || (at === best && this.specials[s].length > bestToken.length))) {
          best = at;
          bestToken = this.specials[s];
        }
      }
      if (best < 0) break;
      if (best > start) parts.push({ text: text.slice(start, best), special: false });
      parts.push({ text: bestToken, special: true });
      start = best + bestToken.length;
    }
    if (start < text.length) parts.push({ text: text.slice(start), special: false });
    return parts;
  };

  // Step 2: the words of a text without special tokens, in GPT-2's byte alphabet.
  Tokenizer.prototype.preTokenize = function (text) {
    var words = [];
    var encoder = this.encoder;
    splitDigits(text).forEach(function (piece) {
      var matches = piece.match(GPT2_PATTERN) || [];
      matches.forEach(function (word) {
        var spelled = "";
        encoder.encode(word).forEach(function (b) { spelled += BYTE_CHARS[b]; });
        words.push(spelled);
      });
    });
    return words;
  };

  // Step 3: one word's ids by byte-pair encoding.
  Tokenizer.prototype.bpe = function (word) {
    var cached = this.cache.get(word);
    if (cached) return cached;
    var symbols = Array.from(word); // one symbol per byte character
    while (symbols.length > 1) {
      var bestRank = Infinity;
      var bestAt = -1;
      for (var i = 0; i < symbols.length - 1; i++) {
        var rank = this.mergeRanks.get(symbols[i] + " " + symbols[i + 1]);
        if (rank !== undefined && rank < bestRank) {
          bestRank = rank;
          bestAt = i;
        }
      }
      if (bestAt < 0) break;
      symbols.splice(bestAt, 2, symbols[bestAt] + symbols[bestAt + 1]);
    }
    var vocab = this.vocab;
    var ids = symbols.map(function (symbol) {
      var id = vocab.get(symbol);
      if (id === undefined) throw new Error("tokenizer: no id for the symbol " + JSON.stringify(symbol));
      return id;
    });
    if (this.cache.size < 50000) this.cache.set(word, ids);
    return ids;
  };

  // The token ids of `text` (no beginning-of-sequence token: SmolLM2's file adds none).
  Tokenizer.prototype.encode = function (text) {
    if (typeof text !== "string") {
      throw new TypeError("text must be a string; got " + (text === null ? "null" : typeof text));
    }
    var ids = [];
    var self = this;
    this.splitSpecial(text).forEach(function (part) {
      if (part.special) ids.push(self.vocab.get(part.text));
      else self.preTokenize(part.text).forEach(function (word) {
        self.bpe(word).forEach(function (id) { ids.push(id); });
      });
    });
    return ids;
  };

  // The bytes of one token (special tokens are their text).
  Tokenizer.prototype.tokenBytes = function (id) {
    var token = this.tokens[id];
    if (this.specials.indexOf(token) >= 0) return this.encoder.encode(token);
    var bytes = [];
    for (var ch of token) bytes.push(CHAR_BYTES[ch] !== undefined ? CHAR_BYTES[ch] : 63);
    return Uint8Array.from(bytes);
  };

  // The text of ids (UTF-8; a token that ends mid-character shows U+FFFD).
  Tokenizer.prototype.decode = function (ids) {
    var self = this;
    var all = [];
    ids.forEach(function (id) { self.tokenBytes(id).forEach(function (b) { all.push(b); }); });
    return this.decoder.decode(Uint8Array.from(all));
  };

  var api = { Tokenizer: Tokenizer, splitDigits: splitDigits, GPT2_PATTERN: GPT2_PATTERN };
  if (typeof module === "object" && module.exports) module.exports = api;
  else {
    root.AttnlabLive = root.AttnlabLive || {};
    root.AttnlabLive.tokenizer = api;
  }
})(typeof self !== "undefined" ? self : this);
