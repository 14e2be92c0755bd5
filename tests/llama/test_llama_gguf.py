"""load_gguf on small random GGUF files of each family: equal to transformers' GGUF loading.

Each file (tests/llama/random_gguf.py) holds every supported tensor type, random block
bytes included, so each type's dequantisation reaches the logits; transformers builds its
own model from the same file (its GGUF loader: config, dequantisation by gguf-py, Llama's
rotary un-permutation), eager attention, float32.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from random_gguf import TOKENS, TYPES, converter_factors, write_random_gguf

from attnlab import Llama3Scaling
from attnlab.llama import SUPPORTED_TYPES, Tokenizer, load_gguf

gguf = pytest.importorskip("gguf", reason="the llm extra is not installed")
transformers = pytest.importorskip("transformers", reason="the hf extra is not installed")

pytestmark = pytest.mark.long  # transformers builds five models (its first import: ~10 s)

FAMILIES = [("llama", True), ("llama", False), ("qwen2", True), ("qwen2", False), ("qwen3", True)]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, bool], Path]:
    """One random file per family and tying, each holding every type."""
    folder = tmp_path_factory.mktemp("gguf")
    return {
        (arch, tied): write_random_gguf(
            folder / f"{arch}-{'tied' if tied else 'untied'}.gguf", arch, seed=i, tied=tied
        )
        for i, (arch, tied) in enumerate(FAMILIES)
    }


def hf_model(path: Path) -> Any:
    """transformers' model built by its GGUF loader from ``path``."""
    transformers.logging.disable_progress_bar()
    return transformers.AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, attn_implementation="eager", dtype=torch.float32
    ).eval()


def test_the_random_files_hold_every_supported_type(files: dict[Any, Path]) -> None:
    """Each file's matrices use all eleven types the package reads."""
    assert set(TYPES) == set(SUPPORTED_TYPES)
    for path in files.values():
        kinds = {t.tensor_type.name for t in gguf.GGUFReader(str(path)).tensors}
        assert kinds == set(TYPES), path.name


@pytest.mark.parametrize(("arch", "tied"), FAMILIES)
def test_load_gguf_equals_transformers(files: dict[Any, Path], arch: str, tied: bool) -> None:
    """Logits within 1e-3 and every layer's attention within 1e-4 of transformers'."""
    path = files[arch, tied]
    model, _ = load_gguf(path)
    reference = hf_model(path)
    c = model.config
    assert (c.architecture, c.tie_word_embeddings) == (arch, tied)
    attn = model.layers[0].attn
    assert (attn.q_proj.bias is not None) == (arch == "qwen2")  # the family's parts
    assert (getattr(attn, "q_norm", None) is not None) == (arch == "qwen3")
    assert c.types() == ("full_attention",) * c.num_layers
    hf = reference.config
    hf_head_dim = getattr(hf, "head_dim", None) or hf.hidden_size // hf.num_attention_heads
    assert (c.num_heads, c.num_kv_heads, c.head_dim) == (
        hf.num_attention_heads,
        hf.num_key_value_heads,
        hf_head_dim,
    )
    ids = torch.randint(0, c.vocab_size, (2, 11), generator=torch.Generator().manual_seed(0))
    logits, attention = model(ids, return_attention=True)
    with torch.no_grad():
        expected = reference(ids, output_attentions=True)
    assert logits.abs().max() > 1  # not a model of zeros
    torch.testing.assert_close(logits, expected.logits, atol=1e-3, rtol=0)
    assert len(attention) == len(expected.attentions) == c.num_layers
    for ours, theirs in zip(attention, expected.attentions, strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=0)


def test_load_gguf_reads_the_tokenizer_of_the_file(files: dict[Any, Path]) -> None:
    """The tokenizer: the file's vocabulary, end token and pre-tokeniser."""
    _, tokenizer = load_gguf(files["qwen2", True])
    assert tokenizer.tokens == TOKENS and tokenizer.eos_token_id == 1
    assert tokenizer.pre == "gpt-2"
    assert tokenizer.tokenize("CAB=") == ["C", "AB", "="]  # the file's one merge
    assert tokenizer.decode(tokenizer.encode("AB=C!")) == "AB=C!"


@pytest.mark.parametrize(
    ("pre", "tokens"),
    [
        ("gpt-2", ["12", "34"]),  # the digits one word, merged by rank
        ("llama-bpe", ["123", "4"]),  # numbers cut in runs of at most three
        ("qwen2", ["1", "2", "3", "4"]),  # every digit alone
        ("smollm", ["1", "2", "3", "4"]),
    ],
)
def test_pre_tokenisers_cut_numbers_as_their_models_do(pre: str, tokens: list[str]) -> None:
    """The pre-tokeniser named by tokenizer.ggml.pre decides where BPE may merge."""
    vocab = ["1", "2", "3", "4", "34", "12", "123"]
    tokenizer = Tokenizer(vocab, ["3 4", "1 2", "12 3"], [], 0, 0, pre=pre)
    assert tokenizer.tokenize("1234") == tokens


def test_an_unknown_pre_tokeniser_is_refused() -> None:
    """A pre-tokeniser the package does not know is named in the error."""
    with pytest.raises(ValueError, match=r"pre must be a pre-tokeniser .* got 'falcon'"):
        Tokenizer(["a"], [], [], 0, 0, pre="falcon")


