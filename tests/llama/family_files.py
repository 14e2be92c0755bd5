"""Tiny random Gemma 3 and Qwen3.5 GGUF files, written as llama.cpp's converter writes them.

Each file comes from a tiny transformers model (random weights, norms included, so a
norm stored wrongly shows): ``convert_hf_to_gguf.py``'s ``Gemma3Model`` and
``Qwen3_5TextModel`` redone step by step with gguf-py's writer and its tensor-name map:
the same metadata keys, every ``*norm.weight`` stored as ``1 + w`` (but Qwen3.5's
``linear_attn.norm``), ``A_log`` as ``-exp(A_log)``, ``dt_bias`` as ``ssm_dt.bias``, the
convolution squeezed, and Qwen3.5's value heads reordered from grouped to tiled. Tensors
are float32, so a model read back is the source model to rounding.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gguf
import torch
import transformers

from tests.llama.random_gguf import MERGES, TOKENS, sentencepiece_fields

__all__ = ["tiny_gemma3", "tiny_qwen35", "write_gemma3_gguf", "write_qwen35_gguf"]

D_MODEL, FFN_DIM = 64, 96
FULL_ATTENTION_INTERVAL = 4  # transformers keeps it only as layer_types
GEMMA_HEAD_DIM = 256  # = query_pre_attn_scalar, which no GGUF key holds (llama.cpp: head_dim)


def _randomise(model: torch.nn.Module, seed: int) -> None:
    """Every parameter random (norms and gates too), small enough to keep logits sane."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            scale = 0.3 if param.dim() == 1 else 0.08
            param.copy_(torch.randn(param.shape, generator=generator) * scale)
            if name.endswith("A_log"):
                param.copy_(torch.rand(param.shape, generator=generator) * 2 - 1)


def tiny_gemma3(*, seed: int = 0, num_layers: int = 7, linear_factor: float | None = None) -> Any:
    """A random ``Gemma3ForCausalLM``: 64 wide, 2 heads of 256 over 1 key/value head, window 4.

    ``linear_factor``: the larger Gemma 3 models' linear rotary scaling of the global layers.
    """
    rope: dict[str, Any] = {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
    }
    if linear_factor is not None:
        rope["full_attention"] = {
            "rope_type": "linear",
            "factor": linear_factor,
            "rope_theta": 1000000.0,
        }
    config = transformers.Gemma3TextConfig(
        vocab_size=len(sentencepiece_fields()["tokens"]),
        hidden_size=D_MODEL,
        intermediate_size=FFN_DIM,
        num_hidden_layers=num_layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=GEMMA_HEAD_DIM,
        query_pre_attn_scalar=GEMMA_HEAD_DIM,
        sliding_window=4,
        max_position_embeddings=128,
        rms_norm_eps=1e-6,
        rope_parameters=rope,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        attn_implementation="eager",
    )
    model = transformers.Gemma3ForCausalLM(config).eval()
    _randomise(model, seed)
    return model


def _tokenizer(writer: gguf.GGUFWriter, fields: dict[str, Any], bos: int, eos: int) -> None:
    """The tokenizer keys a converted file carries."""
    writer.add_tokenizer_model(fields["model"])
    writer.add_tokenizer_pre(fields["pre"])
    writer.add_token_list(fields["tokens"])
    writer.add_token_types(fields["types"])
    if "scores" in fields:
        writer.add_token_scores(fields["scores"])
    if "merges" in fields:
        writer.add_token_merges(fields["merges"])
    writer.add_bos_token_id(bos)
    writer.add_eos_token_id(eos)


