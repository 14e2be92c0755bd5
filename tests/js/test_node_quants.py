"""The page's dequantisation (docs/assets/javascripts/live/quants.js) against gguf-py's.

Random block bytes of every type quants.js reads (random bytes are valid input for each,
the float16 scales included: inf and NaN come out as gguf-py gives them) are dequantised
here by ``gguf.quants.dequantize``; Node's test runner (tests/js/quants.test.mjs) checks
that quants.js gives the same float32 values bit for bit.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest
from support import run_node_tests

HERE = Path(__file__).resolve().parent
TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K")
COLS, ROWS = 512, 16  # each row two blocks of 256 values (sixteen of 32)


def reference_data() -> dict[str, object]:
    """Per type: random bytes of ROWS x COLS values and gguf-py's float32 values."""
    gguf = pytest.importorskip("gguf", reason="the llm extra is not installed")
    from gguf.quants import dequantize

    rng = np.random.default_rng(0)
    types = {}
    for name in TYPES:
        qtype = gguf.GGMLQuantizationType[name]
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        data = rng.integers(0, 256, (ROWS, COLS // block * size), dtype=np.uint8)
        with np.errstate(invalid="ignore", over="ignore"):  # inf * 0 where a scale is inf
            values = np.ascontiguousarray(dequantize(data, qtype), dtype=np.float32)
        assert values.shape == (ROWS, COLS)
        types[name] = {
            "id": int(qtype),
            "bytes": base64.b64encode(data.tobytes()).decode(),
            "values": base64.b64encode(values.tobytes()).decode(),
        }
    return {"types": types}


def test_quants_javascript_dequantises_as_gguf_py(tmp_path: Path) -> None:
    """``node --test tests/js/quants.test.mjs`` passes: every type bit for bit."""
    reference = tmp_path / "quants.json"
    reference.write_text(json.dumps(reference_data()), encoding="utf-8")
    run_node_tests(HERE / "quants.test.mjs", {"QUANTS_REFERENCE": str(reference)})
