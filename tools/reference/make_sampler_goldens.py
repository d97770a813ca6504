#!/usr/bin/env python3
"""Regenerates tests/fixtures/sampler/hf_logits_processors.json, the reference for sampler_test.

The reference is Hugging Face transformers' own logits processors (RepetitionPenalty,
SequenceBias, MinNewTokensLength, Temperature, MinP, TopK, TopP), applied in vLLM v1's order:
logit_bias -> min_tokens -> repetition -> frequency/presence -> [greedy argmax here] ->
temperature -> min_p -> top_k -> top_p -> softmax. transformers has no frequency/presence
penalty, so those two lines are OpenAI's formula written out in torch (logit -= f * count;
logit -= p * (count > 0)). Everything is float32, as in vLLM.

Each case stores: raw logits (float32), prompt/output ids, eos ids, the request JSON that
parse_sampling_params turns into SamplingParams, the logits after the pre-sampling steps
(what greedy takes the argmax of), the final probabilities, and the raw top-5 logprobs
(log_softmax of the raw logits). The logits are drawn with a fixed seed, so the file is
reproducible: python3 tools/reference/make_sampler_goldens.py
"""
import json
import math
import pathlib

import torch
from transformers.generation.logits_process import (
    MinNewTokensLengthLogitsProcessor,
    MinPLogitsWarper,
    RepetitionPenaltyLogitsProcessor,
    SequenceBiasLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

VOCAB = 97  # odd on purpose
OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "sampler" / "hf_logits_processors.json"

CASES = [
    {"name": "temperature_only", "request": {"temperature": 0.7}},
    {"name": "top_k", "request": {"temperature": 1.0, "top_k": 5}},
    {"name": "top_p", "request": {"temperature": 1.0, "top_p": 0.9}},
    {"name": "min_p", "request": {"temperature": 1.0, "min_p": 0.1}},
    {"name": "hot_top_p", "request": {"temperature": 1.5, "top_p": 0.5}},
    {
        "name": "everything",
        "request": {
            "temperature": 0.8,
            "top_p": 0.85,
            "top_k": 20,
            "min_p": 0.05,
            "repetition_penalty": 1.3,
            "frequency_penalty": 0.5,
            "presence_penalty": 0.4,
            "min_tokens": 10,
            "stop_token_ids": [7],
            "logit_bias": {"3": 2.5, "50": -1.5},
        },
    },
    {
        "name": "greedy_with_penalties",
        "request": {"temperature": 0.0, "repetition_penalty": 1.8, "frequency_penalty": 1.0,
                    "logit_bias": {"11": 0.75}},
    },
]


def reference(logits, prompt, output, eos, req):
    x = logits.clone().unsqueeze(0)  # [1, vocab]
    all_ids = torch.tensor([prompt + output], dtype=torch.long)
    if req.get("logit_bias"):
        bias = {(int(k),): float(v) for k, v in req["logit_bias"].items()}
        x = SequenceBiasLogitsProcessor(sequence_bias=bias)(all_ids, x)
    stops = sorted(set(eos) | set(req.get("stop_token_ids", [])))
    if req.get("min_tokens", 0) > 0:
        x = MinNewTokensLengthLogitsProcessor(len(prompt), req["min_tokens"], stops)(all_ids, x)
    if req.get("repetition_penalty", 1.0) != 1.0:
        x = RepetitionPenaltyLogitsProcessor(req["repetition_penalty"])(all_ids, x)
    counts = torch.bincount(torch.tensor(output, dtype=torch.long), minlength=VOCAB).to(torch.float32)
    x = x - torch.tensor(req.get("frequency_penalty", 0.0), dtype=torch.float32) * counts
    x = x - torch.tensor(req.get("presence_penalty", 0.0), dtype=torch.float32) * (counts > 0).float()
    pre = x.clone()
    t = req.get("temperature", 1.0)
    if t < 1e-5:
        top2 = torch.topk(x[0], 2).values
        assert top2[0] - top2[1] > 1e-3, "greedy margin too small"
        probs = torch.zeros_like(x)
        probs[0, int(torch.argmax(x))] = 1.0
    else:
        if t != 1.0:
            x = TemperatureLogitsWarper(t)(all_ids, x)
        if req.get("min_p", 0.0) > 0:
            check_margin("min_p", torch.exp(x[0] - x.max()), req["min_p"])
            x = MinPLogitsWarper(req["min_p"])(all_ids, x)
        if req.get("top_k", 0) > 0:
            x = TopKLogitsWarper(req["top_k"])(all_ids, x)
        if req.get("top_p", 1.0) < 1.0:
            sorted_probs = torch.softmax(x[0].double(), dim=-1).sort(descending=True).values
            check_margin("top_p", torch.cumsum(sorted_probs, 0) - sorted_probs, req["top_p"])
            x = TopPLogitsWarper(req["top_p"])(all_ids, x)
        probs = torch.softmax(x, dim=-1)
    raw_lp = torch.log_softmax(logits, dim=-1)
    top = torch.topk(raw_lp, 5)
    return pre[0], probs[0], [[int(i), float(v)] for v, i in zip(top.values, top.indices)]


def check_margin(name, values, boundary):
    """Fails if a filter boundary is within float noise: then f32 rounding, not semantics, decides."""
    values = values[torch.isfinite(values)]
    gap = float(torch.min(torch.abs(values - boundary)))
    assert gap > 1e-4, f"a token sits on the {name} boundary (gap {gap})"


def finite(v):
    return v if math.isfinite(v) else None  # JSON has no -inf; null means masked


def main():
    gen = torch.Generator().manual_seed(1)
    cases = []
    for case in CASES:
        # std 1.5: a spread-out distribution, so the filters keep tens of tokens, not one.
        logits = (torch.randn(VOCAB, generator=gen) * 1.5).to(torch.float32)
        prompt = torch.randint(0, VOCAB, (12,), generator=gen).tolist()
        output = torch.randint(0, VOCAB, (6,), generator=gen).tolist()
        output += output[:2]  # repeats, so frequency counts reach 2
        eos = [5, 96]
        pre, probs, top = reference(logits, prompt, output, eos, case["request"])
        cases.append({
            "name": case["name"],
            "request": case["request"],
            "eos_token_ids": eos,
            "prompt_ids": prompt,
            "output_ids": output,
            "logits": [float(v) for v in logits],
            "pre_sampling_logits": [finite(float(v)) for v in pre],
            "probs": [float(v) for v in probs],
            "raw_top5_logprobs": top,
        })
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"generator": "tools/reference/make_sampler_goldens.py", "vocab": VOCAB, "cases": cases},
                              indent=1) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
