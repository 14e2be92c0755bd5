"""A family's description (its JSON file) read: metadata keys by their rules, tensors renamed.

Each ``<family>.json`` beside this module states the family's facts once, for the
package and the page (``scripts/family_descriptions.py`` copies them into the page):
the metadata keys in reading order, each with its type, default and rule; the tensor
names per layer type and the model part each becomes; the per-layer rules. This module
is the package's reader of the rows; the family modules add the rules written in words.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any

from torch import Tensor

from ...rope_scaling import LinearScaling, RopeScaling, YarnScaling
from ..config import LlamaConfig
from ..gguf_file import GGUFError

__all__ = ["describe", "read_metadata", "rename", "rope_scaling", "tensor_names"]

Transform = Callable[[dict[str, Any], Tensor], dict[str, Tensor]]


@functools.cache
def describe(architecture: str) -> dict[str, Any]:
    """The family's description, parsed from ``<architecture>.json`` (package data)."""
    text = resources.files(__package__).joinpath(f"{architecture}.json").read_text("utf-8")
    description: dict[str, Any] = json.loads(text)
    return description


# the largest integer both languages read exactly (the page's numbers are float64)
MAX_EXACT_INT = 2**53 - 1


def _checked(key: str, value: Any, kind: str) -> Any:
    """``value`` if it is of the row's ``type``, else a GGUFError naming ``key``.

    The integer types (count, token_id, natural, count_array) need a GGUF integer (a
    float such as 128.0 is refused, as llama.cpp refuses it) of at most 2**53 - 1.
    """
    if kind in ("count", "token_id", "natural") and _too_large(value):
        raise GGUFError(f"the GGUF's {key} must be at most 2**53 - 1; got {value!r}")
    if kind == "count_array" and isinstance(value, list) and any(map(_too_large, value)):
        raise GGUFError(f"the GGUF's {key} must hold ints of at most 2**53 - 1; got {value!r}")
    if kind == "count":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise GGUFError(f"the GGUF's {key} must be a positive int; got {value!r}")
    elif kind == "number":
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise GGUFError(f"the GGUF's {key} must be a number > 0; got {value!r}")
        if not math.isfinite(value):
            raise GGUFError(f"the GGUF's {key} must be finite; got {value!r}")
        return float(value)
    elif kind == "token_id":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise GGUFError(f"the GGUF's {key} must be a token id (an int >= 0); got {value!r}")
    elif kind == "natural":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise GGUFError(f"the GGUF's {key} must be an int >= 0; got {value!r}")
    elif kind == "string":
        if not isinstance(value, str):
            raise GGUFError(f"the GGUF's {key} must be a string; got {value!r}")
    elif kind == "count_array" and (
        not isinstance(value, list)
        or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in value)
    ):
        raise GGUFError(f"the GGUF's {key} must be an array of ints >= 0; got {value!r}")
    return value


