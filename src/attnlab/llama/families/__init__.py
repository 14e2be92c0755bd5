"""One file per model family: its config from the GGUF metadata, its map of tensor names.

Each family module ([`llama`][attnlab.llama.families.llama],
[`qwen2`][attnlab.llama.families.qwen2], [`qwen3`][attnlab.llama.families.qwen3])
holds what is particular to it and nothing else: ``ARCHITECTURE`` (the file's
``general.architecture``), ``config_from_gguf(metadata, tensors)`` giving a
[`LlamaConfig`][attnlab.llama.LlamaConfig], and ``state_dict(config, tensors)`` giving
the GGUF tensors under [`LlamaModel`][attnlab.llama.LlamaModel]'s parameter names. The
model knows no GGUF name; [`load_gguf`][attnlab.llama.load_gguf] picks the family.
"""

from __future__ import annotations

from types import ModuleType

from ..gguf_file import GGUFError
from . import llama, qwen2, qwen3

__all__ = ["FAMILIES", "family"]

FAMILIES: dict[str, ModuleType] = {m.ARCHITECTURE: m for m in (llama, qwen2, qwen3)}


def family(architecture: object) -> ModuleType:
    """The family module for a file's ``general.architecture``; ValueError if none."""
    if not isinstance(architecture, str) or architecture not in FAMILIES:
        raise GGUFError(
            f"the GGUF's general.architecture must be one of {', '.join(sorted(FAMILIES))}; "
            f"got {architecture!r}"
        )
    return FAMILIES[str(architecture)]
