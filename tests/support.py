"""Helpers shared by the test files in every tests/ folder (imported as ``support``).

pyproject.toml's pytest ``pythonpath`` option puts ``tests/`` on the path, so a test
anywhere below it writes ``from support import REPO_ROOT``. The site's code is the
package ``hooks`` (installed editable by scripts/install.py): ``from hooks import roadmap``.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCS = REPO_ROOT / "docs"
HOOKS = REPO_ROOT / "hooks"


def built_page(site: Path, src_uri: str) -> Path:
    """The HTML file the build makes of ``docs/<src_uri>`` (a page or a notebook).

    ``use_directory_urls`` is off (the copy on disk navigates from file://), so
    ``walkthrough/scaling.md`` -> ``walkthrough/scaling.html``, ``a/index.md`` ->
    ``a/index.html`` and ``notebooks/x.py`` -> ``notebooks/x.html``.
    """
    return site / Path(src_uri).with_suffix(".html")


def mkdocs_config() -> dict[str, Any]:
    """mkdocs.yml, read without its ``!!python/name`` tags."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("", lambda loader, suffix, node: None)
    config: dict[str, Any] = yaml.load(
        (REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader
    )
    return config


def mkdocs_nav() -> list[object]:
    """mkdocs.yml's ``nav``."""
    nav: list[object] = mkdocs_config()["nav"]
    return nav


def mkdocs_hooks() -> list[Path]:
    """The hooks' entry files that mkdocs.yml lists (MkDocs loads each by path)."""
    return [REPO_ROOT / entry for entry in mkdocs_config()["hooks"]]


def nav_items(entries: list[Any] | None = None) -> list[Any]:
    """mkdocs.yml's nav as the page and section objects hooks read (``is_page``,
    ``is_section``, ``title``, ``children``, ``file.src_uri``), without building it."""
    from types import SimpleNamespace

    items: list[Any] = []
    for entry in mkdocs_nav() if entries is None else entries:
        title, value = (None, entry) if isinstance(entry, str) else next(iter(entry.items()))
        if isinstance(value, list):
            items.append(
                SimpleNamespace(
                    is_page=False, is_section=True, title=title, children=nav_items(value)
                )
            )
        elif "://" in value:  # an external link
            items.append(SimpleNamespace(is_page=False, is_section=False, title=title))
        else:
            file = SimpleNamespace(src_uri=value)
            items.append(SimpleNamespace(is_page=True, is_section=False, title=title, file=file))
    return items


def main_line_steps() -> list[Any]:
    """The path's steps as hooks/roadmap.py reads them from the nav (title, pages)."""
    from hooks import roadmap

    steps: list[Any] = roadmap.main_line(nav_items())
    return steps


# --- the package's unit and contract tests ----------------------------------------------

HYPOTHESIS_SETTINGS = {"max_examples": 30, "deadline": None, "derandomize": True}
"""``hypothesis.settings(**HYPOTHESIS_SETTINGS)``: a fixed, reproducible set of examples."""

MODULE_BACKENDS = ["explicit", "torch"]
"""The backends the module tests run on (flash has tests of its own)."""


def seeded_randn(*shape: int, seed: int = 0, dtype: Any = None) -> Any:
    """``torch.randn(shape)`` from its own generator: the same numbers in any process."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator, dtype=dtype or torch.float32)


# --- Hugging Face transformers as a reference (the hf extra) -----------------------------

HF_GROUP = "transformers"
"""The ``xdist_group`` of the tests against transformers: under ``--dist loadgroup`` they
share one worker, so transformers (seconds to import) is imported once per run, and only
when they run. Mark each such test ``@pytest.mark.xdist_group(HF_GROUP)``."""


def hf_llama() -> tuple[ModuleType, ModuleType]:
    """transformers and its Llama modelling module (skips the test without the hf extra)."""
    import pytest

    transformers = pytest.importorskip("transformers", reason="the hf extra is not installed")
    from transformers.models.llama import modeling_llama

    return transformers, modeling_llama


def hf_llama_attention(heads: int, kv_heads: int, implementation: str) -> Any:
    """A seeded ``LlamaAttention`` from a small random config (nothing downloaded), width 24,
    head_dim 6, with its ``LlamaRotaryEmbedding`` as ``.rotary``; biases when ``kv_heads == 2``."""
    import torch

    transformers, modeling_llama = hf_llama()
    config = transformers.LlamaConfig(
        hidden_size=24,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=6,
        rope_theta=1000.0,
        attention_bias=kv_heads == 2,
    )
    config._attn_implementation = implementation
    torch.manual_seed(heads * 10 + kv_heads)
    attn = modeling_llama.LlamaAttention(config, layer_idx=0).eval()
    attn.rotary = modeling_llama.LlamaRotaryEmbedding(config)
    return attn


def node_or_skip() -> str:
    """Node's path; a test without it fails in CI (Node 20 is required there), else skips."""
    import os
    import shutil

    import pytest

    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI") == "true":
            pytest.fail("node is required in CI")
        pytest.skip("node is not installed")
    return node


def run_node_tests(script: Path, env: dict[str, str], timeout: int = 120) -> None:
    """``node --test script`` with ``env`` added to the environment; every test passes."""
    import os
    import subprocess

    result = subprocess.run(
        [node_or_skip(), "--test", str(script)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "# fail 0" in result.stdout
