"""Gemma 3 and Qwen3.5 GGUF files read by load_gguf, against the transformers models they came from.

The files (tests/llama/family_files.py) are written from tiny random transformers models
as llama.cpp's converter writes them. Gemma 3: seven layers, so a global layer follows
five sliding ones (window 4, sequences of 11 tokens: the window slides), checked against
the source ``Gemma3ForCausalLM`` and against transformers' own GGUF loader. Qwen3.5:
three Gated DeltaNet layers then gated attention, against the source
``Qwen3_5ForCausalLM``, the linear layers' implicit attention against transformers'
layer rebuilt by ``GatedDeltaNet.from_hf``. Batch 2, eager attention, float32.
"""

from __future__ import annotations

import functools
import re
import struct
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("gguf", reason="the llm extra is not installed")
transformers = pytest.importorskip("transformers", reason="the hf extra is not installed")

from attnlab import gated_delta_attention_matrix  # noqa: E402
from attnlab.llama import GGUFError, load_gguf  # noqa: E402
from attnlab.llama.families.gemma3 import gemma3_layer_types  # noqa: E402
from attnlab.llama.families.qwen35 import untile_value_heads  # noqa: E402
from attnlab.llama.tokenizer import PRE_TOKENIZERS  # noqa: E402
from tests.llama.family_files import (  # noqa: E402
    tiny_gemma3,
    tiny_qwen35,
    write_gemma3_gguf,
    write_qwen35_gguf,
)

IDS = torch.randint(0, 64, (2, 11), generator=torch.Generator().manual_seed(3))  # (B, T)


@functools.cache
def files(folder: Path) -> dict[str, Path]:
    """Each test file, written once per folder."""
    return {
        "gemma3": write_gemma3_gguf(folder / "gemma3.gguf"),
        "gemma3-scaled": write_gemma3_gguf(folder / "gemma3-scaled.gguf", linear_factor=8.0),
        "qwen35": write_qwen35_gguf(folder / "qwen35.gguf"),
    }


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The files, in a module-wide folder."""
    return files(tmp_path_factory.mktemp("families"))


@functools.cache
def loaded(path: Path) -> Any:
    """``load_gguf(path)``, once per file (the tests do not change the model)."""
    return load_gguf(path)


@functools.cache
def source(name: str) -> Any:
    """The transformers model a file came from, built once."""
    if name == "qwen35":
        return tiny_qwen35()
    return tiny_gemma3(linear_factor=8.0 if name == "gemma3-scaled" else None)


def scale(reference: torch.Tensor) -> float:
    """A tolerance relative to the largest logit."""
    return 1e-5 * max(1.0, float(reference.abs().max()))


def test_gemma3_config_has_five_sliding_layers_to_one_global(written: dict[str, Path]) -> None:
    """layer_types 5:1 (in no key), the window, both bases, query_pre_attn_scalar = key_length."""
    model, _ = loaded(written["gemma3"])
    c = model.config
    assert c.layer_types == ("sliding_attention",) * 5 + ("full_attention", "sliding_attention")
    assert gemma3_layer_types(13)[5::6] == ("full_attention",) * 2
    assert (c.sliding_window, c.rope_theta, c.rope_local_theta) == (4, 1e6, 1e4)
    assert c.query_pre_attn_scalar == 256.0 and c.rope_scaling is None
    assert model.embed_scale == pytest.approx(8.0)  # sqrt(64)


@pytest.mark.parametrize("name", ["gemma3", "gemma3-scaled"])
def test_gemma3_file_equals_the_transformers_model_it_came_from(
    written: dict[str, Path], name: str
) -> None:
    """Logits and every layer's attention (sliding ones zero outside the band) as the source's.

    ``gemma3-scaled``: the global layers' linear rotary scaling (factor 8) applied there only.
    """
    model, _ = loaded(written[name])
    logits, attention = model(IDS, return_attention=True)
    with torch.no_grad():
        reference = source(name)(IDS, output_attentions=True)
    assert (logits - reference.logits).abs().max() < scale(reference.logits)
    assert len(attention) == 7
    for ours, theirs in zip(attention, reference.attentions, strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)
    band = torch.ones(11, 11).tril().triu(-3)  # the window of 4
    assert bool((attention[0] * (1 - band) == 0).all())  # a sliding layer: its band only
    assert bool((attention[5][..., 10, :7] > 0).all())  # the global layer: every position


def test_gemma3_file_equals_transformers_gguf_loader(written: dict[str, Path]) -> None:
    """transformers' own GGUF reader of the same file gives the same logits.

    On the scaled file it does not: it reads no Gemma 3 rotary scaling (the trap the
    package avoids by applying the factor to the global layers).
    """
    folder = written["gemma3"].parent
    ours = [loaded(written[name])[0](IDS) for name in ("gemma3", "gemma3-scaled")]
    theirs = []
    for name in ("gemma3.gguf", "gemma3-scaled.gguf"):
        hf = transformers.AutoModelForCausalLM.from_pretrained(
            folder, gguf_file=name, dtype=torch.float32, attn_implementation="eager"
        )
        with torch.no_grad():
            theirs.append(hf(IDS).logits)
    assert (ours[0] - theirs[0]).abs().max() < scale(theirs[0])
    assert (ours[1] - theirs[1]).abs().max() > 1e-2  # transformers left the factor out


@pytest.mark.parametrize("name", ["gemma3", "qwen35"])
def test_cached_decoding_equals_the_full_forward(written: dict[str, Path], name: str) -> None:
    """Chunks of 5, 1 and 5 tokens through new_cache() give the one pass's logits."""
    model, _ = loaded(written[name])
    full = model(IDS)
    cache = model.new_cache()
    chunks = [model(IDS[:, a:b], cache=cache) for a, b in ((0, 5), (5, 6), (6, 11))]
    assert (torch.cat(chunks, dim=1) - full).abs().max() < scale(full)
    tokens = model.generate(IDS, max_new_tokens=3)  # greedy: the full forward's choices
    longer = model(tokens[:, :-1])
    assert torch.equal(tokens[:, 11:], longer[:, 10:].argmax(-1))


