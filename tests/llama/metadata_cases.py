"""Small Llama GGUF files, one per metadata case the family description rules on (item 4).

Each case is one valid random Llama file (``random_gguf.write_random_gguf``, float32)
with a metadata key added, changed or dropped as llama.cpp's converter would write it,
and the outcome both languages must give: a refusal (a substring of the message, which
names the key) or the model loaded, its rotary scaling equal to transformers' with the
``rope_scaling`` given. ``test_metadata_cases.py`` checks the package; the page's parity
tests (tests/js/) run the same files through the page.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tests.llama.gguf_variants import ARRAY, FLOAT32, STRING, UINT32, Layout
from tests.llama.random_gguf import converter_factors, write_random_gguf

BOOL, UINT64 = 7, 10  # GGUF value types

__all__ = ["MetadataCase", "case_names", "metadata_cases"]

CONTEXT = 128  # the base file's llama.context_length


@dataclass(frozen=True)
class MetadataCase:
    """One file and the outcome it must give.

    Attributes:
        name: What the file changes.
        path: The file.
        refusal: A substring of the refusal both languages must give; ``None``: it loads.
        rope_scaling: For a file that loads: the transformers ``rope_parameters`` (less
            ``rope_theta``) its model must equal; ``None``: unscaled.
    """

    name: str
    path: Path
    refusal: str | None
    rope_scaling: dict[str, Any] | None = None


def _edits() -> list[tuple[str, list[tuple[str, int | None, object]], str | None, Any]]:
    """Per case: (name, [(key, type or None to drop, value)], refusal, rope_scaling)."""
    return [
        ("plain", [], None, None),
        (
            "no bos id",
            [("tokenizer.ggml.bos_token_id", None, None)],
            "lacks the metadata key 'tokenizer.ggml.bos_token_id'",
            None,
        ),
        (
            "no eos id",
            [("tokenizer.ggml.eos_token_id", None, None)],
            "lacks the metadata key 'tokenizer.ggml.eos_token_id'",
            None,
        ),
        (
            "rope linear 2",
            [
                ("llama.rope.scaling.type", STRING, "linear"),
                ("llama.rope.scaling.factor", FLOAT32, 2.0),
            ],
            None,
            {"rope_type": "linear", "factor": 2.0},
        ),
        (
            "rope factor 2, no type (llama.cpp: linear)",
            [("llama.rope.scaling.factor", FLOAT32, 2.0)],
            None,
            {"rope_type": "linear", "factor": 2.0},
        ),
        (
            "rope type none, factor 4",
            [
                ("llama.rope.scaling.type", STRING, "none"),
                ("llama.rope.scaling.factor", FLOAT32, 4.0),
            ],
            None,
            None,
        ),
        (
            "rope linear factor 1",
            [
                ("llama.rope.scaling.type", STRING, "linear"),
                ("llama.rope.scaling.factor", FLOAT32, 1.0),
            ],
            None,
            None,
        ),
        (
            "rope yarn 4 from 32",
            [
                ("llama.rope.scaling.type", STRING, "yarn"),
                ("llama.rope.scaling.factor", FLOAT32, 4.0),
                ("llama.rope.scaling.original_context_length", UINT32, 32),
            ],
            None,
            {
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 32,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
            },
        ),
        (
            "rope yarn with betas",
            [
                ("llama.rope.scaling.type", STRING, "yarn"),
                ("llama.rope.scaling.factor", FLOAT32, 4.0),
                ("llama.rope.scaling.original_context_length", UINT32, 32),
                ("llama.rope.scaling.yarn_beta_fast", FLOAT32, 16.0),
                ("llama.rope.scaling.yarn_beta_slow", FLOAT32, 2.0),
            ],
            None,
            {
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 32,
                "beta_fast": 16.0,
                "beta_slow": 2.0,
            },
        ),
        (
            "rope yarn ext_factor",
            [
                ("llama.rope.scaling.type", STRING, "yarn"),
                ("llama.rope.scaling.factor", FLOAT32, 4.0),
                ("llama.rope.scaling.yarn_ext_factor", FLOAT32, 0.5),
            ],
            "llama.rope.scaling.yarn_ext_factor",
            None,
        ),
        (
            "rope attn_factor",
            [("llama.rope.scaling.attn_factor", FLOAT32, 0.9)],
            "llama.rope.scaling.attn_factor",
            None,
        ),
        (
            "rope type longrope",
            [
                ("llama.rope.scaling.type", STRING, "longrope"),
                ("llama.rope.scaling.factor", FLOAT32, 2.0),
            ],
            "llama.rope.scaling.type is 'longrope'",
            None,
        ),
        (
            "rope factor 0",
            [("llama.rope.scaling.factor", FLOAT32, 0.0)],
            "llama.rope.scaling.factor must be a number > 0",
            None,
        ),
        (
            "key_length 64, rope.dimension_count 32",
            [
                ("llama.attention.key_length", UINT32, 64),
                ("llama.rope.dimension_count", UINT32, 32),
            ],
            "llama.rope.dimension_count (32) must equal the head width 64",
            None,
        ),
        (
            "key_length 64, no rope.dimension_count",
            [
                ("llama.attention.key_length", UINT32, 64),
                ("llama.rope.dimension_count", None, None),
            ],
            None,
            None,
        ),
        (
            "value_length 32",
            [("llama.attention.value_length", UINT32, 32)],
            "llama.attention.value_length (32) must equal the head width 64",
            None,
        ),
        (
            "no context_length",
            [("llama.context_length", None, None)],
            "lacks the metadata key 'llama.context_length'",
            None,
        ),
        (
            "no rms epsilon",
            [("llama.attention.layer_norm_rms_epsilon", None, None)],
            "lacks the metadata key 'llama.attention.layer_norm_rms_epsilon'",
            None,
        ),
        # llama.cpp reads the older key as the factor where rope.scaling.factor is absent
        (
            "rope.scale_linear 2, no factor (llama.cpp's older key)",
            [("llama.rope.scale_linear", FLOAT32, 2.0)],
            None,
            {"rope_type": "linear", "factor": 2.0},
        ),
        (
            "rope.scale_linear 2 beside factor 4: the factor",
            [
                ("llama.rope.scale_linear", FLOAT32, 2.0),
                ("llama.rope.scaling.factor", FLOAT32, 4.0),
            ],
            None,
            {"rope_type": "linear", "factor": 4.0},
        ),
        (
            "rope.scale_linear 0.5: refused by its own key",
            [("llama.rope.scale_linear", FLOAT32, 0.5)],
            "the GGUF's llama.rope.scale_linear must be at least 1 (a scaling stretches the "
            "positions); got 0.5",
            None,
        ),
        (
            "rope linear factor 0.5",
            [
                ("llama.rope.scaling.type", STRING, "linear"),
                ("llama.rope.scaling.factor", FLOAT32, 0.5),
            ],
            "the GGUF's llama.rope.scaling.factor must be at least 1",
            None,
        ),
        (
            "rope yarn beta_fast below beta_slow",
            [
                ("llama.rope.scaling.type", STRING, "yarn"),
                ("llama.rope.scaling.factor", FLOAT32, 4.0),
                ("llama.rope.scaling.yarn_beta_fast", FLOAT32, 0.5),
                ("llama.rope.scaling.yarn_beta_slow", FLOAT32, 2.0),
            ],
            "the GGUF's llama.rope.scaling.yarn_beta_fast (0.5) must be greater than "
            "llama.rope.scaling.yarn_beta_slow (2.0)",
            None,
        ),
        # mixture of experts: refused by name, 0 read as absent
        ("expert_count 8", [("llama.expert_count", UINT32, 8)], "llama.expert_count is 8", None),
        (
            "expert_used_count 2",
            [("llama.expert_used_count", UINT32, 2)],
            "the GGUF's llama.expert_used_count is 2; attnlab.llama's llama family does not read",
            None,
        ),
        ("expert_count 0", [("llama.expert_count", UINT32, 0)], None, None),
        (
            "expert_count a bool",
            [("llama.expert_count", BOOL, False)],
            "the GGUF's llama.expert_count must be an int >= 0; got False",
            None,
        ),
        # the value's GGUF type: an integer where a count is read, at most 2**53 - 1
        (
            "context_length a float32 128.0",
            [("llama.context_length", FLOAT32, 128.0)],
            "the GGUF's llama.context_length must be a positive int; got 128.0",
            None,
        ),
        (
            "bos id a float32",
            [("tokenizer.ggml.bos_token_id", FLOAT32, 0.0)],
            "the GGUF's tokenizer.ggml.bos_token_id must be a token id (an int >= 0); got 0.0",
            None,
        ),
        (
            "context_length a uint64 2**60",
            [("llama.context_length", UINT64, 2**60)],
            "the GGUF's llama.context_length must be at most 2**53 - 1; got 1152921504606846976",
            None,
        ),
        ("context_length a uint64 128", [("llama.context_length", UINT64, CONTEXT)], None, None),
        # the tokenizer: an empty pre-tokeniser is llama.cpp's default; add_bos_token a bool
        ("tokenizer.ggml.pre empty", [("tokenizer.ggml.pre", STRING, "")], None, None),
        (
            "add_bos_token a string",
            [("tokenizer.ggml.add_bos_token", STRING, "false")],
            "the GGUF's tokenizer.ggml.add_bos_token must be a bool; got 'false'",
            None,
        ),
        (
            "bad context_length and tokenizer: the config first",
            [("llama.context_length", UINT32, 0), ("tokenizer.ggml.model", STRING, "bert")],
            "the GGUF's llama.context_length must be a positive int; got 0",
            None,
        ),
    ]


def _f32(values: list[float]) -> bytes:
    """Float32 bytes of ``values``."""
    return np.asarray(values, dtype=np.float32).tobytes()


def _no_tensors(layout: Layout) -> None:
    layout.tensors, layout.data = [], b""


def _mtp(layout: Layout, tensors: tuple[str, ...]) -> None:
    """A fifth block counted as Qwen3.5's prediction block, holding ``tensors`` (1-D)."""
    layout.set("qwen35.block_count", UINT32, 5).set("qwen35.nextn_predict_layers", UINT32, 1)
    for name in tensors:
        layout.add(f"blk.4.{name}", [64], 0, _f32([1.0] * 64))


