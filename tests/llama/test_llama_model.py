"""attnlab.llama on its own: layout, caching, batching, ablation, sampling and bad input.

The model is loaded once per process (``load_smollm2`` is memoised); these tests share
the ``smollm2`` worker with the reference tests and the pages.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

pytest.importorskip("gguf", reason="the llm extra is not installed")

from attnlab import GroupedQueryAttention, RotaryEmbedding
from attnlab.llama import (
    DecoderBlock,
    LlamaConfig,
    LlamaOutput,
    RMSNorm,
    SwiGLU,
    load_smollm2,
    unpermute_rotary_rows,
)

pytestmark = pytest.mark.xdist_group("smollm2")


def ids_of(text: str) -> torch.Tensor:
    _, tokenizer = load_smollm2()
    return torch.tensor(tokenizer.encode(text))


def test_unpermute_rotary_rows_on_a_hand_example() -> None:
    """Within each head, llama.cpp's neighbour pairs (a_i, b_i) go to rows i and i + D/2."""
    rows = torch.arange(8.0).unsqueeze(-1).repeat(1, 3)  # 2 heads of D = 4, stored a0 b0 a1 b1
    out = unpermute_rotary_rows(rows, num_heads=2)
    assert out[:, 0].tolist() == [0, 2, 1, 3, 4, 6, 5, 7]
    assert torch.equal(out[:, 1], out[:, 0])  # whole rows move
    with pytest.raises(ValueError, match=r"num_heads = 2; got shape \(6, 3\)"):
        unpermute_rotary_rows(torch.zeros(6, 3), num_heads=2)


def test_load_smollm2_is_memoised_eval_float32_without_grad() -> None:
    """One shared model: eval mode, float32, no gradients, SmolLM2-135M's sizes."""
    model, tokenizer = load_smollm2()
    assert load_smollm2()[0] is model
    assert not model.training
    assert all(p.dtype == torch.float32 and not p.requires_grad for p in model.parameters())
    c = model.config
    assert (c.num_layers, c.d_model, c.num_heads, c.num_kv_heads, c.head_dim) == (30, 576, 9, 3, 64)
    assert (c.vocab_size, c.context_length, tokenizer.vocab_size) == (49152, 8192, 49152)
    assert sum(p.numel() for p in model.parameters()) == 134_515_008


def test_one_rotary_table_per_forward_serves_every_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The model computes its (cos, sin) once per forward and passes it down; a layer used
    alone computes the same table itself."""
    model, _ = load_smollm2()
    calls: list[int] = []
    cos_sin = RotaryEmbedding.cos_sin

    def counted(self: RotaryEmbedding, positions: torch.Tensor) -> tuple[torch.Tensor, ...]:
        calls.append(positions.shape[0])
        return cos_sin(self, positions)

    monkeypatch.setattr(RotaryEmbedding, "cos_sin", counted)
    model(torch.tensor([[1, 2, 3, 4]]))
    assert calls == [4]  # one table of 4 positions for 30 layers
    attn = model.layers[0].attn
    x = torch.randn(2, 5, 576, generator=torch.Generator().manual_seed(0))
    table = model.rotary.cos_sin(torch.arange(5))
    torch.testing.assert_close(attn(x, position_embeddings=table), attn(x), atol=0, rtol=0)
    assert sum(isinstance(m, RotaryEmbedding) for m in model.modules()) == 1  # shared
    assert all(block.attn.positions is model.rotary for block in model.layers)


def test_loading_does_not_import_transformers() -> None:
    """A fresh interpreter loads the model and tokenizer without importing transformers."""
    code = (
        "import sys; from attnlab.llama import load_smollm2; load_smollm2(); "
        "assert 'transformers' not in sys.modules, 'transformers imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_cached_decoding_equals_the_full_forward() -> None:
    """Feeding the ids in chunks through one KVCache per layer gives the full pass's logits."""
    model, _ = load_smollm2()
    ids = ids_of("One, two, three, four, five, six, seven").unsqueeze(0)  # (1, T)
    full = model(ids)
    assert isinstance(full, torch.Tensor)
    cache = model.new_cache()
    chunks = [model(ids[:, :5], cache=cache)]
    chunks += [model(ids[:, t : t + 1], cache=cache) for t in range(5, ids.shape[1])]
    assert len(cache[0]) == ids.shape[1]
    torch.testing.assert_close(torch.cat(chunks, dim=1), full, atol=1e-4, rtol=1e-4)  # type: ignore[arg-type]