def test_qwen35_file_equals_the_transformers_model_it_came_from(written: dict[str, Path]) -> None:
    """Logits, and the gated attention layer's weights, as the source Qwen3_5ForCausalLM's."""
    model, _ = loaded(written["qwen35"])
    c = model.config
    assert c.layer_types == ("linear_attention",) * 3 + ("full_attention",)
    assert (c.rotary_dim, c.linear_value_head_dim, c.linear_num_value_heads) == (4, 8, 4)
    logits, attention = model(IDS, return_attention=True)
    with torch.no_grad():
        reference = source("qwen35")(IDS, output_attentions=True)
    assert (logits - reference.logits).abs().max() < scale(reference.logits)
    (softmax,) = reference.attentions  # transformers returns the softmax layer's only
    torch.testing.assert_close(attention[3], softmax, atol=1e-5, rtol=0)


def test_qwen35_linear_layers_implicit_attention_equals_transformers_inputs(
    written: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each Gated DeltaNet layer's matrix (B, Hv, T, T) is gated_delta_attention_matrix of
    the q, k, g, beta transformers' layers hand their delta rule (captured), L2-normalised
    as its kernel does, keys shared by consecutive value heads: value heads in its order."""
    from transformers.models.qwen3_5 import modeling_qwen3_5 as hf_module

    captured: list[tuple[torch.Tensor, ...]] = []
    rule = hf_module.torch_chunk_gated_delta_rule

    def capture(query: Any, key: Any, value: Any, **kwargs: Any) -> Any:
        captured.append((query, key, kwargs["g"], kwargs["beta"]))
        return rule(query, key, value, **kwargs)

    monkeypatch.setattr(hf_module, "torch_chunk_gated_delta_rule", capture)
    with torch.no_grad():
        source("qwen35")(IDS)
    _, attention = loaded(written["qwen35"])[0](IDS, return_attention=True)
    assert len(captured) == 3
    for i, (query, key, g, beta) in enumerate(captured):  # (B, T, H, D), (B, T, Hv)
        q, k = (
            (t * torch.rsqrt(t.pow(2).sum(-1, keepdim=True) + 1e-6)).transpose(1, 2)
            for t in (query, key)
        )  # (B, H, T, Dk)
        r = g.shape[-1] // q.shape[1]
        q, k = (t.repeat_interleave(r, dim=1) for t in (q, k))  # key head h: r value heads
        expected = gated_delta_attention_matrix(q, k, g.transpose(1, 2), beta.transpose(1, 2))
        assert attention[i].shape == (2, 4, 11, 11)
        torch.testing.assert_close(attention[i], expected, atol=1e-5, rtol=1e-4)


def test_untiling_inverts_the_converters_value_head_reorder() -> None:
    """untile(tile(x)) = x along rows, columns and 1-D, with two value heads per key head."""
    from tests.llama.family_files import _tile

    x = torch.randn(4 * 3, 5)  # Hv = 4 heads of width 3, Hk = 2
    assert torch.equal(untile_value_heads(_tile(x, 0, 2, 2, 3), 0, 2, 3), x)
    assert torch.equal(untile_value_heads(_tile(x.T, 1, 2, 2, 3), 1, 2, 3), x.T)
    heads = torch.arange(4.0)  # grouped [k0v0, k0v1, k1v0, k1v1] -> tiled [k0v0, k1v0, ...]
    assert _tile(heads[:, None], 0, 2, 2, 1).flatten().tolist() == [0.0, 2.0, 1.0, 3.0]


def test_qwen35_pretokeniser_keeps_combining_marks_in_words(written: dict[str, Path]) -> None:
    """``tokenizer.ggml.pre = "qwen35"``: llama.cpp's regex; a combining mark stays in its word."""
    regex = pytest.importorskip("regex")
    text = "cafe\u0301s 123 e\u0301!"
    assert regex.findall(PRE_TOKENIZERS["qwen35"], text) == [
        "cafe\u0301s",
        " ",
        "1",
        "2",
        "3",
        " e\u0301",
        "!",
    ]
    assert regex.findall(PRE_TOKENIZERS["qwen2"], text)[:2] == ["cafe", "\u0301s"]
    _, tokenizer = loaded(written["qwen35"])
    assert tokenizer.pre == "qwen35"
    assert tokenizer.decode(tokenizer.encode("AB@C12")) == "AB@C12"


def test_a_positive_ssm_a_is_refused_by_name(tmp_path: Path) -> None:
    """``ssm_a`` holds -exp(A_log): a positive entry is refused naming the tensor."""
    from tests.llama.gguf_variants import Layout

    path = write_qwen35_gguf(tmp_path / "q.gguf")
    layout = Layout.parse(path.read_bytes())
    path.write_bytes(layout.poke("blk.0.ssm_a", 0, struct.pack("<f", 0.5)).build())
    with pytest.raises(GGUFError, match=r"'blk\.0\.ssm_a' must be negative"):
        load_gguf(path)


@pytest.mark.parametrize(
    ("key", "type_id", "value", "message"),
    [
        ("gemma3.final_logit_softcapping", 6, 30.0, "gemma3.final_logit_softcapping is 30.0"),
        ("gemma3.attn_logit_softcapping", 6, 50.0, "gemma3.attn_logit_softcapping is 50.0"),
        ("gemma3.rope.scaling.type", 8, "yarn", "gemma3.rope.scaling.type is 'yarn'"),
    ],
)
def test_gemma3_keys_it_does_not_compute_are_refused_by_name(
    written: dict[str, Path], tmp_path: Path, key: str, type_id: int, value: object, message: str
) -> None:
    """Soft-capping (Gemma 2's) and a rotary scaling other than linear: refused, never ignored."""
    from tests.llama.gguf_variants import Layout

    path = tmp_path / "edited.gguf"
    path.write_bytes(Layout.parse(written["gemma3"].read_bytes()).set(key, type_id, value).build())
    with pytest.raises(GGUFError, match=re.escape(message)):
        load_gguf(path)


def test_gemma3_without_a_window_has_only_global_layers(
    written: dict[str, Path], tmp_path: Path
) -> None:
    """No ``attention.sliding_window`` (llama.cpp: no SWA): every layer full_attention."""
    from tests.llama.gguf_variants import Layout

    path = tmp_path / "no-window.gguf"
    layout = Layout.parse(written["gemma3"].read_bytes()).drop("gemma3.attention.sliding_window")
    path.write_bytes(layout.build())
    model, _ = load_gguf(path)
    assert model.config.types() == ("full_attention",) * 7 and model.config.sliding_window is None


def test_qwen35_prediction_layers_are_counted_and_not_read(
    written: dict[str, Path], tmp_path: Path
) -> None:
    """``nextn_predict_layers`` 1 with block_count 5 and a block 4 of MTP tensors: the model's
    four layers read, the fifth block left (llama.cpp: n_layer = block_count - nextn)."""
    from tests.llama.gguf_variants import UINT32, Layout

    layout = Layout.parse(written["qwen35"].read_bytes())
    layout.set("qwen35.block_count", UINT32, 5).set("qwen35.nextn_predict_layers", UINT32, 1)
    layout.add("blk.4.nextn.eh_proj.weight", [128, 64], 0, bytes(128 * 64 * 4))
    for norm in ("nextn.enorm", "nextn.hnorm", "attn_norm"):  # llama.cpp's MTP tensors
        layout.add(f"blk.4.{norm}.weight", [64], 0, bytes(64 * 4))
    path = tmp_path / "mtp.gguf"
    path.write_bytes(layout.build())
    model, _ = load_gguf(path)
    assert model.config.num_layers == 4
    assert torch.equal(model(IDS), loaded(written["qwen35"])[0](IDS))
    layout.set("qwen35.nextn_predict_layers", UINT32, 5)
    path.write_bytes(layout.build())
    with pytest.raises(GGUFError, match=r"qwen35\.nextn_predict_layers \(5\) must be less than"):
        load_gguf(path)


@pytest.mark.parametrize(("num_layers", "scalar"), [(26, 256.0), (62, 32.0)])
def test_gemma3_query_scale_follows_llama_cpps_rule(num_layers: int, scalar: float) -> None:
    """No key holds query_pre_attn_scalar: key_length, but d_model / H for 62 layers (27B)."""
    from attnlab.llama.families import gemma3

    metadata: dict[str, Any] = {
        "gemma3.block_count": num_layers,
        "gemma3.context_length": 128,
        "gemma3.embedding_length": 64,
        "gemma3.feed_forward_length": 96,
        "gemma3.attention.head_count": 2,
        "gemma3.attention.head_count_kv": 1,
        "gemma3.attention.key_length": 256,
        "gemma3.attention.value_length": 256,
        "gemma3.attention.layer_norm_rms_epsilon": 1e-6,
        "gemma3.attention.sliding_window": 4,
        "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 2,
    }
    tensors = {
        f"blk.{i}.attn_q.weight": torch.empty(512, 64, device="meta") for i in range(num_layers)
    }
    tensors["token_embd.weight"] = torch.empty(40, 64, device="meta")
    config = gemma3.config_from_gguf(metadata, tensors)
    assert config.query_pre_attn_scalar == scalar
    assert config.types().count("full_attention") == num_layers // 6
