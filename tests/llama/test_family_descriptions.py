"""The family descriptions: one JSON file per family, the page's generated copy current.

Each family's facts live once, in ``src/attnlab/llama/families/<family>.json``;
``scripts/family_descriptions.py`` writes the page's copy
(``docs/assets/javascripts/live/families/descriptions.js``). These tests fail when that
copy is stale, when a description lacks a part the readers need, and when a GGUF key or
tensor name the package reads appears in Python source instead of a description.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

from attnlab import GatedDeltaNet, GroupedQueryAttention
from attnlab.llama import GeGLU, LlamaConfig, LlamaModel
from attnlab.llama.families import FAMILIES
from attnlab.llama.families.description import describe
from attnlab.llama.families.gemma3 import gemma3_layer_types

ROOT = Path(__file__).resolve().parents[2]
FAMILY_DIR = ROOT / "src" / "attnlab" / "llama" / "families"
KEY_TYPES = {"count", "natural", "number", "token_id", "string", "count_array"}


def generator():  # type: ignore[no-untyped-def]
    """scripts/family_descriptions.py, imported by path (scripts/ is no package)."""
    spec = importlib.util.spec_from_file_location(
        "family_descriptions", ROOT / "scripts" / "family_descriptions.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_copy_of_the_descriptions_is_current() -> None:
    """descriptions.js is what the generator writes from the JSON files, byte for byte."""
    script = generator()
    assert script.TARGET.read_text(encoding="utf-8") == script.module_text(), (
        "docs/assets/javascripts/live/families/descriptions.js is stale: run "
        "python scripts/family_descriptions.py"
    )
    assert script.main(["--check"]) == 0


def test_every_family_module_has_its_description() -> None:
    """One JSON file per family module, naming the same architecture."""
    names = {path.stem for path in FAMILY_DIR.glob("*.json")}
    assert set(FAMILIES) <= names
    for name in names:
        assert json.loads((FAMILY_DIR / f"{name}.json").read_text())["general.architecture"] == name


@pytest.mark.parametrize("name", sorted(p.stem for p in FAMILY_DIR.glob("*.json")))
def test_descriptions_are_complete(name: str) -> None:
    """Every metadata row typed, every layer type with its tensors and parts, keys unique."""
    d = describe(name)
    assert d["format"] == 1
    keys = [row["key"] for row in d["metadata"]]
    assert len(keys) == len(set(keys))
    for row in d["metadata"]:
        assert row["type"] in KEY_TYPES, row
        assert row["key"].startswith(("{arch}.", "tokenizer.ggml.")), row
    for kind, rows in d["tensors"]["layer"].items():
        assert kind in d["layer"]
        assert all(row["name"].startswith("blk.{i}.") for row in rows)
        parts = {p for row in rows for p in row["part"].split(" + ")}
        assert len(parts) == sum(len(row["part"].split(" + ")) for row in rows)  # one source each


def test_no_python_source_names_a_gguf_key_or_tensor_of_a_description() -> None:
    """A key or tensor name the descriptions hold appears in no Python module of the package."""
    names = set()
    for path in FAMILY_DIR.glob("*.json"):
        d = json.loads(path.read_text())
        names |= {row["key"].removeprefix("{arch}.") for row in d["metadata"]}
        names -= {row["key"] for row in d["metadata"] if row["key"].startswith("tokenizer.")}
        for rows in [d["tensors"]["model"], *d["tensors"]["layer"].values()]:
            names |= {row["name"].removeprefix("blk.{i}.") for row in rows}
    names -= {"output.weight", "context_length", "vocab_size", "block_count"}  # common words
    for path in (ROOT / "src" / "attnlab" / "llama").rglob("*.py"):
        text = path.read_text()
        found = [n for n in names if re.search(rf"[\"'.]{re.escape(n)}[\"']", text)]
        assert found == [], f"{path.relative_to(ROOT)} names {found}: put them in the JSON"


def tiny_config(name: str) -> LlamaConfig:
    """A small config of family ``name`` with every layer type the family has."""
    sizes: dict[str, Any] = {"vocab_size": 40, "d_model": 16, "num_heads": 2, "num_kv_heads": 1}
    sizes |= {"head_dim": 8, "ffn_dim": 24, "architecture": name, "rotary_dim": 8}
    if name == "gemma3":
        return LlamaConfig(
            **sizes,
            num_layers=6,
            sliding_window=3,
            layer_types=gemma3_layer_types(6),
            rope_local_theta=10000.0,
            query_pre_attn_scalar=12.0,
        )
    if name == "qwen35":
        return LlamaConfig(
            **{**sizes, "rotary_dim": 4},
            num_layers=2,
            layer_types=("linear_attention", "full_attention"),
            linear_num_key_heads=1,
            linear_num_value_heads=2,
            linear_key_head_dim=4,
            linear_value_head_dim=4,
            linear_conv_kernel_dim=3,
        )
    return LlamaConfig(**sizes, num_layers=1)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_each_layer_is_made_of_the_parts_its_description_lists(name: str) -> None:
    """The Python family's layers against the description's ``layer`` section, part by part."""
    d = describe(name)
    model = LlamaModel(tiny_config(name))
    scale = (model.embed_scale or None) is not None
    assert scale == (d["embedding_scale"] is not None)
    for block in model.layers:
        parts = d["layer"][block.kind]
        assert hasattr(block, "post_attn_norm") == (parts["post_mixer_norm"] is not None)
        assert hasattr(block, "post_ffn_norm") == (parts["post_ffn_norm"] is not None)
        assert isinstance(block.ffn, GeGLU) == (parts["ffn"]["activation"] == "gelu_tanh")
        mixer = parts["mixer"]
        if mixer["kind"] == "gated_deltanet":
            assert isinstance(block.attn, GatedDeltaNet)
            continue
        attn = block.attn
        assert isinstance(attn, GroupedQueryAttention)
        assert (attn.q_proj.bias is not None) == mixer["projections_bias"]
        assert (getattr(attn, "q_norm", None) is not None) == (mixer["q_norm"] is not None)
        assert (attn.output_gate is not None) == mixer["output_gate"]
        assert (attn.window is not None) == ("window" in mixer["mask"])
        theta = getattr(model.config, mixer["positions"]["theta"])
        assert block.rotary is not None and block.rotary.theta == theta
        assert block.rotary.head_dim == model.config.rotary_dim
