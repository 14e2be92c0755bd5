"""A Llama-architecture decoder built from the package's own attention.

The pieces, in the order a token meets them:

* ``embed``: token ids to vectors of width ``d_model``;
* ``num_layers`` [`DecoderBlock`][attnlab.llama.DecoderBlock]s, each
  RMSNorm -> grouped-query attention -> residual -> RMSNorm -> SwiGLU -> residual;
* a final [`RMSNorm`][attnlab.llama.RMSNorm], then the logits: the dot product with
  every token's embedding (the embeddings are *tied*: one matrix reads tokens in and
  scores them out).

The attention is [`GroupedQueryAttention`][attnlab.GroupedQueryAttention], every layer
sharing the model's one rotary part, with a cache per layer; its ``need_weights`` and
``ablate_heads`` keywords are the two ways to look inside. Shapes follow the package's
legend, with ``V`` the vocabulary; ``forward`` always returns a batch axis.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._validation import (
    check_bool,
    check_distinct,
    check_integer_tensor,
    check_length,
    check_token_range,
    check_vectors,
    format_shape,
)
from ..attention_heads import PositionEmbeddings
from ..gqa import GroupedQueryAttention
from ..kv_cache import Cache, KVCache
from ..rope_scaling import RopeScaling, ScaledRotaryEmbedding
from ..rotary import RotaryEmbedding
from .generate import Sampling, check_attention_mask, generate_tokens, padding_mask

__all__ = [
    "BlockOutput",
    "DecoderBlock",
    "LlamaConfig",
    "LlamaModel",
    "LlamaOutput",
    "RMSNorm",
    "SwiGLU",
]


@dataclass(frozen=True)
class LlamaConfig:
    """The sizes of a Llama-architecture model (defaults: SmolLM2-135M).

    Attributes:
        vocab_size: Tokens in the vocabulary ``V``.
        d_model: Width of every token's vector (``hidden_size``).
        num_layers: Decoder blocks.
        num_heads: Query heads ``H`` per layer.
        num_kv_heads: Key/value heads ``Hkv`` per layer, shared by ``H // Hkv`` query
            heads each.
        head_dim: Width ``D`` of a head.
        ffn_dim: Hidden width of the SwiGLU feed-forward (``intermediate_size``).
        rope_theta: Base of the rotary frequencies.
        rms_eps: The epsilon inside RMSNorm's square root.
        context_length: The longest sequence the model was trained for.
        bos_token_id: Id of the beginning-of-sequence token.
        eos_token_id: Id of the end-of-sequence token (``<|im_end|>`` for SmolLM2).
        architecture: The family (GGUF's ``general.architecture``): ``"llama"``,
            ``"qwen2"`` or ``"qwen3"``.
        attention_bias: Biases on the query, key and value projections (Qwen2's; the
            output projection has none).
        qk_norm: An RMSNorm over each query and key head before the rotation (Qwen3's
            ``q_norm``/``k_norm``: one weight of width ``head_dim`` each).
        tie_word_embeddings: Score the vocabulary with the embedding matrix; ``False``:
            with a separate ``lm_head``.
        rope_scaling: Rotary frequencies stretched past the trained length (one of
            [`rope_frequencies`][attnlab.rope_frequencies]' scalings); ``None``: the
            trained ones.
        sliding_window: Every layer's window: each query sees only its last
            ``sliding_window`` positions (Mistral's ``sliding_window``; see
            [`sliding_window_mask`][attnlab.sliding_window_mask]); ``None``: all of them.
    """

    vocab_size: int = 49152
    d_model: int = 576
    num_layers: int = 30
    num_heads: int = 9
    num_kv_heads: int = 3
    head_dim: int = 64
    ffn_dim: int = 1536
    rope_theta: float = 100000.0
    rms_eps: float = 1e-5
    context_length: int = 8192
    bos_token_id: int = 1
    eos_token_id: int = 2
    architecture: str = "llama"
    attention_bias: bool = False
    qk_norm: bool = False
    tie_word_embeddings: bool = True
    rope_scaling: RopeScaling | None = None
    sliding_window: int | None = None


class RMSNorm(nn.Module):
    """Root-mean-square normalisation: ``weight * x / sqrt(mean(x**2) + eps)``.

    LayerNorm without the mean subtraction and the bias; computed in float32.
    """

    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: Tensor) -> Tensor:
        """Scale each vector to unit root mean square, then by ``weight``."""
        x = check_vectors("x", x, self.weight.shape[0], self.weight)
        x32 = x.float()
        mean_square = x32.pow(2).mean(-1, keepdim=True)  # (..., 1)
        return self.weight * (x32 * torch.rsqrt(mean_square + self.eps)).to(x.dtype)


class SwiGLU(nn.Module):
    """Llama's feed-forward: ``down(silu(gate(x)) * up(x))``, hidden width ``ffn_dim``."""

    def __init__(self, d_model: int, ffn_dim: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(d_model, ffn_dim, bias=False)
        self.up_proj = nn.Linear(d_model, ffn_dim, bias=False)
        self.down_proj = nn.Linear(ffn_dim, d_model, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        """The gated hidden layer, projected back to ``d_model``."""
        x = check_vectors("x", x, self.gate_proj.in_features, self.gate_proj.weight)
        hidden = F.silu(self.gate_proj(x)) * self.up_proj(x)  # (..., ffn_dim)
        output: Tensor = self.down_proj(hidden)  # (..., d_model)
        return output


class BlockOutput(NamedTuple):
    """A block's output and its attention weights (``None`` unless asked for).

    Attributes:
        hidden: ``(B, T, d_model)``.
        attn_weights: ``(B, H, T, S)`` or ``None``.
    """

    hidden: Tensor
    attn_weights: Tensor | None


class DecoderBlock(nn.Module):
    """One Llama layer: pre-norm attention and pre-norm SwiGLU, each added back.

    The attention is [`GroupedQueryAttention`][attnlab.GroupedQueryAttention] configured
    from ``config``: Qwen2's q/k/v biases (``attention_bias``, none on ``o_proj``),
    Qwen3's per-head ``q_norm``/``k_norm`` (``qk_norm``).

    Args:
        config: The model's sizes.
        rotary: The model's one rotary part, shared by every layer (default: the
            block's own).

    Shape:
        x: ``(B, T, d_model)``; output: the same.
    """

    def __init__(self, config: LlamaConfig, rotary: RotaryEmbedding | None = None) -> None:
        super().__init__()
        c = config
        self.attn_norm = RMSNorm(c.d_model, c.rms_eps)
        self.attn = GroupedQueryAttention(
            c.d_model,
            c.num_heads,
            c.num_kv_heads,
            c.head_dim,
            c.rope_theta,
            c.attention_bias,
            window=c.sliding_window,
            positions=rotary,
            out_bias=False,
            q_norm=RMSNorm(c.head_dim, c.rms_eps) if c.qk_norm else None,
            k_norm=RMSNorm(c.head_dim, c.rms_eps) if c.qk_norm else None,
        )
        self.ffn_norm = RMSNorm(c.d_model, c.rms_eps)
        self.ffn = SwiGLU(c.d_model, c.ffn_dim)

    def forward(
        self,
        x: Tensor,
        cache: Cache | None = None,
        ablate_heads: Iterable[int] = (),
        need_weights: bool = False,
        *,
        attn_mask: Tensor | None = None,
        position_embeddings: PositionEmbeddings | None = None,
    ) -> BlockOutput:
        """The block's output and (with ``need_weights``) its attention weights.

        ``attn_mask`` is combined with the causal rule (e.g. to hide padding keys);
        ``position_embeddings`` is the model's rotary ``(cos, sin)`` for these positions.
        """
        attn_out, attn_weights = self.attn(
            self.attn_norm(x),
            cache=cache,
            attn_mask=attn_mask,
            position_embeddings=position_embeddings,
            ablate_heads=ablate_heads,
            need_weights=need_weights,
        )
        x = x + attn_out  # residual: (B, T, d_model)
        x = x + self.ffn(self.ffn_norm(x))  # residual: (B, T, d_model)
        return BlockOutput(x, attn_weights)


class LlamaOutput(NamedTuple):
    """The logits with every layer's attention weights (``return_attention=True``).

    A tuple too: ``logits, attention = model(ids, return_attention=True)`` unpacks it.

    Attributes:
        logits: ``(B, T, V)``, the next-token scores after every position.
        attention: ``num_layers`` tensors ``(B, H, T, S)``, one per layer.
    """

    logits: Tensor
    attention: list[Tensor]


class LlamaModel(nn.Module):
    """A Llama-architecture causal language model (tied embeddings unless configured not).

    ``model(input_ids)`` returns the logits of the next token after every position.
    ``model(input_ids, return_attention=True)`` also returns every layer's attention
    weights; ``model(input_ids, ablate={layer: [head, ...]})`` runs with those query
    heads switched off (layers and heads counted from zero).
    ``model.generate(input_ids, max_new_tokens=N)`` continues the text through one
    [`KVCache`][attnlab.KVCache] per layer.

    [`load_smollm2`][attnlab.llama.load_smollm2] builds one with trained weights.
    """

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.rotary = (  # one for all layers
            RotaryEmbedding(config.head_dim, config.rope_theta)
            if config.rope_scaling is None
            else ScaledRotaryEmbedding(config.head_dim, config.rope_theta, config.rope_scaling)
        )
        self.layers = nn.ModuleList(
            DecoderBlock(config, self.rotary) for _ in range(config.num_layers)
        )
        self.norm = RMSNorm(config.d_model, config.rms_eps)
        self.lm_head = (
            None
            if config.tie_word_embeddings
            else nn.Linear(config.d_model, config.vocab_size, bias=False)
        )

    def new_cache(self) -> list[KVCache]:
        """An empty [`KVCache`][attnlab.KVCache] for each layer, for ``forward(..., cache=)``."""
        return [KVCache() for _ in self.layers]

    def forward(
        self,
        input_ids: Tensor,
        *,
        cache: list[KVCache] | None = None,
        attention_mask: Tensor | None = None,
        return_attention: bool = False,
        ablate: Mapping[int, Iterable[int]] | None = None,
    ) -> Tensor | LlamaOutput:
        """The next-token logits after every position of ``input_ids``.

        Args:
            input_ids: Token ids.
            cache: Optional list of one cache per layer (``new_cache()``); the ids
                are then the positions after the cached ones, and their keys and
                values are appended.
            attention_mask: Optional padding mask, Hugging Face's: ``1`` (or ``True``)
                for a real token, ``0`` for padding, one entry per cached and new
                position. No query attends to a padding key; a padding query attends
                only to itself (its outputs are meaningless but finite). Positions
                count from each row's start, pads included, as in transformers'
                forward: with rotary positions only distances matter, so a row's real
                tokens get what they would unpadded (to rounding), left or right padded.
            return_attention: Also return each layer's attention weights, as a
                [`LlamaOutput`][attnlab.llama.LlamaOutput] ``(logits, attention)``.
            ablate: ``{layer: [head, ...]}``: zero those query heads' context vectors
                (before the output projection) in those layers.

        Returns:
            ``logits`` ``(B, T, V)``; ``attention``: one ``(B, H, T, S)`` per layer.
        """
        ids = self.check_ids("input_ids", input_ids)
        check_bool("return_attention", return_attention)
        past = self._check_cache(cache, batch=ids.shape[0])
        if past + ids.shape[1] > self.config.context_length:
            raise ValueError(
                f"input_ids must fit the context of {self.config.context_length} tokens; "
                f"got {ids.shape[1]} new tokens after {past} cached"
            )
        heads_off = self._check_ablate(ablate)
        keep = check_attention_mask(attention_mask, ids, ids_rank=input_ids.dim(), past=past)
        if keep is not None and not torch.compiler.is_compiling() and bool(keep.all()):
            keep = None  # no padding: the causal rule alone, on its fast path
        mask = None if keep is None else padding_mask(keep, ids.shape[1])  # (B, 1, T, S)
        x = self.embed(ids)  # (B, T) -> (B, T, d_model)
        positions = torch.arange(past, past + ids.shape[1], device=ids.device)  # (T,)
        rotary = self.rotary.cos_sin(positions)  # (T, D) each: once, for every layer
        attention: list[Tensor] = []
        for i, layer in enumerate(self.layers):
            layer_cache = None if cache is None else cache[i]
            x, weights = layer(
                x,
                layer_cache,
                heads_off.get(i, ()),
                return_attention,
                attn_mask=mask,
                position_embeddings=rotary,
            )
            if weights is not None:
                attention.append(weights)  # (B, H, T, S)
        unembed = self.embed.weight if self.lm_head is None else self.lm_head.weight  # (V, d)
        logits = self.norm(x) @ unembed.transpose(-2, -1)  # (B, T, V)
        return LlamaOutput(logits, attention) if return_attention else logits

    @torch.no_grad()
    def generate(
        self,
        input_ids: Tensor,
        max_new_tokens: int,
        *,
        attention_mask: Tensor | None = None,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        stop_at_eos: bool = False,
    ) -> Tensor:
        """Continue ``input_ids`` by ``max_new_tokens`` tokens, one at a time.

        The prompt is read in one forward pass that fills one
        [`KVCache`][attnlab.KVCache] per layer; each new token then costs one pass
        over that token alone. ``temperature=0`` picks the most likely token (greedy);
        a positive temperature samples from ``softmax(logits / temperature)``, after the
        optional ``top_k`` and ``top_p`` filters (Hugging Face's semantics, in its order;
        see [`warp_logits`][attnlab.llama.generate.warp_logits]), with a
        ``torch.Generator`` seeded by ``seed`` (the same seed, the same text).

        Args:
            input_ids: The prompt's ids.
            max_new_tokens: Tokens to add (at most; see ``stop_at_eos``).
            attention_mask: Optional padding mask of the prompts (``1`` = real token,
                ``0`` = padding), left or right padded. Each row is continued from its
                last real token as if it had no padding (its real tokens are moved to the
                row's end first); the new tokens follow the row as given.
            temperature: 0 for greedy decoding, else the sampling temperature.
            top_k: Sample among the ``top_k`` most likely tokens only (``None``: all).
            top_p: Sample among the most likely tokens whose probabilities first add up
                to more than ``top_p`` (``None``: all).
            seed: Seed of the sampling generator (``None``: a fresh random one).
            stop_at_eos: Stop once every row has produced ``eos_token_id``; a row
                that ended earlier is padded with it.

        Returns:
            The prompt (as given) followed by the new tokens: ``(T + N,)`` or
            ``(B, T + N)``, ``N <= max_new_tokens``.
        """
        ids = self.check_ids("input_ids", input_ids)
        max_new_tokens = check_length("max_new_tokens", max_new_tokens)
        total = ids.shape[1] + max_new_tokens
        if total > self.config.context_length:
            raise ValueError(
                f"input_ids plus max_new_tokens must fit the context of "
                f"{self.config.context_length} tokens; got {ids.shape[1]} + {max_new_tokens}"
            )
        keep = check_attention_mask(attention_mask, ids, ids_rank=input_ids.dim(), past=0)
        sampling = Sampling(temperature, top_k, top_p, seed)
        check_bool("stop_at_eos", stop_at_eos)
        tokens = generate_tokens(
            self,
            ids,
            keep,
            max_new_tokens=max_new_tokens,
            sampling=sampling,
            stop_at_eos=stop_at_eos,
            eos_token_id=self.config.eos_token_id,
            cache=self.new_cache(),
        )  # (B, T + N)
        return tokens[0] if input_ids.dim() == 1 else tokens

    def check_ids(self, name: str, ids: object) -> Tensor:
        """Check token ids (type, dtype, rank, range) and return them as int64 ``(B, T)``.

        Any integer dtype is read (uint16/32/64 too, which PyTorch cannot compare).

        Raises:
            TypeError: Not a tensor, or not an integer dtype.
            ValueError: Not of shape ``(T,)`` or ``(B, T)`` with ``T >= 1``, or an id
                outside ``0 .. vocab_size - 1``. The range needs the ids' values, which
                ``torch.compile`` cannot see while it traces: a compiled model leaves
                that check to the embedding, which raises on an id outside the table.
        """
        tensor = check_integer_tensor(name, ids)
        if tensor.device != self.embed.weight.device:
            raise ValueError(
                f"{name} is on device {tensor.device} but the model is on "
                f"{self.embed.weight.device}; move one to the other"
            )
        if tensor.dim() not in (1, 2) or tensor.shape[-1] == 0 or tensor.numel() == 0:
            raise ValueError(
                f"{name} must have shape (T,) or (B, T) with T >= 1; "
                f"got shape {format_shape(tensor.shape)}"
            )
        if torch.compiler.is_compiling():  # the values are not known while tracing
            ids64 = tensor.long()
        else:
            ids64 = check_token_range(name, tensor, self.config.vocab_size)
        return ids64.unsqueeze(0) if ids64.dim() == 1 else ids64

    def _check_cache(self, cache: object, batch: int) -> int:
        """Validate ``cache`` (``None`` or one KVCache per layer); its length.

        The caches must be different objects (``[KVCache()] * n`` would give every
        layer the same one), hold the same number of positions and ``batch`` rows.
        """
        if cache is None:
            return 0
        n = len(self.layers)
        if (
            not isinstance(cache, list)
            or len(cache) != n
            or not all(isinstance(c, Cache) for c in cache)
        ):
            raise TypeError(
                f"cache must be a list of {n} caches (model.new_cache()); got "
                f"{type(cache).__name__}"
                + (f" of length {len(cache)}" if isinstance(cache, list) else "")
            )
        check_distinct("cache", cache)
        lengths = sorted({len(c) for c in cache})
        if len(lengths) > 1:
            raise ValueError(
                f"cache must hold the same number of positions in every layer; "
                f"got lengths from {lengths[0]} to {lengths[-1]}"
            )
        rows = cache[0].batch_size
        if rows is not None and rows != batch:
            raise ValueError(
                f"cache must hold keys of shape (B, Hkv, S, D) with B = {batch} like "
                f"input_ids; got B = {rows}"
            )
        return lengths[0]

    def _check_ablate(self, ablate: object) -> dict[int, tuple[int, ...]]:
        """Validate ``ablate`` (``{layer: [head, ...]}``); a dict of tuples."""
        if ablate is None:
            return {}
        if not isinstance(ablate, Mapping):
            raise TypeError(
                f"ablate must be a dict {{layer: [head, ...]}}; got {type(ablate).__name__}"
            )
        n, H = len(self.layers), self.config.num_heads
        checked: dict[int, tuple[int, ...]] = {}
        for layer, heads in ablate.items():
            if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < n:
                raise ValueError(f"ablate's layers must be ints in 0 .. {n - 1}; got {layer!r}")
            if isinstance(heads, int):
                heads = (heads,)
            if isinstance(heads, str | bytes) or not isinstance(heads, Iterable):
                raise TypeError(
                    f"ablate[{layer}] must be a head or a list of heads (ints in 0 .. {H - 1}); "
                    f"got {type(heads).__name__} {heads!r}"
                )
            heads_t = tuple(heads)
            for head in heads_t:
                if isinstance(head, bool) or not isinstance(head, int) or not 0 <= head < H:
                    raise ValueError(
                        f"ablate's heads must be ints in 0 .. {H - 1}; "
                        f"got {head!r} in layer {layer}"
                    )
            checked[layer] = heads_t
        return checked
