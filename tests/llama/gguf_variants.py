"""Broken and hostile GGUF files, each made from one small valid file by editing its fields.

``Layout.parse`` splits a GGUF file into its fields (written here from the format's
description, not with the readers under test); each variant edits one field and
``Layout.build`` writes the bytes again. ``VARIANTS`` maps a variant's name to its
bytes' maker and the outcome both readers must give: a regular expression the refusal
must match (the same words in Python and JavaScript), or ``ACCEPT`` (the valid file's
logits).
"""

from __future__ import annotations

import copy
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

ACCEPT = "accept"
# GGUF value types: struct formats of the fixed-size ones
FORMATS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?"}
FORMATS |= {10: "<Q", 11: "<q", 12: "<d"}
STRING, ARRAY, UINT32, INT32, FLOAT32 = 8, 9, 4, 5, 6
HALF_NAN, HALF_INF = b"\x00\x7e", b"\x00\x7c"


def u32(n: int) -> bytes:
    return struct.pack("<I", n)


def u64(n: int) -> bytes:
    return struct.pack("<Q", n)


def gstr(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return u64(len(raw)) + raw


def value_bytes(type_id: int, value: object) -> bytes:
    """A metadata value of GGUF type ``type_id``; an array is ``(item_type, items)``."""
    if type_id == STRING:
        assert isinstance(value, str | bytes)
        return gstr(value)
    if type_id == ARRAY:
        item_type, items = value  # type: ignore[misc]
        if isinstance(items, bytes):  # uint8 items, as they are
            return u32(item_type) + u64(len(items)) + items
        return u32(item_type) + u64(len(items)) + b"".join(value_bytes(item_type, v) for v in items)
    return struct.pack(FORMATS[type_id], value)


@dataclass
class Tensor:
    name: str
    dims: list[int]  # innermost first, as stored
    type_id: int
    offset: int


@dataclass
class Layout:
    """A GGUF file's fields: metadata as (key, type, value bytes), tensors, data section."""

    version: int = 3
    kvs: list[tuple[str | bytes, int, bytes]] = field(default_factory=list)
    tensors: list[Tensor] = field(default_factory=list)
    data: bytes = b""
    alignment: int = 32
    boundaries: dict[str, int] = field(default_factory=dict)  # section -> its end in the file

    @classmethod
    def parse(cls, raw: bytes) -> Layout:
        at = 24
        version, n_tensors, n_kv = struct.unpack_from("<IQQ", raw, 4)
        layout = cls(version, boundaries={"header": 24})

        def skip_value(type_id: int) -> None:
            nonlocal at
            if type_id == STRING:
                at += 8 + struct.unpack_from("<Q", raw, at)[0]
            elif type_id == ARRAY:
                item_type, count = struct.unpack_from("<IQ", raw, at)
                at += 12
                for _ in range(count):
                    skip_value(item_type)
            else:
                at += struct.calcsize(FORMATS[type_id])

        for _ in range(n_kv):
            length = struct.unpack_from("<Q", raw, at)[0]
            key = raw[at + 8 : at + 8 + length].decode()
            type_id = struct.unpack_from("<I", raw, at + 8 + length)[0]
            at += 12 + length
            start = at
            skip_value(type_id)
            layout.kvs.append((key, type_id, raw[start:at]))
        layout.boundaries["metadata"] = at
        for _ in range(n_tensors):
            length = struct.unpack_from("<Q", raw, at)[0]
            name = raw[at + 8 : at + 8 + length].decode()
            at += 8 + length
            n_dims = struct.unpack_from("<I", raw, at)[0]
            dims = list(struct.unpack_from(f"<{n_dims}Q", raw, at + 4))
            at += 4 + 8 * n_dims
            type_id, offset = struct.unpack_from("<IQ", raw, at)
            at += 12
            layout.tensors.append(Tensor(name, dims, type_id, offset))
        layout.boundaries["tensor infos"] = at
        start = -(-at // layout.alignment) * layout.alignment
        layout.boundaries["padding"] = start
        layout.data = raw[start:]
        return layout

    def __repr__(self) -> str:
        return f"Layout({len(self.kvs)} keys, {len(self.tensors)} tensors)"

    def build(self, tensor_count: int | None = None, kv_count: int | None = None) -> bytes:
        tensors = len(self.tensors) if tensor_count is None else tensor_count
        kvs = len(self.kvs) if kv_count is None else kv_count
        parts = [b"GGUF" + u32(self.version) + u64(tensors) + u64(kvs)]
        parts += [gstr(key) + u32(t) + v for key, t, v in self.kvs]
        for t in self.tensors:
            parts.append(gstr(t.name) + u32(len(t.dims)) + b"".join(map(u64, t.dims)))
            parts.append(u32(t.type_id) + u64(t.offset))
        size = sum(map(len, parts))
        return b"".join([*parts, b"\0" * (-size % self.alignment), self.data])

    def set(self, key: str, type_id: int, value: object) -> Layout:
        """Set (or add) ``key``; returns self."""
        raw = value_bytes(type_id, value)
        for i, (k, _, _) in enumerate(self.kvs):
            if k == key:
                self.kvs[i] = (key, type_id, raw)
                return self
        self.kvs.append((key, type_id, raw))
        return self

    def raw(self, key: str, type_id: int, raw: bytes) -> Layout:
        """Replace ``key``'s value with ``raw`` bytes of type ``type_id``."""
        self.kvs = [(k, type_id, raw) if k == key else (k, t, v) for k, t, v in self.kvs]
        return self

    def drop(self, key: str) -> Layout:
        self.kvs = [kv for kv in self.kvs if kv[0] != key]
        return self

    def add(self, name: str, dims: list[int], type_id: int, raw: bytes) -> Layout:
        """Append a tensor of ``raw`` bytes at the end of the data section."""
        self.data += b"\0" * (-len(self.data) % self.alignment)
        self.tensors.append(Tensor(name, dims, type_id, len(self.data)))
        self.data += raw
        return self

    def tensor(self, name: str) -> Tensor:
        return next(t for t in self.tensors if t.name == name)

    def poke(self, name: str, at: int, raw: bytes) -> Layout:
        """Overwrite bytes ``at`` .. of tensor ``name``'s data."""
        start = self.tensor(name).offset + at
        self.data = self.data[:start] + raw + self.data[start + len(raw) :]
        return self


Edit = Callable[[Layout], bytes]


def edited(change: Callable[[Layout], object]) -> Edit:
    """A variant that edits a copy of the layout, then writes it."""

    def make(base: Layout) -> bytes:
        layout = copy.deepcopy(base)
        change(layout)
        return layout.build()

    return make


def cut(section: str, extra: int = 0) -> Edit:
    """The valid file cut at the end of ``section`` (plus ``extra`` bytes)."""
    return lambda base: base.build()[: base.boundaries[section] + extra]


def first(base: Layout, type_id: int) -> str:
    """The first tensor of ggml type ``type_id``."""
    return next(t.name for t in base.tensors if t.type_id == type_id)


TOKEN_ID = "tokenizer.ggml.{}_token_id"
SHAPE = r"tensor '{}' has shape \({}\); the file's llama\.\* keys imply \({}\)"
VARIANTS: dict[str, tuple[Edit, str]] = {
    # header
    "magic": (lambda b: b"GGUG" + b.build()[4:], "is not a GGUF file"),
    "empty file": (lambda b: b"", "is not a GGUF file"),
    "12 bytes": (lambda b: b.build()[:12], r"truncated: tensor_count at byte 8 needs 8 bytes"),
    "version 1": (lambda b: b.build()[:4] + u32(1) + b.build()[8:], "version is 1; GGUF versions"),
    "version 2**32-1": (lambda b: b.build()[:4] + u32(2**32 - 1) + b.build()[8:], "version is"),
    "tensor_count 2**63": (
        lambda b: b.build(tensor_count=2**63),
        "tensor_count is 9223372036854775808, more",
    ),
    "kv_count 2**64-1": (lambda b: b.build(kv_count=2**64 - 1), "kv_count is 18446744073709551615"),
    "tensor_count one short": (lambda b: b.build(tensor_count=19), r"lacks 1 tensor\(s\)"),
    # strings
    "key length 2**62": (
        lambda b: b.build()[:24] + u64(2**62) + b.build()[32:],
        r"length of metadata key #0 is 4611686018427387904, more than",
    ),
    "string length 2**62": (
        edited(lambda la: la.kvs.insert(0, ("general.name", STRING, u64(2**62) + b"x"))),
        r"length of 'general\.name' is 4611686018427387904, more than",
    ),
    "key not UTF-8": (
        edited(lambda la: la.kvs.insert(0, (b"\xff\xfe", STRING, gstr("v")))),
        "metadata key #0 is not UTF-8",
    ),
    # arrays
    "array of 2**40 tokens": (
        edited(lambda la: la.raw("tokenizer.ggml.tokens", ARRAY, u32(STRING) + u64(2**40))),
        r"array length of 'tokenizer\.ggml\.tokens' is 1099511627776, more than",
    ),
    "array of 2**40 scores": (
        edited(lambda la: la.kvs.insert(0, ("tokenizer.ggml.scores", ARRAY, u32(6) + u64(2**40)))),
        r"array length of 'tokenizer\.ggml\.scores' is 1099511627776, more than",
    ),
    "an array of 2**24 + 1 bytes (memory)": (
        edited(lambda la: la.set("x", ARRAY, (0, b"\0" * (2**24 + 1)))),
        r"array length of 'x' is 16777217, past the 16777216 items",
    ),
    "array of arrays": (
        edited(lambda la: la.kvs.insert(0, ("x", ARRAY, u32(ARRAY) + u64(1)))),
        r"'x' is an array of value type 9",
    ),
    # type ids
    "value type 13": (edited(lambda la: la.kvs.insert(0, ("x", 13, b""))), "'x' has value type 13"),
    "tensor type id 99": (
        edited(lambda la: setattr(la.tensors[0], "type_id", 99)),
        r"tensor 'token_embd\.weight' has type id 99, not a ggml type",
    ),
    "tensor type I8": (
        edited(lambda la: setattr(la.tensor("output_norm.weight"), "type_id", 24)),
        r"tensor 'output_norm\.weight' has type I8, which is not supported",
    ),
    # ranks and dims
    "n_dims 0": (
        edited(lambda la: setattr(la.tensor("output_norm.weight"), "dims", [])),
        r"tensor 'output_norm\.weight' has n_dims 0; GGUF tensors have 1 to 4",
    ),
    "n_dims 5": (
        edited(lambda la: setattr(la.tensor("output_norm.weight"), "dims", [256, 1, 1, 1, 1])),
        r"tensor 'output_norm\.weight' has n_dims 5",
    ),
    "a dim of 0": (
        edited(lambda la: setattr(la.tensor("blk.0.attn_q.weight"), "dims", [256, 0])),
        r"tensor 'blk\.0\.attn_q\.weight' has dims \[256, 0\]; each must be >= 1",
    ),
    "element count past 64 bits": (
        edited(lambda la: setattr(la.tensor("output_norm.weight"), "dims", [2**32, 2**32])),
        r"tensor 'output_norm\.weight' has dims \[4294967296, 4294967296\], whose element count",
    ),
    "a rank of 3 (64, 1, 256)": (
        edited(lambda la: setattr(la.tensor("token_embd.weight"), "dims", [256, 1, 64])),
        SHAPE.format(r"token_embd\.weight", "64, 1, 256", "64, 256"),
    ),
    # offsets
    "offset misaligned": (
        edited(lambda la: setattr(la.tensors[1], "offset", la.tensors[1].offset + 1)),
        r"has offset \d+, not a multiple of general\.alignment 32",
    ),
    "offset past the end": (
        edited(lambda la: setattr(la.tensors[-1], "offset", len(la.data))),
        r"truncated: tensor '.*' needs bytes \d+ to \d+ of a file of \d+ bytes",
    ),
    "offset 2**63": (
        edited(lambda la: setattr(la.tensors[0], "offset", 2**63)),
        r"truncated: tensor 'token_embd\.weight' needs bytes",
    ),
    # alignment
    "alignment 3": (
        edited(lambda la: la.set("general.alignment", UINT32, 3)),
        r"general\.alignment must be a power of two \(at most 2\*\*30\); got 3",
    ),
    "alignment 0": (
        edited(lambda la: la.set("general.alignment", UINT32, 0)),
        r"general\.alignment must be a power of two",
    ),
    "alignment a string": (
        edited(lambda la: la.set("general.alignment", STRING, "32")),
        r"general\.alignment must be a power of two .*; got '32'",
    ),
    # duplicates
    "duplicate key": (
        edited(lambda la: la.kvs.append(la.kvs[-1])),
        r"metadata key '[\w.]+' appears twice",
    ),
    "duplicate general.name": (
        edited(lambda la: la.kvs.extend([("general.name", STRING, gstr("a"))] * 2)),
        r"metadata key 'general\.name' appears twice",
    ),
    "duplicate tensor name": (
        edited(lambda la: setattr(la.tensors[2], "name", la.tensors[1].name)),
        r"tensor name 'blk\.0\.attn_norm\.weight' appears twice",
    ),
    # tokenizer ids, vocabulary and merges
    "bos id = vocabulary": (
        edited(lambda la: la.set(TOKEN_ID.format("bos"), UINT32, 64)),
        r"tokenizer\.ggml\.bos_token_id must be a token id in 0 \.\. 63 \(the vocabulary\); got 64",
    ),
    "eos id 2**31": (
        edited(lambda la: la.set(TOKEN_ID.format("eos"), UINT32, 2**31)),
        r"tokenizer\.ggml\.eos_token_id must be a token id in 0 \.\. 63 .*got 2147483648",
    ),
    "padding id -1": (
        edited(lambda la: la.set(TOKEN_ID.format("padding"), INT32, -1)),
        r"tokenizer\.ggml\.padding_token_id must be a token id .*; got -1",
    ),
    "no bos id": (
        edited(lambda la: la.drop(TOKEN_ID.format("bos"))),
        r"lacks the metadata key 'tokenizer\.ggml\.bos_token_id'",
    ),
    "merge of a token outside the vocabulary": (
        edited(lambda la: la.set("tokenizer.ggml.merges", ARRAY, (STRING, ["\u0120 A"]))),
        r"tokenizer\.ggml\.merges\[0\] must be two tokens .*got 'Ġ A' \('Ġ' is not a token\)",
    ),
    "merge without a space": (
        edited(lambda la: la.set("tokenizer.ggml.merges", ARRAY, (STRING, ["A B", "AB"]))),
        r"tokenizer\.ggml\.merges\[1\] must be two tokens .*got 'AB' \(not two tokens\)",
    ),
    "merge whose join is no token": (
        edited(lambda la: la.set("tokenizer.ggml.merges", ARRAY, (STRING, ["B A"]))),
        r"tokenizer\.ggml\.merges\[0\] .*got 'B A' \('BA' is not a token\)",
    ),
    "scores shorter than the vocabulary": (
        edited(lambda la: la.set("tokenizer.ggml.scores", ARRAY, (FLOAT32, [0.0] * 3))),
        r"tokenizer\.ggml\.scores must hold one number per token \(64\); got an array of 3",
    ),
    "token types longer than the vocabulary": (
        edited(lambda la: la.set("tokenizer.ggml.token_type", ARRAY, (INT32, [1] * 65))),
        r"tokenizer\.ggml\.token_type must hold one number per token \(64\); got an array of 65",
    ),
    "more tokens than embedding rows": (
        edited(
            lambda la: la.set(
                "tokenizer.ggml.tokens", ARRAY, (STRING, [*map(chr, range(33, 97)), "AB"])
            ).set("tokenizer.ggml.token_type", ARRAY, (INT32, [1] * 65))
        ),
        r"tokenizer\.ggml\.tokens holds 65 tokens, more than the model's vocabulary of 64",
    ),
    # config counts
    "block_count 2**32-1": (
        edited(lambda la: la.set("llama.block_count", UINT32, 2**32 - 1)),
        r"llama\.block_count is 4294967295, but the file holds tensors of 2 block\(s\)",
    ),
    "block_count 1": (
        edited(lambda la: la.set("llama.block_count", UINT32, 1)),
        r"llama\.block_count is 1, but the file holds tensors of 2 block\(s\)",
    ),
    "block_count a string": (
        edited(lambda la: la.set("llama.block_count", STRING, "2")),
        r"llama\.block_count must be a positive int; got '2'",
    ),
    "head_count 0": (
        edited(lambda la: la.set("llama.attention.head_count", UINT32, 0)),
        r"llama\.attention\.head_count must be a positive int; got 0",
    ),
    "head_count 3 (not a multiple of 2 kv heads)": (
        edited(lambda la: la.set("llama.attention.head_count", UINT32, 3)),
        r"embedding_length \(256\) must be a multiple of llama\.attention\.head_count \(3\)",
    ),
    "head_count 8 (the head width 32 is not the rotary's 64)": (
        edited(lambda la: la.set("llama.attention.head_count", UINT32, 8)),
        r"rope\.dimension_count \(64\) must equal the head width 32 .*invalid n_rot",
    ),
    "head_count_kv 4 (the key rows imply 2)": (
        edited(lambda la: la.set("llama.attention.head_count_kv", UINT32, 4)),
        SHAPE.format(r"blk\.0\.attn_k\.weight", "128, 256", "256, 256"),
    ),
    "embedding_length 128 (the head width 32 is not the rotary's 64)": (
        edited(lambda la: la.set("llama.embedding_length", UINT32, 128)),
        r"rope\.dimension_count \(64\) must equal the head width 32 .*invalid n_rot",
    ),
    "feed_forward_length 0": (
        edited(lambda la: la.set("llama.feed_forward_length", UINT32, 0)),
        r"llama\.feed_forward_length must be a positive int; got 0",
    ),
    "rms epsilon NaN": (
        edited(lambda la: la.set("llama.attention.layer_norm_rms_epsilon", FLOAT32, float("nan"))),
        r"layer_norm_rms_epsilon must be a number > 0; got nan",
    ),
    "no embedding_length": (
        edited(lambda la: la.drop("llama.embedding_length")),
        r"lacks the metadata key 'llama\.embedding_length'",
    ),
    "another architecture": (
        edited(lambda la: la.set("general.architecture", STRING, "gptj")),
        r"general\.architecture must be one of [a-z0-9, ]+; got 'gptj'",
    ),
    "architecture 'constructor'": (
        edited(lambda la: la.set("general.architecture", STRING, "constructor")),
        r"general\.architecture must be one of [a-z0-9, ]+; got 'constructor'",
    ),
    "architecture an array": (
        edited(lambda la: la.set("general.architecture", ARRAY, (STRING, ["llama"]))),
        r"general\.architecture must be one of [a-z0-9, ]+; got \['llama'\]",
    ),
    "pre-tokeniser 'toString'": (
        edited(lambda la: la.set("tokenizer.ggml.pre", STRING, "toString")),
        r"tokenizer\.ggml\.pre",
    ),
    # tensors against the config
    "a tensor missing": (
        edited(lambda la: la.tensors.remove(la.tensor("blk.1.ffn_up.weight"))),
        r"lacks 1 tensor\(s\) of the llama family, e\.g\. 'blk\.1\.ffn_up\.weight'",
    ),
    "a tensor unused": (
        edited(lambda la: la.add("blk.0.extra", [8], 0, b"\0" * 32)),
        r"has tensor\(s\) the llama family does not use, e\.g\. 'blk\.0\.extra'",
    ),
    "a tensor named 'constructor'": (
        edited(lambda la: la.add("constructor", [8], 0, b"\0" * 32)),
        r"has tensor\(s\) the llama family does not use, e\.g\. 'constructor'",
    ),
    "two tensors overlapping": (
        edited(lambda la: setattr(la.tensors[2], "offset", la.tensors[2].offset - 32)),
        r"tensors 'blk\.0\.attn_norm\.weight' and 'blk\.0\.attn_q\.weight' overlap",
    ),
    "output_norm of 128": (
        edited(lambda la: setattr(la.tensor("output_norm.weight"), "dims", [128])),
        SHAPE.format(r"output_norm\.weight", "128,", "256,"),
    ),
    # harmless
    "an unknown key": (edited(lambda la: la.set("general.comment", STRING, "hello")), ACCEPT),
    "another general.name": (edited(lambda la: la.set("general.name", STRING, "renamed")), ACCEPT),
    "bytes after the data": (lambda b: b.build() + b"\0" * 100, ACCEPT),
}
# truncation at every section boundary
for _section in ("header", "metadata", "tensor infos", "padding"):
    VARIANTS[f"cut after the {_section}"] = (cut(_section), "truncated")
VARIANTS["cut inside the first key"] = (cut("header", 10), "truncated")
VARIANTS["cut inside the data"] = (cut("padding", 100_000), "truncated: tensor '.*' needs bytes")
VARIANTS["cut one byte short"] = (lambda b: b.build()[:-1], "truncated: tensor '.*' needs bytes")


def number_variants(base: Layout) -> dict[str, tuple[Edit, str]]:
    """NaN and infinity in weights: a float32 vector, a float16 matrix, block scales."""
    found: dict[str, tuple[Edit, str]] = {}
    for label, type_id, at, raw, index in [
        ("NaN in a float32 matrix", 0, 4 * 7, struct.pack("<f", float("nan")), 7),
        ("infinity in a float32 matrix", 0, 0, struct.pack("<f", float("inf")), 0),
        ("NaN in a float16 matrix", 1, 2 * 300, HALF_NAN, 300),
        ("a NaN Q8_0 block scale", 8, 34 * 5, HALF_NAN, 5 * 32),  # block 5's
        ("an infinite Q4_K scale", 12, 144 * 2, HALF_INF, 2 * 256),
        ("an infinite Q4_1 minimum", 3, 20 + 2, HALF_INF, 32),
        ("a NaN Q6_K scale", 14, 208, HALF_NAN, 0),
    ]:
        name = first(base, type_id)
        type_name = {0: "F32", 1: "F16", 3: "Q4_1", 8: "Q8_0", 12: "Q4_K", 14: "Q6_K"}[type_id]
        found[label] = (
            edited(lambda la, name=name, at=at, raw=raw: la.poke(name, at, raw)),
            rf"tensor '{name}' \({type_name}\) holds NaN or infinity at flat index {index};",
        )
    return found
