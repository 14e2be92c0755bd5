"""The passkey test of context extension on SmolLM2 (``passkey``), with each rope scaling.

Not a timing. Mohtashami and Jaggi's (2023) test: a five-digit pass key hidden at some
depth of a long, repetitive filler text, asked for at the end. SmolLM2-135M-Instruct
reads the whole prompt and its answer in one forward pass, with its rotary frequencies
as trained or scaled ([`rope_frequencies`][attnlab.rope_frequencies]); the key counts
as retrieved when the greedy choice at every digit is the right digit (what greedy
decoding would write). The same pass gives the loss of every filler token, by position.
Recorded because the full run (10,240 tokens, past the 8,192 SmolLM2 was trained on)
takes minutes per pass on a CPU; the chapter re-runs a short one in seconds.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import torch

from .._validation import check_number, check_positive_int
from ..rope_scaling import (
    DynamicNTKScaling,
    LinearScaling,
    Llama3Scaling,
    RopeScaling,
    YarnScaling,
)
from .measure import fresh_process_context, in_fresh_process, machine_info

if TYPE_CHECKING:
    from ..llama import LlamaModel, Tokenizer

__all__ = [
    "PASSKEY_FULL",
    "PASSKEY_QUICK",
    "SCALINGS",
    "passkey_prompt",
    "passkey_trial",
    "run_passkey_experiment",
    "scaling_for",
    "stretched",
]

SCALINGS = ("none", "linear", "dynamic", "yarn", "llama3")
"""The methods compared, in the chapter's order; ``none`` is the model as trained."""

PASSKEY_FULL: dict[str, Any] = {
    "length": 10240,
    "depths": [0.1],
    "factor": 2.0,
    "bucket": 1024,
    "seed": 0,
}
PASSKEY_QUICK: dict[str, Any] = {
    "length": 320,
    "depths": [0.5],
    "factor": 2.0,
    "bucket": 64,
    "seed": 0,
}

INTRO = (
    "There is an important piece of information hidden inside a lot of irrelevant text. "
    "Find it and memorize it. I will quiz you about it.\n"
)
FILLER = (
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "
)
QUESTION = "\nWhat is the pass key? The pass key is "


def scaling_for(method: str, factor: float, trained_length: int) -> RopeScaling | None:
    """The scaling named ``method`` (one of ``SCALINGS``) for ``factor`` times the length.

    ``none``: ``None``; the others with transformers' defaults for the rest
    (YaRN's betas 32 and 1, Llama 3's frequency factors 1 and 4).
    """
    if method not in SCALINGS:
        raise ValueError(f"method must be one of {', '.join(SCALINGS)}; got {method!r}")
    factor = check_number("factor", factor, at_least=1.0)
    length = check_positive_int("trained_length", trained_length)
    return {
        "none": None,
        "linear": LinearScaling(factor),
        "dynamic": DynamicNTKScaling(factor, length),
        "yarn": YarnScaling(factor, length),
        "llama3": Llama3Scaling(factor, original_length=length),
    }[method]


def stretched(model: LlamaModel, scaling: RopeScaling | None, context_length: int) -> LlamaModel:
    """``model`` with another rotary scaling and context length, sharing its weights.

    Nothing is copied: the new model's parameters are the same tensors (build it on the
    meta device, then assign them), so the memoised SmolLM2 stays untouched.
    """
    from ..llama import LlamaModel

    config = replace(model.config, rope_scaling=scaling, context_length=context_length)
    with torch.device("meta"):
        new = LlamaModel(config)
    new.load_state_dict(model.state_dict(), assign=True)
    return new.eval().requires_grad_(False)


