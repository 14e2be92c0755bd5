"""attnlab.llama.experiments: StreamingLLM's mask, masked logits, copying.

Each function is checked against an independent computation: the mask against its
definition as a loop, ``masked_logits`` against the model's own forward (causal, and
with the layers' ``window`` set) and against a plain-softmax forward written here,
``mean_loss`` against ``-log_softmax`` token by token, and ``head_direct_logits``
against the model's own attention layer with every other head ablated. The last tests
check, with margins, what the chapter says about the real model.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("tokenizers", reason="the llm extra is not installed")

from tiny_llama import TINY, tiny_model

from attnlab.bench import load_results
from attnlab.llama import LlamaModel
from attnlab.llama.experiments import (
    head_direct_logits,
    long_text,
    masked_logits,
    mean_loss,
    ov_copying_scores,
    renumbered_streaming_logits,
    streaming_mask,
)

pytestmark = pytest.mark.xdist_group("smollm2")

NO_KEY_0 = torch.arange(3) > 0  # (3,): hides key 0, so query 0 sees nothing


def _ids(T: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, 64, (2, T), generator=torch.Generator().manual_seed(seed))


def test_streaming_mask_is_its_definition() -> None:
    """mask[i, j]: j <= i and (the last `window` keys or one of the first `sinks`)."""
    for T, window, sinks in [(9, 3, 0), (9, 3, 2), (6, 10, 1), (7, 1, 1), (5, 2, 5)]:
        want = torch.zeros(T, T, dtype=torch.bool)
        for i in range(T):
            for j in range(i + 1):
                want[i, j] = i - j < window or j < sinks
        assert torch.equal(streaming_mask(T, window, sinks), want), (T, window, sinks)


def _plain_forward(model: LlamaModel, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The model written out with a plain softmax and repeated key/value heads."""
    x = model.embed(ids)  # (B, T, d)
    B, T, _ = x.shape
    H, Hkv, D = TINY.num_heads, TINY.num_kv_heads, TINY.head_dim
    positions = torch.arange(T)
    for block in model.layers:
        a = block.attn
        h = block.attn_norm(x)
        q = model.rotary(a.q_proj(h).view(B, T, H, D).transpose(1, 2), positions)  # (B, H, T, D)
        k = model.rotary(a.k_proj(h).view(B, T, Hkv, D).transpose(1, 2), positions)
        v = a.v_proj(h).view(B, T, Hkv, D).transpose(1, 2)
        k, v = (t.repeat_interleave(H // Hkv, dim=1) for t in (k, v))  # (B, H, T, D)
        scores = (q @ k.transpose(-2, -1) / D**0.5).masked_fill(~mask, float("-inf"))
        context = torch.softmax(scores, dim=-1) @ v  # (B, H, T, D)
        x = x + a.o_proj(context.transpose(1, 2).reshape(B, T, H * D))
        x = x + block.ffn(block.ffn_norm(x))
    return model.norm(x) @ model.embed.weight.T


def test_masked_logits_equal_the_model_and_a_plain_forward() -> None:
    """Causal mask: model(ids); window alone: the layers' own window; sinks: a plain forward."""
    model = tiny_model()
    ids = _ids(12)
    assert torch.allclose(masked_logits(model, ids, streaming_mask(12, 12)), model(ids), atol=1e-5)
    for block in model.layers:
        block.attn.window = 4
    try:
        windowed = model(ids)
    finally:
        for block in model.layers:
            block.attn.window = None
    assert torch.allclose(masked_logits(model, ids, streaming_mask(12, 4)), windowed, atol=1e-5)
    mask = streaming_mask(12, 4, sinks=2)
    with torch.no_grad():
        plain = _plain_forward(model, ids, mask)
    sinks = masked_logits(model, ids, mask)
    assert torch.allclose(sinks, plain, atol=1e-5)
    assert not torch.allclose(sinks, windowed, atol=1e-3)  # the sinks change the result


def test_mean_loss_is_the_token_by_token_cross_entropy() -> None:
    """Mean of -log p(token at p | logits at p - 1) over p = start .. T-1 and the batch."""
    logits = torch.randn(2, 9, 64, generator=torch.Generator().manual_seed(3))
    ids = _ids(9)
    for start in (1, 4, 8):
        want = torch.stack([
            -torch.log_softmax(logits[b, p - 1], dim=-1)[ids[b, p]]
            for b in range(2) for p in range(start, 9)
        ]).mean()  # fmt: skip
        assert mean_loss(logits, ids, start) == pytest.approx(float(want), rel=1e-5)
    assert mean_loss(logits[:1], ids[0], 1) == pytest.approx(
        float(torch.nn.functional.cross_entropy(logits[0, :-1], ids[0, 1:])), rel=1e-5
    )


def test_head_direct_logits_equal_the_layer_with_every_other_head_off() -> None:
    """The layer's own output with only one head on, through the final norm's scale."""
    model = tiny_model()
    ids = _ids(10)
    layer, head = 1, 2
    seen: dict[str, torch.Tensor] = {}
    hooks = [
        model.layers[layer].attn_norm.register_forward_hook(
            lambda m, i, o: seen.__setitem__("attn_input", o)
        ),
        model.norm.register_forward_hook(lambda m, i, o: seen.__setitem__("final", i[0])),
    ]
    try:
        with torch.no_grad():
            model(ids)
    finally:
        for hook in hooks:
            hook.remove()
    others = [h for h in range(TINY.num_heads) if h != head]
    with torch.no_grad():
        only, _ = model.layers[layer].attn(seen["attn_input"], ablate_heads=others)  # (B, T, d)
    final = seen["final"]
    scale = model.norm.weight / final.pow(2).mean(-1, keepdim=True).add(model.norm.eps).sqrt()
    want = (only * scale) @ model.embed.weight.T  # (B, T, V)
    assert torch.allclose(head_direct_logits(model, ids, layer, head), want, atol=1e-5)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: streaming_mask(0, 3), ValueError, "T must be a positive int; got 0"),
        (lambda: streaming_mask(5, 2.0), TypeError, "window must be a positive int; got float"),
        (lambda: streaming_mask(5, 2, -1), ValueError, "sinks must be an int >= 0; got -1"),
        (
            lambda: masked_logits(tiny_model(), _ids(5), streaming_mask(6, 2)),
            ValueError,
            r"mask must have shape \(T, T\) = \(5, 5\) .* got shape \(6, 6\)",
        ),
        (
            lambda: masked_logits(tiny_model(), _ids(5), torch.ones(5, 5)),
            TypeError,
            "mask must be a bool tensor",
        ),
        (
            lambda: masked_logits(tiny_model(), _ids(3), streaming_mask(3, 2) & NO_KEY_0),
            ValueError,
            "all-False row",
        ),
        (lambda: masked_logits(object(), _ids(3), streaming_mask(3, 2)), TypeError, "LlamaModel"),
        (lambda: mean_loss(torch.zeros(1, 5, 8), _ids(5), 1), ValueError, r"\(2, 5\)"),
        (
            lambda: mean_loss(torch.zeros(2, 5, 8), _ids(5), 5),
            ValueError,
            "start must be in 1 .. T-1 = 4; got 5",
        ),
        (
            lambda: mean_loss(torch.zeros(1, 3, 8), torch.tensor([1, 8, 2]), 1),
            ValueError,
            r"input_ids must be token ids in 0 \.\. 7; got .*8",
        ),
        (
            lambda: mean_loss(torch.zeros(1, 3, 8), torch.tensor([1.0, 2.0, 3.0]), 1),
            TypeError,
            "input_ids must hold integer token ids",
        ),
        (
            lambda: head_direct_logits(tiny_model(), _ids(4), 3, 0),
            ValueError,
            "layer must be in 0 .. 2; got 3",
        ),
        (
            lambda: head_direct_logits(tiny_model(), _ids(4), 0, True),
            TypeError,
            "head must be an int",
        ),
    ],
)
def test_bad_input_is_refused(call, error, match) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=match):
        call()


