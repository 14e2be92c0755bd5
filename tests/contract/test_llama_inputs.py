"""The Llama model's and generation's input checks, on a toy model (no weights file needed).

The checks added for issue 29's adversarial cases: numbers that must be finite, seeds a
``torch.Generator`` takes, one object per layer, token ids of any integer dtype, the
padding mask and the sampling settings. Each is refused with the argument's name, what
it got and what it wanted, before any arithmetic.
"""

from __future__ import annotations

import pytest
import torch

from attnlab import KVCache, _validation
from attnlab.llama import LlamaConfig, LlamaModel
from attnlab.llama.generate import Sampling, warp_logits

TINY = LlamaConfig(
    vocab_size=40, d_model=16, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=4, ffn_dim=24
)


@pytest.fixture(scope="module")
def tiny() -> LlamaModel:
    torch.manual_seed(0)
    return LlamaModel(TINY).eval()


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        (float("nan"), ValueError, "t must be a finite number >= 0; got nan"),
        (float("-inf"), ValueError, "got -inf"),
        (-0.5, ValueError, "t must be a finite number >= 0; got -0.5"),
        (True, TypeError, "t must be a finite number >= 0; got bool True"),
        ("1.0", TypeError, "got str '1.0'"),
    ],
)
def test_check_number_refuses_nan_infinities_bools_and_strings(
    value: object, error: type[Exception], match: str
) -> None:
    """A plain ``value < 0`` lets NaN through; check_number does not."""
    with pytest.raises(error, match=match):
        _validation.check_number("t", value, at_least=0)
    assert _validation.check_number("t", 3, at_least=0) == 3.0


def test_check_seed_takes_what_a_generator_takes() -> None:
    """0 .. 2**64 - 1, the range of torch.Generator.manual_seed; nothing else."""
    assert _validation.check_seed("seed", 2**64 - 1) == 2**64 - 1
    torch.Generator().manual_seed(2**64 - 1)  # the bound is the generator's
    for bad, error in ((2**64, ValueError), (-1, ValueError), (1.0, TypeError), ("1", TypeError)):
        with pytest.raises(error, match=r"seed must be an int in 0 \.\. 2\*\*64 - 1"):
            _validation.check_seed("seed", bad)


def test_check_distinct_names_the_repeated_positions() -> None:
    """``[x] * n`` is one object n times: refused, naming where it repeats."""
    cache = KVCache()
    _validation.check_distinct("cache", [KVCache(), KVCache()])
    with pytest.raises(ValueError, match="same KVCache at positions 1 and 2"):
        _validation.check_distinct("cache", [KVCache(), cache, cache])


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64, torch.int8])
def test_check_token_range_reads_every_integer_dtype(dtype: torch.dtype) -> None:
    """Ids of dtypes without min/max kernels are read as int64; out-of-range ids named."""
    ids = _validation.check_token_range("ids", torch.tensor([3, 7], dtype=dtype), 10)
    assert ids.dtype == torch.int64 and ids.tolist() == [3, 7]
    wanted = r"ids must be token ids in 0 \.\. 9; got values from 3 to 10"
    with pytest.raises(ValueError, match=wanted):
        _validation.check_token_range("ids", torch.tensor([3, 10], dtype=dtype), 10)


def test_the_toy_model_refuses_one_cache_for_every_layer(tiny: LlamaModel) -> None:
    """Both layers appending to one cache would give wrong logits: refused, cache untouched."""
    shared = KVCache()
    with pytest.raises(ValueError, match="same KVCache at positions 0 and 1"):
        tiny(torch.tensor([1, 2, 3]), cache=[shared, shared])
    assert len(shared) == 0


def test_a_padded_row_of_the_toy_model_equals_the_row_alone(tiny: LlamaModel) -> None:
    """Left padding with attention_mask: the real positions' logits are the unpadded row's."""
    row = torch.tensor([5, 9, 2, 30])
    ids = torch.cat([torch.zeros(3, dtype=torch.long), row]).unsqueeze(0)  # (1, 7)
    mask = (torch.arange(7) >= 3).long().unsqueeze(0)  # (1, 7): 3 pads
    padded = tiny(ids, attention_mask=mask)
    alone = tiny(row)
    assert isinstance(padded, torch.Tensor) and isinstance(alone, torch.Tensor)
    torch.testing.assert_close(padded[:, 3:], alone, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(tiny(ids)[:, 3:], alone, atol=1e-3)  # type: ignore[index]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(temperature=float("nan")), ValueError, "temperature must be a finite number"),
        (dict(temperature=1.0, top_k=-2), ValueError, "top_k must be a positive int; got -2"),
        (dict(temperature=1.0, top_p=-0.1), ValueError, r"top_p must be in \[0, 1\]; got -0.1"),
        (dict(temperature=1.0, seed=2**64), ValueError, "seed must be an int in 0"),
        (dict(top_p=0.5), ValueError, "top_p filters sampling, which needs temperature > 0"),
    ],
)
def test_sampling_settings_are_checked_when_built(
    kwargs: dict[str, object], error: type[Exception], match: str
) -> None:
    """Sampling(...) refuses bad settings at once, before a model runs."""
    with pytest.raises(error, match=match):
        Sampling(**kwargs)  # type: ignore[arg-type]


def test_warp_logits_refuses_greedy_settings_and_wrong_logits() -> None:
    """Warping needs a temperature > 0 and (B, V) floating logits."""
    with pytest.raises(ValueError, match="temperature must be > 0 to warp"):
        warp_logits(torch.zeros(1, 5), Sampling())
    with pytest.raises(ValueError, match=r"logits must be a floating-point tensor of shape \(B, V"):
        warp_logits(torch.zeros(5), Sampling(temperature=1.0))
