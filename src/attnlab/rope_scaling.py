"""Rotary frequencies stretched past the trained length: linear, dynamic NTK, YaRN, Llama 3.

A model trained on sequences of ``L`` tokens has only ever seen rotary angles
``position * inv_freq`` for positions below ``L``. Each scaling changes the
frequencies ``inv_freq`` (and YaRN a factor on ``cos`` and ``sin``) so that a longer
sequence stays in, or near, the angles the model knows:

* **linear** (position interpolation; Chen et al. 2023, kaiokendev): every frequency
  divided by ``factor``, i.e. positions squeezed ``factor`` times;
* **dynamic** NTK-aware: a larger base, grown with the sequence only once it passes
  the trained length (bloc97, emozilla); low frequencies stretch, high ones barely move;
* **YaRN** (Peng et al. 2023): high frequencies kept, low ones divided by ``factor``,
  a linear ramp in between, and ``cos``/``sin`` multiplied by an attention factor
  ``0.1 ln(factor) + 1`` that sharpens the softmax again;
* **Llama 3** (Meta 2024): the same three bands, cut by wavelength against the trained
  length, with a smooth blend in the middle band.

[`rope_frequencies`][attnlab.rope_frequencies] computes them, equal to transformers'
``ROPE_INIT_FUNCTIONS`` (and Llama's default); each kind is a small frozen dataclass,
so that its fields are named, checked once when it is built, and typed.
[`rope_scaling_from_hf`][attnlab.rope_scaling_from_hf] reads a transformers
``rope_scaling`` dict into one. [`ScaledRotaryEmbedding`][attnlab.ScaledRotaryEmbedding]
is the rotary module that uses them (``LlamaConfig(rope_scaling=...)``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from ._validation import check_bool, check_number, check_positive_int
from .rotary import RotaryEmbedding

__all__ = [
    "DynamicNTKScaling",
    "LinearScaling",
    "Llama3Scaling",
    "RopeFrequencies",
    "RopeScaling",
    "ScaledRotaryEmbedding",
    "YarnScaling",
    "rope_frequencies",
    "rope_scaling_from_hf",
]


def _check_factor(value: object) -> float:
    return check_number("factor", value, at_least=1.0)


@dataclass(frozen=True)
class LinearScaling:
    """Position interpolation: every frequency divided by ``factor`` (``rope_type="linear"``).

    Attributes:
        factor: How many times longer than trained the sequences may be (>= 1).
    """

    factor: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "factor", _check_factor(self.factor))


@dataclass(frozen=True)
class DynamicNTKScaling:
    """NTK-aware scaling of the base, grown with the sequence (``rope_type="dynamic"``).

    For a sequence of ``seq_len > original_length`` tokens the base becomes
    ``base * (factor * seq_len / original_length - (factor - 1)) ** (D / (D - 2))``;
    up to ``original_length`` the frequencies are the default ones.

    Attributes:
        factor: How fast the base grows past the trained length (>= 1).
        original_length: The trained length (transformers' ``max_position_embeddings``).
    """

    factor: float
    original_length: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "factor", _check_factor(self.factor))
        check_positive_int("original_length", self.original_length)


@dataclass(frozen=True)
class YarnScaling:
    """YaRN: interpolate low frequencies, keep high ones, ramp between (``rope_type="yarn"``).

    Pairs that turn fewer than ``beta_slow`` times over ``original_length`` positions
    are divided by ``factor``; pairs that turn more than ``beta_fast`` times are kept;
    a linear ramp blends the pairs between. ``cos`` and ``sin`` are multiplied by the
    attention factor: ``attention_factor`` if given, else ``0.1 * ln(factor) + 1``
    (or DeepSeek's ratio of two such terms with ``mscale`` and ``mscale_all_dim``).

    Attributes:
        factor: How many times longer than trained (>= 1).
        original_length: The trained length (``original_max_position_embeddings``).
        beta_fast: Turns above which a pair is kept (default 32).
        beta_slow: Turns below which a pair is interpolated (default 1).
        attention_factor: Explicit factor on ``cos`` and ``sin``; ``None``: computed.
        mscale: DeepSeek's numerator coefficient (with ``mscale_all_dim``).
        mscale_all_dim: DeepSeek's denominator coefficient.
        truncate: Round the ramp's ends outwards to whole pairs (transformers' default).
    """

    factor: float
    original_length: int
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    attention_factor: float | None = None
    mscale: float | None = None
    mscale_all_dim: float | None = None
    truncate: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "factor", _check_factor(self.factor))
        check_positive_int("original_length", self.original_length)
        slow = check_number("beta_slow", self.beta_slow, above=0.0)
        fast = check_number("beta_fast", self.beta_fast, above=slow)
        object.__setattr__(self, "beta_slow", slow)
        object.__setattr__(self, "beta_fast", fast)
        for name in ("attention_factor", "mscale", "mscale_all_dim"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, check_number(name, value, above=0.0))
        check_bool("truncate", self.truncate)

    @property
    def softmax_factor(self) -> float:
        """DeepSeek's factor on the softmax scale: ``mscale(factor, mscale_all_dim) ** 2``.

        1 without ``mscale_all_dim``. DeepSeek's latent attention multiplies its
        ``1 / sqrt(Dn + Dr)`` by it (transformers' ``yarn_apply_mscale``): every feature's
        score is sharpened, not only the rotary ones that ``attention_factor`` scales.
        """
        if not self.mscale_all_dim:
            return 1.0
        return _yarn_mscale(self.factor, self.mscale_all_dim) ** 2


@dataclass(frozen=True)
class Llama3Scaling:
    """Llama 3.1's wavelength bands (``rope_type="llama3"``).

    A pair whose wavelength ``2 pi / inv_freq`` is shorter than
    ``original_length / high_freq_factor`` is kept; longer than
    ``original_length / low_freq_factor``, divided by ``factor``; between, a smooth blend.

    Attributes:
        factor: How many times longer than trained (Llama 3.1: 8).
        low_freq_factor: Llama 3.1: 1.
        high_freq_factor: Llama 3.1: 4; greater than ``low_freq_factor``.
        original_length: The trained length (Llama 3.1: 8192).
    """

    factor: float
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_length: int = 8192

    def __post_init__(self) -> None:
        object.__setattr__(self, "factor", _check_factor(self.factor))
        low = check_number("low_freq_factor", self.low_freq_factor, above=0.0)
        high = check_number("high_freq_factor", self.high_freq_factor, above=low)
        object.__setattr__(self, "low_freq_factor", low)
        object.__setattr__(self, "high_freq_factor", high)
        check_positive_int("original_length", self.original_length)


RopeScaling = LinearScaling | DynamicNTKScaling | YarnScaling | Llama3Scaling
"""Any of the four scalings ``rope_frequencies`` takes."""

_KINDS = (LinearScaling, DynamicNTKScaling, YarnScaling, Llama3Scaling)


class RopeFrequencies(NamedTuple):
    """What ``rope_frequencies`` returns (a tuple: ``inv_freq, factor = ...`` unpacks it).

    Attributes:
        inv_freq: ``(D / 2,)`` float32, each pair's angle per position.
        attention_factor: The number ``cos`` and ``sin`` are multiplied by (1 but for YaRN).
    """

    inv_freq: Tensor
    attention_factor: float


def _default_inv_freq(head_dim: int, base: float) -> Tensor:
    """``1 / base ** (2i / D)``, in transformers' order of operations (bit for bit)."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim  # (D/2,)
    return 1.0 / (base**exponents)


def rope_frequencies(
    head_dim: int,
    base: float,
    scaling: RopeScaling | None = None,
    *,
    seq_len: int | None = None,
) -> RopeFrequencies:
    """The rotary frequencies of each pair, scaled, and the attention factor.

    Equal to transformers' ``ROPE_INIT_FUNCTIONS[rope_type](config)`` (and to
    ``LlamaRotaryEmbedding.compute_default_rope_parameters`` for ``scaling=None``),
    for a config whose whole head is rotated (``partial_rotary_factor = 1``).

    Args:
        head_dim: Width ``D`` of a head (even).
        base: The rotary base ``theta`` (``rope_theta``), greater than 1.
        scaling: ``None`` (the trained frequencies) or a
            [`LinearScaling`][attnlab.LinearScaling],
            [`DynamicNTKScaling`][attnlab.DynamicNTKScaling],
            [`YarnScaling`][attnlab.YarnScaling] or
            [`Llama3Scaling`][attnlab.Llama3Scaling].
        seq_len: The sequence's length, read by dynamic scaling only (``None``: the
            trained length, where dynamic scaling changes nothing).

    Returns:
        ``(inv_freq, attention_factor)``.

    Raises:
        TypeError: ``scaling`` not one of the four kinds; a non-int ``head_dim``.
        ValueError: an odd or non-positive ``head_dim``, a ``base`` not above 1.

    Shape:
        inv_freq: ``(D / 2,)``.
    """
    D = check_positive_int("head_dim", head_dim)
    if D % 2:
        raise ValueError(f"head_dim must be even (pairs of coordinates); got {head_dim}")
    theta = check_number("base", base, above=1.0)
    if scaling is not None and not isinstance(scaling, _KINDS):
        raise TypeError(
            "scaling must be None, LinearScaling, DynamicNTKScaling, YarnScaling or "
            f"Llama3Scaling; got {type(scaling).__name__} {scaling!r}"
        )
    if seq_len is not None:
        check_positive_int("seq_len", seq_len)
    if scaling is None:
        return RopeFrequencies(_default_inv_freq(D, theta), 1.0)
    if isinstance(scaling, LinearScaling):
        return RopeFrequencies(_default_inv_freq(D, theta) / scaling.factor, 1.0)
    if isinstance(scaling, DynamicNTKScaling):
        if D == 2:
            raise ValueError("head_dim must be at least 4 for dynamic scaling; got 2")
        length = max(seq_len or 0, scaling.original_length)
        grown = scaling.factor * length / scaling.original_length - (scaling.factor - 1)
        return RopeFrequencies(_default_inv_freq(D, theta * grown ** (D / (D - 2))), 1.0)
    if isinstance(scaling, YarnScaling):
        return _yarn(D, theta, scaling)
    return RopeFrequencies(_llama3(D, theta, scaling), 1.0)


def _yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def _yarn(D: int, base: float, s: YarnScaling) -> RopeFrequencies:
    """YaRN's frequencies and attention factor (transformers' ``_compute_yarn_parameters``)."""
    if s.attention_factor is not None:
        attention_factor = s.attention_factor
    elif s.mscale and s.mscale_all_dim:
        attention_factor = _yarn_mscale(s.factor, s.mscale) / _yarn_mscale(
            s.factor, s.mscale_all_dim
        )
    else:
        attention_factor = _yarn_mscale(s.factor)

    def pair_turning(turns: float) -> float:
        """The (fractional) pair index that turns ``turns`` times over the trained length."""
        return D * math.log(s.original_length / (turns * 2 * math.pi)) / (2 * math.log(base))

    low, high = pair_turning(s.beta_fast), pair_turning(s.beta_slow)
    if s.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, D - 1)
    if low == high:
        high += 0.001  # transformers' guard against a zero-width ramp
    ramp = ((torch.arange(D // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    pos_freqs = base ** (torch.arange(0, D, 2).float() / D)  # (D/2,) wavelengths / 2 pi
    kept = 1.0 / pos_freqs  # extrapolation: the trained frequencies
    squeezed = 1.0 / (s.factor * pos_freqs)  # interpolation: divided by factor
    keep = 1 - ramp  # 1 for fast pairs (kept), 0 for slow pairs (squeezed)
    return RopeFrequencies(squeezed * (1 - keep) + kept * keep, float(attention_factor))


def _llama3(D: int, base: float, s: Llama3Scaling) -> Tensor:
    """Llama 3.1's frequencies (transformers' ``_compute_llama3_parameters``)."""
    inv_freq = _default_inv_freq(D, base)  # (D/2,)
    low_freq_wavelen = s.original_length / s.low_freq_factor
    high_freq_wavelen = s.original_length / s.high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / s.factor, inv_freq)
    smooth = (s.original_length / wavelen - s.low_freq_factor) / (
        s.high_freq_factor - s.low_freq_factor
    )
    blended = (1 - smooth) * scaled / s.factor + smooth * scaled
    middle = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(middle, blended, scaled)


def rope_scaling_from_hf(
    rope_scaling: Mapping[str, object], max_position_embeddings: int
) -> RopeScaling | None:
    """A transformers ``rope_scaling`` (or ``rope_parameters``) dict, as one of the four kinds.

    Args:
        rope_scaling: The dict: ``rope_type`` (or the older ``type``) and that kind's
            keys (``factor``, ``original_max_position_embeddings``, ...).
        max_position_embeddings: The config's ``max_position_embeddings`` (dynamic
            scaling's trained length).

    Returns:
        ``None`` for ``rope_type="default"``, else the scaling.

    Raises:
        TypeError: ``rope_scaling`` is not a dict.
        ValueError: a ``rope_type`` other than default, linear, dynamic, yarn, llama3.
    """
    if not isinstance(rope_scaling, Mapping):
        raise TypeError(f"rope_scaling must be a dict; got {type(rope_scaling).__name__}")
    max_len = check_positive_int("max_position_embeddings", max_position_embeddings)
    kind = rope_scaling.get("rope_type", rope_scaling.get("type", "default"))
    get = rope_scaling.get
    if kind == "default":
        return None
    if kind == "linear":
        return LinearScaling(get("factor"))  # type: ignore[arg-type]
    if kind == "dynamic":
        return DynamicNTKScaling(get("factor"), max_len)  # type: ignore[arg-type]
    if kind == "yarn":
        return YarnScaling(
            get("factor"),  # type: ignore[arg-type]
            get("original_max_position_embeddings"),  # type: ignore[arg-type]
            beta_fast=get("beta_fast") or 32.0,  # type: ignore[arg-type]
            beta_slow=get("beta_slow") or 1.0,  # type: ignore[arg-type]
            attention_factor=get("attention_factor"),  # type: ignore[arg-type]
            mscale=get("mscale"),  # type: ignore[arg-type]
            mscale_all_dim=get("mscale_all_dim"),  # type: ignore[arg-type]
            truncate=get("truncate", True),  # type: ignore[arg-type]
        )
    if kind == "llama3":
        return Llama3Scaling(
            get("factor"),  # type: ignore[arg-type]
            get("low_freq_factor"),  # type: ignore[arg-type]
            get("high_freq_factor"),  # type: ignore[arg-type]
            get("original_max_position_embeddings"),  # type: ignore[arg-type]
        )
    raise ValueError(
        f"rope_scaling's rope_type must be default, linear, dynamic, yarn or llama3; got {kind!r}"
    )


class ScaledRotaryEmbedding(RotaryEmbedding):
    """[`RotaryEmbedding`][attnlab.RotaryEmbedding] with scaled frequencies.

    ``cos_sin(positions)`` uses [`rope_frequencies`][attnlab.rope_frequencies] with
    ``scaling`` (dynamic scaling: for ``seq_len = max(positions) + 1``) and multiplies
    ``cos`` and ``sin`` by the attention factor, as transformers'
    ``LlamaRotaryEmbedding`` does. A model built with
    ``LlamaConfig(rope_scaling=...)`` holds one.

    Args:
        head_dim: Width ``D`` of each head's vectors; even.
        theta: The rotary base.
        scaling: One of the four scalings.

    Shape:
        positions: ``(T,)``; cos, sin: ``(T, D)`` each.
    """

    def __init__(self, head_dim: int, theta: float, scaling: RopeScaling) -> None:
        super().__init__(head_dim, theta)
        rope_frequencies(head_dim, theta, scaling)  # checks the three at once
        self.scaling = scaling

    def frequencies(
        self, device: torch.device | str | None = None, seq_len: int | None = None
    ) -> Tensor:
        """The scaled frequencies, ``(D / 2,)`` float32, computed where asked."""
        freqs = rope_frequencies(self.head_dim, self.theta, self.scaling, seq_len=seq_len)
        return freqs.inv_freq.to(device)

    def angles(self, positions: Tensor) -> Tensor:
        """Each position's angle for each pair, with the scaled frequencies: ``(T, D / 2)``."""
        if not isinstance(positions, Tensor) or positions.dim() != 1:
            super().angles(positions)  # raises, naming positions
        seq_len = int(positions.max()) + 1 if positions.numel() else None
        # (T, 1) * (D/2,) -> (T, D/2)
        return positions.float().unsqueeze(-1) * self.frequencies(positions.device, seq_len)

    def cos_sin(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        """``cos`` and ``sin`` of the scaled angles, times the attention factor: ``(T, D)`` each."""
        cos, sin = super().cos_sin(positions)
        factor = rope_frequencies(self.head_dim, self.theta, self.scaling).attention_factor
        return cos * factor, sin * factor

    def extra_repr(self) -> str:
        """Head width, base and scaling, shown by ``print(module)``."""
        return f"{super().extra_repr()}, scaling={self.scaling!r}"
