"""The real LLM refuses what it cannot do right, or does it right: issue 29's adversarial cases.

Each call below once ran and gave a silent wrong answer, crashed deep in PyTorch or
raised an error that named nothing. Now each is refused before any arithmetic with a
``TypeError``/``ValueError`` naming the argument, what it got and what it wanted, or
answered right (checked against the answer the ordinary input gives).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

pytest.importorskip("gguf", reason="the llm extra is not installed")

from attnlab import KVCache
from attnlab.llama import load_smollm2
from attnlab.llama.interpret import copy_losses, repeated_random_tokens

pytestmark = pytest.mark.xdist_group("smollm2")

IDS = torch.tensor([504, 3575, 282, 4649, 314])  # "The capital of France is"


def model_call(call: Callable[[Any], object]) -> Callable[[], object]:
    return lambda: call(load_smollm2()[0])


def tokenizer_call(call: Callable[[Any], object]) -> Callable[[], object]:
    return lambda: call(load_smollm2()[1])


REFUSED = {
    "one KVCache object for every layer": (
        model_call(lambda m: m(IDS, cache=[KVCache()] * 30)),
        ValueError,
        r"cache must hold a different object at each position; got the same KVCache at "
        r"positions 0 and 1",
    ),
    "caches of different lengths": (
        model_call(lambda m: m(IDS[:2], cache=[*m.new_cache()[:29], _filled_cache(m)])),
        ValueError,
        "cache must hold the same number of positions in every layer; got lengths from 0 to 3",
    ),
    "a cache of another batch size": (
        model_call(lambda m: m(IDS.repeat(2, 1), cache=_filled_caches(m))),
        ValueError,
        r"cache must hold keys of shape \(B, Hkv, S, D\) with B = 2 like input_ids; got B = 1",
    ),
    "temperature=nan": (
        model_call(lambda m: m.generate(IDS, 2, temperature=float("nan"))),
        ValueError,
        "temperature must be a finite number >= 0.0; got nan",
    ),
    "temperature=inf": (
        model_call(lambda m: m.generate(IDS, 2, temperature=float("inf"))),
        ValueError,
        "temperature must be a finite number >= 0.0; got inf",
    ),
    "return_attention='False'": (
        model_call(lambda m: m(IDS, return_attention="False")),
        TypeError,
        "return_attention must be a bool; got str",
    ),
    "stop_at_eos='False'": (
        model_call(lambda m: m.generate(IDS, 2, stop_at_eos="False")),
        TypeError,
        "stop_at_eos must be a bool; got str",
    ),
    "a float seed": (
        model_call(lambda m: m.generate(IDS, 2, temperature=1.0, seed=1.5)),
        TypeError,
        r"seed must be an int in 0 \.\. 2\*\*64 - 1; got float 1.5",
    ),
    "a str seed": (
        model_call(lambda m: m.generate(IDS, 2, temperature=1.0, seed="3")),
        TypeError,
        "seed must be an int .*; got str '3'",
    ),
    "seed=2**70": (
        model_call(lambda m: m.generate(IDS, 2, temperature=1.0, seed=2**70)),
        ValueError,
        f"seed must be an int in 0 .. 2\\*\\*64 - 1; got {2**70}",
    ),
    "a negative seed": (
        model_call(lambda m: m.generate(IDS, 2, temperature=1.0, seed=-1)),
        ValueError,
        "seed must be an int in 0 .. 2\\*\\*64 - 1; got -1",
    ),
    "top_k with greedy decoding": (
        model_call(lambda m: m.generate(IDS, 2, top_k=5)),
        ValueError,
        "top_k filters sampling, which needs temperature > 0; got top_k=5 with temperature=0",
    ),
    "top_p with greedy decoding": (
        model_call(lambda m: m.generate(IDS, 2, top_p=0.9)),
        ValueError,
        "top_p filters sampling, which needs temperature > 0; got top_p=0.9",
    ),
    "top_k=0": (
        model_call(lambda m: m.generate(IDS, 2, temperature=1.0, top_k=0)),
        ValueError,
        "top_k must be a positive int; got 0",
    ),
    "a float top_k": (
        model_call(lambda m: m.generate(IDS, 2, temperature=1.0, top_k=2.5)),
        TypeError,
        "top_k must be a positive int; got float 2.5",
    ),
    "top_p=1.5": (
        model_call(lambda m: m.generate(IDS, 2, temperature=1.0, top_p=1.5)),
        ValueError,
        r"top_p must be in \[0, 1\]; got 1.5",
    ),
    "top_p=nan": (
        model_call(lambda m: m.generate(IDS, 2, temperature=1.0, top_p=float("nan"))),
        ValueError,
        r"top_p must be in \[0, 1\]; got nan",
    ),
    "a uint64 id of 2**63": (
        model_call(lambda m: m(torch.tensor([2**63], dtype=torch.uint64))),
        ValueError,
        r"input_ids must be token ids in 0 \.\. 49151; got a value of 2\*\*63 or more",
    ),
    "a uint32 id outside the vocabulary": (
        model_call(lambda m: m(torch.tensor([5, 49152], dtype=torch.uint32))),
        ValueError,
        r"input_ids must be token ids in 0 \.\. 49151; got values from 5 to 49152",
    ),
    "ablate={3: None}": (
        model_call(lambda m: m(IDS, ablate={3: None})),
        TypeError,
        r"ablate\[3\] must be a head or a list of heads \(ints in 0 \.\. 8\); got NoneType",
    ),
    "ablate={3: '0'}": (
        model_call(lambda m: m(IDS, ablate={3: "0"})),
        TypeError,
        r"ablate\[3\] must be a head or a list of heads .*; got str '0'",
    ),
    "a float attention_mask": (
        model_call(lambda m: m(IDS, attention_mask=torch.ones(5))),
        TypeError,
        r"attention_mask must hold 1 \(real token\) or 0 \(padding\) \(int64\); got dtype "
        r"torch.float32",
    ),
    "an attention_mask of another length": (
        model_call(lambda m: m(IDS.repeat(2, 1), attention_mask=torch.ones(2, 4).long())),
        ValueError,
        r"attention_mask must have shape \(B, S\) = \(2, 5\).*; got shape \(2, 4\)",
    ),
    "an attention_mask that does not cover the cache": (
        model_call(lambda m: m(IDS[:2], cache=_filled_caches(m), attention_mask=IDS[:2] > 0)),
        ValueError,
        r"attention_mask must have shape \(B, S\) = \(1, 5\)",
    ),
    "an attention_mask holding a 2": (
        model_call(lambda m: m(IDS, attention_mask=torch.tensor([1, 1, 2, 1, 1]))),
        ValueError,
        r"attention_mask must hold 1 \(real token\) or 0 \(padding\); got 2",
    ),
    "an attention_mask on another device": (
        model_call(lambda m: m(IDS, attention_mask=torch.ones(5, dtype=torch.bool, device="meta"))),
        ValueError,
        "attention_mask must be on the device of input_ids",
    ),
    "chat content that is a list": (
        tokenizer_call(lambda t: t.chat_prompt([{"role": "user", "content": ["Hi", "there"]}])),
        TypeError,
        r"messages\[0\]\['content'\] must be a str; got list \['Hi', 'there'\]",
    ),
    "chat content that is None": (
        tokenizer_call(lambda t: t.chat_prompt([{"role": "user", "content": None}])),
        TypeError,
        r"messages\[0\]\['content'\] must be a str; got NoneType None",
    ),
    "a chat role that is not a str": (
        tokenizer_call(
            lambda t: t.chat_prompt(
                [{"role": "system", "content": "Be brief."}, {"role": 1, "content": "Hi"}]
            )
        ),
        TypeError,
        r"messages\[1\]\['role'\] must be a str; got int 1",
    ),
    "chat messages that are one str": (
        tokenizer_call(lambda t: t.chat_prompt("Hi")),
        TypeError,
        "messages must be a list of .* dicts; got str",
    ),
    "decode(None)": (
        tokenizer_call(lambda t: t.decode(None)),
        TypeError,
        "ids must be a list or a 1-D tensor of token ids; got NoneType",
    ),
    "decode of a 0-d tensor": (
        tokenizer_call(lambda t: t.decode(torch.tensor(504))),
        ValueError,
        r"ids must be a list or a 1-D tensor of token ids; got a tensor of shape \(\)",
    ),
    "decode of a 2-D tensor": (
        tokenizer_call(lambda t: t.decode(torch.tensor([[504, 3575]]))),
        ValueError,
        r"got a tensor of shape \(1, 2\)",
    ),
    "decode(skip_special_tokens='False')": (
        tokenizer_call(lambda t: t.decode([504], skip_special_tokens="False")),
        TypeError,
        "skip_special_tokens must be a bool; got str",
    ),
    "encode(add_special_tokens='False')": (
        tokenizer_call(lambda t: t.encode("Hi", add_special_tokens="False")),
        TypeError,
        "add_special_tokens must be a bool; got str",
    ),
    "repeated_random_tokens(first_token=1.5)": (
        lambda: repeated_random_tokens(4, first_token=1.5),
        TypeError,
        "first_token must be an int >= 0; got float 1.5",
    ),
    "repeated_random_tokens(first_token=-1)": (
        lambda: repeated_random_tokens(4, first_token=-1),
        ValueError,
        "first_token must be an int >= 0; got -1",
    ),
    "repeated_random_tokens(seed=2**70)": (
        lambda: repeated_random_tokens(4, seed=2**70),
        ValueError,
        r"seed must be an int in 0 \.\. 2\*\*64 - 1",
    ),
    "copy_losses with float ids": (
        lambda: copy_losses(torch.zeros(1, 9, 50), torch.zeros(1, 9), 4),
        TypeError,
        r"input_ids must hold integer token ids \(int64\); got dtype torch.float32",
    ),
    "copy_losses with an id outside the vocabulary": (
        lambda: copy_losses(torch.zeros(1, 9, 50), torch.full((1, 9), 50), 4),
        ValueError,
        r"input_ids must be token ids in 0 \.\. 49; got values from 50 to 50",
    ),
    "copy_losses with a negative id": (
        lambda: copy_losses(torch.zeros(1, 9, 50), torch.full((9,), -1), 4),
        ValueError,
        r"input_ids must be token ids in 0 \.\. 49; got values from -1 to -1",
    ),
    "copy_losses with integer logits": (
        lambda: copy_losses(torch.zeros(1, 9, 50, dtype=torch.long), torch.zeros(1, 9).long(), 4),
        TypeError,
        "logits must be a floating-point tensor",
    ),
}


def _filled_cache(model: Any) -> KVCache:
    """Layer 0's cache after reading three tokens (batch 1)."""
    return _filled_caches(model)[0]


