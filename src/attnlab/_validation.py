"""Input checks shared by every public function and module.

Each runs before any arithmetic and raises an error naming the argument, what it got
and what it needed: ``TypeError`` for a wrong type or dtype, ``ValueError`` for a
wrong rank, size, broadcast or range.
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

    PyTorch's rule written out, because ``torch.broadcast_shapes``'s first call imports
    ``torch._refs`` (about a second per process), and in plain loops, which
    ``torch.compile`` traces without a graph break.
    """
    result: list[int] = []  # built from the last dim backwards
    for shape in shapes:
        for axis in range(1, len(shape) + 1):  # axis counts from the end
            size = shape[-axis]
            if axis > len(result):
                result.insert(0, size)
            elif size != result[-axis] and size != 1:
                if result[-axis] != 1:
                    return None
                result[-axis] = size
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


def check_int(name: str, value: object) -> int:
    """Return ``value`` if it is an ``int`` (not a bool), else raise ``TypeError``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int; got {type(value).__name__} {value!r}")
    return value


def check_length(name: str, value: object) -> int:
    """Return ``value`` if it is an ``int >= 0`` (a sequence length; 0 is empty), else raise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int >= 0; got {type(value).__name__} {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be an int >= 0; got {value}")
    return value


def check_positive_int(name: str, value: object) -> int:
    """Return ``value`` if it is a positive ``int`` (not a bool), else raise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be a positive int; got {type(value).__name__} {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be a positive int; got {value}")
    return value


def check_probability(name: str, value: object) -> float:
    """Return ``value`` if it is a number in ``[0, 1]``, else raise.

    ``1`` is allowed, as in PyTorch's dropout: every weight is dropped (the output is 0).
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a float in [0, 1]; got {type(value).__name__}")
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1]; got {value}")
    return float(value)


def check_features(
    name: str, x: object, width: int, *, tokens: str = "T", width_name: str = "d_in"
) -> Tensor:
    """Check a module input of shape ``(T, d_in)`` or ``(B, T, d_in)``; ``x`` if valid.

    ``tokens`` and ``width_name`` are how the message names the token axis and the width.
    """
    tensor = check_floating(name, x)
    if tensor.dim() not in (2, 3) or tensor.shape[-1] != width:
        raise ValueError(
            f"{name} must have shape ({tokens}, {width_name}) or (B, {tokens}, {width_name}) "
            f"with {width_name} = {width}; got shape {format_shape(tensor.shape)}"
        )
    return tensor


def check_vectors(name: str, x: object, width: int, weight: Tensor) -> Tensor:
    """Check the input ``(..., width)`` of a module that works on each vector alone.

    ``x`` must share ``weight``'s device and dtype.
    """
    tensor = check_floating(name, x)
    if tensor.dim() == 0 or tensor.shape[-1] != width:
        raise ValueError(
            f"{name} must have shape (..., d_model) with d_model = {width}; "
            f"got shape {format_shape(tensor.shape)}"
        )
    check_module_input(name, tensor, weight)
    return tensor


def check_attention_args(
    query: object,
    key: object,
    value: object,
    attn_mask: object,
    dropout_p: object,
    is_causal: object,
    scale: object,
    *,
    enable_gqa: object = False,
) -> tuple[tuple[int, ...], int]:
    """Check the arguments of scaled dot-product attention before computing anything.

    The one check of every attention entry point; the kernels they call check nothing
    again. Returns ``(batch, group)``: the broadcast batch shape ``(N, ...)`` (with
    ``enable_gqa``, counting the query's ``Hq`` heads) and the query heads per key/value
    head (``1`` without ``enable_gqa``).
    """
    q = check_floating("query", query)
    k = check_floating("key", key)
    v = check_floating("value", value)
    gqa = check_bool("enable_gqa", enable_gqa)
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
    group = 1
    k_batch, v_batch = tuple(k.shape[:-2]), tuple(v.shape[:-2])
    if gqa:
        group = check_gqa_shapes(q, k, v)
        # the query's Hq heads stand in for the key's and value's Hkv in the batch check
        k_batch, v_batch = (*k_batch[:-1], q.shape[-3]), (*v_batch[:-1], q.shape[-3])
    batch = broadcast_shape(q.shape[:-2], k_batch, v_batch)
    if batch is None:
        raise ValueError(
            "query, key and value must have broadcastable batch dims (N, ...); got shapes "
            f"{format_shape(q.shape)}, {format_shape(k.shape)} and {format_shape(v.shape)}"
        )
    if attn_mask is not None:
        check_mask("attn_mask", attn_mask, (*batch, L, S), q)
        if is_causal:
            raise ValueError(
                "attn_mask and is_causal=True were both given; pass one of them "
                "(for a causal mask combined with another, build the combined mask yourself)"
            )
    check_probability("dropout_p", dropout_p)
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, int | float)):
        raise TypeError(f"scale must be a float or None; got {type(scale).__name__}")
    return batch, group


