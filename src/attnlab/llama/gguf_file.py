"""A GGUF file's header, checked field by field before anything is allocated or looped over.

GGUF (llama.cpp's format) is a header then a data section::

    magic "GGUF" | version | tensor_count | kv_count
    kv_count x (key, value type, value)          the metadata
    tensor_count x (name, n_dims, dims, type, offset)
    padding to general.alignment | the tensors' bytes

A file from anywhere may lie in any of these fields: a count of 2**40 items in a file of
a few kilobytes, a rank of 0, a dimension of 0, an element count past 64 bits, an offset
outside the data section or off its alignment. ``open_gguf`` reads the header itself
(``gguf``'s ``GGUFReader`` allocates and loops on the counts it reads before it can
check them) and checks every count and length against the bytes left *before* it
allocates or loops; each refusal is a [`GGUFError`][attnlab.llama.GGUFError] naming the
field and its value. The tensors' bytes stay memory-mapped until a family asks for them.
"""

from __future__ import annotations

import functools
import itertools
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["GGUFError", "GGUFFile", "GGUFTensorInfo", "open_gguf"]


class GGUFError(ValueError):
    """A GGUF file the package refuses: the message names the field, key or tensor."""


# GGUF metadata value types: id -> (name, struct format or None for str/array)
VALUE_TYPES: dict[int, tuple[str, str | None]] = {
    0: ("uint8", "<B"),
    1: ("int8", "<b"),
    2: ("uint16", "<H"),
    3: ("int16", "<h"),
    4: ("uint32", "<I"),
    5: ("int32", "<i"),
    6: ("float32", "<f"),
    7: ("bool", "<?"),
    8: ("string", None),
    9: ("array", None),
    10: ("uint64", "<Q"),
    11: ("int64", "<q"),
    12: ("float64", "<d"),
}
STRING, ARRAY = 8, 9
MAX_DIMS = 4  # ggml's GGML_MAX_DIMS
DEFAULT_ALIGNMENT = 32
# the fewest bytes one metadata entry / one tensor info can take (an empty key and a
# one-byte value; an empty name, one dimension, type and offset)
MIN_KV_BYTES = 8 + 4 + 1
MIN_TENSOR_INFO_BYTES = 8 + 4 + 8 + 4 + 8
# the most items all metadata arrays may hold together (a real vocabulary, its merges,
# scores and types: about 1.5 million), which bounds the memory the metadata takes
MAX_ARRAY_ITEMS = 2**24


@dataclass(frozen=True)
class GGUFTensorInfo:
    """One tensor's entry in the header, checked against the file.

    Attributes:
        name: The tensor's name (as llama.cpp names it).
        shape: Its shape, outermost first (GGUF lists the dims innermost first).
        type_name: Its ggml type (``Q4_1``, ``F32``, ...).
        start: Where its bytes begin in the file.
        nbytes: How many bytes it takes.
    """

    name: str
    shape: tuple[int, ...]
    type_name: str
    start: int
    nbytes: int


@dataclass(frozen=True)
class GGUFFile:
    """A GGUF file whose header passed every check: metadata, tensor entries, its bytes.

    Attributes:
        path: The file.
        version: GGUF version (2 or 3).
        metadata: Key -> value (arrays as lists).
        tensors: Tensor name -> entry, in the file's order.
        data: The whole file, memory-mapped read-only.
    """

    path: Path
    version: int
    metadata: dict[str, Any]
    tensors: dict[str, GGUFTensorInfo]
    data: np.ndarray[Any, np.dtype[np.uint8]]

    def raw(self, name: str) -> np.ndarray[Any, np.dtype[np.uint8]]:
        """Tensor ``name``'s bytes, one row per row of its innermost dimension."""
        info = self.tensors[name]
        rows = int(np.prod(info.shape[:-1], dtype=np.int64))
        return self.data[info.start : info.start + info.nbytes].reshape(rows, -1)


