#!/usr/bin/env python3
"""transformers baseline for `loom bench`: the same shapes with random weights, bf16, sdpa, on
the same GPU in the same device call. Prints a table and writes JSON.

  python3 tools/bench/hf_baseline.py --preset qwen2.5-7b --out hf.json \
      --prefill 8192 --decode-batches 1,64 --context 1024 --decode-steps 64

Decode is timed with the default (dynamic) KV cache after a --context-token prompt, by generate() with
min_new_tokens = max_new_tokens (no early stop), minus the prefill; prefill is one forward over
--prefill tokens. Timings use CUDA events after a warm-up.
"""
import argparse
import json
import sys
import time

import torch
from transformers import AutoModelForCausalLM, Qwen2Config, Qwen3Config

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from make_random_checkpoint import PRESETS  # noqa: E402


def build(preset):
    p = dict(PRESETS[preset])
    p.pop("architectures")
    cls = Qwen3Config if p.pop("model_type") == "qwen3" else Qwen2Config
    cfg = cls(**p)
    cfg._attn_implementation = "sdpa"
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    return model.eval()


def timed(fn, reps=3):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="qwen2.5-7b", choices=sorted(PRESETS))
    ap.add_argument("--prefill", type=int, default=8192)
    ap.add_argument("--decode-batches", default="1,64")
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--decode-steps", type=int, default=64)
    ap.add_argument("--out", default="hf_baseline.json")
    a = ap.parse_args()
    torch.manual_seed(0)
    model = build(a.preset)
    vocab = model.config.vocab_size
    res = {"preset": a.preset, "torch": torch.__version__, "device": torch.cuda.get_device_name(),
           "transformers": __import__("transformers").__version__}

    ids = torch.randint(0, vocab, (1, a.prefill), device="cuda")
    with torch.no_grad():
        t = timed(lambda: model(ids, logits_to_keep=1))
    res["prefill"] = {"tokens": a.prefill, "seconds": t, "tokens_per_s": a.prefill / t}

    res["decode"] = []
    for b in [int(x) for x in a.decode_batches.split(",")]:
        ctx = torch.randint(0, vocab, (b, a.context), device="cuda")
        kw = dict(do_sample=False, pad_token_id=0)  # dynamic cache: a static one triggers torch.compile
        with torch.no_grad():
            t_pre = timed(lambda: model.generate(ctx, max_new_tokens=1, min_new_tokens=1, **kw), reps=2)
            t_all = timed(lambda: model.generate(ctx, max_new_tokens=a.decode_steps + 1,
                                                 min_new_tokens=a.decode_steps + 1, **kw), reps=2)
        per_step = (t_all - t_pre) / a.decode_steps
        res["decode"].append({"batch": b, "context": a.context, "seconds_per_step": per_step,
                              "tokens_per_s": b / per_step})
        torch.cuda.empty_cache()

    with open(a.out, "w") as f:
        json.dump(res, f, indent=2)
    print(f"transformers {res['transformers']} ({a.preset}, bf16, sdpa) on {res['device']}")
    print(f"  prefill {a.prefill} tokens: {res['prefill']['seconds'] * 1e3:.1f} ms")
    for d in res["decode"]:
        print(f"  decode batch {d['batch']:>3} ctx {d['context']}: {d['tokens_per_s']:.1f} tokens/s "
              f"({d['seconds_per_step'] * 1e3:.2f} ms/step)")


if __name__ == "__main__":
    main()
