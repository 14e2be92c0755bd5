"""Benchmark: explicit attention, ``flash_attention`` and PyTorch's kernels, side by side.

It needs the ``bench`` extra (tqdm, matplotlib, numpy)::

    python -m attnlab.bench               # the forward sweep, written to ./forward.json
    python -m attnlab.bench --quick       # tiny sizes, to check that everything runs
    python -m attnlab.bench --decode --window --output DIR   # other runs, into DIR
    python -m attnlab.bench --all --output src/attnlab/results   # `make bench`

Each run writes ``<name>.json`` into ``--output`` (default: the current directory).
The recorded results the docs print and plot ship inside the package, as
``attnlab/results/<name>.json``; [`load_results`][attnlab.bench.load_results] reads them
by name, from a checkout or from an installed wheel alike, and ``attnlab.plot``
(``plot_sweep``, ``plot_decode``, ``plot_window``) draws them. The runs, one entry each of
[`SUITES`][attnlab.bench.SUITES]:

* ``forward`` (the default): the forward sweep of every attention path
  ([`run_benchmark`][attnlab.bench.run_benchmark]);
* ``flash`` (``--flash``): ``flash_attention`` against PyTorch's SDPA timed in turn in
  one process, quiet and beside a busy neighbour process pinned to one core, multi-head
  and grouped-query, at ``T = 4096``;
* ``flash_taught`` (``--flash_taught``): the same cases, quiet, timing ``flash_attention``'s
  fast path and its loop as taught (``attnlab.flash.flash_attention_taught``), each
  against SDPA, in turn in one process;
* ``backward`` (``--backward``): forward+backward memory and backward time;
* ``ring`` (``--ring``): ring attention's memory per rank;
* ``decode`` (``--decode``): decoding token by token through a ``KVCache`` against
  recomputing the prefix at every step, and the KV cache's bytes per token;
* ``gqa`` (``--gqa``): one decoding step at a long cache, SmolLM2's attention shape with
  9 against 3 key/value heads: time and the cache's bytes;
* ``window`` (``--window``): sliding-window flash attention against full causal flash
  attention as ``T`` grows;
* ``llm`` (``--llm``): SmolLM2-135M on attnlab's attention (``attnlab.llama``) against
  transformers' Llama on the same weights: load time, prefill and decode tokens per
  second, and decoding 256 tokens with the KV cache against recomputing (needs the
  ``llm`` and ``hf`` extras);
* ``streaming`` (``--streaming``): not a timing, SmolLM2's loss on 1,024 tokens of the
  package's long text through a sliding window, with and without attention sinks
  (StreamingLLM), against full attention;
* ``cache_formats`` (``--cache_formats``): not a timing, SmolLM2's loss on 1,024 tokens
  of the long text with its KV cache's keys, values or both in GGUF's 8- and 4-bit
  block formats, bytes per token, and per layer what 4-bit keys or values do to the
  attention weights and output;
* ``passkey`` (``--passkey``): not a timing, SmolLM2's passkey retrieval and loss by
  position on a 10,240-token prompt (past its 8,192), with each rotary scaling;
* ``trained`` (``--trained``): not a timing, SmolLM2's OV-circuit copying score for every
  head, and its sinks replaced by line breaks or renumbered inside the cache.

The package's rooms: ``results`` (the recorded runs and reading them), ``measure``
(time, peak extra memory, a fresh process per configuration), one module per suite,
``suites`` (the table) and ``__main__`` (the command line).
"""

from __future__ import annotations

from .backward import run_backward_benchmark
from .decode import kv_cache_sizes, run_decode_benchmark
from .forward import METHODS, MODULE_METHODS, run_benchmark
from .results import RESULT_NAMES, load_results, results_file
from .ring_memory import run_ring_memory
from .suites import SUITES, Suite
from .window import run_window_benchmark

__all__ = [
    "METHODS",
    "MODULE_METHODS",
    "RESULT_NAMES",
    "SUITES",
    "Suite",
    "kv_cache_sizes",
    "load_results",
    "results_file",
    "run_backward_benchmark",
    "run_benchmark",
    "run_decode_benchmark",
    "run_ring_memory",
    "run_window_benchmark",
]
