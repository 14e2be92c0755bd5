"""SmolLM2-135M on attnlab's attention against transformers' Llama (``llm``).

Three measurements, in one fresh process, on one thread, in CPU time:

* loading: ``load_smollm2()`` (read the GGUF file, dequantise, build the model and
  the tokenizer), and the import of ``attnlab.llama`` before it;
* prefill and decode speed of [`LlamaModel`][attnlab.llama.LlamaModel] and of
  transformers' ``LlamaForCausalLM`` holding the very same float32 weights (copied
  from ours), both on PyTorch's SDPA: tokens per second for a prompt read in one pass,
  and for new tokens decoded one at a time through each model's KV cache;
* decoding with the cache against recomputing: attnlab's model generates
  ``new_tokens`` (256) greedily through one [`KVCache`][attnlab.KVCache] per layer,
  and, as a decoder without a cache does, by running the whole sequence so far at
  every step. The recomputing step ``n`` costs the same whatever the tokens, so it is
  timed at one length in each run of ``stride`` steps and counts for all of them (as
  in the ``decode`` suite).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from .measure import cpu_time_header, fresh_process_context, in_fresh_process

__all__ = ["LLM_FULL", "LLM_QUICK", "hf_llama_from", "llm_worker", "run_llm_benchmark"]

LLM_FULL: dict[str, Any] = {
    "prefill_T": 128,
    "decode_prompt_T": 32,
    "decode_steps": 64,
    "new_tokens": 256,
    "stride": 16,
    "repeats": 3,
    "reference": True,
}
LLM_QUICK: dict[str, Any] = {
    "prefill_T": 8,
    "decode_prompt_T": 4,
    "decode_steps": 4,
    "new_tokens": 8,
    "stride": 4,
    "repeats": 1,
    "reference": True,
}
PROMPT = (
    "Attention lets every token look at every earlier token and decide how much of each "
    "to read. A query is compared with every key; the scores become weights through a "
    "softmax; the weights mix the values. "
)


def hf_llama_from(model: Any, attn_implementation: str = "sdpa") -> Any:
    """A transformers ``LlamaForCausalLM`` with a copy of an attnlab ``LlamaModel``'s weights.

    Args:
        model: An [`LlamaModel`][attnlab.llama.LlamaModel].
        attn_implementation: transformers' attention (``"sdpa"`` or ``"eager"``).

    Returns:
        The transformers model, float32, eval mode.
    """
    import transformers

    c = model.config
    sizes: dict[str, Any] = dict(  # rope_theta: transformers 5 moves it to rope_parameters
        vocab_size=c.vocab_size,
        hidden_size=c.d_model,
        intermediate_size=c.ffn_dim,
        num_hidden_layers=c.num_layers,
        num_attention_heads=c.num_heads,
        num_key_value_heads=c.num_kv_heads,
        head_dim=c.head_dim,
        max_position_embeddings=c.context_length,
        rms_norm_eps=c.rms_eps,
        rope_theta=c.rope_theta,
        tie_word_embeddings=True,
        bos_token_id=c.bos_token_id,
        eos_token_id=c.eos_token_id,
        attn_implementation=attn_implementation,
    )
    config: Any = transformers.LlamaConfig(**sizes)
    names = {
        "attn_norm": "input_layernorm",
        "ffn_norm": "post_attention_layernorm",
        "attn": "self_attn",
        "ffn": "mlp",
    }
    state = {
        "model.embed_tokens.weight": model.embed.weight,
        "model.norm.weight": model.norm.weight,
    }
    for name, tensor in model.layers.state_dict().items():
        index, part, rest = name.split(".", 2)
        state[f"model.layers.{index}.{names[part]}.{rest}"] = tensor
    with torch.device("meta"):
        hf_model: Any = transformers.LlamaForCausalLM(config)
    hf_model.load_state_dict(state, strict=False, assign=True)
    hf_model.tie_weights()
    hf_model.model.rotary_emb = type(hf_model.model.rotary_emb)(config)  # buffers off "meta"
    return hf_model.eval().requires_grad_(False)


def _median_s(run: Callable[[], object], repeats: int, clock: Callable[[], float]) -> float:
    """Median CPU seconds of ``run()`` over ``repeats`` calls after one warm-up call."""
    run()
    times: list[float] = []
    for _ in range(repeats):
        start = clock()
        run()
        times.append(clock() - start)
    return statistics.median(times)


def llm_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Run the measurements of ``spec`` (``LLM_FULL`` or ``LLM_QUICK``) in this process."""
    clock = time.process_time
    torch.set_num_threads(1)
    wall, cpu = time.perf_counter(), clock()
    from ..llama import load_smollm2

    import_s = clock() - cpu
    model, tokenizer = load_smollm2()
    load = {
        "import_cpu_s": import_s,
        "load_cpu_s": clock() - cpu - import_s,
        "wall_s": time.perf_counter() - wall,
    }
    text_ids = tokenizer.encode(PROMPT * 8)
    ids = torch.tensor([text_ids[: spec["prefill_T"]]])  # (1, prefill_T)
    prompt = torch.tensor([text_ids[: spec["decode_prompt_T"]]])  # (1, decode_prompt_T)
    steps = spec["decode_steps"]

    def ours_prefill() -> Any:
        return model(ids)

    def ours_decode() -> Any:
        cache = model.new_cache()
        logits = model(prompt, cache=cache)
        start = clock()
        for _ in range(steps):
            logits = model(logits[:, -1:].argmax(-1), cache=cache)
        return clock() - start

    models: dict[str, dict[str, Any]] = {}
    with torch.no_grad():
        prefill_s = _median_s(ours_prefill, spec["repeats"], clock)
        decode_s = statistics.median(ours_decode() for _ in range(spec["repeats"]))
        models["attnlab"] = {
            "prefill_tokens_per_s": ids.shape[1] / prefill_s,
            "decode_tokens_per_s": steps / decode_s,
        }
        max_diff = None
        if spec["reference"]:
            from transformers import DynamicCache

            hf_model = hf_llama_from(model)

            def hf_prefill() -> Any:
                return hf_model(ids).logits

            def hf_decode() -> Any:
                cache = DynamicCache(config=hf_model.config)
                logits = hf_model(prompt, cache=cache, use_cache=True).logits
                start = clock()
                for _ in range(steps):
                    next_ids = logits[:, -1:].argmax(-1)
                    logits = hf_model(next_ids, cache=cache, use_cache=True).logits
                return clock() - start

            hf_prefill_s = _median_s(hf_prefill, spec["repeats"], clock)
            hf_decode_s = statistics.median(hf_decode() for _ in range(spec["repeats"]))
            models["transformers"] = {
                "prefill_tokens_per_s": ids.shape[1] / hf_prefill_s,
                "decode_tokens_per_s": steps / hf_decode_s,
                "attn_implementation": "sdpa",
            }
            max_diff = float((hf_prefill() - ours_prefill()).abs().max())

        # Cached decoding against recomputing the whole sequence at every step.
        n, stride = spec["new_tokens"], spec["stride"]
        start_ids = prompt
        start = clock()
        generated = model.generate(start_ids, max_new_tokens=n)  # (1, T0 + n)
        cached_s = clock() - start
        recompute_step, agree = {}, True
        T0 = start_ids.shape[1]
        for step in range(stride // 2, n, stride):  # the step that predicts token T0 + step
            prefix = generated[:, : T0 + step]
            begin = clock()
            logits = model(prefix)
            recompute_step[step] = clock() - begin
            agree = agree and int(logits[0, -1].argmax()) == int(generated[0, T0 + step])
    recompute_s = stride * sum(recompute_step.values())
    return {
        "load": load,
        "models": models,
        "prefill_T": ids.shape[1],
        "decode": {"prompt_T": prompt.shape[1], "steps": steps},
        "logits_max_abs_diff": max_diff,
        "cache_vs_recompute": {
            "prompt_T": T0,
            "new_tokens": n,
            "cached_s": cached_s,
            "recompute_s": recompute_s,
            "speedup": recompute_s / cached_s,
            "recompute_sampled_every": stride,
            "same_tokens": agree,
        },
    }


def run_llm_benchmark(quick: bool = False) -> dict[str, Any]:
    """SmolLM2 on attnlab against transformers, and cached against recomputed decoding.

    Runs [`llm_worker`][attnlab.bench.llm.llm_worker] in a fresh process on one thread
    (``quick``: tiny lengths, a smoke test). Times are CPU time (``CPU_CLOCK``), except
    the load's ``wall_s``.
    """
    spec = LLM_QUICK if quick else LLM_FULL
    header = cpu_time_header(quick)
    measured = in_fresh_process(fresh_process_context(), llm_worker, spec)
    return {
        **header,
        "model": "SmolLM2-135M-Instruct (Q4_1 GGUF, dequantised to float32), B = 1",
        **measured,
    }
