"""A decoder-only language model built from the package's own attention: a list of layers.

The pieces, in the order a token meets them:

* ``embed``: token ids to vectors of width ``d_model`` (Gemma 3: times ``sqrt(d_model)``);
* ``num_layers`` [`DecoderBlock`][attnlab.llama.DecoderBlock]s, each made of the parts
  its family gives it (``attnlab.llama.families``): for Llama, RMSNorm -> grouped-query
  attention -> residual -> RMSNorm -> SwiGLU -> residual;
* a final [`RMSNorm`][attnlab.llama.RMSNorm], then the logits: the dot product with
  every token's embedding (the embeddings are *tied*: one matrix reads tokens in and
  scores them out), or with a separate ``lm_head``.

The softmax layers are [`GroupedQueryAttention`][attnlab.GroupedQueryAttention], sharing
the model's rotary parts; Qwen3.5's linear layers are
[`GatedDeltaNet`][attnlab.GatedDeltaNet]. Each layer has its own cache; ``need_weights``
and ``ablate_heads`` are the two ways to look inside. Shapes follow the package's
legend, with ``V`` the vocabulary; ``forward`` always returns a batch axis.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import NamedTuple, cast

import torch
from torch import Tensor, nn

from .._validation import (
    check_bool,
    check_distinct,
    check_integer_tensor,
    check_length,
    check_token_range,
    format_shape,
)
from ..gated_deltanet import GatedDeltaNetCache
from ..kv_cache import Cache
from ..rope_scaling import ScaledRotaryEmbedding
from ..rotary import RotaryEmbedding
from .blocks import BlockOutput, DecoderBlock, RMSNorm, SwiGLU
from .config import LlamaConfig
from .families import family
from .families.description import describe
from .families.llama import Rotaries
from .generate import Sampling, check_attention_mask, generate_tokens, padding_mask

LayerCache = Cache | GatedDeltaNetCache
"""A layer's cache: keys and values (softmax layers) or Gated DeltaNet's state."""

__all__ = [
    "BlockOutput",
    "DecoderBlock",
    "LlamaConfig",
    "LlamaModel",
    "LlamaOutput",
    "RMSNorm",
    "SwiGLU",
]


class LlamaOutput(NamedTuple):
    """The logits with every layer's attention weights (``return_attention=True``).

    A tuple too: ``logits, attention = model(ids, return_attention=True)`` unpacks it.

    Attributes:
        logits: ``(B, T, V)``, the next-token scores after every position.
        attention: ``num_layers`` tensors, one per layer: a softmax layer's
            probabilities ``(B, H, T, S)`` (a window layer's zero outside its band), a
            Gated DeltaNet layer's implicit attention ``(B, Hv, T, T)``
            ([`gated_delta_attention_matrix`][attnlab.gated_delta_attention_matrix]:
            signed, its rows not probabilities); ``config.layer_types`` says which.
    """

    logits: Tensor
    attention: list[Tensor]


class LlamaModel(nn.Module):
    """A decoder-only causal language model: a list of layers, each made of its parts.

    ``config.architecture`` names the family that gives each layer its
    [`LayerParts`][attnlab.llama.LayerParts] (Llama's, Qwen2's, Qwen3's, Gemma 3's,
    Qwen3.5's); the embeddings are tied unless configured not.

    ``model(input_ids)`` returns the logits of the next token after every position.
    ``model(input_ids, return_attention=True)`` also returns every layer's attention
    weights; ``model(input_ids, ablate={layer: [head, ...]})`` runs with those query
    heads switched off (layers and heads counted from zero).
    ``model.generate(input_ids, max_new_tokens=N)`` continues the text through one cache
    per layer (``new_cache()``).

    [`load_smollm2`][attnlab.llama.load_smollm2] builds one with trained weights.
    """

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.config = config
        chosen = family(config.architecture)
        for index, kind in enumerate(config.types()):
            if kind not in chosen.LAYER_KINDS:
                raise ValueError(
                    f"config.layer_types[{index}] must be one of the {config.architecture} "
                    f"family's kinds {chosen.LAYER_KINDS}; got {kind!r}"
                )
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        # Gemma scales the embedding rows by sqrt(d_model) before layer 0 (as its description says)
        scaled = describe(config.architecture)["embedding_scale"] is not None
        self.embed_scale = math.sqrt(config.d_model) if scaled else None
        R = config.head_dim if config.rotary_dim is None else config.rotary_dim
        self.rotary = (  # rope_theta's, shared by the layers that use it
            RotaryEmbedding(R, config.rope_theta)
            if config.rope_scaling is None
            else ScaledRotaryEmbedding(R, config.rope_theta, config.rope_scaling)
        )
        local = config.rope_local_theta
        self.local_rotary = None if local is None else RotaryEmbedding(R, local)  # Gemma 3
        rotaries = Rotaries(self.rotary, self.local_rotary)
        self.layers = nn.ModuleList(
            DecoderBlock(chosen.layer_parts(config, i, rotaries)) for i in range(config.num_layers)
        )
        self.norm = RMSNorm(config.d_model, config.rms_eps)
        self.lm_head = (
            None
            if config.tie_word_embeddings
            else nn.Linear(config.d_model, config.vocab_size, bias=False)
        )

    def new_cache(self) -> list[LayerCache]:
        """An empty cache for each layer, for ``forward(..., cache=)``.

        A [`KVCache`][attnlab.KVCache] for a softmax layer (a window layer's mask reads
        its last columns), a [`GatedDeltaNetCache`][attnlab.GatedDeltaNetCache] for a
        linear one.
        """
        return [cast(DecoderBlock, layer).new_cache() for layer in self.layers]

    def forward(
        self,
        input_ids: Tensor,
        *,
        cache: list[LayerCache] | None = None,
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
                Not with linear_attention layers (refused).
            return_attention: Also return each layer's attention weights, as a
                [`LlamaOutput`][attnlab.llama.LlamaOutput] ``(logits, attention)``.
            ablate: ``{layer: [head, ...]}``: zero those query heads' context vectors
                (before the output projection) in those layers.

        Returns:
            ``logits`` ``(B, T, V)``; ``attention``: one tensor per layer (see
            [`LlamaOutput`][attnlab.llama.LlamaOutput]).
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
        if keep is not None and "linear_attention" in self.config.types():
            raise ValueError(
                "attention_mask with padding is not supported by a model with "
                "linear_attention (Gated DeltaNet) layers; run one unpadded row at a time"
            )
        mask = None if keep is None else padding_mask(keep, ids.shape[1])  # (B, 1, T, S)
        x = self.embed(ids)  # (B, T) -> (B, T, d_model)
        if self.embed_scale is not None:  # Gemma: in the weights' dtype, as transformers
            x = x * torch.tensor(self.embed_scale, dtype=x.dtype)
        positions = torch.arange(past, past + ids.shape[1], device=ids.device)  # (T,)
        tables: dict[int, tuple[Tensor, Tensor]] = {}  # one (cos, sin) per rotary part
        attention: list[Tensor] = []
        for i, block in enumerate(self.layers):
            layer = cast(DecoderBlock, block)
            rotary = layer.rotary
            if rotary is not None and id(rotary) not in tables:
                tables[id(rotary)] = rotary.cos_sin(positions)  # (T, R) each
            x, weights = layer(
                x,
                None if cache is None else cache[i],
                heads_off.get(i, ()),
                return_attention,
                attn_mask=mask,
                position_embeddings=None if rotary is None else tables[id(rotary)],
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
        """Validate ``cache`` (``None`` or one cache per layer, of its kind); its length.

        The caches must be different objects (``[KVCache()] * n`` would give every
        layer the same one), hold the same number of positions and ``batch`` rows.
        """
        if cache is None:
            return 0
        n = len(self.layers)
        if (
            not isinstance(cache, list)
            or len(cache) != n
            or not all(isinstance(c, Cache | GatedDeltaNetCache) for c in cache)
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
