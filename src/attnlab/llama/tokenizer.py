r"""SmolLM2's tokenizer: byte-level BPE over 49,152 tokens, built from the GGUF file.

Text becomes ids in three steps, all run by the ``tokenizers`` library (the Rust
core of Hugging Face's tokenizers; ``transformers`` is not imported):

1. the 17 special tokens (``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``, ...)
   written in the text are matched whole, each becoming its own id;
2. pre-tokenisation cuts the rest into words: every digit alone, then GPT-2's
   pattern (letters with their leading space, punctuation, whitespace runs), and
   each word's UTF-8 bytes are spelled in GPT-2's byte alphabet (a space is ``Ġ``);
3. byte-pair encoding merges each word's bytes by the file's 48,900 merges, in order.

Decoding joins the tokens' bytes and reads them as UTF-8.

Other GGUF files ([`load_gguf`][attnlab.llama.load_gguf]) name their own cutting rule in
``tokenizer.ggml.pre`` (Llama 3's ``llama-bpe`` keeps runs of up to three digits, Qwen2's
``qwen2`` cuts every digit, Qwen3.5's ``qwen35`` also keeps combining marks inside words,
as the patterns of their own tokenizers do), or carry a
SentencePiece vocabulary with scores (``tokenizer.ggml.model = "llama"``, TinyLlama's).

The digit rule is the file's ``tokenizer.ggml.pre = "smollm"`` (llama.cpp's name for
SmolLM's tokenizer, which cuts off every Unicode number character, ``\p{N}``):
transformers' GGUF loader does not know that name and falls back to GPT-2's pattern
alone, which keeps a leading space on a run of numbers. The two give different ids
where that matters: a whitespace run before an ASCII digit (``"a  1"``: ours gives
``ĠĠ`` as one token, as SmolLM2's own tokenizer does; the fallback gives ``Ġ`` twice),
and a space before a non-ASCII number character such as ``" ½"``, ``" ²"`` or Arabic
``" ١"`` (ours: ``Ġ`` then the character, as SmolLM2's own tokenizer; the fallback: one
word ``Ġ½``). Here the package is right and transformers' GGUF conversion is not.

Bytes without a token vanish. 21 of the 256 byte values have no token of their own in
the vocabulary: six ASCII control characters (``0x04``, ``0x06``, ``0x13``, ``0x14``,
``0x16``, ``0x1D``), the lead bytes ``0xF1`` and ``0xF2`` of Unicode planes 4 to 11,
and 13 bytes that valid UTF-8 never holds (``0xC0``, ``0xC1``, ``0xF5`` to ``0xFF``).
Encoding drops such a byte without a word, as transformers' tokenizer does: ``"a\x04b"``
decodes back as ``"ab"``, and a character of planes 4 to 11 keeps only its continuation
bytes (it decodes as replacement characters ``\ufffd``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers
from tokenizers import Tokenizer as _RustTokenizer

from .._validation import check_bool, check_str, format_shape
from .gguf_file import GGUFError

__all__ = ["Tokenizer"]

CONTROL = 3  # tokenizer.ggml.token_type of a special (control) token
# pre-tokenisers by llama.cpp's name (tokenizer.ggml.pre): the pattern that cuts the
# text into words before BPE; None: GPT-2's pattern (the ByteLevel step's own)
_LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
PRE_TOKENIZERS: dict[str, str | None] = {
    "smollm": None,  # every digit alone, then GPT-2's pattern
    "gpt-2": None,
    "default": None,
    "llama-bpe": _LLAMA3_PATTERN,  # Llama 3: numbers in runs of up to three digits
    "qwen2": _LLAMA3_PATTERN.replace(r"\p{N}{1,3}", r"\p{N}"),  # every digit alone
    # Qwen3.5 (llama.cpp's LLAMA_VOCAB_PRE_TYPE_QWEN35): qwen2's, combining marks kept in words
    "qwen35": (
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
        r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    ),
}
DEFAULT_SYSTEM_PROMPT = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def _byte_level(vocab: dict[str, int], merges: list[tuple[str, str]], pre: str) -> _RustTokenizer:
    """Byte-level BPE (GPT-2's alphabet) behind the pre-tokeniser ``pre``."""
    backend = _RustTokenizer(models.BPE(vocab, merges, ignore_merges=False))
    pattern = PRE_TOKENIZERS[pre]
    steps: list[pre_tokenizers.PreTokenizer] = []
    if pre == "smollm":
        steps.append(pre_tokenizers.Digits(individual_digits=True))
    if pattern is not None:
        steps.append(pre_tokenizers.Split(Regex(pattern), behavior="isolated"))
    steps.append(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=pattern is None))
    backend.pre_tokenizer = pre_tokenizers.Sequence(steps)
    backend.decoder = decoders.ByteLevel()
    return backend


