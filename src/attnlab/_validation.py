"""Input checks shared by every public function and module.

Each check runs before any arithmetic and raises an error that names the argument,
the shape (or value) it got and the one it needed:

* ``TypeError`` for a non-tensor or a wrong dtype;
* ``ValueError`` for a wrong rank, a mismatched size, a mask that does not
  broadcast, or a size or probability out of range.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def format_shape(shape: Sequence[int]) -> str:
    """Write a shape the way the docs do: ``(2, 6, 3)``."""
    if len(shape) == 1:
        return f"({shape[0]},)"
    return "(" + ", ".join(str(size) for size in shape) + ")"


def broadcast_shape(*shapes: Sequence[int]) -> tuple[int, ...] | None:
    """The shape that ``shapes`` broadcast to, or ``None`` if they do not.

    PyTorch's rule, written out: align the shapes at their last dimension; in each
    dimension the sizes must agree or be 1. (``torch.broadcast_shapes`` gives the same
    answer, but its first call imports ``torch._refs``: about a second in each new
    process, which every call of this package would pay.)
    """
    rank = max((len(shape) for shape in shapes), default=0)
    result = [1] * rank
    for shape in shapes:
        for axis, size in enumerate(shape, start=rank - len(shape)):
            if size == result[axis] or size == 1:
                continue
            if result[axis] != 1:
                return None
            result[axis] = size
    return tuple(result)


def check_tensor(name: str, value: object) -> Tensor:
    """Return ``value`` if it is a tensor, else raise ``TypeError``."""
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(value).__name__}")
    return value


FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
"""The dtypes attention accepts; float16 and bfloat16 are computed in float32."""


def check_floating(name: str, value: object) -> Tensor:
    """Return ``value`` if its dtype is in ``FLOAT_DTYPES``, else raise ``TypeError``."""
    tensor = check_tensor(name, value)
    if tensor.dtype not in FLOAT_DTYPES:
        raise TypeError(
            f"{name} must be a floating-point tensor (float16, bfloat16, float32 or float64); "
            f"got dtype {tensor.dtype}"
        )
    return tensor


def check_bool(name: str, value: object) -> bool:
    """Return ``value`` if it is a real ``bool``, else raise ``TypeError`` naming ``name``."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool; got {type(value).__name__}")
    return value


def check_same_device(name: str, tensor: Tensor, reference: Tensor, reference_name: str) -> None:
    """Raise ``ValueError`` naming both devices unless ``tensor`` is on ``reference``'s."""
    if tensor.device != reference.device:
        raise ValueError(
            f"{name} must be on the device of {reference_name} ({reference.device}); "
            f"got device {tensor.device}"
        )


def check_min_rank(name: str, tensor: Tensor, min_rank: int, wanted: str) -> None:
    """Raise ``ValueError`` if ``tensor`` has fewer than ``min_rank`` dimensions."""
    if tensor.dim() < min_rank:
        raise ValueError(
            f"{name} must have shape {wanted} (at least {min_rank} dims); "
            f"got shape {format_shape(tensor.shape)}"
        )


def check_module_dtype(name: str, x: Tensor, weight: Tensor) -> None:
    """Raise ``TypeError`` naming both dtypes unless ``x`` has the module weights' dtype."""
    if x.dtype != weight.dtype:
        raise TypeError(
            f"{name} has dtype {x.dtype} but the module's parameters are {weight.dtype}; "
            f"convert one to the other (module.to({x.dtype}) or {name}.to({weight.dtype}))"
        )