def passkey_prompt(
    tokenizer: Tokenizer, length: int, depth: float, key: int
) -> tuple[torch.Tensor, int]:
    """A prompt of exactly ``length`` tokens, ending with the key's digits as the answer.

    The introduction, the filler repeated (cut to fit), the sentence with the key
    inserted at ``depth`` (0: right after the introduction, 1: just before the
    question), the question, and the key's digits.

    Returns:
        ``(ids, answer_start)``: ``ids[answer_start:]`` are the key's digits.

    Shape:
        ids: ``(length,)``.
    """
    check_number("depth", depth, at_least=0.0, at_most=1.0)
    if not 10000 <= key <= 99999:
        raise ValueError(f"key must be a five-digit int; got {key!r}")
    intro = tokenizer.encode(INTRO)
    needle = tokenizer.encode(f"The pass key is {key}. Remember it. {key} is the pass key. ")
    question = tokenizer.encode(QUESTION)
    answer = tokenizer.encode(str(key))
    room = length - len(intro) - len(needle) - len(question) - len(answer)
    if room < 1:
        raise ValueError(f"length must leave room for filler; got {length}")
    unit = tokenizer.encode(FILLER)
    filler = (unit * (room // len(unit) + 1))[:room]
    at = round(depth * room)
    ids = intro + filler[:at] + needle + filler[at:] + question + answer
    return torch.tensor(ids), length - len(answer)


def passkey_trial(model: LlamaModel, ids: torch.Tensor, answer_start: int) -> dict[str, Any]:
    """One forward pass: the key retrieved or not, and every token's loss.

    Returns:
        ``{"retrieved": bool, "digits_right": int, "losses": (length - 1,) tensor}``;
        ``losses[p - 1]`` is the loss on the token at position ``p``.
    """
    import torch.nn.functional as F

    with torch.no_grad():
        logits = model(ids)[0]  # (T, V)
    losses = torch.cat(  # (T-1,); by chunks of rows, not a second (T, V) tensor
        [
            F.cross_entropy(chunk, targets, reduction="none")
            for chunk, targets in zip(
                torch.split(logits[:-1], 1024), torch.split(ids[1:], 1024), strict=True
            )
        ]
    )
    guesses = logits[answer_start - 1 : -1].argmax(-1)  # (digits,)
    right = int((guesses == ids[answer_start:]).sum())
    return {
        "retrieved": right == ids.shape[0] - answer_start,
        "digits_right": right,
        "losses": losses,
    }


def passkey_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Every scaling at every depth: retrieval and the loss by bucket; in this process."""
    from ..llama import load_smollm2

    torch.set_num_threads(spec.get("threads", 1))
    model, tokenizer = load_smollm2()
    trained = model.config.context_length
    length, bucket = spec["length"], spec["bucket"]
    generator = torch.Generator().manual_seed(spec["seed"])
    keys = [
        int(k) for k in torch.randint(10000, 100000, (len(spec["depths"]),), generator=generator)
    ]
    prompts = [
        passkey_prompt(tokenizer, length, d, k) for d, k in zip(spec["depths"], keys, strict=True)
    ]
    rows = []
    for method in spec.get("methods", SCALINGS):
        scaled = stretched(
            model, scaling_for(method, spec["factor"], trained), max(length, trained)
        )
        trials = [passkey_trial(scaled, ids, start) for ids, start in prompts]
        losses = torch.stack([t["losses"] for t in trials]).mean(0)  # (T-1,), mean over depths
        rows.append(
            {
                "method": method,
                "retrieved": [t["retrieved"] for t in trials],
                "digits_right": [t["digits_right"] for t in trials],
                "bucket_losses": [  # the tokens at positions k * bucket .. (k+1) * bucket - 1
                    float(losses[max(k * bucket, 1) - 1 : (k + 1) * bucket - 1].mean())
                    for k in range(length // bucket)
                ],
            }
        )
    return {"keys": keys, "trained_length": trained, "rows": rows}


def run_passkey_experiment(quick: bool = False) -> dict[str, Any]:
    """The passkey at 10,240 tokens (``quick``: 320), each scaling with ``factor`` 2.

    In a fresh process: for each method in ``SCALINGS``, for each depth (the full run:
    one, a tenth of the way in, about 9,200 positions before the question),
    retrieved or not (and how many of the five digits the greedy choice gets right),
    and the mean loss by bucket of positions over the depths.
    """
    spec = PASSKEY_QUICK if quick else PASSKEY_FULL
    measured = in_fresh_process(fresh_process_context(), passkey_worker, spec)
    return {
        "machine": machine_info(),
        "quick": quick,
        "model": "SmolLM2-135M-Instruct (Q4_1 GGUF, dequantised to float32), B = 1",
        "config": dict(spec),
        **measured,
    }
