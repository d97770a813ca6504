#!/usr/bin/env python3
"""transformers baseline for `loom bench`: the same shapes with random weights, bf16, sdpa, on
the same GPU in the same device call. Prints a table and writes JSON.

  python3 tools/bench/hf_baseline.py --preset qwen2.5-7b --out hf.json \
      --prefill 8192 --decode-batches 1,64 --context 1024 --decode-steps 64

Decode is timed with the default (dynamic) KV cache after a --context-token prompt, by generate() with
min_new_tokens = max_new_tokens (no early stop), minus the prefill; prefill is one forward over
--prefill tokens. Timings use CUDA events after a warm-up.

Image TTFT (the counterpart of `loom bench --image`):

  python3 tools/bench/hf_baseline.py --vl-image /tmp/vlbench/image_1280x720.jpg --vl-model /dev/shm/q7vl \
      --reps 5 --out hf_vl.json

loads Qwen2_5_VLForConditionalGeneration from the folder tools/bench/make_random_checkpoint.py
--preset qwen2.5-vl-7b writes (bf16, sdpa, cuda) and times, per repetition after one warm-up:
processor (PIL open + Qwen2_5_VLProcessor on the chat prompt, fast image processor, copy to the
GPU), vision tower alone (model.get_image_features), and the first-token forward (the whole model
on the processed inputs, vision tower included, logits of the last position, argmax), each with
torch.cuda.synchronize; TTFT = processor + first-token forward. Medians.
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


VL_PROMPT = ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
             "<|vision_start|><|image_pad|><|vision_end|>Describe this image.<|im_end|>\n"
             "<|im_start|>assistant\n")


def vl_image_ttft(a):
    import statistics
    from PIL import Image
    from transformers import (AutoTokenizer, Qwen2_5_VLForConditionalGeneration, Qwen2_5_VLProcessor,
                              Qwen2VLImageProcessor, Qwen2VLVideoProcessor)

    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(
        a.vl_model, dtype=torch.bfloat16, attn_implementation="sdpa").to(a.vl_device).eval()
    proc = Qwen2_5_VLProcessor(image_processor=Qwen2VLImageProcessor.from_pretrained(a.vl_model),
                               tokenizer=AutoTokenizer.from_pretrained(a.vl_model),
                               video_processor=Qwen2VLVideoProcessor.from_pretrained(a.vl_model))

    def now():
        if a.vl_device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter()

    samples = {"processor_ms": [], "vision_tower_ms": [], "first_token_forward_ms": [], "ttft_ms": []}
    with torch.no_grad():
        for rep in range(a.reps + 1):  # rep 0: warm-up
            t0 = now()
            img = Image.open(a.vl_image).convert("RGB")
            inputs = proc(text=[VL_PROMPT], images=[img], return_tensors="pt").to(a.vl_device)
            t1 = now()
            model.get_image_features(inputs["pixel_values"], inputs["image_grid_thw"])
            t2 = now()
            logits = model(**inputs, logits_to_keep=1).logits
            logits.argmax(-1).item()
            t3 = now()
            if rep == 0:
                grid = inputs["image_grid_thw"][0].tolist()
                tokens = int(inputs["input_ids"].shape[1])
                continue
            samples["processor_ms"].append((t1 - t0) * 1e3)
            samples["vision_tower_ms"].append((t2 - t1) * 1e3)
            samples["first_token_forward_ms"].append((t3 - t2) * 1e3)
            samples["ttft_ms"].append((t1 - t0 + t3 - t2) * 1e3)
    device = torch.cuda.get_device_name() if a.vl_device == "cuda" else a.vl_device
    res = {"mode": "vl-image", "model": a.vl_model, "image": a.vl_image, "torch": torch.__version__,
           "device": device, "transformers": __import__("transformers").__version__,
           "grid_thw": grid, "prompt_tokens": tokens, "image_tokens": grid[0] * grid[1] * grid[2] // 4,
           "reps": a.reps}
    for k, v in samples.items():
        res[k] = statistics.median(v)
        res[k.replace("_ms", "_samples_ms")] = v
    with open(a.out, "w") as f:
        json.dump(res, f, indent=2)
    print(f"transformers {res['transformers']} Qwen2.5-VL (bf16, sdpa) on {res['device']}: image grid {grid}, "
          f"{tokens} prompt tokens")
    for k in samples:
        print(f"  {k[:-3]:<24} {res[k]:9.1f} ms")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="qwen2.5-7b", choices=sorted(PRESETS))
    ap.add_argument("--prefill", type=int, default=8192)
    ap.add_argument("--decode-batches", default="1,64")
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--decode-steps", type=int, default=64)
    ap.add_argument("--out", default="hf_baseline.json")
    ap.add_argument("--vl-image", help="image TTFT mode: the image (JPEG) of the one-image chat prompt")
    ap.add_argument("--vl-model", help="image TTFT mode: make_random_checkpoint.py --preset qwen2.5-vl-7b folder")
    ap.add_argument("--reps", type=int, default=5, help="image TTFT mode: timed repetitions")
    ap.add_argument("--vl-device", default="cuda", help="image TTFT mode: torch device (cpu for a local check)")
    a = ap.parse_args()
    torch.manual_seed(0)
    if a.vl_image:
        if not a.vl_model:
            ap.error("--vl-image needs --vl-model")
        return vl_image_ttft(a)
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