# --- the chapter's claims, on the real model --------------------------------------------


def test_the_long_text_is_over_1024_tokens_of_prose() -> None:
    """Package data: the story, long enough for the 1,024-token experiment."""
    pytest.importorskip("gguf", reason="the llm extra is not installed")
    from attnlab.llama import load_smollm2

    _, tokenizer = load_smollm2()
    text = long_text()
    assert text.startswith("The Lighthouse at Marrow Point")
    assert len(tokenizer.encode(text)) >= 1024


def test_the_recorded_streaming_run_orders_the_settings() -> None:
    """streaming.json: full < window + sinks < window alone, by margins, at the full size."""
    results = load_results("streaming")
    assert results["quick"] is False and results["config"]["T"] == 1024
    loss = {(r["window"], r["sinks"]): r["mean_loss"] for r in results["rows"]}
    assert loss[(None, 0)] < loss[(128, 4)] < loss[(128, 0)] - 0.3
    assert abs(loss[(128, 1)] - loss[(128, 4)]) < 0.1  # token 0 alone does most of it
    for row in results["rows"]:
        assert len(row["bucket_losses"]) == 1024 // results["config"]["bucket"]


def _streaming_decode(
    model: LlamaModel, ids: torch.Tensor, window: int, sinks: int
) -> torch.Tensor:
    """StreamingLLM token by token: a cache of unrotated keys, renumbered at every step."""
    import torch.nn.functional as F

    caches: list[tuple[list[torch.Tensor], list[torch.Tensor]]] = [([], []) for _ in model.layers]
    logits = []
    with torch.no_grad():
        for i in range(ids.shape[1]):
            kept = [j for j in range(i + 1) if j < sinks or j > i - window]
            positions = torch.arange(len(kept))  # the cache's own numbering
            x = model.embed(ids[:, i : i + 1])  # (B, 1, d)
            for block, (keys, values) in zip(model.layers, caches, strict=True):
                attn = block.attn
                h = block.attn_norm(x)
                keys.append(attn.split_heads(attn.k_proj(h)))  # (B, Hkv, 1, D), unrotated
                values.append(attn.split_heads(attn.v_proj(h)))
                rotary = getattr(attn, "positions", None) or attn.rotary
                k = rotary.rotate(torch.cat([keys[j] for j in kept], dim=-2), positions)
                v = torch.cat([values[j] for j in kept], dim=-2)
                q = rotary.rotate(attn.split_heads(attn.q_proj(h)), positions[-1:])
                context_vecs = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                x = x + attn.o_proj(attn.merge_heads(context_vecs))
                x = x + block.ffn(block.ffn_norm(x))
            logits.append(model.norm(x) @ model.embed.weight.T)
    return torch.cat(logits, dim=1)


