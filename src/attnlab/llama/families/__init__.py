"""One description and one module per model family: its facts, and its layers' parts.

Each family's facts (the GGUF metadata keys it reads, in order, with their defaults and
rules; its tensor names and the part each becomes; its per-layer rules) are written once
in ``<family>.json`` beside these modules, read here by
[`description`][attnlab.llama.families.description] and by the page (a generated copy).
Each family module ([`llama`][attnlab.llama.families.llama],
[`qwen2`][attnlab.llama.families.qwen2], [`qwen3`][attnlab.llama.families.qwen3],
[`gemma3`][attnlab.llama.families.gemma3], [`qwen35`][attnlab.llama.families.qwen35])
holds what is particular to it: ``ARCHITECTURE`` (the file's ``general.architecture``),
``config_from_gguf(metadata, tensors)`` giving a [`LlamaConfig`][attnlab.llama.LlamaConfig],
``layer_parts(config, index, rotaries)`` giving each layer's
[`LayerParts`][attnlab.llama.LayerParts], and ``state_dict(config, tensors)`` giving the
GGUF tensors under [`LlamaModel`][attnlab.llama.LlamaModel]'s parameter names. The model
knows no GGUF name; [`load_gguf`][attnlab.llama.load_gguf] picks the family.
"""

from __future__ import annotations

from types import ModuleType

from ..gguf_file import GGUFError
from . import gemma3, llama, qwen2, qwen3, qwen35

__all__ = ["FAMILIES", "family"]

FAMILIES: dict[str, ModuleType] = {m.ARCHITECTURE: m for m in (llama, qwen2, qwen3, gemma3, qwen35)}


def family(architecture: object) -> ModuleType:
    """The family module for a file's ``general.architecture``; ValueError if none."""
    if not isinstance(architecture, str) or architecture not in FAMILIES:
        raise GGUFError(
            f"the GGUF's general.architecture must be one of {', '.join(sorted(FAMILIES))}; "
            f"got {architecture!r}"
        )
    return FAMILIES[str(architecture)]
