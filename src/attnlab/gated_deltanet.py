"""Gated DeltaNet: the linear-attention layer of Qwen3-Next and Qwen3.5.

A token ``x`` of width ``d_model`` becomes, per layer:

1. ``in_proj_qkv``: queries and keys (``Hk`` heads of ``Dk``) and values (``Hv`` heads
   of ``Dv``), then a short causal depthwise convolution over the last
   ``conv_kernel_size`` tokens and SiLU;
2. queries and keys L2-normalised (``x * rsqrt(sum(x**2) + 1e-6)``), each key head shared
   by ``Hv // Hk`` consecutive value heads;
3. ``beta = sigmoid(in_proj_b x)`` and ``g = -exp(A_log) * softplus(in_proj_a x + dt_bias)``
   per value head;
4. [`gated_delta_rule`][attnlab.gated_delta_rule];
5. an RMSNorm of each head's output, times ``silu(in_proj_z x)``; ``out_proj``.

A cache ([`GatedDeltaNetCache`][attnlab.GatedDeltaNetCache]) keeps what the next
chunk needs, whatever the length so far: the convolution's last inputs and the state.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._validation import (
    check_bool,
    check_features,
    check_module_input,
    check_positive_int,
    format_shape,
)
from .attention_heads import AttentionOutput
from .delta_rule import gated_delta_attention_matrix, gated_delta_attention_rows, gated_delta_rule
from .functional import compute_dtype

__all__ = ["DeltaRuleInputs", "GatedDeltaNet", "GatedDeltaNetCache"]

L2_EPS = 1e-6
"""The epsilon of the queries' and keys' L2 norm (FLA's and transformers')."""


class DeltaRuleInputs(NamedTuple):
    """What a Gated DeltaNet layer hands the delta rule, heads-first, per value head.

    In the compute dtype (float32 for half-precision layers), as transformers casts them.

    Attributes:
        query: ``(B, Hv, T, Dk)``, L2-normalised.
        key: ``(B, Hv, T, Dk)``, L2-normalised.
        value: ``(B, Hv, T, Dv)``.
        g: ``(B, Hv, T)``, the log decay.
        beta: ``(B, Hv, T)``, the write strength.
    """

    query: Tensor
    key: Tensor
    value: Tensor
    g: Tensor
    beta: Tensor


class GatedDeltaNetCache:
    """What a Gated DeltaNet layer keeps between chunks: a fixed size, whatever the length.

    ``len(cache)``, ``nbytes`` and ``batch_size`` read as [`Cache`][attnlab.Cache]'s;
    the layer writes the rest. transformers keeps ``conv_kernel_size`` inputs where
    ``conv_kernel_size - 1`` suffice.

    Attributes:
        conv_state: The convolution's last ``conv_kernel_size - 1`` inputs (zeros
            before the first token), ``(B, 2 * Hk * Dk + Hv * Dv, K - 1)``.
        recurrent_state: The delta rule's state ``(B, Hv, Dk, Dv)``.
        writes: Only when the first pass asked for the implicit attention: every cached
            token's write as decayed and corrected since, ``(B, Hv, S, Dk)``
            ([`gated_delta_attention_rows`][attnlab.gated_delta_attention_rows]), so
            later passes can give their rows too. It grows with the text.
    """

    def __init__(self) -> None:
        self.conv_state: Tensor | None = None
        self.recurrent_state: Tensor | None = None
        self.writes: Tensor | None = None
        self._length = 0

    def __len__(self) -> int:
        return self._length

    @property
    def nbytes(self) -> int:
        """Bytes held by the two states (and the writes, if kept)."""
        held = (self.conv_state, self.recurrent_state, self.writes)
        return sum(t.nbytes for t in held if t is not None)

    @property
    def batch_size(self) -> int | None:
        """``B`` of the states, ``None`` while empty."""
        return None if self.recurrent_state is None else self.recurrent_state.shape[0]

    def update(self, conv_state: Tensor, recurrent_state: Tensor, new_tokens: int) -> None:
        """Replace both states after a chunk of ``new_tokens`` tokens."""
        self.conv_state, self.recurrent_state = conv_state, recurrent_state
        self._length += new_tokens


def _l2_normalise(x: Tensor) -> Tensor:
    """``x * rsqrt(sum(x**2) + 1e-6)`` over the last dim, as FLA and transformers."""
    return x * torch.rsqrt(x.pow(2).sum(dim=-1, keepdim=True) + L2_EPS)


class GatedDeltaNet(nn.Module):
    """Gated DeltaNet, with transformers' module names (``Qwen3_5GatedDeltaNet``).

    ``out, weights = layer(x)``; ``weights`` is ``None`` unless ``need_weights=True``,
    then the implicit attention ``(B, Hv, T, T)``
    ([`gated_delta_attention_matrix`][attnlab.gated_delta_attention_matrix]) with
    ``weights @ value`` equal to the rule's output. ``layer(x, cache=cache)`` with
    ``cache = layer.new_cache()`` continues after the cached tokens: a sequence fed
    chunk by chunk gives the one pass's output.

    Args:
        d_model: Width of a token (``hidden_size``).
        num_key_heads: Query/key heads ``Hk`` (``linear_num_key_heads``).
        num_value_heads: Value heads ``Hv``, a multiple of ``Hk``.
        key_head_dim: ``Dk`` (``linear_key_head_dim``).
        value_head_dim: ``Dv`` (``linear_value_head_dim``).
        conv_kernel_size: Taps ``K`` of the causal convolution (``linear_conv_kernel_dim``).
        eps: The epsilon of the output's RMSNorm (``rms_norm_eps``).
        chunk_size: The rule's chunk; a single new token runs the recurrent form.

    Shape:
        x: ``(T, d_model)`` or ``(B, T, d_model)``; output: the same.
    """

    def __init__(
        self,
        d_model: int,
        num_key_heads: int,
        num_value_heads: int,
        key_head_dim: int,
        value_head_dim: int,
        conv_kernel_size: int = 4,
        eps: float = 1e-6,
        chunk_size: int = 64,
    ) -> None:
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.num_key_heads = check_positive_int("num_key_heads", num_key_heads)
        self.num_value_heads = check_positive_int("num_value_heads", num_value_heads)
        if num_value_heads % num_key_heads:
            raise ValueError(
                f"num_key_heads must divide num_value_heads = {num_value_heads}; "
                f"got {num_key_heads}"
            )
        self.key_head_dim = check_positive_int("key_head_dim", key_head_dim)
        self.value_head_dim = check_positive_int("value_head_dim", value_head_dim)
        self.conv_kernel_size = check_positive_int("conv_kernel_size", conv_kernel_size)
        self.chunk_size = check_positive_int("chunk_size", chunk_size)
        key_dim, value_dim = num_key_heads * key_head_dim, num_value_heads * value_head_dim
        self.conv_dim = 2 * key_dim + value_dim
        self.in_proj_qkv = nn.Linear(d_model, self.conv_dim, bias=False)
        self.in_proj_z = nn.Linear(d_model, value_dim, bias=False)
        self.in_proj_b = nn.Linear(d_model, num_value_heads, bias=False)
        self.in_proj_a = nn.Linear(d_model, num_value_heads, bias=False)
        self.conv1d = nn.Conv1d(
            self.conv_dim, self.conv_dim, conv_kernel_size, groups=self.conv_dim, bias=False
        )  # depthwise; the layer pads on the left with the cached inputs
        self.dt_bias = nn.Parameter(torch.ones(num_value_heads))
        self.A_log = nn.Parameter(torch.log(torch.empty(num_value_heads).uniform_(0.01, 16.0)))
        self.norm = nn.RMSNorm(value_head_dim, eps=eps)
        self.out_proj = nn.Linear(value_dim, d_model, bias=False)

    def new_cache(self) -> GatedDeltaNetCache:
        """An empty cache for this layer."""
        return GatedDeltaNetCache()

    def forward(
        self, x: Tensor, *, cache: GatedDeltaNetCache | None = None, need_weights: bool = False
    ) -> AttentionOutput:
        """Mix each token with the ones before it through the decaying, self-correcting state.

        Args:
            x: The tokens, after the cached ones if ``cache`` is given.
            cache: Optional [`GatedDeltaNetCache`][attnlab.GatedDeltaNetCache], read and
                updated.
            need_weights: Also return the implicit attention of this call's tokens over
                every token so far; after cached tokens only if the cache's first pass
                asked for it too (the cache then keeps each token's write).

        Returns:
            ``AttentionOutput(output, attn_weights)``; weights ``(B, Hv, T, S)`` or ``None``.
        """
        x = check_features("x", x, self.d_model, width_name="d_model")
        check_module_input("x", x, self.in_proj_qkv.weight)
        check_bool("need_weights", need_weights)
        batch = x.shape[0] if x.dim() == 3 else 1
        self._check_cache(cache, batch, need_weights)
        tokens = x if x.dim() == 3 else x.unsqueeze(0)  # (B, T, d_model)
        T = tokens.shape[1]
        inputs, gate, conv_state = self._mix(tokens, None if cache is None else cache.conv_state)
        core, state = gated_delta_rule(
            *inputs,
            chunk_size=None if T == 1 else self.chunk_size,
            initial_state=None if cache is None else cache.recurrent_state,
            output_final_state=cache is not None,
        )  # (B, Hv, T, Dv)
        if cache is not None and state is not None:
            cache.update(conv_state, state, T)
        output = self._out(core.to(x.dtype), gate)  # (B, T, d_model)
        weights = None
        q, k, _, g, beta = inputs
        if cache is not None and (cache.writes is not None or need_weights):
            past = cache.writes  # None on the first pass: the history starts here
            rows, cache.writes = gated_delta_attention_rows(q, k, g, beta, past)  # (B, Hv, T, S)
            weights = rows.to(x.dtype) if need_weights else None
        elif need_weights:
            weights = gated_delta_attention_matrix(q, k, g, beta).to(x.dtype)  # (B, Hv, T, T)
        if x.dim() == 2:
            output = output.squeeze(0)
            weights = None if weights is None else weights.squeeze(0)
        return AttentionOutput(output, weights)

    def rule_inputs(self, x: Tensor) -> DeltaRuleInputs:
        """The delta rule's inputs for ``x`` from a fresh start (no cache), as the forward.

        Shape:
            x: ``(B, T, d_model)``; outputs as [`DeltaRuleInputs`][attnlab.DeltaRuleInputs].
        """
        x = check_features("x", x, self.d_model, width_name="d_model")
        check_module_input("x", x, self.in_proj_qkv.weight)
        if x.dim() != 3:
            shape = format_shape(x.shape)
            raise ValueError(f"x must have shape (B, T, d_model); got shape {shape}")
        return self._mix(x, None)[0]

    def _mix(self, x: Tensor, conv_state: Tensor | None) -> tuple[DeltaRuleInputs, Tensor, Tensor]:
        """Projections, convolution and gates: the rule's inputs, the gate ``z``, conv state."""
        B, T, _ = x.shape
        Hk, Hv = self.num_key_heads, self.num_value_heads
        Dk, Dv = self.key_head_dim, self.value_head_dim
        mixed = self.in_proj_qkv(x).transpose(1, 2)  # (B, conv_dim, T)
        if conv_state is None:
            conv_state = mixed.new_zeros(B, self.conv_dim, self.conv_kernel_size - 1)
        window = torch.cat([conv_state, mixed], dim=-1)  # (B, conv_dim, K - 1 + T)
        if T:  # (B, conv_dim, T): causal, SiLU after the conv
            mixed = F.silu(self.conv1d(window))
        new_conv_state = window[..., window.shape[-1] - (self.conv_kernel_size - 1) :]
        q, k, v = torch.split(mixed, [Hk * Dk, Hk * Dk, Hv * Dv], dim=1)
        compute = compute_dtype(x.dtype)
        q, k = (  # (B, Hk * Dk, T) -> (B, Hk, T, Dk), normalised -> (B, Hv, T, Dk)
            _l2_normalise(t.reshape(B, Hk, Dk, T).transpose(-2, -1).to(compute)) for t in (q, k)
        )
        q, k = (t.repeat_interleave(Hv // Hk, dim=1) for t in (q, k))  # key head h: r value heads
        v = v.reshape(B, Hv, Dv, T).transpose(-2, -1)  # (B, Hv, T, Dv)
        beta = self.in_proj_b(x).sigmoid().transpose(1, 2).to(compute)  # (B, Hv, T)
        a = self.in_proj_a(x).to(compute) + self.dt_bias.to(compute)  # (B, T, Hv)
        g = (-self.A_log.to(compute).exp() * F.softplus(a)).transpose(1, 2)  # (B, Hv, T)
        gate = self.in_proj_z(x).view(B, T, Hv, Dv)
        return DeltaRuleInputs(q, k, v.to(compute), g, beta), gate, new_conv_state

    def _out(self, core: Tensor, gate: Tensor) -> Tensor:
        """Gated RMSNorm per head, then ``out_proj``: ``(B, Hv, T, Dv) -> (B, T, d_model)``."""
        normed = self.norm(core.transpose(1, 2)) * F.silu(gate)  # (B, T, Hv, Dv)
        output: Tensor = self.out_proj(normed.flatten(-2))
        return output

    def _check_cache(self, cache: object, batch: int, need_weights: bool) -> None:
        """Check ``cache`` is ``None`` or a Gated DeltaNet cache of this batch."""
        if cache is None:
            return
        if not isinstance(cache, GatedDeltaNetCache):
            raise TypeError(
                f"cache must be a GatedDeltaNetCache (layer.new_cache()) or None; "
                f"got {type(cache).__name__}"
            )
        if cache.batch_size not in (None, batch):
            raise ValueError(
                f"x must have the cache's batch size {cache.batch_size}; got a batch of {batch}"
            )
        if need_weights and len(cache) and cache.writes is None:
            raise ValueError(
                "need_weights=True after cached tokens needs the cache's writes: ask for the "
                f"weights on the cache's first pass too; got a cache of {len(cache)} tokens "
                "without them"
            )

    @staticmethod
    def from_hf(layer: nn.Module, *, chunk_size: int = 64) -> GatedDeltaNet:
        """Build a module equal to transformers' ``Qwen3_5GatedDeltaNet`` or Qwen3-Next's.

        Reads the sizes from the layer and copies every weight. Qwen3-Next's
        ``Qwen3NextGatedDeltaNet`` packs ``[q, k, v, z]`` and ``[b, a]`` per key head in
        ``in_proj_qkvz`` and ``in_proj_ba``: they are unpacked into Qwen3.5's four
        projections, so one forward serves both.

        Args:
            layer: The transformers layer.
            chunk_size: The new module's chunk.

        Returns:
            A new ``GatedDeltaNet`` on the layer's device and dtype.
        """
        packed = isinstance(getattr(layer, "in_proj_qkvz", None), nn.Linear)
        if not isinstance(getattr(layer, "conv1d", None), nn.Conv1d) or not (
            packed or isinstance(getattr(layer, "in_proj_qkv", None), nn.Linear)
        ):
            raise TypeError(
                "layer must be a transformers Qwen3_5GatedDeltaNet or Qwen3NextGatedDeltaNet "
                f"(conv1d and in_proj_qkv or in_proj_qkvz); got {type(layer).__name__}"
            )
        hf: Any = layer  # its sizes are plain attributes
        if getattr(hf, "activation", "silu") not in ("silu", "swish"):
            raise ValueError(f"layer.activation must be 'silu'; got {hf.activation!r}")
        if hf.conv1d.bias is not None:
            raise ValueError("layer.conv1d must have no bias, as transformers builds it")
        module = GatedDeltaNet(
            hf.hidden_size,
            hf.num_k_heads,
            hf.num_v_heads,
            hf.head_k_dim,
            hf.head_v_dim,
            conv_kernel_size=hf.conv_kernel_size,
            eps=hf.norm.variance_epsilon,
            chunk_size=chunk_size,
        )
        state = {name: t.detach().clone() for name, t in layer.state_dict().items()}
        if packed:
            qkvz, ba = state.pop("in_proj_qkvz.weight"), state.pop("in_proj_ba.weight")
            state.update(module._unpack(qkvz, ba))
        weight = next(layer.parameters())
        module.to(device=weight.device, dtype=weight.dtype)
        module.load_state_dict(state)
        module.train(layer.training)
        return module

    def _unpack(self, qkvz: Tensor, ba: Tensor) -> dict[str, Tensor]:
        """Qwen3-Next's per-key-head ``[q, k, v, z]`` and ``[b, a]`` rows as Qwen3.5's four."""
        Hk, Dk, Dv, d = self.num_key_heads, self.key_head_dim, self.value_head_dim, self.d_model
        r = self.num_value_heads // Hk  # value heads per key head
        groups = qkvz.view(Hk, 2 * Dk + 2 * r * Dv, d)  # one group of rows per key head
        q, k, v, z = torch.split(groups, [Dk, Dk, r * Dv, r * Dv], dim=1)
        b, a = torch.split(ba.view(Hk, 2 * r, d), [r, r], dim=1)
        return {
            "in_proj_qkv.weight": torch.cat([t.reshape(-1, d) for t in (q, k, v)]),
            "in_proj_z.weight": z.reshape(-1, d),
            "in_proj_b.weight": b.reshape(-1, d),
            "in_proj_a.weight": a.reshape(-1, d),
        }

    def extra_repr(self) -> str:
        """Sizes and chunk, shown by ``print(module)``."""
        return (
            f"d_model={self.d_model}, num_key_heads={self.num_key_heads}, "
            f"num_value_heads={self.num_value_heads}, key_head_dim={self.key_head_dim}, "
            f"value_head_dim={self.value_head_dim}, conv_kernel_size={self.conv_kernel_size}, "
            f"chunk_size={self.chunk_size}"
        )
