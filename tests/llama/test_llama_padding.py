"""Padded batches (``attention_mask``) against transformers' LlamaForCausalLM on the same file.

Prompts of different lengths padded to one tensor, on the left and on the right, with
Hugging Face's mask (1 = real token, 0 = padding). At every real position the logits and
every layer's attention weights must be transformers'; generation must give transformers'
tokens. Padding positions compute nothing anyone reads, so they are not compared.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

pytest.importorskip("gguf", reason="the llm extra is not installed")

from attnlab.llama import load_smollm2
from attnlab.llama.generate import left_align, padding_mask

pytestmark = [pytest.mark.xdist_group("smollm2"), pytest.mark.long]

TEXTS = ["The capital of France is", "Hi", "def add(a, b):\n    return"]
PAD = 0  # any id: the mask decides; <|endoftext|>


def padded(side: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``TEXTS`` encoded and padded to the longest on ``side``: ``(ids, attention_mask)``."""
    _, tokenizer = load_smollm2()
    rows = [tokenizer.encode(text) for text in TEXTS]
    T = max(len(row) for row in rows)
    ids = torch.full((len(rows), T), PAD)
    mask = torch.zeros(len(rows), T, dtype=torch.long)
    for b, row in enumerate(rows):
        span = slice(T - len(row), T) if side == "left" else slice(0, len(row))
        ids[b, span], mask[b, span] = torch.tensor(row), 1
    return ids, mask  # (3, T) each


@pytest.mark.parametrize("side", ["left", "right"])
def test_padded_forward_matches_transformers_at_every_real_position(
    reference: tuple[Any, Any], side: str
) -> None:
    """Logits (to 1e-3) and all 30 layers' attention weights (to 1e-4) at the real queries."""
    hf_model, _ = reference
    model, _ = load_smollm2()
    ids, mask = padded(side)
    assert not bool(mask.all())  # padding to hide
    with torch.no_grad():
        expected = hf_model(ids, attention_mask=mask, output_attentions=True)
    logits, attention = model(ids, attention_mask=mask, return_attention=True)
    real = mask.bool()  # (B, T)
    torch.testing.assert_close(logits[real], expected.logits[real], atol=1e-3, rtol=1e-4)
    for layer, (ours, theirs) in enumerate(zip(attention, expected.attentions, strict=True)):
        # (B, H, T, S) -> the real queries' rows: (n_real, H, S)
        ours_rows, their_rows = ours.transpose(1, 2)[real], theirs.transpose(1, 2)[real]
        torch.testing.assert_close(ours_rows, their_rows, atol=1e-4, rtol=0, msg=f"layer {layer}")
        assert torch.all(ours_rows[..., ~real.any(0)] == 0)  # no weight on a column of pads only


def test_a_padded_row_computes_what_it_computes_alone() -> None:
    """Left or right padded, each row's real positions give the unpadded row's logits."""
    model, tokenizer = load_smollm2()
    for side in ("left", "right"):
        ids, mask = padded(side)
        logits = model(ids, attention_mask=mask)
        assert isinstance(logits, torch.Tensor)
        for b, text in enumerate(TEXTS):
            alone = model(torch.tensor(tokenizer.encode(text)))
            assert isinstance(alone, torch.Tensor)
            torch.testing.assert_close(logits[b][mask[b].bool()], alone[0], atol=1e-4, rtol=1e-4)


def test_a_padding_query_sees_only_itself_and_nothing_is_nan() -> None:
    """padding_mask: real keys and the query's own position; no empty row, so no NaN."""
    keep = torch.tensor([[False, False, True, True], [True, True, True, False]])  # (2, 4)
    mask = padding_mask(keep, T=2)  # the last 2 positions are the queries
    assert mask.shape == (2, 1, 2, 4)
    assert mask[0, 0].tolist() == [[False, False, True, True], [False, False, True, True]]
    assert mask[1, 0].tolist() == [[True, True, True, False], [True, True, True, True]]
    model, _ = load_smollm2()
    ids, attention_mask = padded("left")
    _, attention = model(ids, attention_mask=attention_mask, return_attention=True)
    assert all(torch.isfinite(weights).all() for weights in attention)
    pad_query = attention[0][1, :, 0, :]  # row 1 ("Hi") starts with padding: (H, S)
    assert torch.equal(pad_query, torch.eye(ids.shape[1])[0].expand_as(pad_query))


def test_cached_chunks_with_a_mask_equal_the_full_masked_pass() -> None:
    """With a cache, the mask covers cached and new positions; chunks give the full logits."""
    model, _ = load_smollm2()
    ids, mask = padded("left")
    full = model(ids, attention_mask=mask)
    assert isinstance(full, torch.Tensor)
    cache = model.new_cache()
    first = model(ids[:, :4], cache=cache, attention_mask=mask[:, :4])
    rest = model(ids[:, 4:], cache=cache, attention_mask=mask)
    real = mask.bool()
    chunks = torch.cat([first, rest], dim=1)  # type: ignore[list-item]
    torch.testing.assert_close(chunks[real], full[real], atol=1e-4, rtol=1e-4)


def test_left_align_moves_padding_to_the_start_in_order() -> None:
    """Right padding and padding in the middle become left padding; token order is kept."""
    ids = torch.tensor([[5, 6, 0, 0], [0, 7, 0, 8]])
    keep = torch.tensor([[1, 1, 0, 0], [0, 1, 0, 1]]).bool()
    aligned, aligned_keep = left_align(ids, keep)
    assert aligned.tolist() == [[0, 0, 5, 6], [0, 0, 7, 8]]
    assert aligned_keep.tolist() == [[False, False, True, True], [False, False, True, True]]


def test_greedy_generation_of_a_left_padded_batch_matches_transformers(
    reference: tuple[Any, Any],
) -> None:
    """Left-padded prompts: transformers' generate with the same mask, token for token."""
    hf_model, _ = reference
    model, _ = load_smollm2()
    ids, mask = padded("left")
    with torch.no_grad():
        expected = hf_model.generate(
            ids,
            attention_mask=mask,
            max_new_tokens=8,
            min_new_tokens=8,
            do_sample=False,
            pad_token_id=PAD,
        )
    ours = model.generate(ids, 8, attention_mask=mask)
    assert ours.tolist() == expected.tolist()


def test_right_padded_prompts_continue_as_if_left_padded() -> None:
    """Right padding: each row goes on from its last real token, as left padded or alone.

    (transformers' generate gives a right-padded row's first new token position 1, after
    the padding's position 0, and warns that right padding is wrong for a decoder;
    here each row is continued as it would be unpadded, which the left-padded run, equal
    to transformers' above, shows.)
    """
    model, tokenizer = load_smollm2()
    ids, mask = padded("right")
    left_ids, left_mask = padded("left")
    ours = model.generate(ids, 6, attention_mask=mask)
    assert torch.equal(ours[:, : ids.shape[1]], ids)  # the prompt as given, pads where they were
    left = model.generate(left_ids, 6, attention_mask=left_mask)
    assert torch.equal(ours[:, ids.shape[1] :], left[:, ids.shape[1] :])
    alone = model.generate(torch.tensor(tokenizer.encode(TEXTS[1])), 6)
    assert torch.equal(ours[1, ids.shape[1] :], alone[-6:])