def check_gqa_shapes(q: Tensor, k: Tensor, v: Tensor) -> int:
    """Check grouped-query heads at dim ``-3``; return the group size ``Hq // Hkv``."""
    check_min_rank("query", q, 3, "(N, ..., Hq, L, E)")
    check_min_rank("key", k, 3, "(N, ..., Hkv, S, E)")
    check_min_rank("value", v, 3, "(N, ..., Hkv, S, Ev)")
    Hq, Hkv = q.shape[-3], k.shape[-3]
    if v.shape[-3] != Hkv:
        raise ValueError(
            f"value must have shape (N, ..., Hkv, S, Ev) with Hkv = {Hkv} heads like key; "
            f"got shape {format_shape(v.shape)}"
        )
    if Hkv == 0 or Hq % Hkv != 0:
        raise ValueError(
            f"key must have shape (N, ..., Hkv, S, E) with Hkv dividing the query's "
            f"Hq = {Hq} heads (enable_gqa=True); got shape {format_shape(k.shape)}"
        )
    return Hq // Hkv


def check_sinks(sinks: object, batch: tuple[int, ...], query: Tensor) -> Tensor | None:
    """Check ``sinks``: ``None`` or one floating logit per head ``(H,)``, ``H = batch[-1]``.

    ``batch`` is the broadcast batch ``(N, ..., H)`` that ``check_attention_args`` returns.
    """
    if sinks is None:
        return None
    tensor = check_floating("sinks", sinks)
    check_same_device("sinks", tensor, query, "query")
    if not batch or tensor.shape != (batch[-1],):
        heads = f"H = {batch[-1]}" if batch else "query heads at dim -3, (N, ..., H, L, E)"
        raise ValueError(
            f"sinks must have shape (H,), one logit per head, with {heads}; "
            f"got shape {format_shape(tensor.shape)}"
        )
    return tensor


def check_mask(
    name: str,
    mask: object,
    target: tuple[int, ...],
    query: Tensor,
    *,
    wanted: str = "(N, ..., L, S)",
    meaning: str = "True = may attend",
    query_name: str = "query",
) -> Tensor:
    """Check that a mask is boolean (or the query's dtype), on its device, and broadcasts.

    The one mask check, for ``attn_mask`` and ``key_padding_mask`` alike: ``target`` is
    the shape it must broadcast to, ``wanted`` how the docs write it, ``meaning`` what a
    boolean ``True`` means, for the message.
    """
    tensor = check_tensor(name, mask)
    if tensor.dtype != torch.bool and tensor.dtype != query.dtype:
        raise TypeError(
            f"{name} must be a bool tensor ({meaning}) or a float tensor of the "
            f"{query_name}'s dtype {query.dtype} (added to the scores); got dtype {tensor.dtype}"
        )
    check_same_device(name, tensor, query, query_name)
    if broadcast_shape(tensor.shape, target) != target:
        raise ValueError(
            f"{name} must broadcast to {wanted} = {format_shape(target)}; "
            f"got shape {format_shape(tensor.shape)}"
        )
    return tensor


def check_key_padding_mask(
    mask: object, batch: tuple[int, ...], S: int, query: Tensor, query_name: str = "query"
) -> Tensor:
    """Check a key padding mask, bool or float, that broadcasts to ``(*batch, S)``.

    ``batch`` is ``(B,)``, or ``()`` for an unbatched input.
    """
    return check_mask(
        "key_padding_mask",
        mask,
        (*batch, S),
        query,
        wanted="(B, S)" if batch else "(S,)",
        meaning="True = real token, may attend",
        query_name=query_name,
    )


def check_module_input(name: str, x: Tensor, weight: Tensor) -> None:
    """Raise unless ``x`` is on the device and has the dtype of a module's parameters.

    Checked before the first projection, so a module given an input on another device
    (``meta`` included) or of another dtype says so instead of failing inside PyTorch.
    """
    if x.device != weight.device:
        raise ValueError(
            f"{name} is on device {x.device} but the module's parameters are on "
            f"{weight.device}; move one to the other (module.to({str(x.device)!r}) or "
            f"{name}.to({str(weight.device)!r}))"
        )
    if x.dtype != weight.dtype:
        raise TypeError(
            f"{name} has dtype {x.dtype} but the module's parameters are {weight.dtype}; "
            f"convert one to the other (module.to({x.dtype}) or {name}.to({weight.dtype}))"
        )