def test_a_batch_equals_its_rows_one_at_a_time() -> None:
    """Rows of a batch do not interact: each row's logits and attention are its own."""
    model, tokenizer = load_smollm2()
    texts = ("Hello there, my friend", "import torch as th\n", "2 + 2 = 4, and")
    rows = [tokenizer.encode(text)[:5] for text in texts]
    batch = torch.tensor(rows)  # (3, 5)
    logits, attention = model(batch, return_attention=True)
    for b, row in enumerate(rows):
        one, one_attention = model(torch.tensor(row), return_attention=True)  # 1-D input
        torch.testing.assert_close(logits[b : b + 1], one, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(attention[7][b : b + 1], one_attention[7], atol=1e-5, rtol=0)


def test_attention_weights_are_causal_rows_that_sum_to_one() -> None:
    """return_attention: 30 tensors (B, 9, T, T), zero above the diagonal, rows summing to 1."""
    model, _ = load_smollm2()
    ids = ids_of("The cat sat on the mat.")
    T = ids.shape[0]
    result = model(ids, return_attention=True)
    assert isinstance(result, LlamaOutput)  # a named result, and a tuple
    logits, attention = result
    assert result.logits is logits and result.attention is attention
    assert logits.shape == (1, T, 49152)
    assert len(attention) == 30
    for weights in attention:
        assert weights.shape == (1, 9, T, T)
        assert torch.all(weights.triu(1) == 0)
        torch.testing.assert_close(weights.sum(-1), torch.ones(1, 9, T))


def test_ablation_zeroes_exactly_the_chosen_heads() -> None:
    """ablate={layer: heads} changes nothing before that layer and equals zeroing those heads."""
    model, _ = load_smollm2()
    ids = ids_of("The Eiffel Tower is in the city of").unsqueeze(0)
    base, base_att = model(ids, return_attention=True)
    knocked, knocked_att = model(ids, return_attention=True, ablate={4: [0, 8], 10: 3})
    for layer in range(5):
        torch.testing.assert_close(knocked_att[layer], base_att[layer], atol=0, rtol=0)
    assert not torch.allclose(knocked, base, atol=1e-3)
    # By hand: layer 4's heads 0 and 8 add nothing, so o_proj sees zeros in their columns.
    attn = model.layers[4].attn
    assert isinstance(attn, GroupedQueryAttention)
    x = torch.randn(1, 3, 576, generator=torch.Generator().manual_seed(0))
    out, _ = attn(x, ablate_heads=[0, 8])  # an ordinary keyword
    o_proj = attn.o_proj.weight.clone()
    o_proj[:, 0:64] = 0
    o_proj[:, 8 * 64 :] = 0
    queries = attn.split_heads(attn.q_proj(x))
    keys, values = attn.split_heads(attn.k_proj(x)), attn.split_heads(attn.v_proj(x))
    queries, keys = attn.position_queries_keys(queries, keys)
    context, _ = attn.attend_heads(queries, keys, values, None, True)
    torch.testing.assert_close(out, attn.merge_heads(context) @ o_proj.T, atol=1e-5, rtol=1e-5)


def test_generate_shapes_sampling_and_eos() -> None:
    """1-D in, 1-D out; a seed fixes the sample; stop_at_eos ends at the eos token."""
    model, tokenizer = load_smollm2()
    ids = ids_of("Once upon a time")
    greedy = model.generate(ids, max_new_tokens=3)
    assert greedy.shape == (ids.shape[0] + 3,) and torch.equal(greedy[: ids.shape[0]], ids)
    batch = model.generate(torch.stack([ids, ids]), max_new_tokens=2)
    assert batch.shape == (2, ids.shape[0] + 2) and torch.equal(batch[1], greedy[:-1])
    a = model.generate(ids, max_new_tokens=4, temperature=1.0, seed=3)
    b = model.generate(ids, max_new_tokens=4, temperature=1.0, seed=3)
    assert torch.equal(a, b)
    assert torch.equal(model.generate(ids, max_new_tokens=0), ids)
    prompt = tokenizer.chat_prompt([{"role": "user", "content": "What is 2+2?"}])
    chat = torch.tensor(tokenizer.encode(prompt))
    answer = model.generate(chat, max_new_tokens=30, stop_at_eos=True)[chat.shape[0] :]
    assert answer[-1].item() == tokenizer.eos_token_id == 2
    assert (answer == 2).sum() == 1


def test_tokenizer_round_trips_and_knows_its_special_tokens() -> None:
    """decode(encode(text)) == text; special tokens are single ids; digits stand alone."""
    _, tokenizer = load_smollm2()
    for text in ["naïve café 東京 🙂", "x = [1, 22, 333]\n\tpass", "  two  spaces  "]:
        assert tokenizer.decode(tokenizer.encode(text)) == text
    assert tokenizer.encode("<|im_start|><|im_end|>") == [1, 2]
    assert tokenizer.tokenize(" 2024") == ["Ġ", "2", "0", "2", "4"]
    assert tokenizer.decode([1, 504, 2], skip_special_tokens=True) == "The"


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda m: m(torch.tensor([1.0, 2.0])), TypeError, "input_ids must hold integer"),
        (lambda m: m([1, 2, 3]), TypeError, "input_ids must be a torch.Tensor"),
        (
            lambda m: m(torch.tensor([5, 49152])),
            ValueError,
            r"0 \.\. 49151; got values from 5 to 49152",
        ),
        (lambda m: m(torch.tensor([-1, 3])), ValueError, "got values from -1"),
        (
            lambda m: m(torch.zeros(1, 2, 3, dtype=torch.long)),
            ValueError,
            r"\(T,\) or \(B, T\).*\(1, 2, 3\)",
        ),
        (lambda m: m(torch.zeros(0, dtype=torch.long)), ValueError, r"T >= 1; got shape \(0,\)"),
        (
            lambda m: m(torch.zeros(8193, dtype=torch.long)),
            ValueError,
            "context of 8192 tokens; got 8193",
        ),
        (lambda m: m.generate(torch.zeros(8190, dtype=torch.long), 3), ValueError, "8190 \\+ 3"),
        (lambda m: m.generate(torch.tensor([1]), 2.5), TypeError, "max_new_tokens must be an int"),
        (lambda m: m.generate(torch.tensor([1]), 2, temperature=-1.0), ValueError, "temperature"),
        (
            lambda m: m(torch.tensor([1]), ablate={30: [0]}),
            ValueError,
            r"layers must be ints in 0 \.\. 29",
        ),
        (
            lambda m: m(torch.tensor([1]), ablate={0: [9]}),
            ValueError,
            r"heads must be ints in 0 \.\. 8",
        ),
        (lambda m: m(torch.tensor([1]), ablate=[0]), TypeError, "ablate must be a dict"),
        (lambda m: m(torch.tensor([1]), cache=[]), TypeError, "list of 30 caches"),
        (
            lambda m: m(torch.tensor([1], device="meta")),
            ValueError,
            "input_ids is on device meta but the model is on cpu",
        ),
    ],
)
def test_bad_input_is_refused_before_any_arithmetic(call, error, match) -> None:  # type: ignore[no-untyped-def]
    """Wrong types, shapes, out-of-vocabulary ids and over-long prompts name the argument."""
    model, _ = load_smollm2()
    with pytest.raises(error, match=match):
        call(model)