def _dims(name: str, dims: list[int]) -> Callable[[Layout], None]:
    return lambda layout: setattr(layout.tensor(name), "dims", dims)


def _file_edits() -> list[tuple[str, str, Callable[[Layout], None], str]]:
    """Per case: (name, base file, edit, refusal): tensors, and other families' keys."""
    soft = "gemma3.final_logit_softcapping"
    return [
        ("no tensors", "llama", _no_tensors, "but the file holds tensors of 0 block(s)"),
        (
            "attn_q 3-D",
            "llama",
            _dims("blk.0.attn_q.weight", [256, 1, 256]),
            "the GGUF file's tensor 'blk.0.attn_q.weight' has shape (256, 1, 256); the file's "
            "llama.* keys imply (256, 256)",
        ),
        (
            "rope_freqs of factors 0.5",
            "llama",
            lambda la: la.add("rope_freqs.weight", [32], 0, _f32([0.5] * 32)),
            "the GGUF file's rope_freqs.weight must hold factors >= 1 (Llama 3.1's rotary "
            "scaling); got a largest factor of 0.5",
        ),
        (
            "rope_freqs of 16 factors",
            "llama",
            lambda la: la.add("rope_freqs.weight", [16], 0, _f32([1.0] * 16)),
            "the GGUF file's tensor 'rope_freqs.weight' has shape (16,); the file's llama.* "
            "keys imply (32,)",
        ),
        (
            "qwen2 with rope_freqs: unused",
            "qwen2",
            lambda la: la.add("rope_freqs.weight", [32], 0, _f32([1.0] * 32)),
            "the GGUF file has tensor(s) the qwen2 family does not use, e.g. 'rope_freqs.weight'",
        ),
        (
            "gemma3 rope.freq_base_swa 20000 (llama.cpp: 10000)",
            "gemma3",
            lambda la: la.set("gemma3.rope.freq_base_swa", FLOAT32, 20000.0),
            "the GGUF's gemma3.rope.freq_base_swa is 20000.0; attnlab.llama's gemma3 family "
            "reads 10000.0",
        ),
        (
            "gemma3 final_logit_softcapping 30",
            "gemma3",
            lambda la: la.set(soft, FLOAT32, 30.0),
            f"the GGUF's {soft} is 30.0; attnlab.llama's gemma3 family does not read it (only 0)",
        ),
        (
            "gemma3 final_logit_softcapping a bool",
            "gemma3",
            lambda la: la.set(soft, BOOL, False),
            f"the GGUF's {soft} must be a number; got False",
        ),
        (
            "qwen35 nextn 1 and no prediction block",
            "qwen35",
            lambda la: la.set("qwen35.nextn_predict_layers", UINT32, 1),
            "the GGUF's qwen35.nextn_predict_layers is 1, so block 3 is a "
            "multi-token-prediction block; it lacks its tensor 'blk.3.nextn.eh_proj.weight'",
        ),
        (
            "qwen35 prediction block without nextn.hnorm",
            "qwen35",
            lambda la: _mtp(la, ("nextn.eh_proj.weight", "nextn.enorm.weight")),
            "block 4 is a multi-token-prediction block; it lacks its tensor "
            "'blk.4.nextn.hnorm.weight'",
        ),
        (
            "qwen35 prediction block and a block past block_count",
            "qwen35",
            lambda la: (
                _mtp(la, ("nextn.eh_proj.weight", "nextn.enorm.weight", "nextn.hnorm.weight")),
                la.add("blk.7.nextn.eh_proj.weight", [64], 0, _f32([1.0] * 64)),
            ),
            "the GGUF's qwen35.block_count is 5, but the file holds tensors of 6 block(s)",
        ),
        (
            "qwen35 prediction block named with a non-ASCII digit",
            "qwen35",
            lambda la: (
                la.set("qwen35.block_count", UINT32, 5),
                la.set("qwen35.nextn_predict_layers", UINT32, 1),
                la.add("blk.\u0664.nextn.eh_proj.weight", [64], 0, _f32([1.0] * 64)),
            ),
            "block 4 is a multi-token-prediction block; it lacks its tensor "
            "'blk.4.nextn.eh_proj.weight'",
        ),
        (
            "qwen35 ssm.conv_kernel 3, the convolution stored with 4",
            "qwen35",
            lambda la: la.set("qwen35.ssm.conv_kernel", UINT32, 3),
            "the GGUF file's tensor 'blk.0.ssm_conv1d.weight' has shape (96, 4); the file's "
            "qwen35.* keys imply (96, 3)",
        ),
        (
            "qwen35 rope.dimension_sections of floats",
            "qwen35",
            lambda la: la.set(
                "qwen35.rope.dimension_sections", ARRAY, (FLOAT32, [11.0, 11.0, 10.0, 0.0])
            ),
            "the GGUF's qwen35.rope.dimension_sections must be an array of ints >= 0; "
            "got [11.0, 11.0, 10.0, 0.0]",
        ),
        (
            "qwen35 ssm_conv1d 3-D",
            "qwen35",
            _dims("blk.0.ssm_conv1d.weight", [4, 1, 96]),
            "the GGUF file's tensor 'blk.0.ssm_conv1d.weight' has shape (96, 1, 4); the file's "
            "qwen35.* keys imply (96, 4)",
        ),
        (
            "qwen35 expert_count 4",
            "qwen35",
            lambda la: la.set("qwen35.expert_count", UINT32, 4),
            "the GGUF's qwen35.expert_count is 4; attnlab.llama's qwen35 family does not read it",
        ),
    ]


