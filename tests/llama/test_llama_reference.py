"""attnlab.llama's SmolLM2 against Hugging Face's LlamaForCausalLM on the same GGUF file.

The reference (the ``reference`` fixture of ``tests/llama/conftest.py``) is built by
transformers' own GGUF loader, eager attention, float32, loaded once per process; every
test here shares one worker (``xdist_group("smollm2")``) with the pages that load the model.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from attnlab.llama import load_smollm2

pytestmark = [pytest.mark.xdist_group("smollm2"), pytest.mark.long]

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    ",
    "Attention is all you need because",
]

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "def f(x):\n    return x ** 2  # square\n\n\tprint(f'{x=}')",
    "In 2024, 3.14159 * 1,000,000 = 3141590; call 555-0100 at 10:30pm.",
    "Grüße aus Zürich — naïve café, 東京タワー, Ελληνικά, emoji 🙂👍🏽!",
    "spaces   between\twords\n\n\nand   trailing   ",
    "<|im_start|>user\nHi!<|im_end|>\n",
    "I'm sure they'll say it's fine; we've done what you'd do.",
    "",
]


def test_logits_match_transformers(reference: tuple[Any, Any]) -> None:
    """The logits of a batch agree with Hugging Face's to about 1e-3."""
    hf_model, _ = reference
    model, tokenizer = load_smollm2()
    rows = [tokenizer.encode(p)[:5] for p in PROMPTS]
    ids = torch.tensor(rows)  # (3, 5)
    with torch.no_grad():
        expected = hf_model(ids).logits
    ours = model(ids)
    assert isinstance(ours, torch.Tensor)
    assert ours.shape == expected.shape == (3, 5, 49152)
    torch.testing.assert_close(ours, expected, atol=1e-3, rtol=1e-4)


def test_every_layers_attention_weights_match(reference: tuple[Any, Any]) -> None:
    """Each layer's (B, 9, T, T) attention weights agree with Hugging Face's to 1e-4."""
    hf_model, tokenizer = reference
    model, _ = load_smollm2()
    ids = torch.tensor([tokenizer.encode("Alice gave Bob a book, and then Bob gave it to")])
    with torch.no_grad():
        expected = hf_model(ids, output_attentions=True).attentions
    _, attention = model(ids, return_attention=True)
    assert len(attention) == len(expected) == 30
    T = ids.shape[1]
    for layer, (ours, theirs) in enumerate(zip(attention, expected, strict=True)):
        assert ours.shape == (1, 9, T, T), layer
        torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=0, msg=f"layer {layer}")


def test_greedy_generation_matches_token_for_token(reference: tuple[Any, Any]) -> None:
    """Greedy decoding through the KV cache gives Hugging Face's tokens, 24 new ones per prompt."""
    hf_model, tokenizer = reference
    model, ours_tokenizer = load_smollm2()
    for prompt in PROMPTS:
        ids = torch.tensor([ours_tokenizer.encode(prompt)])
        with torch.no_grad():
            expected = hf_model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=24,
                min_new_tokens=24,
                do_sample=False,
                pad_token_id=tokenizer.eos_token_id,
            )
        ours = model.generate(ids, max_new_tokens=24)
        assert ours.tolist() == expected.tolist(), prompt


def test_tokenizer_ids_match_on_varied_text(reference: tuple[Any, Any]) -> None:
    """encode gives transformers' ids on prose, code, numbers, non-ASCII and whitespace runs."""
    _, hf_tokenizer = reference
    _, tokenizer = load_smollm2()
    for text in TEXTS:
        expected = hf_tokenizer.encode(text, add_special_tokens=False)
        assert tokenizer.encode(text) == expected, text
        assert tokenizer.encode(text, add_special_tokens=True) == hf_tokenizer.encode(text)
        assert tokenizer.decode(expected) == hf_tokenizer.decode(expected), text
        assert tokenizer.decode(expected, skip_special_tokens=True) == hf_tokenizer.decode(
            expected, skip_special_tokens=True
        )


def test_tokenizer_splits_digits_where_transformers_falls_back(
    reference: tuple[Any, Any],
) -> None:
    """Whitespace before a digit: the file's "smollm" pre-tokenizer, not transformers' fallback.

    transformers' GGUF loader does not know ``tokenizer.ggml.pre = "smollm"`` and uses
    GPT-2's pattern alone; SmolLM2 (and llama.cpp) first cut every digit off on its own.
    The only texts where this changes the ids are whitespace runs before a digit.
    """
    _, hf_tokenizer = reference
    _, tokenizer = load_smollm2()
    assert tokenizer.tokenize("x  1") == ["x", "ĠĠ", "1"]
    assert hf_tokenizer.convert_ids_to_tokens(hf_tokenizer.encode("x  1")) == ["x", "Ġ", "Ġ", "1"]
    for number in ("½", "²", "١"):  # non-ASCII numbers: cut off their space too (\p{N})
        ours = tokenizer.encode(f" {number}")
        assert tokenizer.tokenize(f" {number}")[0] == "Ġ" and tokenizer.decode(ours[1:]) == number
        theirs = hf_tokenizer.encode(f" {number}")
        assert theirs != ours and hf_tokenizer.decode(theirs) == f" {number}"


def test_bytes_without_a_token_vanish_as_in_transformers(reference: tuple[Any, Any]) -> None:
    """The tokenizer docstring's 21 bytes: 6 ASCII controls vanish; planes 4-11 lose a byte."""
    _, hf_tokenizer = reference
    _, tokenizer = load_smollm2()
    for control in "\x04\x06\x13\x14\x16\x1d":
        text = f"a{control}b"
        ids = tokenizer.encode(text)
        assert ids == hf_tokenizer.encode(text) and tokenizer.decode(ids) == "ab"
    assert tokenizer.decode(tokenizer.encode("a\x05b")) == "a\x05b"  # a control with a token
    plane_4 = chr(0x40000)  # UTF-8 F1 80 80 80: the lead byte 0xF1 has no token
    ids = tokenizer.encode(plane_4)
    assert ids == hf_tokenizer.encode(plane_4) and len(ids) == 3
    assert tokenizer.decode(ids) == "\ufffd" * 3


def test_chat_prompt_matches_the_chat_template(reference: tuple[Any, Any]) -> None:
    """chat_prompt writes what transformers' apply_chat_template writes from the GGUF template."""
    _, hf_tokenizer = reference
    _, tokenizer = load_smollm2()
    chats = [
        [{"role": "user", "content": "What is attention?"}],
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "Name a colour."},
        ],
    ]
    for messages in chats:
        for generation in (True, False):
            expected = hf_tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=generation
            )
            assert tokenizer.chat_prompt(messages, add_generation_prompt=generation) == expected
