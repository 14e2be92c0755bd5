"""The worked inputs of the source tutorials, so a code block starts from one import.

Every function returns fresh tensors, and seeded ones leave the global random state
untouched (a private generator, or ``torch.random.fork_rng``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor, nn

from ._validation import (
    check_int,
    check_number,
    check_positive_int,
    check_str,
    check_tensor,
    format_shape,
)
from .gated_deltanet import GatedDeltaNet
from .multihead import MultiHeadAttention

__all__ = [
    "EmbeddedSentence",
    "IllustratedExample",
    "MyCausalMultiHeadAttention",
    "QKVWeights",
    "RecallLayer",
    "Sentence",
    "TinyDecoder",
    "build_vocab",
    "dream_big",
    "illustrated",
    "letter_digit_recall",
    "life_is_short",
    "random_query_key_pairs",
    "second_sequence",
    "seeded_weights",
    "tiny_decoder",
    "tokenize",
    "your_journey",
]


class Sentence(NamedTuple):
    """A sentence's ``words`` and one hand-made embedding per word, ``inputs (T, d_in)``."""

    words: tuple[str, ...]
    inputs: Tensor


class EmbeddedSentence(NamedTuple):
    """A sentence turned into vectors by a seeded ``nn.Embedding``.

    ``vocab`` numbers the tokens in sorted order; ``token_ids`` is ``(T,)`` and ``inputs``
    the detached embeddings ``(T, d)``.
    """

    text: str
    words: tuple[str, ...]
    vocab: dict[str, int]
    token_ids: Tensor
    embedding: nn.Embedding
    inputs: Tensor


class IllustratedExample(NamedTuple):
    """The illustrated walkthrough's three 4-d inputs ``(3, 4)`` and integer weights ``(4, 3)``.

    The weights multiply from the right: ``inputs @ W_key``.
    """

    words: tuple[str, ...]
    inputs: Tensor
    W_key: Tensor
    W_query: Tensor
    W_value: Tensor


class QKVWeights(NamedTuple):
    """Three projection matrices that multiply from the right: ``inputs @ W_query``."""

    W_query: Tensor
    W_key: Tensor
    W_value: Tensor


def your_journey() -> Sentence:
    """The sentence "Your journey starts with one step": six hand-made 3-d embeddings."""
    inputs = torch.tensor(
        [
            [0.43, 0.15, 0.89],  # Your     (x^(1))
            [0.55, 0.87, 0.66],  # journey  (x^(2))
            [0.57, 0.85, 0.64],  # starts   (x^(3))
            [0.22, 0.58, 0.33],  # with     (x^(4))
            [0.77, 0.25, 0.10],  # one      (x^(5))
            [0.05, 0.80, 0.55],  # step     (x^(6))
        ]
    )
    return Sentence(("Your", "journey", "starts", "with", "one", "step"), inputs)


def dream_big() -> Sentence:
    """The sentence "Dream big and work for it": six hand-made 3-d embeddings."""
    inputs = torch.tensor(
        [
            [0.72, 0.45, 0.31],  # Dream  (x^(1))
            [0.75, 0.20, 0.55],  # big    (x^(2))
            [0.30, 0.80, 0.40],  # and    (x^(3))
            [0.85, 0.35, 0.60],  # work   (x^(4))
            [0.55, 0.15, 0.75],  # for    (x^(5))
            [0.25, 0.20, 0.85],  # it     (x^(6))
        ]
    )
    return Sentence(("Dream", "big", "and", "work", "for", "it"), inputs)