def test_tokenizer_refuses_bad_input() -> None:
    """encode wants a str of valid Unicode; decode wants ids inside the vocabulary."""
    _, tokenizer = load_smollm2()
    with pytest.raises(TypeError, match="text must be a str"):
        tokenizer.encode(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(
        ValueError, match=r"text must be valid Unicode; got a lone surrogate '\\ud800' at index 1"
    ):
        tokenizer.encode("a\ud800b")
    with pytest.raises(ValueError, match=r"0 \.\. 49151; got 49152"):
        tokenizer.decode([49152])
    with pytest.raises(TypeError, match="integer token ids"):
        tokenizer.decode([1.5])


def test_pre_tokenisation_cuts_every_digit_off_even_where_a_merge_would_join_them() -> None:
    """SmolLM2's vocabulary has no multi-digit token, so this is tried on a tiny one that
    merges "1 2", "Ġ a" and "a a": digits stay single (the "smollm" pre-tokenizer), a space
    joins the word after it (GPT-2's pattern, no prefix space added), and words merge."""
    from attnlab.llama.tokenizer import Tokenizer

    tokens = ["<s>", "1", "2", "12", "a", "Ġ", "Ġa", "aa"]
    tiny = Tokenizer(tokens, ["1 2", "Ġ a", "a a"], special_ids=[0], bos_token_id=0, eos_token_id=0)
    assert tiny.tokenize("12 a aa 2112") == ["1", "2", "Ġa", "Ġa", "a", "Ġ", "2", "1", "1", "2"]
    assert tiny.tokenize("aa") == ["aa"]  # the merge applies within a word
    assert tiny.encode("12") == [1, 2]


def test_rmsnorm_default_eps_is_1e_5_under_the_root() -> None:
    """RMSNorm(d) = x / sqrt(mean(x^2) + 1e-5) * weight, written out on inputs small
    enough (~1e-3) that the epsilon and where it sits change the result."""
    x = torch.randn(3, 16, generator=torch.Generator().manual_seed(0)) * 1e-3
    norm = RMSNorm(16)
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.5, 2.0, 16))
        expected = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * norm.weight
        torch.testing.assert_close(norm(x), expected)
        torch.testing.assert_close(norm(x), torch.nn.RMSNorm(16, eps=1e-5).to(x)(x) * norm.weight)


