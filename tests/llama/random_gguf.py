"""Small random GGUF files of each family (llama, qwen2, qwen3), written with gguf-py's writer.

Every 2-D tensor is written in one of the eleven supported types as random block bytes
(random bytes are valid input for every type), except the blocks' float16 scales and
minimums, which are drawn finite and small so that the weights keep a sensible size
(random bytes there could be inf or NaN). ``TYPE_ORDER`` cycles the types over the
tensors, starting at a different type for each family, so each file holds every type.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import torch

Q = gguf.GGMLQuantizationType

TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K")
# byte offsets of the float16 fields in a block, and their size (a weight stays below ~0.1)
F16_FIELDS = {
    "Q8_0": ((0,), 5e-4),
    "Q4_0": ((0,), 1e-2),
    "Q4_1": ((0, 2), 1e-2),
    "Q5_0": ((0,), 5e-3),
    "Q5_1": ((0, 2), 5e-3),
    "Q4_K": ((0, 2), 1e-4),
    "Q5_K": ((0, 2), 5e-5),
    "Q6_K": ((208,), 1e-5),
}

# the families' sizes: every row a multiple of 256 (the K-quants' block); Qwen3's head
# width is 128, as transformers' Qwen3 config assumes (its GGUF loader reads no head_dim)
SIZES = {
    "llama": {"num_heads": 4, "num_kv_heads": 2, "head_dim": 64},
    "qwen2": {"num_heads": 4, "num_kv_heads": 2, "head_dim": 64},
    "qwen3": {"num_heads": 4, "num_kv_heads": 2, "head_dim": 128},
}
D_MODEL, FFN_DIM, NUM_LAYERS, VOCAB = 256, 256, 2, 64
# GPT-2's byte alphabet for bytes 0x21 .. 0x5F (printable ASCII, one token each), and
# one merged token (real files always carry merges)
TOKENS = [chr(b) for b in range(0x21, 0x20 + VOCAB)] + ["AB"]
MERGES = ["A B"]


def random_weights(rng: np.random.Generator, type_name: str, rows: int, cols: int) -> np.ndarray:
    """A ``(rows, cols)`` weight's bytes in ``type_name``, random with finite small scales."""
    if type_name == "F32":
        return (rng.standard_normal((rows, cols)) * 0.05).astype(np.float32)
    if type_name == "F16":
        return (rng.standard_normal((rows, cols)) * 0.05).astype(np.float16)
    if type_name == "BF16":
        values = (rng.standard_normal((rows, cols)) * 0.05).astype(np.float32)
        return (values.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)
    block, size = gguf.GGML_QUANT_SIZES[Q[type_name]]
    data = rng.integers(0, 256, (rows, cols // block, size), dtype=np.uint8)
    offsets, scale = F16_FIELDS.get(type_name, ((), 0.0))  # another type: bytes as drawn
    for offset in offsets:
        value = rng.uniform(0.5, 1.5, (rows, cols // block)) * scale
        data[:, :, offset : offset + 2] = value.astype(np.float16)[..., None].view(np.uint8)
    return data.reshape(rows, -1)


def write_random_gguf(
    path: Path,
    architecture: str,
    *,
    seed: int = 0,
    types: tuple[str, ...] = TYPES,
    tied: bool = True,
    pre: str = "gpt-2",
    tokenizer_model: str = "gpt2",
    name_architecture: str | None = None,
    extra: tuple[str, ...] = (),
    leave_out: tuple[str, ...] = (),
    rope_freqs: np.ndarray | None = None,
    context_length: int = 128,
) -> Path:
    """Write a random 2-layer model of ``architecture`` to ``path``; return ``path``.

    For the refusals: ``name_architecture`` writes another ``general.architecture``
    (and its keys) over the same tensors; ``extra`` adds 1-D tensors of those names;
    ``leave_out`` drops the tensors of those names. ``rope_freqs``: Llama 3.1's
    rotary factors, written as ``rope_freqs.weight``.
    """
    rng = np.random.default_rng(seed)
    sizes = SIZES[architecture]
    H, Hkv, D = sizes["num_heads"], sizes["num_kv_heads"], sizes["head_dim"]
    writer = gguf.GGUFWriter(str(path), name_architecture or architecture)
    writer.add_block_count(NUM_LAYERS)
    writer.add_context_length(context_length)
    writer.add_embedding_length(D_MODEL)
    writer.add_feed_forward_length(FFN_DIM)
    writer.add_head_count(H)
    writer.add_head_count_kv(Hkv)
    writer.add_rope_freq_base(10000.0 if architecture == "llama" else 1000000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    if architecture == "llama":
        writer.add_rope_dimension_count(D)
    if architecture == "qwen3":
        writer.add_key_length(D)
        writer.add_value_length(D)
    writer.add_tokenizer_model(tokenizer_model)
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(TOKENS)
    writer.add_token_types([1] * VOCAB)
    writer.add_token_merges(MERGES)
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(1)

    cycle = iter(types[(seed + i) % len(types)] for i in range(10_000))

    def matrix(name: str, rows: int, cols: int) -> None:
        kind = next(cycle)
        data = random_weights(rng, kind, rows, cols)
        raw = None if kind in ("F32", "F16") else Q[kind]
        if name not in leave_out:
            writer.add_tensor(name, data, raw_dtype=raw)

    def vector(name: str, n: int, mean: float = 1.0) -> None:
        if name not in leave_out:
            writer.add_tensor(name, (mean + 0.1 * rng.standard_normal(n)).astype(np.float32))

    for name in extra:
        vector(name, D // 2)
    if rope_freqs is not None:
        writer.add_tensor("rope_freqs.weight", rope_freqs.astype(np.float32))

    matrix("token_embd.weight", VOCAB, D_MODEL)
    for i in range(NUM_LAYERS):
        vector(f"blk.{i}.attn_norm.weight", D_MODEL)
        matrix(f"blk.{i}.attn_q.weight", H * D, D_MODEL)
        matrix(f"blk.{i}.attn_k.weight", Hkv * D, D_MODEL)
        matrix(f"blk.{i}.attn_v.weight", Hkv * D, D_MODEL)
        matrix(f"blk.{i}.attn_output.weight", D_MODEL, H * D)
        if architecture == "qwen2":
            vector(f"blk.{i}.attn_q.bias", H * D, 0.0)
            vector(f"blk.{i}.attn_k.bias", Hkv * D, 0.0)
            vector(f"blk.{i}.attn_v.bias", Hkv * D, 0.0)
        if architecture == "qwen3":
            vector(f"blk.{i}.attn_q_norm.weight", D)
            vector(f"blk.{i}.attn_k_norm.weight", D)
        vector(f"blk.{i}.ffn_norm.weight", D_MODEL)
        matrix(f"blk.{i}.ffn_gate.weight", FFN_DIM, D_MODEL)
        matrix(f"blk.{i}.ffn_up.weight", FFN_DIM, D_MODEL)
        matrix(f"blk.{i}.ffn_down.weight", D_MODEL, FFN_DIM)
    vector("output_norm.weight", D_MODEL)
    if not tied:
        matrix("output.weight", VOCAB, D_MODEL)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def converter_factors(factor: float, head_dim: int, theta: float) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf.py for Llama 3.1's scaling (low_freq_factor 1,
    high_freq_factor 4, 8192 positions), written out: each pair's frequency's divisor."""
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    low_wavelen, high_wavelen = 8192 / 1.0, 8192 / 4.0
    factors = []
    for freq in freqs.tolist():
        wavelen = 2 * math.pi / freq
        if wavelen < high_wavelen:
            factors.append(1.0)
        elif wavelen > low_wavelen:
            factors.append(factor)
        else:
            smooth = (8192 / wavelen - 1.0) / (4.0 - 1.0)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(factors, dtype=np.float32)


def write_tokenizer(path: Path, fields: dict[str, Any]) -> Path:
    """A GGUF file of tokenizer metadata only (``general.architecture = "llama"``)."""
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model(fields["model"])
    writer.add_tokenizer_pre(fields["pre"])
    writer.add_token_list(fields["tokens"])
    writer.add_token_types(fields["types"])
    if "merges" in fields:
        writer.add_token_merges(fields["merges"])
    if "scores" in fields:
        writer.add_token_scores(fields["scores"])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


PIECES = ["▁", "a", "b", "c", "d", "é", "▁a", "ab", "▁ab", "bc", "abc", "▁abc", "cd", "▁d"]
PIECES += ["dd", "▁dd", "ba", "▁ba", "aa", "é▁", "▁é"]
SENTENCEPIECE_TEXTS = ["abc", "ab abc  dd", "  d é é  x! 😀", "</s>a<s>b", "\n\tab", " ab", "é▁é"]


def sentencepiece_fields() -> dict[str, Any]:
    """A small SentencePiece vocabulary (TinyLlama's kind): unknown, bos, eos, 256 byte
    tokens, then pieces scored best first."""
    tokens = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256)), *PIECES]
    return {
        "model": "llama",
        "pre": "default",
        "tokens": tokens,
        "types": [2, 3, 3] + [6] * 256 + [1] * len(PIECES),
        "scores": [0.0] * 259 + [-float(i) for i in range(len(PIECES))],
    }