def _sentencepiece(vocab: dict[str, int], merges: list[tuple[str, str]]) -> _RustTokenizer:
    """SentencePiece's BPE as transformers' LlamaTokenizer runs it.

    ``▁`` for a space (one put before the text); a byte without a piece: ``<0xXX>``.
    """
    model = models.BPE(vocab, merges, fuse_unk=True, byte_fallback=True)
    backend = _RustTokenizer(model)
    backend.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement="\u2581", prepend_scheme="first", split=False
    )
    backend.decoder = decoders.Sequence(
        [
            decoders.Replace("\u2581", " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Strip(content=" ", left=1),
        ]
    )
    return backend


def _merges_from_scores(
    tokens: Sequence[str], vocab: dict[str, int], scores: Sequence[float]
) -> list[tuple[str, str]]:
    """The merges a SentencePiece vocabulary implies (transformers' ``generate_merges``).

    Every split of a piece into two pieces, the best-scored piece's first.
    """
    found = []
    for piece, score in dict(zip(tokens, scores, strict=True)).items():
        splits = [
            (piece[:i], piece[i:], score)
            for i in range(1, len(piece))
            if piece[:i] in vocab and piece[i:] in vocab
        ]
        found.extend(sorted(splits, key=lambda split: (vocab[split[0]], vocab[split[1]])))
    found.sort(key=lambda merge: (merge[2], len(merge[0]), len(merge[1])), reverse=True)
    return [(left, right) for left, right, _ in found]


class Tokenizer:
    """Text to SmolLM2's token ids and back (or another GGUF file's: ``load_gguf``).

    Build it with [`load_smollm2`][attnlab.llama.load_smollm2] (or
    ``Tokenizer.from_gguf_reader``).

    Args:
        tokens: The vocabulary, in id order, spelled in GPT-2's byte alphabet.
        merges: The BPE merges, ``"left right"``, in priority order.
        special_ids: Ids of the special tokens, matched whole in the text.
        bos_token_id: Id of the beginning-of-sequence token.
        eos_token_id: Id of the end-of-sequence token.
        add_bos: Whether ``add_special_tokens=True`` puts ``bos`` first (not for SmolLM2).
        pre: The pre-tokeniser, by llama.cpp's name (``tokenizer.ggml.pre``): one of
            ``PRE_TOKENIZERS`` (``"smollm"``, ``"llama-bpe"``, ``"qwen2"``, ``"gpt-2"``).
        scores: SentencePiece's token scores (``tokenizer.ggml.scores`` of a file whose
            ``tokenizer.ggml.model`` is ``"llama"``, as TinyLlama's): the tokens are then
            SentencePiece pieces (``▁`` for a space, ``<0x41>`` for a byte), a space is
            put before the text, and without ``merges`` they are recovered from the
            scores, as transformers' GGUF tokenizer does; ``pre`` is not used.
    """

    def __init__(
        self,
        tokens: Sequence[str],
        merges: Sequence[str],
        special_ids: Iterable[int],
        bos_token_id: int,
        eos_token_id: int,
        add_bos: bool = False,
        pre: str = "smollm",
        scores: Sequence[float] | None = None,
    ) -> None:
        if scores is None and pre not in PRE_TOKENIZERS:
            raise ValueError(
                f"pre must be a pre-tokeniser attnlab.llama knows "
                f"({', '.join(sorted(PRE_TOKENIZERS))}); got {pre!r}"
            )
        self.tokens = list(tokens)
        vocab = {token: i for i, token in enumerate(self.tokens)}
        pairs = [(left, right) for left, right in (merge.split(" ", 1) for merge in merges)]
        if scores is not None:
            backend = _sentencepiece(
                vocab, pairs or _merges_from_scores(self.tokens, vocab, scores)
            )
        else:
            backend = _byte_level(vocab, pairs, pre)
        backend.add_special_tokens(
            [AddedToken(self.tokens[i], normalized=False, special=True) for i in special_ids]
        )
        self._backend = backend
        self.pre = "sentencepiece" if scores is not None else pre
        self.bos_token_id = bos_token_id
        self.eos_token_id = eos_token_id
        self.add_bos = add_bos

    @classmethod
    def from_gguf_reader(cls, reader: Any) -> Tokenizer:
        """The tokenizer a ``gguf.GGUFReader``'s ``tokenizer.ggml.*`` metadata describes."""
        return cls.from_metadata({name: field.contents() for name, field in reader.fields.items()})

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> Tokenizer:
        """The tokenizer a GGUF file's ``tokenizer.ggml.*`` metadata describes, checked.

        Raises:
            GGUFError: A tokenizer key that is missing, of the wrong type, or that
                disagrees with the vocabulary (each named with what it holds).
        """

        def get(name: str, default: Any = None) -> Any:
            return metadata.get(name, default)

        model = get("tokenizer.ggml.model")
        if model not in ("gpt2", "llama"):
            raise GGUFError(
                f"the GGUF's tokenizer.ggml.model must be 'gpt2' (byte-level BPE) or 'llama' "
                f"(SentencePiece); got {model!r}"
            )
        if model == "llama" and "tokenizer.ggml.scores" not in metadata:
            raise GGUFError("the GGUF's SentencePiece tokenizer lacks tokenizer.ggml.scores")
        pre = get("tokenizer.ggml.pre", "default")
        pre = "default" if pre == "" else pre  # as llama.cpp: empty means its default
        if model == "gpt2" and (not isinstance(pre, str) or pre not in PRE_TOKENIZERS):
            raise GGUFError(
                f"the GGUF's tokenizer.ggml.pre {pre!r} is not a pre-tokeniser attnlab.llama "
                f"knows ({', '.join(sorted(PRE_TOKENIZERS))})"
            )
        tokens = _check_vocabulary(metadata)
        merges = _check_merges(get("tokenizer.ggml.merges", []), tokens)
        add_bos = get("tokenizer.ggml.add_bos_token", model == "llama")
        if not isinstance(add_bos, bool):  # llama.cpp refuses another type too
            raise GGUFError(
                f"the GGUF's tokenizer.ggml.add_bos_token must be a bool; got {add_bos!r}"
            )
        types = get("tokenizer.ggml.token_type", [0] * len(tokens))
        return cls(
            tokens,
            merges,
            [i for i, kind in enumerate(types) if kind == CONTROL],
            metadata["tokenizer.ggml.bos_token_id"],
            metadata["tokenizer.ggml.eos_token_id"],
            # llama.cpp puts bos first for SentencePiece unless the file says otherwise
            add_bos,
            pre,
            get("tokenizer.ggml.scores") if model == "llama" else None,
        )

    @property
    def vocab_size(self) -> int:
        """Number of tokens (49,152 for SmolLM2)."""
        return len(self.tokens)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """The token ids of ``text``.

        Special tokens written in the text (``<|im_start|>``) become their own ids.

        Args:
            text: Any string of valid Unicode (no lone surrogate).
            add_special_tokens: Add the ids the model expects around a text; for SmolLM2
                none (its file sets no beginning-of-sequence token), as in transformers.

        Returns:
            One id per token.
        """
        _check_text(text)
        check_bool("add_special_tokens", add_special_tokens)
        ids: list[int] = self._backend.encode(text, add_special_tokens=False).ids
        return [self.bos_token_id, *ids] if add_special_tokens and self.add_bos else ids

    def decode(self, ids: Iterable[int] | Any, skip_special_tokens: bool = False) -> str:
        """The text of token ids (a list, or a 1-D tensor).

        Args:
            ids: Token ids.
            skip_special_tokens: Leave out special tokens such as ``<|im_end|>``.

        Returns:
            The decoded text.

        Raises:
            TypeError: ``ids`` is not a list, tuple or tensor of ints.
            ValueError: A tensor that is not 1-D, or an id outside the vocabulary.
        """
        check_bool("skip_special_tokens", skip_special_tokens)
        values = self._id_list(ids)
        bad = [i for i in values if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"ids must be in 0 .. {self.vocab_size - 1}; got {bad[0]}")
        text: str = self._backend.decode(values, skip_special_tokens=skip_special_tokens)
        return text

    @staticmethod
    def _id_list(ids: object) -> list[int]:
        """``ids`` (a list, tuple or 1-D tensor of ints) as a list, else raise."""
        if hasattr(ids, "tolist") and hasattr(ids, "shape"):  # a tensor (or NumPy array)
            array: Any = ids
            if len(array.shape) != 1:
                raise ValueError(
                    f"ids must be a list or a 1-D tensor of token ids; got a tensor of shape "
                    f"{format_shape(tuple(array.shape))}"
                )
            ids = array.tolist()
        if not isinstance(ids, list | tuple | range):
            raise TypeError(
                f"ids must be a list or a 1-D tensor of token ids; got {type(ids).__name__}"
            )
        for i in ids:
            if isinstance(i, bool) or not isinstance(i, int):
                raise TypeError(
                    f"ids must be integer token ids (a list or a 1-D tensor); "
                    f"got {type(i).__name__} {i!r}"
                )
        return list(ids)

    def tokenize(self, text: str) -> list[str]:
        """The tokens of ``text`` as strings (in GPT-2's byte alphabet: ``Ġ`` is a space)."""
        return [self.tokens[i] for i in self.encode(text)]

    def chat_prompt(
        self,
        messages: Sequence[Mapping[str, str]],
        add_generation_prompt: bool = True,
    ) -> str:
        r"""Messages in SmolLM2-Instruct's chat format (its GGUF's chat template).

        Each message is ``<|im_start|>role\ncontent<|im_end|>\n``; a default system
        message comes first when the first message is not one; with
        ``add_generation_prompt`` the text ends with ``<|im_start|>assistant\n``.

        Args:
            messages: ``[{"role": "user", "content": "..."}, ...]``.
            add_generation_prompt: End with the assistant's turn opened.

        Returns:
            The prompt text (encode it with ``encode``).

        Raises:
            TypeError: ``messages`` is not a list of dicts, or a role or content is not
                a str (a list or ``None`` would be written into the prompt as text).
            ValueError: A message without ``"role"`` or ``"content"``.
        """
        if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
            raise TypeError(
                f"messages must be a list of {{'role': ..., 'content': ...}} dicts; "
                f"got {type(messages).__name__}"
            )
        check_bool("add_generation_prompt", add_generation_prompt)
        parts = []
        for i, message in enumerate(messages):
            if not isinstance(message, Mapping):
                raise TypeError(f"messages[{i}] must be a dict; got {type(message).__name__}")
            if not {"role", "content"} <= message.keys():
                raise ValueError(f"messages[{i}] must be a dict with 'role' and 'content'")
            check_str(f"messages[{i}]['role']", message["role"])
            check_str(f"messages[{i}]['content']", message["content"])
            if i == 0 and message["role"] != "system":
                parts.append(f"<|im_start|>system\n{DEFAULT_SYSTEM_PROMPT}<|im_end|>\n")
            parts.append(f"<|im_start|>{message['role']}\n{message['content']}<|im_end|>\n")
        if add_generation_prompt:
            parts.append("<|im_start|>assistant\n")
        return "".join(parts)


def _check_text(text: object) -> str:
    """``text`` if it is a str the tokenizer can read: UTF-8 has no lone surrogate."""
    text = check_str("text", text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(
            f"text must be valid Unicode; got a lone surrogate {text[error.start]!r} "
            f"at index {error.start}"
        ) from None
    return text


# the token ids a file may name; bos and eos it must
TOKEN_ID_KEYS = ("bos", "eos", "padding", "unknown", "separator")


def _check_vocabulary(metadata: Mapping[str, Any]) -> list[str]:
    """``tokenizer.ggml.tokens`` with the arrays and ids that index it, checked."""
    tokens = metadata.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list) or not tokens or not all(isinstance(t, str) for t in tokens):
        raise GGUFError(
            f"the GGUF's tokenizer.ggml.tokens must be a non-empty array of strings; got "
            f"{_describe(tokens)}"
        )
    for key in ("token_type", "scores"):
        values = metadata.get(f"tokenizer.ggml.{key}")
        if values is not None and (not isinstance(values, list) or len(values) != len(tokens)):
            raise GGUFError(
                f"the GGUF's tokenizer.ggml.{key} must hold one number per token "
                f"({len(tokens)}); got {_describe(values)}"
            )
    for kind in TOKEN_ID_KEYS:
        key = f"tokenizer.ggml.{kind}_token_id"
        if key not in metadata and kind in ("bos", "eos"):
            raise GGUFError(f"the GGUF file lacks the metadata key {key!r}")
        value = metadata.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < len(tokens):
            raise GGUFError(
                f"the GGUF's {key} must be a token id in 0 .. {len(tokens) - 1} (the "
                f"vocabulary); got {value!r}"
            )
    return tokens


def _check_merges(merges: object, tokens: Sequence[str]) -> list[str]:
    """``tokenizer.ggml.merges``: each ``"left right"``, both and their join tokens."""
    if not isinstance(merges, list) or not all(isinstance(m, str) for m in merges):
        raise GGUFError(
            f"the GGUF's tokenizer.ggml.merges must be an array of strings; got {_describe(merges)}"
        )
    vocab = set(tokens)
    for i, merge in enumerate(merges):
        left, space, right = merge.partition(" ")
        missing = [t for t in (left, right, left + right) if t not in vocab]
        if not space or not left or not right or missing:
            why = (
                "not two tokens"
                if not (space and left and right)
                else f"{missing[0]!r} is not a token"
            )
            raise GGUFError(
                f"the GGUF's tokenizer.ggml.merges[{i}] must be two tokens of the vocabulary "
                f"whose join is one too, 'left right'; got {merge!r} ({why})"
            )
    return merges


def _describe(value: object) -> str:
    """A short description of a metadata value for an error message."""
    if isinstance(value, list):
        kinds = sorted({type(v).__name__ for v in value})
        return f"an array of {len(value)} ({', '.join(kinds) or 'empty'})"
    return f"{type(value).__name__} {value!r}"[:80]