def check_int(name: str, value: object) -> int:
    """Return ``value`` if it is an ``int`` (not a bool), else raise ``TypeError``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int; got {type(value).__name__} {value!r}")
    return value


def check_positive_int(name: str, value: object) -> int:
    """Return ``value`` if it is a positive ``int`` (not a bool), else raise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be a positive int; got {type(value).__name__} {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be a positive int; got {value}")
    return value


def check_probability(name: str, value: object) -> float:
    """Return ``value`` if it is a number in ``[0, 1)``, else raise."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a float in [0, 1); got {type(value).__name__}")
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1); got {value}")
    return float(value)


def check_features(
    name: str, x: object, width: int, *, tokens: str = "T", width_name: str = "d_in"
) -> Tensor:
    """Check a module input of shape ``(T, d_in)`` or ``(B, T, d_in)``.

    Args:
        name: The argument's name, used in the error message.
        x: The value passed.
        width: The feature width the module was built for.
        tokens: How the docs name the token axis (``T``, ``L`` or ``S``).
        width_name: How the docs name the width (``d_in``, ``kdim``, ...).

    Returns:
        ``x``, now known to be a floating tensor of a valid shape.
    """
    tensor = check_floating(name, x)
    if tensor.dim() not in (2, 3) or tensor.shape[-1] != width:
        raise ValueError(
            f"{name} must have shape ({tokens}, {width_name}) or (B, {tokens}, {width_name}) "
            f"with {width_name} = {width}; got shape {format_shape(tensor.shape)}"
        )
    return tensor


def check_attention_args(
    query: object,
    key: object,
    value: object,
    attn_mask: object,
    dropout_p: object,
    is_causal: bool,
    scale: object,
) -> tuple[int, ...]:
    """Check the arguments of scaled dot-product attention before computing anything.

    Returns:
        The broadcast batch shape ``(N, ...)`` of query, key and value.

    Raises:
        TypeError: A non-tensor, a non-floating tensor, mismatched dtypes, a mask of the
            wrong dtype, or a scale that is not a number.
        ValueError: A rank below 2, mismatched ``E`` or ``S``, batch dims that do not
            broadcast, a mask that does not broadcast to ``(N, ..., L, S)``, both a mask
            and ``is_causal``, or ``dropout_p`` outside ``[0, 1)``.
    """
    q = check_floating("query", query)
    k = check_floating("key", key)
    v = check_floating("value", value)
    check_min_rank("query", q, 2, "(N, ..., L, E)")
    check_min_rank("key", k, 2, "(N, ..., S, E)")
    check_min_rank("value", v, 2, "(N, ..., S, Ev)")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(
            f"query, key and value must share one dtype; got {q.dtype}, {k.dtype} and {v.dtype}"
        )
    check_same_device("key", k, q, "query")
    check_same_device("value", v, q, "query")
    check_bool("is_causal", is_causal)
    L, E = q.shape[-2:]
    S = k.shape[-2]
    if k.shape[-1] != E:
        raise ValueError(
            f"key must have shape (N, ..., S, E) with E = {E} to match query; "
            f"got shape {format_shape(k.shape)}"
        )
    if v.shape[-2] != S:
        raise ValueError(
            f"value must have shape (N, ..., S, Ev) with S = {S} to match key; "
            f"got shape {format_shape(v.shape)}"
        )
    batch = broadcast_shape(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    if batch is None:
        raise ValueError(
            "query, key and value must have broadcastable batch dims (N, ...); got shapes "
            f"{format_shape(q.shape)}, {format_shape(k.shape)} and {format_shape(v.shape)}"
        )
    if attn_mask is not None:
        mask = check_mask("attn_mask", attn_mask, (*batch, L, S), q.dtype)
        check_same_device("attn_mask", mask, q, "query")
        if is_causal:
            raise ValueError(
                "attn_mask and is_causal=True were both given; pass one of them "
                "(for a causal mask combined with another, build the combined mask yourself)"
            )
    check_probability("dropout_p", dropout_p)
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, int | float)):
        raise TypeError(f"scale must be a float or None; got {type(scale).__name__}")
    return batch


def check_mask(name: str, mask: object, target: tuple[int, ...], dtype: torch.dtype) -> Tensor:
    """Check that a mask is boolean (or ``dtype``) and broadcasts to ``target``.

    Args:
        name: The argument's name, used in the error message.
        mask: The mask passed.
        target: The shape the mask must broadcast to, ``(N, ..., L, S)``.
        dtype: The floating dtype a float mask must have (the query's).

    Returns:
        The mask, now known to be valid.
    """
    tensor = check_tensor(name, mask)
    if tensor.dtype != torch.bool and tensor.dtype != dtype:
        raise TypeError(
            f"{name} must be a bool tensor (True = may attend) or a float tensor of the "
            f"query's dtype {dtype} (added to the scores); got dtype {tensor.dtype}"
        )
    if broadcast_shape(tensor.shape, target) != target:
        raise ValueError(
            f"{name} must broadcast to (N, ..., L, S) = {format_shape(target)}; "
            f"got shape {format_shape(tensor.shape)}"
        )
    return tensor


def check_key_padding_mask(
    mask: object, batch: tuple[int, ...], S: int, dtype: torch.dtype
) -> Tensor:
    """Check a key padding mask: bool (``True`` = real token) or float, one entry per key.

    Args:
        mask: The mask passed.
        batch: The input's batch shape: ``(B,)``, or ``()`` for an unbatched input.
        S: The number of keys.
        dtype: The floating dtype a float mask must have (the query's).

    Returns:
        The mask, now known to broadcast to ``(*batch, S)``.
    """
    tensor = check_tensor("key_padding_mask", mask)
    if tensor.dtype != torch.bool and tensor.dtype != dtype:
        raise TypeError(
            "key_padding_mask must be a bool tensor (True = real token, may attend) or a "
            f"float tensor of the query's dtype {dtype} (added to the scores); "
            f"got dtype {tensor.dtype}"
        )
    target = (*batch, S)
    wanted = "(B, S)" if batch else "(S,)"
    if broadcast_shape(tensor.shape, target) != target:
        raise ValueError(
            f"key_padding_mask must broadcast to {wanted} = {format_shape(target)}; "
            f"got shape {format_shape(tensor.shape)}"
        )
    return tensor