TINY = LlamaConfig(vocab_size=50, d_model=16, num_layers=1, num_heads=4, num_kv_heads=2,
                   head_dim=4, ffn_dim=32)  # fmt: skip
PARTS = {
    "RMSNorm": lambda: RMSNorm(16),
    "SwiGLU": lambda: SwiGLU(16, 32),
    "DecoderBlock": lambda: DecoderBlock(TINY),
}


@pytest.mark.parametrize("part", PARTS)
@pytest.mark.parametrize(
    ("x", "error", "match"),
    [
        (torch.zeros(2, 3, 15), ValueError, r"d_model = 16; got shape \(2, 3, 15\)"),
        (torch.zeros(2, 3, 16, device="meta"), ValueError, "x is on device meta but the module's"),
        (torch.zeros(2, 3, 16, dtype=torch.float64), TypeError, "x has dtype torch.float64"),
        (torch.zeros(2, 3, 16, dtype=torch.long), TypeError, "x must be a floating-point tensor"),
    ],
)  # fmt: skip
def test_the_blocks_parts_refuse_bad_input_with_the_packages_errors(
    part: str, x: torch.Tensor, error: type[Exception], match: str
) -> None:
    """Each part checks its own input before its first operation, not deep in PyTorch."""
    with pytest.raises(error, match=match):
        PARTS[part]()(x)