def _filled_caches(model: Any) -> list[KVCache]:
    cache = model.new_cache()
    model(IDS[:3], cache=cache)
    return cache


@pytest.mark.parametrize("case", REFUSED)
def test_refused_with_an_error_naming_the_argument(case: str) -> None:
    """Each bad call raises the package's error: the argument, what it got, what it wanted."""
    call, error, match = REFUSED[case]
    with pytest.raises(error, match=match):
        call()


def test_a_refused_cache_is_left_untouched() -> None:
    """The shared-cache check runs before any layer appends to the cache."""
    model, _ = load_smollm2()
    shared = KVCache()
    with pytest.raises(ValueError, match="same KVCache"):
        model(IDS, cache=[shared] * 30)
    assert len(shared) == 0


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64])
def test_ids_of_any_integer_dtype_give_the_int64_logits(dtype: torch.dtype) -> None:
    """uint16/32/64 ids (no min/max kernels in PyTorch) are read as int64, not a crash."""
    model, _ = load_smollm2()
    ids = torch.tensor([[1, 200, 17]])
    expected = model(ids)
    assert isinstance(expected, torch.Tensor)
    torch.testing.assert_close(model(ids.to(dtype)), expected, atol=0, rtol=0)
    assert torch.equal(model.generate(ids.to(dtype), 2), model.generate(ids, 2))


@pytest.mark.parametrize("temperature", [1e-40, 5e-324])
def test_a_tiny_temperature_samples_the_greedy_tokens(temperature: float) -> None:
    """A tiny positive temperature is the greedy limit, not softmax(inf) and a crash.

    (1e-40 is a float32 subnormal, so logits / 1e-40 overflow; 5e-324 is 0 in float32.)
    """
    model, _ = load_smollm2()
    greedy = model.generate(IDS, 4)
    assert torch.equal(model.generate(IDS, 4, temperature=temperature, seed=0), greedy)


def test_chat_prompt_still_writes_string_content() -> None:
    """A control: the checks refuse only what is wrong (ordinary calls work as before)."""
    _, tokenizer = load_smollm2()
    prompt = tokenizer.chat_prompt([{"role": "user", "content": "Hi"}], add_generation_prompt=False)
    assert prompt.endswith("<|im_start|>user\nHi<|im_end|>\n")
    the_capital = tokenizer.decode(torch.tensor([504, 3575]))
    assert the_capital == tokenizer.decode((504, 3575)) == "The capital"
