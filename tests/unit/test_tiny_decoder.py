"""examples.tiny_decoder: the big-picture chapter's decoder, causal and seeded."""

from __future__ import annotations

import pytest
import torch

from attnlab import examples


def test_tiny_decoder_maps_ids_to_logits_and_counts_the_chapters_parameters() -> None:
    decoder = examples.tiny_decoder()
    token_ids = torch.randint(50, (3, 5), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert decoder(token_ids).shape == (3, 5, 50)
    assert sum(p.numel() for p in decoder.blocks.parameters()) == 6464


def test_tiny_decoder_is_seeded_and_leaves_the_global_random_state_alone() -> None:
    torch.manual_seed(0)
    state = torch.get_rng_state()
    first, second = examples.tiny_decoder(), examples.tiny_decoder()
    assert torch.equal(torch.get_rng_state(), state)
    for a, b in zip(first.parameters(), second.parameters(), strict=True):
        assert torch.equal(a, b)


def test_tiny_decoder_is_causal() -> None:
    """Changing token t leaves the logits of every earlier position bit for bit."""
    decoder = examples.tiny_decoder(num_heads=4)
    token_ids = torch.tensor([[1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1]])
    changed = token_ids.clone()
    changed[:, 3] = 0
    with torch.no_grad():
        before, after = decoder(token_ids), decoder(changed)
    assert torch.equal(before[:, :3], after[:, :3])
    assert not torch.allclose(before[:, 3:], after[:, 3:])


def test_tiny_decoder_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="num_blocks must be a positive int; got 0"):
        examples.tiny_decoder(num_blocks=0)
    decoder = examples.tiny_decoder()
    with pytest.raises(
        ValueError, match=r"token_ids must have shape \(B, T\) with T <= 6; got shape \(1, 7\)"
    ):
        decoder(torch.zeros(1, 7, dtype=torch.long))
    with pytest.raises(ValueError, match=r"got shape \(6,\)"):
        decoder(torch.zeros(6, dtype=torch.long))
    with pytest.raises(TypeError, match="token_ids must be an integer tensor"):
        decoder(torch.zeros(1, 6))
