"""Record ``attnlab.triton_attention`` on a CUDA GPU against SDPA's FlashAttention backend.

Site tooling, not part of the suite (which never needs a GPU). On a machine with a CUDA
GPU and Triton, it times the package's Triton kernels, compiled, against
``F.scaled_dot_product_attention`` restricted to ``SDPBackend.FLASH_ATTENTION``, and
writes what it measured, with the GPU's name, to JSON:

* float16 and bfloat16, head widths 64 and 128, causal and not, at several lengths
  ``T``, with ``B = tokens // T`` sequences and ``H = 2048 // D`` heads (16k tokens and a
  model width of 2048, the shapes FlashAttention-2's paper reports);
* the forward pass alone, and the backward pass alone (the forward's graph kept);
* TFLOP/s as FlashAttention's papers count them: ``4 * B * H * T^2 * D`` for the
  forward (two matrix products), half that when causal, and 2.5 times the forward's for
  the backward (five products);
* for ``triton_attention``, each of a few block sizes, and the largest difference of
  its output from SDPA's (both against a float32 reference) as a check that it ran right.

Times are GPU times (``triton.testing.do_bench``: CUDA events, the median of repeated
calls after warm-up, caches flushed between calls).

    python scripts/bench_triton_gpu.py [--quick] [--output scripts/bench_triton_gpu.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

from attnlab import TRITON_MODE, triton_attention

RESULTS = Path(__file__).resolve().with_suffix(".json")
TOKENS = 16_384
MODEL_WIDTH = 2048
LENGTHS = (512, 1024, 2048, 4096, 8192, 16384)
HEAD_DIMS = (64, 128)
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}
BLOCKS = ((64, 64), (128, 64), (128, 32))  # (block_m, block_n) tried for triton_attention
QKV = tuple[Tensor, Tensor, Tensor]
Attend = Callable[[Tensor, Tensor, Tensor], Tensor]


def attention_flops(B: int, H: int, T: int, D: int, causal: bool) -> float:
    """Forward FLOPs of attention: two (T, T, D) products per head, halved when causal."""
    flops = 4.0 * B * H * T * T * D
    return flops / 2 if causal else flops


def gpu_time_ms(fn: Callable[[], object]) -> float:
    """Median GPU time of ``fn`` in milliseconds (CUDA events, warm-up, caches flushed)."""
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))


def time_method(attend: Attend, inputs: QKV, flops: float) -> dict[str, float]:
    """Forward and backward times (ms) and TFLOP/s of one attention on ``inputs``."""
    with torch.no_grad():
        forward_ms = gpu_time_ms(lambda: attend(*inputs))
    q, k, v = (x.detach().requires_grad_(True) for x in inputs)
    output = attend(q, k, v)
    grad_output = torch.randn_like(output)
    backward_ms = gpu_time_ms(
        lambda: torch.autograd.grad(output, (q, k, v), grad_output, retain_graph=True)
    )
    return {
        "forward_ms": round(forward_ms, 4),
        "backward_ms": round(backward_ms, 4),
        "forward_tflops": round(flops / forward_ms / 1e9, 2),
        "backward_tflops": round(2.5 * flops / backward_ms / 1e9, 2),
    }


def methods(causal: bool) -> dict[str, Attend]:
    """SDPA's flash backend and ``triton_attention`` with each of ``BLOCKS``, by name."""

    def sdpa(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def triton_blocks(block_m: int, block_n: int) -> Attend:
        def attend(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
            output, _ = triton_attention(
                q, k, v, is_causal=causal, block_m=block_m, block_n=block_n
            )
            return output

        return attend

    found: dict[str, Attend] = {"sdpa_flash": sdpa}
    found.update({f"triton_{m}x{n}": triton_blocks(m, n) for m, n in BLOCKS})
    return found


def one_case(T: int, D: int, dtype: torch.dtype, causal: bool) -> list[dict[str, Any]]:
    """Every method at one length, head width, dtype and causal flag."""
    B, H = max(TOKENS // T, 1), MODEL_WIDTH // D
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(B, H, T, D, device="cuda", dtype=dtype, generator=gen) for _ in range(3))
    with torch.no_grad():  # float32, by PyTorch's memory-efficient or math kernel
        reference = F.scaled_dot_product_attention(
            q.float(), k.float(), v.float(), is_causal=causal
        )
    case = {"T": T, "B": B, "H": H, "D": D, "dtype": str(dtype).removeprefix("torch."),
            "causal": causal}  # fmt: skip
    rows = []
    for name, attend in methods(causal).items():
        try:
            with torch.no_grad():
                error = (attend(q, k, v).float() - reference).abs().max().item()
            timings = time_method(attend, (q, k, v), attention_flops(B, H, T, D, causal))
        except Exception as failure:  # a block size too large for this GPU, say: go on
            rows.append({**case, "method": name, "failed": f"{type(failure).__name__}: {failure}"})
            continue
        rows.append({**case, "method": name, "max_abs_error": error, **timings})
    return rows


def gpu_info() -> dict[str, Any]:
    """The GPU and the software a run was recorded with."""
    import triton

    return {
        "gpu": torch.cuda.get_device_name(),
        "capability": ".".join(map(str, torch.cuda.get_device_capability())),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "triton": triton.__version__,
        "python": platform.python_version(),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the sweep (``--quick``: one length, one head width) and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="T = 2048 and D = 64 only")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available() or TRITON_MODE != "compiled":
        print("no CUDA GPU here: this recording needs one (the suite does not)", file=sys.stderr)
        return 1
    lengths, head_dims = ((2048,), (64,)) if args.quick else (LENGTHS, HEAD_DIMS)
    results: list[dict[str, Any]] = []
    for dtype in DTYPES.values():
        for D in head_dims:
            for T in lengths:
                for causal in (False, True):
                    rows = one_case(T, D, dtype, causal)
                    for row in rows:
                        print(json.dumps(row), flush=True)
                    results += rows
    record = {"machine": gpu_info(), "quick": args.quick, "tokens": TOKENS,
              "model_width": MODEL_WIDTH, "results": results}  # fmt: skip
    args.output.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