def _write(writer: gguf.GGUFWriter, tensors: dict[str, torch.Tensor]) -> None:
    """Add float32 tensors, then write the file."""
    for name, tensor in tensors.items():
        writer.add_tensor(name, tensor.detach().float().contiguous().numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _mapped(arch: Any, model: torch.nn.Module, modify: Any) -> dict[str, torch.Tensor]:
    """The model's tensors under llama.cpp's names, each through ``modify(hf_name, t)``."""
    names = gguf.get_tensor_name_map(arch, model.config.num_hidden_layers)
    out = {}
    for hf_name, tensor in model.state_dict().items():
        if hf_name == "lm_head.weight" and model.config.tie_word_embeddings:
            continue
        tensor = modify(hf_name, tensor.detach().clone())
        if tensor is None:
            continue
        if hf_name.endswith(".dt_bias"):  # Qwen3NextModel renames it
            hf_name = hf_name.removesuffix(".dt_bias") + ".dt_proj.bias"
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        assert name is not None, hf_name
        out[name] = tensor
    return out


def write_gemma3_gguf(
    path: Path, *, seed: int = 0, num_layers: int = 7, linear_factor: float | None = None
) -> Path:
    """``tiny_gemma3(...)`` written as ``convert_hf_to_gguf.py``'s ``Gemma3Model`` does."""
    model = tiny_gemma3(seed=seed, num_layers=num_layers, linear_factor=linear_factor)
    c = model.config
    writer = gguf.GGUFWriter(str(path), "gemma3")
    writer.add_context_length(c.max_position_embeddings)
    writer.add_embedding_length(c.hidden_size)
    writer.add_block_count(c.num_hidden_layers)
    writer.add_feed_forward_length(c.intermediate_size)
    writer.add_head_count(c.num_attention_heads)
    writer.add_layer_norm_rms_eps(c.rms_norm_eps)
    writer.add_key_length(c.head_dim)
    writer.add_value_length(c.head_dim)
    writer.add_rope_freq_base(c.rope_parameters["full_attention"]["rope_theta"])  # global layers
    writer.add_sliding_window(c.sliding_window)
    writer.add_head_count_kv(c.num_key_value_heads)
    if linear_factor is not None:  # applied to the global layers only
        writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(linear_factor)
    _tokenizer(writer, sentencepiece_fields(), bos=1, eos=2)

    def modify(name: str, tensor: torch.Tensor) -> torch.Tensor:
        return tensor + 1 if name.endswith("norm.weight") else tensor  # Gemma's (1 + w)

    _write(writer, _mapped(gguf.MODEL_ARCH.GEMMA3, model, modify))
    return path


def tiny_qwen35(*, seed: int = 0, num_layers: int = 4) -> Any:
    """A random ``Qwen3_5ForCausalLM``: 64 wide, 3 Gated DeltaNet layers then gated attention.

    Attention: 4 heads of 16 over 2 key/value heads, a quarter rotated. Gated DeltaNet: 2
    key heads of 16, 4 value heads of 8 (two per key head: their order matters), 4 taps.
    """
    config = transformers.Qwen3_5TextConfig(
        vocab_size=len(TOKENS),
        hidden_size=D_MODEL,
        intermediate_size=FFN_DIM,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=16,
        linear_value_head_dim=8,
        linear_conv_kernel_dim=4,
        full_attention_interval=FULL_ATTENTION_INTERVAL,
        max_position_embeddings=128,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        bos_token_id=0,
        eos_token_id=1,
        attn_implementation="eager",
    )
    model = transformers.Qwen3_5ForCausalLM(config).eval()
    _randomise(model, seed)
    return model


def _tile(tensor: torch.Tensor, dim: int, k_heads: int, per_k: int, width: int) -> torch.Tensor:
    """The converter's ``_reorder_v_heads``: value heads grouped by key head -> tiled."""
    shape = list(tensor.shape)
    dim %= len(shape)
    grouped = tensor.reshape(*shape[:dim], k_heads, per_k, width, *shape[dim + 1 :])
    return grouped.transpose(dim, dim + 1).reshape(shape)


def write_qwen35_gguf(path: Path, *, seed: int = 0, num_layers: int = 4) -> Path:
    """``tiny_qwen35(...)`` written as ``convert_hf_to_gguf.py``'s ``Qwen3_5TextModel`` does."""
    model = tiny_qwen35(seed=seed, num_layers=num_layers)
    c = model.config
    writer = gguf.GGUFWriter(str(path), "qwen35")
    writer.add_context_length(c.max_position_embeddings)
    writer.add_embedding_length(c.hidden_size)
    writer.add_block_count(c.num_hidden_layers)
    writer.add_feed_forward_length(c.intermediate_size)
    writer.add_head_count(c.num_attention_heads)
    writer.add_head_count_kv(c.num_key_value_heads)
    writer.add_rope_freq_base(c.rope_parameters["rope_theta"])
    writer.add_layer_norm_rms_eps(c.rms_norm_eps)
    writer.add_key_length(c.head_dim)
    writer.add_value_length(c.head_dim)
    writer.add_ssm_conv_kernel(c.linear_conv_kernel_dim)
    writer.add_ssm_state_size(c.linear_key_head_dim)
    writer.add_ssm_group_count(c.linear_num_key_heads)
    writer.add_ssm_time_step_rank(c.linear_num_value_heads)
    writer.add_ssm_inner_size(c.linear_value_head_dim * c.linear_num_value_heads)
    writer.add_full_attention_interval(FULL_ATTENTION_INTERVAL)
    fraction = c.rope_parameters.get("partial_rotary_factor", 0.25)
    writer.add_rope_dimension_count(int(c.head_dim * fraction))
    writer.add_rope_dimension_sections([11, 11, 10, 0])
    fields = {"model": "gpt2", "pre": "qwen35", "tokens": TOKENS, "merges": MERGES}
    _tokenizer(writer, {**fields, "types": [1] * len(TOKENS)}, bos=0, eos=1)
    Hk, Hv = c.linear_num_key_heads, c.linear_num_value_heads
    Dk, Dv, r = c.linear_key_head_dim, c.linear_value_head_dim, Hv // Hk

    def modify(name: str, t: torch.Tensor) -> torch.Tensor:
        if "linear_attn." in name and r > 1:  # _LinearAttentionVReorderBase
            if ".in_proj_qkv." in name:
                t = torch.cat([t[: 2 * Hk * Dk], _tile(t[2 * Hk * Dk :], 0, Hk, r, Dv)])
            elif ".in_proj_z." in name:
                t = _tile(t, 0, Hk, r, Dv)
            elif ".in_proj_b." in name or ".in_proj_a." in name:
                t = _tile(t, 0, Hk, r, 1)
            elif ".A_log" in name or ".dt_bias" in name:
                t = _tile(t.unsqueeze(-1), 0, Hk, r, 1).squeeze(-1)
            elif ".conv1d" in name:
                t = t.squeeze()
                t = torch.cat([t[: 2 * Hk * Dk], _tile(t[2 * Hk * Dk :], 0, Hk, r, Dv)])
            elif ".out_proj." in name:
                t = _tile(t, 1, Hk, r, Dv)
        if name.endswith(".A_log"):  # Qwen3NextModel
            return -torch.exp(t)
        if "conv1d" in name:
            return t.squeeze()
        if name.endswith("norm.weight") and not name.endswith("linear_attn.norm.weight"):
            return t + 1
        return t

    _write(writer, _mapped(gguf.MODEL_ARCH.QWEN35, model, modify))
    return path