@pytest.mark.parametrize(("window", "sinks"), [(4, 2), (3, 1), (5, 0), (12, 2)])
def test_renumbered_streaming_equals_a_renumbered_cache_token_by_token(
    window: int, sinks: int
) -> None:
    """The one-pass version equals decoding with StreamingLLM's cache, and equals the
    original positions until the window fills (or when it never does)."""
    model, ids = tiny_model(), _ids(12)
    got = renumbered_streaming_logits(model, ids, window, sinks)
    assert torch.allclose(got, _streaming_decode(model, ids, window, sinks), atol=1e-5)
    original = masked_logits(model, ids, streaming_mask(12, window, sinks))
    full = sinks + window  # from query sinks + window - 1 on, the two numberings agree
    assert torch.allclose(got[:, :full], original[:, :full], atol=1e-5)
    if sinks and full < 12:
        assert not torch.allclose(got, original, atol=1e-3)


def test_ov_copying_scores_equal_the_whole_vocabulary_circuit() -> None:
    """Against W_E W_V W_O W_U built whole, (V, V), with the model's own norms."""
    model = tiny_model()
    c = TINY
    scores = ov_copying_scores(model, sample=c.vocab_size)
    D, group = c.head_dim, c.num_heads // c.num_kv_heads
    with torch.no_grad():
        for n, block in enumerate(model.layers):
            normed = block.attn_norm(
                model.embed.weight
            )  # (V, d): each token, as the layer reads it
            values = block.attn.v_proj(normed)  # (V, Hkv * D)
            for head in range(c.num_heads):
                kv = head // group
                written = (
                    values[:, kv * D : (kv + 1) * D]
                    @ block.attn.o_proj.weight[:, head * D : (head + 1) * D].T
                )
                circuit = (written * model.norm.weight) @ model.embed.weight.T  # (V, V)
                eig = torch.linalg.eigvals(circuit.double())
                want = float(eig.sum().real / eig.abs().sum())
                assert scores["eigenvalue"][n, head] == pytest.approx(want, abs=1e-4)
                top1 = float((circuit.argmax(-1) == torch.arange(c.vocab_size)).float().mean())
                assert scores["top1"][n, head] == pytest.approx(top1)
    only = ov_copying_scores(model, sample=8, layers=[1])
    assert torch.isnan(only["eigenvalue"][0]).all() and not torch.isnan(only["top1"][1]).any()
    with pytest.raises(ValueError, match=r"sample must be in 1 \.\. V = 64"):
        ov_copying_scores(model, sample=65)


def test_recorded_sink_rows_agree_with_the_streaming_run() -> None:
    """The trained run's original-position rows are the streaming run's, same settings."""
    streaming = {
        (r["window"], r["sinks"]): r["mean_loss"] for r in load_results("streaming")["rows"]
    }
    rows = load_results("trained")["sinks"]
    original = [r for r in rows if r["first_tokens"] == "original" and r["positions"] == "original"]
    assert len(original) >= 3
    for row in original:
        assert row["mean_loss"] == pytest.approx(streaming[row["window"], row["sinks"]], abs=1e-3)
    copying = load_results("trained")["copying"]
    assert len(copying["eigenvalue"]) == 30 and len(copying["top1"][0]) == 9