def refused(tmp_path: Path, **options: Any) -> Path:
    """A random llama file with one thing changed."""
    return write_random_gguf(tmp_path / "refused.gguf", "llama", **options)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"name_architecture": "gpt2"}, r"must be one of .*llama, qwen2, qwen3.*; got 'gpt2'"),
        ({"types": ("Q2_K",)}, "tensor 'token_embd.weight' has type Q2_K, which is not supported"),
        ({"tokenizer_model": "bert"}, r"tokenizer.ggml.model must be 'gpt2' .* got 'bert'"),
        ({"tokenizer_model": "llama"}, "SentencePiece tokenizer lacks tokenizer.ggml.scores"),
        ({"pre": "falcon"}, "tokenizer.ggml.pre 'falcon' is not a pre-tokeniser"),
        ({"extra": ("rope_freqs.weight",)}, "rope_freqs.weight are not Llama 3.1's rotary"),
        ({"extra": ("blk.0.attn_q.bias",)}, "tensor.* the llama family does not use.*attn_q.bias"),
        ({"leave_out": ("blk.1.ffn_up.weight",)}, "lacks 1 tensor.*blk.1.ffn_up.weight"),
    ],
)
def test_unsupported_files_are_refused_by_name(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    """Another architecture, type, tokenizer or tensor set: a ValueError naming it."""
    with pytest.raises(ValueError, match=message):
        load_gguf(refused(tmp_path, **options))


def test_a_file_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    """Not GGUF, truncated GGUF, no file, not a path: each refused by name."""
    text = tmp_path / "model.gguf"
    text.write_text("not a model")
    with pytest.raises(ValueError, match=r"is not a GGUF file: it starts with b'not '"):
        load_gguf(text)
    whole = refused(tmp_path).read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match=r"GGUF file is truncated: tensor 'blk\.1\.attn_output"):
        load_gguf(cut)
    with pytest.raises(FileNotFoundError, match="is not a file"):
        load_gguf(tmp_path / "missing.gguf")
    with pytest.raises(TypeError, match=r"path must be a str or Path .* got int"):
        load_gguf(3)  # type: ignore[arg-type]


def test_k_quant_bytes_round_trip_through_the_file(tmp_path: Path) -> None:
    """A tensor's values are gguf-py's dequantisation of the bytes written (Q6_K here)."""
    from gguf.quants import dequantize

    from attnlab.llama import read_gguf

    path = write_random_gguf(tmp_path / "q6k.gguf", "llama", types=("Q6_K",))
    _, tensors, _ = read_gguf(path)
    stored = {t.name: t for t in gguf.GGUFReader(path).tensors}["blk.0.ffn_down.weight"]
    expected = dequantize(np.asarray(stored.data), stored.tensor_type)
    assert np.array_equal(tensors["blk.0.ffn_down.weight"].numpy(), expected.reshape(256, 256))


def test_llama_31_rotary_scaling_equals_transformers_llama3_rope(tmp_path: Path) -> None:
    """A file with rope_freqs.weight (Llama 3.1 to 3.3) = transformers' Llama with
    rope_type "llama3" and the same weights, over 300 positions (where it matters)."""
    factors = converter_factors(32.0, 64, 10000.0)
    assert factors.min() > 1.0 or factors.max() == 32.0  # some pairs scaled
    path = write_random_gguf(
        tmp_path / "llama31.gguf", "llama", seed=7, rope_freqs=factors, context_length=512
    )
    model, _ = load_gguf(path)
    assert model.config.rope_scaling == Llama3Scaling(32.0)
    unscaled = hf_model(path)  # transformers' GGUF loader reads no rope_freqs
    config = copy.deepcopy(unscaled.config)
    config.rope_parameters = {
        "rope_type": "llama3",
        "rope_theta": 10000.0,
        "factor": 32.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }
    reference = type(unscaled)(config).eval()
    reference.load_state_dict(unscaled.state_dict())
    ids = torch.randint(0, 64, (1, 300), generator=torch.Generator().manual_seed(1))
    logits, attention = model(ids, return_attention=True)
    with torch.no_grad():
        expected = reference(ids, output_attentions=True)
        plain = unscaled(ids).logits
    torch.testing.assert_close(logits, expected.logits, atol=1e-3, rtol=0)
    for ours, theirs in zip(attention, expected.attentions, strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=0)
    assert (logits - plain).abs().max() > 1e-2  # the scaling changed the result


def test_no_gguf_tensor_name_outside_the_family_files() -> None:
    """Only attnlab.llama.families knows llama.cpp's tensor names (issue 35.3)."""
    source = Path(__file__).resolve().parents[2] / "src" / "attnlab"
    names = re.compile(r"blk\.|token_embd|attn_(q|k|v|output|q_norm|k_norm)\b|ffn_(gate|up|down)\b")
    names_too = re.compile(r"output_norm|rope_freqs")
    found = [
        f"{path.relative_to(source)}:{number}"
        for path in sorted(source.rglob("*.py"))
        if "families" not in path.parts
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if names.search(line) or names_too.search(line)
    ]
    assert found == []