def build_vocab(text: str) -> dict[str, int]:
    """Map each distinct token of ``text`` to an id, in sorted token order.

    Tokens are the words with commas removed; sorting is by code point, so capitalised
    words come first.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str; got {type(text).__name__}")
    return {token: i for i, token in enumerate(sorted(set(text.replace(",", "").split())))}


def tokenize(text: str, vocab: dict[str, int]) -> Tensor:
    """``text`` as token ids ``(T,)``, by a [`build_vocab`][attnlab.examples.build_vocab] vocab.

    Raises:
        ValueError: A token of ``text`` is not in ``vocab``.
    """
    tokens = text.replace(",", "").split()
    unknown = [token for token in tokens if token not in vocab]
    if unknown:
        raise ValueError(f"text has tokens missing from vocab: {unknown}")
    return torch.tensor([vocab[token] for token in tokens])


def life_is_short(embed_dim: int = 16, seed: int = 123) -> EmbeddedSentence:
    """The sentence "Life is short, eat dessert first", embedded by a seeded ``nn.Embedding``.

    The same numbers as ``torch.manual_seed(seed); nn.Embedding(6, embed_dim)``.
    """
    check_positive_int("embed_dim", embed_dim)
    check_int("seed", seed)
    text = "Life is short, eat dessert first"
    vocab = build_vocab(text)
    token_ids = tokenize(text, vocab)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        embedding = nn.Embedding(len(vocab), embed_dim)
    inputs = embedding(token_ids).detach()
    words = tuple(text.replace(",", "").split())
    return EmbeddedSentence(text, words, vocab, token_ids, embedding, inputs)


def illustrated() -> IllustratedExample:
    """The illustrated walkthrough's three inputs and integer weight matrices, float32."""
    inputs = torch.tensor([[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]], dtype=torch.float32)
    W_key = torch.tensor([[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]], dtype=torch.float32)
    W_query = torch.tensor([[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]], dtype=torch.float32)
    W_value = torch.tensor([[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]], dtype=torch.float32)
    return IllustratedExample(("Input 1", "Input 2", "Input 3"), inputs, W_key, W_query, W_value)


def second_sequence(num_tokens: int = 8, embed_dim: int = 16, seed: int = 456) -> Tensor:
    """A second input sequence for cross-attention: ``(num_tokens, embed_dim)``, uniform.

    The tutorial draws it from the global random state, so its numbers depend on which
    cells ran before; here a private generator has its own seed (456, not the weights'
    123, so it does not repeat the rows of ``W_query``).
    """
    check_positive_int("num_tokens", num_tokens)
    check_positive_int("embed_dim", embed_dim)
    check_int("seed", seed)
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(num_tokens, embed_dim, generator=generator)


def seeded_weights(
    d_in: int,
    d_out: int,
    *,
    d_v: int | None = None,
    seed: int = 123,
    drawn_transposed: bool = False,
) -> QKVWeights:
    """The tutorials' seeded query, key and value matrices, uniform in ``[0, 1)``.

    The same numbers as ``torch.manual_seed(seed)`` and three ``torch.rand(d_in, width)``
    draws (query, key, value), as [`SelfAttentionV1`][attnlab.SelfAttentionV1] draws its
    parameters. ``d_v`` defaults to ``d_out``. With ``drawn_transposed=True`` each is drawn
    as ``torch.rand(width, d_in)`` (the from-scratch article's ``W_query @ x`` layout, and
    ``nn.Linear.weight``'s) and returned transposed, so ``inputs @ W_query`` gives the
    article's numbers in the site's row convention.
    """
    check_positive_int("d_in", d_in)
    check_positive_int("d_out", d_out)
    d_v = d_out if d_v is None else check_positive_int("d_v", d_v)
    check_int("seed", seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if drawn_transposed:
            drawn = [torch.rand(width, d_in) for width in (d_out, d_out, d_v)]  # (width, d_in)
            return QKVWeights(*(w.transpose(-2, -1) for w in drawn))  # (d_in, width) each
        return QKVWeights(*(torch.rand(d_in, width) for width in (d_out, d_out, d_v)))


def random_query_key_pairs(
    d_k: int, num_pairs: int = 10_000, seed: int = 123
) -> tuple[Tensor, Tensor]:
    """``num_pairs`` standard-normal query and key vectors of width ``d_k`` (float64).

    The draws of the chapter on scaling: each call has its own generator seeded with
    ``seed``, queries drawn first, so one width gives the same numbers whatever other
    widths ran before it. Row ``i`` of each makes pair ``i``.
    """
    check_positive_int("d_k", d_k)
    check_positive_int("num_pairs", num_pairs)
    check_int("seed", seed)
    generator = torch.Generator().manual_seed(seed)
    queries = torch.randn(num_pairs, d_k, generator=generator, dtype=torch.float64)
    keys = torch.randn(num_pairs, d_k, generator=generator, dtype=torch.float64)
    return queries, keys


class _DecoderBlock(nn.Module):
    """One pre-norm block: causal multi-head attention, then a feed-forward network."""

    def __init__(self, d: int, num_heads: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = MultiHeadAttention(d, d, num_heads, causal=True)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.norm1(x)).output  # (B, T, d): tokens exchange information
        out: Tensor = x + self.ff(self.norm2(x))  # (B, T, d): each token on its own
        return out


class TinyDecoder(nn.Module):
    """The whole decoder of the big-picture chapter, untrained: ``(B, T)`` ids to logits.

    Token plus learned position embedding, ``num_blocks`` pre-norm blocks (causal
    multi-head attention and a feed-forward network, each with a residual), then
    LayerNorm and a linear map to the vocabulary. The submodules are created in the
    chapter's order, so under the same seed they hold the chapter's numbers.
    """

    def __init__(
        self, vocab_size: int, d: int, context_length: int, num_blocks: int, num_heads: int
    ) -> None:
        super().__init__()
        for name, value in (
            ("vocab_size", vocab_size),
            ("d", d),
            ("context_length", context_length),
            ("num_blocks", num_blocks),
            ("num_heads", num_heads),
        ):
            check_positive_int(name, value)
        self.embed, self.position = nn.Embedding(vocab_size, d), nn.Embedding(context_length, d)
        self.blocks = nn.Sequential(*(_DecoderBlock(d, num_heads) for _ in range(num_blocks)))
        self.to_logits = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, vocab_size))

    def forward(self, token_ids: Tensor) -> Tensor:
        """Logits for every position: ``(B, T) -> (B, T, vocab_size)``."""
        check_tensor("token_ids", token_ids)
        if token_ids.dtype.is_floating_point or token_ids.dtype.is_complex:
            raise TypeError(f"token_ids must be an integer tensor; got {token_ids.dtype}")
        context_length = self.position.num_embeddings
        if token_ids.dim() != 2 or token_ids.shape[1] > context_length:
            raise ValueError(
                f"token_ids must have shape (B, T) with T <= {context_length}; "
                f"got shape {format_shape(token_ids.shape)}"
            )
        T = token_ids.shape[1]
        x = self.embed(token_ids) + self.position(torch.arange(T, device=token_ids.device))
        logits: Tensor = self.to_logits(self.blocks(x))  # (B, T, d) -> (B, T, vocab_size)
        return logits