class _Cursor:
    """Reads the header's little-endian fields, each checked against the bytes left."""

    def __init__(self, data: np.ndarray[Any, np.dtype[np.uint8]]) -> None:
        self.data = data.data  # a memoryview: slices without numpy's per-slice cost
        self.size = int(data.shape[0])
        self.offset = 0
        self.items = 0  # array items read so far

    def left(self) -> int:
        return self.size - self.offset

    def take(self, n: int, what: str) -> bytes:
        if n > self.left():
            raise GGUFError(
                f"the GGUF file is truncated: {what} at byte {self.offset} needs {n} bytes, "
                f"{self.left()} are left"
            )
        chunk = self.data[self.offset : self.offset + n].tobytes()
        self.offset += n
        return chunk

    def scalar(self, fmt: str, what: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))[0]

    def count(self, what: str, item_bytes: int) -> int:
        """A uint64 count of items of at least ``item_bytes`` each, checked to fit."""
        n: int = self.scalar("<Q", what)
        if n * item_bytes > self.left():
            raise GGUFError(
                f"the GGUF file's {what} is {n}, more than the {self.left()} bytes left can "
                f"hold ({item_bytes} bytes or more each): the file is truncated or corrupt"
            )
        return n

    def string(self, what: str) -> str:
        raw = self.take(self.count(f"length of {what}", 1), what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise GGUFError(f"the GGUF file's {what} is not UTF-8 text: {raw[:40]!r}") from None

    def strings(self, n: int, what: str) -> list[str]:
        """``n`` strings of an array; the first bad one is read again by ``string``."""
        data, at, size, items = self.data, self.offset, self.size, []
        for i in range(n):
            end = at + 8 + int.from_bytes(data[at : at + 8], "little") if at + 8 <= size else -1
            try:
                if not 0 <= end <= size:
                    raise UnicodeError  # the length: truncated
                items.append(str(data[at + 8 : end], "utf-8"))
            except UnicodeError:
                self.offset = at
                self.string(f"{what}[{i}]")  # raises, naming the item
            at = end
        self.offset = at
        return items

    def value(self, type_id: int, what: str) -> Any:
        if type_id not in VALUE_TYPES:
            raise GGUFError(
                f"the GGUF file's {what} has value type {type_id}; GGUF's types are 0 to 12"
            )
        fmt = VALUE_TYPES[type_id][1]
        if fmt is not None:
            return self.scalar(fmt, what)
        if type_id == STRING:
            return self.string(what)
        return self.array(what)

    def array(self, what: str) -> list[Any]:
        item_type: int = self.scalar("<I", f"item type of {what}")
        if item_type not in VALUE_TYPES or item_type == ARRAY:
            raise GGUFError(
                f"the GGUF file's {what} is an array of value type {item_type}; arrays hold "
                f"types 0 to 8 or 10 to 12"
            )
        fmt = VALUE_TYPES[item_type][1]
        item_bytes = 8 if fmt is None else struct.calcsize(fmt)
        n = self.count(f"array length of {what}", item_bytes)
        self.items += n
        if self.items > MAX_ARRAY_ITEMS:
            raise GGUFError(
                f"the GGUF file's array length of {what} is {n}, past the {MAX_ARRAY_ITEMS} "
                f"items the metadata's arrays may hold in all"
            )
        if fmt is None:  # strings: n is at most the bytes left / 8
            return self.strings(n, what)
        items = np.frombuffer(self.take(n * item_bytes, what), dtype=np.dtype(fmt))
        values: list[Any] = items.tolist()
        return values


@functools.cache
def _type_sizes() -> dict[int, tuple[str, int, int]]:
    """The ggml type id -> (name, values per block, bytes per block), from the gguf package."""
    import gguf  # the llm extra

    return {
        int(kind): (kind.name, *gguf.GGML_QUANT_SIZES[kind])
        for kind in gguf.GGMLQuantizationType
        if kind in gguf.GGML_QUANT_SIZES
    }


def open_gguf(path: Path | str) -> GGUFFile:
    """Read and check a GGUF file's header; its tensors' bytes stay mapped, unread.

    Args:
        path: The ``.gguf`` file.

    Returns:
        The checked [`GGUFFile`][attnlab.llama.GGUFFile].

    Raises:
        TypeError: ``path`` is not a str or Path.
        FileNotFoundError: No such file.
        GGUFError: Not GGUF, or a field that the file cannot hold (each named).
    """
    if not isinstance(path, str | Path):
        raise TypeError(f"path must be a str or Path of a .gguf file; got {type(path).__name__}")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path {str(path)!r} is not a file")
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise GGUFError(
            f"path {str(path)!r} is not a GGUF file: it starts with {magic!r}, not b'GGUF'"
        )
    data = np.memmap(path, dtype=np.uint8, mode="r")
    cursor = _Cursor(data)
    cursor.take(4, "the magic")
    version: int = cursor.scalar("<I", "the version")
    if version not in (2, 3):
        raise GGUFError(f"the GGUF file's version is {version}; GGUF versions 2 and 3 are read")
    tensor_count = cursor.scalar("<Q", "tensor_count")
    kv_count = cursor.count("kv_count", MIN_KV_BYTES)
    if tensor_count * MIN_TENSOR_INFO_BYTES > cursor.left():
        raise GGUFError(
            f"the GGUF file's tensor_count is {tensor_count}, more than the {cursor.left()} "
            f"bytes left can hold ({MIN_TENSOR_INFO_BYTES} bytes or more each): the file is "
            f"truncated or corrupt"
        )
    metadata: dict[str, Any] = {}
    for k in range(kv_count):
        key = cursor.string(f"metadata key #{k}")
        if key in metadata:
            raise GGUFError(f"the GGUF file's metadata key {key!r} appears twice")
        metadata[key] = cursor.value(cursor.scalar("<I", f"value type of {key!r}"), repr(key))
    alignment = _alignment(metadata)
    tensors = _tensor_infos(cursor, tensor_count)
    data_start = -(-cursor.offset // alignment) * alignment
    checked = {}
    for name, (shape, type_id, offset) in tensors.items():
        checked[name] = _place(name, shape, type_id, offset, data_start, alignment, cursor.size)
    placed = sorted(checked.values(), key=lambda info: info.start)
    for before, after in itertools.pairwise(placed):
        if after.start < before.start + before.nbytes:
            raise GGUFError(
                f"the GGUF file's tensors {before.name!r} and {after.name!r} overlap: bytes "
                f"{before.start} to {before.start + before.nbytes} and {after.start} on"
            )
    return GGUFFile(path, version, metadata, checked, data)


def _alignment(metadata: dict[str, Any]) -> int:
    """``general.alignment``, checked to be a power of two (32 if the file sets none)."""
    value = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    power_of_two = isinstance(value, int) and 1 <= value <= 2**30 and not value & (value - 1)
    if isinstance(value, bool) or not power_of_two:
        raise GGUFError(
            f"the GGUF file's general.alignment must be a power of two (at most 2**30); "
            f"got {value!r}"
        )
    return int(value)


def _tensor_infos(cursor: _Cursor, count: int) -> dict[str, tuple[tuple[int, ...], int, int]]:
    """The tensor entries: name -> (shape outermost first, type id, offset), each checked."""
    infos: dict[str, tuple[tuple[int, ...], int, int]] = {}
    for t in range(count):
        name = cursor.string(f"tensor #{t}'s name")
        if name in infos:
            raise GGUFError(f"the GGUF file's tensor name {name!r} appears twice")
        n_dims: int = cursor.scalar("<I", f"tensor {name!r}'s n_dims")
        if not 1 <= n_dims <= MAX_DIMS:
            raise GGUFError(
                f"the GGUF file's tensor {name!r} has n_dims {n_dims}; GGUF tensors have 1 "
                f"to {MAX_DIMS}"
            )
        dims = struct.unpack(f"<{n_dims}Q", cursor.take(8 * n_dims, f"tensor {name!r}'s dims"))
        if min(dims) < 1:
            raise GGUFError(
                f"the GGUF file's tensor {name!r} has dims {list(dims)}; each must be >= 1"
            )
        if int(np.prod(np.array(dims, dtype=object))) >= 2**63:
            raise GGUFError(
                f"the GGUF file's tensor {name!r} has dims {list(dims)}, whose element count "
                f"overflows 64 bits"
            )
        type_id: int = cursor.scalar("<I", f"tensor {name!r}'s type")
        offset: int = cursor.scalar("<Q", f"tensor {name!r}'s offset")
        infos[name] = (tuple(reversed(dims)), type_id, offset)
    return infos


def _place(
    name: str,
    shape: tuple[int, ...],
    type_id: int,
    offset: int,
    data_start: int,
    alignment: int,
    file_size: int,
) -> GGUFTensorInfo:
    """One tensor's entry checked: a known type, whole blocks, aligned, inside the file."""
    sizes = _type_sizes()
    if type_id not in sizes:
        raise GGUFError(f"the GGUF file's tensor {name!r} has type id {type_id}, not a ggml type")
    type_name, block_values, block_bytes = sizes[type_id]
    if shape[-1] % block_values:
        raise GGUFError(
            f"the GGUF file's tensor {name!r} ({type_name}) has rows of {shape[-1]} values, "
            f"not a whole number of {block_values}-value blocks"
        )
    nbytes = int(np.prod(np.array(shape, dtype=object))) // block_values * block_bytes
    if offset % alignment:
        raise GGUFError(
            f"the GGUF file's tensor {name!r} has offset {offset}, not a multiple of "
            f"general.alignment {alignment}"
        )
    if data_start + offset + nbytes > file_size:
        raise GGUFError(
            f"the GGUF file is truncated: tensor {name!r} needs bytes {data_start + offset} to "
            f"{data_start + offset + nbytes} of a file of {file_size} bytes"
        )
    return GGUFTensorInfo(name, shape, type_name, data_start + offset, nbytes)