LLAMA31_CASE = "rope_freqs and linear 2"


def case_names() -> list[str]:
    """The cases' names, in ``metadata_cases``' order (no file written)."""
    return [name for name, *_ in _edits()] + [LLAMA31_CASE] + [n for n, *_ in _file_edits()]


def metadata_cases(folder: Path) -> list[MetadataCase]:
    """Write every case's file into ``folder``; the cases, in a fixed order.

    The last case keeps Llama 3.1's ``rope_freqs.weight`` and adds a linear factor: two
    scalings at once, refused.
    """
    base = write_random_gguf(folder / "base.gguf", "llama", types=("F32",), context_length=CONTEXT)
    cases = []
    for i, (name, edits, refusal, scaling) in enumerate(_edits()):
        layout = Layout.parse(base.read_bytes())
        for key, type_id, value in edits:
            if type_id is None:
                layout.drop(key)
            else:
                layout.set(key, type_id, value)
        path = folder / f"case{i:02d}.gguf"
        path.write_bytes(layout.build())
        cases.append(MetadataCase(name, path, refusal, scaling))
    factors = converter_factors(8.0, 64, 10000.0)
    llama31 = write_random_gguf(
        folder / "llama31.gguf", "llama", types=("F32",), rope_freqs=factors, context_length=CONTEXT
    )
    layout = Layout.parse(llama31.read_bytes())
    layout.set("llama.rope.scaling.type", STRING, "linear")
    layout.set("llama.rope.scaling.factor", FLOAT32, 2.0)
    path = folder / f"case{len(cases):02d}.gguf"
    path.write_bytes(layout.build())
    refusal = "both rope_freqs.weight and llama.rope.scaling.type"
    cases.append(MetadataCase(LLAMA31_CASE, path, refusal, None))
    assert np.all(factors >= 1.0)
    bases = {"llama": base}
    for name, family, edit, refusal in _file_edits():
        if family not in bases:
            bases[family] = _base(folder, family)
        layout = Layout.parse(bases[family].read_bytes())
        edit(layout)
        path = folder / f"case{len(cases):02d}.gguf"
        path.write_bytes(layout.build())
        cases.append(MetadataCase(name, path, refusal, None))
    return cases


def _base(folder: Path, family: str) -> Path:
    """The unedited file of another family (float32), written once."""
    from tests.llama.family_files import write_gemma3_gguf, write_qwen35_gguf

    path = folder / f"base-{family}.gguf"
    if family == "gemma3":
        return write_gemma3_gguf(path)
    if family == "qwen35":
        return write_qwen35_gguf(path)
    return write_random_gguf(path, family, types=("F32",), context_length=CONTEXT)