def tiny_decoder(
    vocab_size: int = 50,
    d: int = 16,
    context_length: int = 6,
    num_blocks: int = 2,
    num_heads: int = 2,
    seed: int = 0,
) -> TinyDecoder:
    """The big-picture chapter's two-block decoder, built under ``torch.manual_seed(seed)``."""
    check_int("seed", seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return TinyDecoder(vocab_size, d, context_length, num_blocks, num_heads)


# The class the reader writes in "Causal multi-head attention, from scratch", kept here
# (tests/unit/test_check.py holds the two copies equal) so later blocks import it.
class MyCausalMultiHeadAttention(nn.Module):
    """Causal multi-head self-attention in plain PyTorch: (B, T, d_in) -> (B, T, d_out)."""

    def __init__(
        self, d_in: int, d_out: int, num_heads: int, dropout: float = 0.0, qkv_bias: bool = False
    ) -> None:
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError(f"d_out must be divisible by num_heads; got {d_out}, {num_heads}")
        self.d_out, self.num_heads, self.head_dim = d_out, num_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.out_proj = nn.Linear(d_out, d_out)  # mixes the heads

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """Cut d_out into H heads of width D: (B, T, d_out) -> (B, H, T, D)."""
        B, T, _ = x.shape
        x = x.view(B, T, self.num_heads, self.head_dim)  # (B, T, H, D)
        return x.transpose(1, 2)  # (B, T, H, D) -> (B, H, T, D): heads before tokens

    def causal_weights(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """Scores, causal mask, scale and softmax: (B, H, T, D) twice -> (B, H, T, T)."""
        T = queries.shape[-2]
        attn_scores = queries @ keys.transpose(-2, -1)  # (B, H, T, D) @ (B, H, D, T)
        future = torch.ones(T, T, dtype=torch.bool, device=queries.device).triu(diagonal=1)
        attn_scores = attn_scores.masked_fill(future, float("-inf"))  # (B, H, T, T)
        return torch.softmax(attn_scores / self.head_dim**0.5, dim=-1)  # each row sums to 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Attend from every token to itself and the tokens before it."""
        B, T, _ = x.shape  # batch, tokens, d_in
        queries = self.split_heads(self.W_query(x))  # (B, T, d_in) -> (B, H, T, D)
        keys = self.split_heads(self.W_key(x))  # (B, H, T, D)
        values = self.split_heads(self.W_value(x))  # (B, H, T, D)
        attn_weights = self.dropout(self.causal_weights(queries, keys))  # (B, H, T, T)
        context_vecs = attn_weights @ values  # (B, H, T, T) @ (B, H, T, D) -> (B, H, T, D)
        context_vecs = context_vecs.transpose(1, 2)  # (B, H, T, D) -> (B, T, H, D)
        context_vecs = context_vecs.reshape(B, T, self.d_out)  # (B, T, H, D) -> (B, T, d_out)
        output: torch.Tensor = self.out_proj(context_vecs)  # (B, T, d_out)
        return output


class RecallLayer(NamedTuple):
    """A text of letter-digit pairs, one-hot, and a Gated DeltaNet layer set by hand for it.

    ``x (1, T, d_model)``: each token one-hot (the letters in sorted order, then the
    digits), with a last channel of ones; ``letters`` and ``digits`` name the channels.
    """

    text: str
    letters: str
    digits: str
    x: Tensor
    layer: GatedDeltaNet


def letter_digit_recall(
    text: str = "A1B2C3D4A5C6ABCD",
    *,
    overlap: float = 0.2,
    decay: float = 0.95,
    beta: float = 0.99,
) -> RecallLayer:
    """A one-head Gated DeltaNet whose weights make it store and recall letter -> digit.

    The convolution's two taps give the key from the previous token, the query and the
    value from the current one: each digit is written under the letter before it, each
    letter reads what its key holds. A letter's query and key are one vector, ``1`` on
    its own channel and ``overlap`` on the other letters'; a digit's value is one-hot.
    Every token writes with strength ``beta``; the state decays by ``decay`` per token.
    ``out_proj`` puts what is read on the digits' channels.
    """
    check_str("text", text)
    if not text or not all(c.isascii() and (c.isupper() or c.isdigit()) for c in text):
        raise ValueError(f"text must be capital letters and digits; got {text!r}")
    check_number("overlap", overlap, at_least=0.0)
    check_number("decay", decay, above=0.0, at_most=1.0)
    check_number("beta", beta, above=0.0, at_most=1.0)
    letters = "".join(sorted({c for c in text if c.isalpha()}))
    digits = "".join(sorted({c for c in text if c.isdigit()}))
    if not letters or not digits:
        raise ValueError(f"text must hold at least one letter and one digit; got {text!r}")
    L, N = len(letters), len(digits)
    d_model = len(letters) + len(digits) + 1  # the last channel is always 1
    channels = {c: i for i, c in enumerate(letters + digits)}
    x = torch.zeros(1, len(text), d_model)
    x[0, torch.arange(len(text)), [channels[c] for c in text]] = 1.0
    x[0, :, -1] = 1.0
    with torch.random.fork_rng(devices=[]):  # every weight is set below; the draws don't matter
        layer = GatedDeltaNet(d_model, 1, 1, L, N, conv_kernel_size=2)
    with torch.no_grad():
        for p in layer.parameters():
            p.zero_()
        letter_vectors = torch.eye(L) + overlap  # (L, L), symmetric
        for rows in (slice(0, L), slice(L, 2 * L)):  # queries, keys
            layer.in_proj_qkv.weight[rows, :L] = letter_vectors
        layer.in_proj_qkv.weight[2 * L :, L:-1] = torch.eye(N)
        layer.conv1d.weight[:L, 0, 1] = 4.0  # queries: this token
        layer.conv1d.weight[L : 2 * L, 0, 0] = 4.0  # keys: the token before
        layer.conv1d.weight[2 * L :, 0, 1] = 4.0  # values: this token
        layer.in_proj_b.weight[0, -1] = math.log(beta / (1 - beta)) if beta < 1 else 20.0
        layer.dt_bias.fill_(math.log(1 / decay - 1) if decay < 1 else -20.0)  # g = log(decay)
        layer.in_proj_z.weight[:, -1] = 4.0  # the output gate open
        layer.norm.weight.fill_(1.0)
        layer.out_proj.weight[L:-1] = torch.eye(N)
    return RecallLayer(text, letters, digits, x, layer)