def check_number(
    name: str,
    value: object,
    *,
    at_least: float | None = None,
    above: float | None = None,
    at_most: float | None = None,
) -> float:
    """Return ``value`` as a float if it is a finite real number in range, else raise.

    NaN is refused explicitly (``nan < 0`` is false, so a range check lets it through);
    a bool is not a number here.
    """
    bounds = [f">= {at_least}"] if at_least is not None else []
    bounds += [f"> {above}"] if above is not None else []
    bounds += [f"<= {at_most}"] if at_most is not None else []
    wanted = " ".join(["a finite number", " and ".join(bounds)]).strip()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be {wanted}; got {type(value).__name__} {value!r}")
    number = float(value)
    if (
        number != number  # NaN
        or number in (float("inf"), float("-inf"))
        or (at_least is not None and number < at_least)
        or (above is not None and number <= above)
        or (at_most is not None and number > at_most)
    ):
        raise ValueError(f"{name} must be {wanted}; got {value!r}")
    return number


SEED_RANGE = (0, 2**64 - 1)
"""The seeds a ``torch.Generator`` takes (``manual_seed``): a 64-bit unsigned int."""


def check_seed(name: str, value: object) -> int:
    """Return ``value`` if it is an ``int`` in ``0 .. 2**64 - 1``, else raise."""
    low, high = SEED_RANGE
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"{name} must be an int in {low} .. 2**64 - 1; got {type(value).__name__} {value!r}"
        )
    if not low <= value <= high:
        raise ValueError(f"{name} must be an int in {low} .. 2**64 - 1; got {value}")
    return value


def check_str(name: str, value: object) -> str:
    """Return ``value`` if it is a ``str``, else raise ``TypeError`` naming ``name``."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str; got {type(value).__name__} {value!r}")
    return value


def check_distinct(name: str, items: Sequence[object]) -> None:
    """Raise ``ValueError`` if one object appears twice in ``items`` (``[x] * n``)."""
    first: dict[int, int] = {}
    for i, item in enumerate(items):
        j = first.setdefault(id(item), i)
        if j != i:
            raise ValueError(
                f"{name} must hold a different object at each position; got the same "
                f"{type(item).__name__} at positions {j} and {i}"
            )


def check_integer_tensor(name: str, value: object, wanted: str = "integer token ids") -> Tensor:
    """Return ``value`` if it is a tensor of an integer dtype (not bool), else ``TypeError``."""
    tensor = check_tensor(name, value)
    if tensor.dtype.is_floating_point or tensor.dtype.is_complex or tensor.dtype == torch.bool:
        raise TypeError(f"{name} must hold {wanted} (int64); got dtype {tensor.dtype}")
    return tensor


def check_logits_and_ids(logits: object, input_ids: object) -> tuple[Tensor, Tensor]:
    """Return floating ``logits (B, T, V)`` and integer ``input_ids`` as ``(B, T)``.

    ``input_ids`` may be one sequence ``(T,)``; it comes back with a batch dim of 1.
    """
    logits = check_floating("logits", logits)
    ids = check_integer_tensor("input_ids", input_ids)
    ids = ids.unsqueeze(0) if ids.dim() == 1 else ids  # (B, T)
    if logits.dim() != 3 or ids.dim() != 2 or logits.shape[:2] != ids.shape:
        raise ValueError(
            f"logits must have shape (B, T, V) with (B, T) the shape of input_ids "
            f"{format_shape(ids.shape)}; got shape {format_shape(logits.shape)}"
        )
    return logits, ids


def check_token_range(name: str, ids: Tensor, vocab_size: int) -> Tensor:
    """Return integer ``ids`` as int64 if every one is in ``0 .. vocab_size - 1``, else raise.

    Unsigned tensors have no ``min``/``max`` in PyTorch, so the ids are read as int64
    first; a uint64 id of ``2**63`` or more turns negative there and is reported as such.
    """
    ids64 = ids.long()  # (...): no copy for int64
    if ids64.numel() == 0:
        return ids64
    low, high = int(ids64.min()), int(ids64.max())
    if ids.dtype == torch.uint64 and low < 0:
        raise ValueError(
            f"{name} must be token ids in 0 .. {vocab_size - 1}; got a value of 2**63 or more"
        )
    if low < 0 or high >= vocab_size:
        raise ValueError(
            f"{name} must be token ids in 0 .. {vocab_size - 1}; got values from {low} to {high}"
        )
    return ids64
