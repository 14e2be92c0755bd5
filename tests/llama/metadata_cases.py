"""Small Llama GGUF files, one per metadata case the family description rules on (item 4).

Each case is one valid random Llama file (``random_gguf.write_random_gguf``, float32)
with a metadata key added, changed or dropped as llama.cpp's converter would write it,
and the outcome both languages must give: a refusal (a substring of the message, which
names the key) or the model loaded, its rotary scaling equal to transformers' with the
``rope_scaling`` given. ``test_metadata_cases.py`` checks the package; the page's parity
tests (tests/js/) run the same files through the page.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tests.llama.gguf_variants import FLOAT32, STRING, UINT32, Layout
from tests.llama.random_gguf import converter_factors, write_random_gguf

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
    ]


LLAMA31_CASE = "rope_freqs and linear 2"


def case_names() -> list[str]:
    """The cases' names, in ``metadata_cases``' order (no file written)."""
    return [name for name, *_ in _edits()] + [LLAMA31_CASE]


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
    return cases