def _too_large(value: Any) -> bool:
    """Whether ``value`` is an int past ``MAX_EXACT_INT`` (the one rule for 64-bit values)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > MAX_EXACT_INT


def _refused(row: Mapping[str, Any], key: str, value: Any, arch: str) -> None:
    """A row with ``refuse``: ``present`` refuses any value, ``nonzero`` one that is not 0.

    A ``nonzero`` row's value must still be of its type (``natural``: a GGUF integer;
    ``number``: an int or float, not a bool), else refused naming the key.
    """
    if row["refuse"] == "nonzero":
        if row["type"] == "natural":
            _checked(key, value, "natural")
        elif isinstance(value, bool) or not isinstance(value, int | float):
            raise GGUFError(f"the GGUF's {key} must be a number; got {value!r}")
        if value == 0:
            return
    raise GGUFError(
        f"the GGUF's {key} is {value!r}; attnlab.llama's {arch} family does not read it "
        f"({'it must be absent' if row['refuse'] == 'present' else 'only 0'})"
    )


def read_metadata(
    description: Mapping[str, Any], metadata: Mapping[str, Any], tensors: Mapping[str, Tensor]
) -> dict[str, Any]:
    """Every metadata row of ``description`` read from ``metadata``, in order.

    Returns each value under its row's config ``field`` (``"num_heads"``) or ``name``
    (a value the family's code reads, ``"scaling_type"``), and the full key it came
    from under ``"key:<field or name>"`` (for messages: no key is spelt in Python; a
    value defaulted to an earlier field's is named by that field's key).

    Raises:
        GGUFError: A required key missing, a value of the wrong type, a value not
            ``allowed``, a key the family refuses (each named).
    """
    arch = description["general.architecture"]
    values: dict[str, Any] = {}
    for row in description["metadata"]:
        key = row["key"].replace("{arch}", arch)
        present = key in metadata
        if row.get("refuse") is not None:
            if present:
                _refused(row, key, metadata[key], arch)
            continue
        if present:
            value = _checked(key, metadata[key], row["type"])
        elif "default" not in row:
            raise GGUFError(f"the GGUF file lacks the metadata key {key!r}")
        else:
            value = _default(row["default"], values, tensors, metadata, key)
        allowed = row.get("allowed")
        if allowed is not None and value not in allowed:
            raise GGUFError(
                f"the GGUF's {key} is {value!r}; attnlab.llama's {arch} family reads "
                f"{', '.join(map(repr, allowed))}"
            )
        label = row.get("field") or row.get("name")
        if label:  # a value taken from an earlier field: named by that field's key
            earlier = None if present else row.get("default", {}).get("field")
            source = key if earlier is None else values["key:" + earlier]
            values[label], values["key:" + label] = value, source
    return values


def _default(
    rule: Mapping[str, Any],
    values: Mapping[str, Any],
    tensors: Mapping[str, Tensor],
    metadata: Mapping[str, Any],
    key: str,
) -> Any:
    """A row's default: a value, an earlier field, a quotient of two, a tensor's rows."""
    if "value" in rule:
        return rule["value"]
    if "field" in rule:
        return values[rule["field"]]
    if "quotient" in rule:
        top, bottom = (values[name] for name in rule["quotient"])
        if top % bottom:
            over, under = (values["key:" + name] for name in rule["quotient"])
            raise GGUFError(
                f"the GGUF's {over} ({top}) must be a multiple of {under} ({bottom}) when "
                f"the file states no {key}"
            )
        return top // bottom
    tensor = tensors.get(rule["tensor_rows"])
    rows = len(metadata.get("tokenizer.ggml.tokens", [])) if tensor is None else tensor.shape[0]
    return _checked(key, int(rows), "count")


def rope_scaling(values: Mapping[str, Any]) -> RopeScaling | None:
    """The rotary scaling the rows of group ``rope_scaling`` state (read and checked).

    Type ``none`` or factor 1: none; ``linear``: ``LinearScaling(factor)``; ``yarn``:
    ``YarnScaling(factor, original length, beta_fast, beta_slow)``.

    Raises:
        GGUFError: A factor below 1, or yarn's beta_fast not above beta_slow (each
            named by its key), before any scaling is built.
    """
    kind, factor = values["scaling_type"], values["scaling_factor"]
    if kind == "none" or factor == 1.0:
        return None
    if factor < 1.0:
        raise GGUFError(
            f"the GGUF's {values['key:scaling_factor']} must be at least 1 (a scaling "
            f"stretches the positions); got {factor!r}"
        )
    if kind == "linear":
        return LinearScaling(factor)
    fast, slow = values["yarn_beta_fast"], values["yarn_beta_slow"]
    if not fast > slow:
        raise GGUFError(
            f"the GGUF's {values['key:yarn_beta_fast']} ({fast!r}) must be greater than "
            f"{values['key:yarn_beta_slow']} ({slow!r})"
        )
    return YarnScaling(
        factor,
        int(values["scaling_original_length"]),
        beta_fast=fast,
        beta_slow=slow,
    )


def _rows(config: LlamaConfig, present: Mapping[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Each GGUF tensor name the config implies: its parameters' prefix and its row."""
    description = describe(config.architecture)
    rows: dict[str, tuple[str, dict[str, Any]]] = {}
    for row in description["tensors"]["model"]:
        if row["name"] in present or not row.get("optional"):
            rows[row["name"]] = ("", row)
    for i, kind in enumerate(config.types()):
        for row in description["tensors"]["layer"][kind]:
            rows[row["name"].replace("{i}", str(i))] = (f"layers.{i}.", row)
    return rows


def tensor_names(config: LlamaConfig, present: Mapping[str, Any]) -> dict[str, str]:
    """The GGUF tensor each model parameter comes from (``present``: the file's tensors)."""
    names = {}
    for name, (prefix, row) in _rows(config, present).items():
        for part in row["part"].split(" + "):
            names[prefix + part] = name
    return names


def rename(
    config: LlamaConfig,
    tensors: Mapping[str, Tensor],
    transform: Transform | None = None,
    used: frozenset[str] = frozenset(),
) -> dict[str, Tensor]:
    """The GGUF tensors under the model's parameter names, as the description maps them.

    ``transform(row, tensor)`` gives a row's parameters (default: ``{row["part"]: tensor}``);
    ``used`` names tensors read elsewhere (Llama 3.1's ``rope_freqs.weight``).

    Raises:
        GGUFError: A tensor missing, or one the family does not use (each named).
    """
    rows = _rows(config, tensors)
    missing = [name for name in rows if name not in tensors]
    if missing:
        raise GGUFError(
            f"the GGUF file lacks {len(missing)} tensor(s) of the {config.architecture} "
            f"family, e.g. {missing[0]!r}"
        )
    extra = sorted(set(tensors) - set(rows) - used)
    if extra:
        raise GGUFError(
            f"the GGUF file has tensor(s) the {config.architecture} family does not use, "
            f"e.g. {extra[0]!r}"
        )
    state = {}
    for name, (prefix, row) in rows.items():
        tensor = tensors[name]  # the row, its "name" the tensor's own (blk.3., not blk.{i}.)
        parts = (
            {row["part"]: tensor} if transform is None else transform({**row, "name": name}, tensor)
        )
        state.update({prefix + part: t.contiguous() for part, t in parts.items()})
    return state
