#!/usr/bin/env python3
"""Builds tiny random Qwen-family text checkpoints in the exact Hugging Face layout and dumps
what transformers produces for them (ENGINEERING.md §3).

For each model in MODELS this writes tests/fixtures/models/<name>/:
  config.json, generation_config.json, model.safetensors (or shards + index), tokenizer.json,
  tokenizer_config.json (with the chat template)
and tests/fixtures/goldens/<name>/:
  cases.json      per request: rendered prompt, prompt ids, greedy continuation, top-5 logprobs
                  per step, the reference's top1-top2 margin per step
  hidden.safetensors  per request: every decoder layer's output over the prompt (f32)

Weights are drawn with a larger std than the library default so that top-1/top-2 margins stay far
above our f32 tolerance, then rounded to bf16 (stored as bf16, like real checkpoints); the reference
runs transformers in f32 on those same bf16-rounded values. Deterministic (fixed seeds).

Usage: python3 tools/reference/make_tiny_models.py   (needs torch, transformers, safetensors)
"""
import json
import pathlib
import shutil

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
TOKENIZER_DIR = FIX / "tokenizer"
TEMPLATES = FIX / "templates"

VOCAB = 4082  # tests/fixtures/tokenizer: 4056 BPE tokens + 26 added tokens
IM_END, ENDOFTEXT = 4058, 4056

MODELS = [
    # Head dims are ones the GPU attention kernels take (64, 80, 128), so the same fixtures check
    # the CUDA path.
    # Qwen2: q/k/v biases, untied lm_head, GQA ratio 2, head_dim 64.
    dict(name="qwen2-tiny", cls=(Qwen2Config, Qwen2ForCausalLM), template="qwen2.5-7b-instruct",
         config=dict(hidden_size=128, intermediate_size=160, num_hidden_layers=3, num_attention_heads=2,
                     num_key_value_heads=1, max_position_embeddings=4096, rope_theta=1000000.0,
                     rms_norm_eps=1e-6, tie_word_embeddings=False, use_sliding_window=False),
         shards=1, seed=1),
    # Qwen3: q/k RMSNorm, tied head, explicit head_dim != hidden/heads, GQA ratio 1; sharded.
    dict(name="qwen3-tiny", cls=(Qwen3Config, Qwen3ForCausalLM), template="qwen3",
         config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=4, head_dim=64, max_position_embeddings=4096, rope_theta=1000000.0,
                     rms_norm_eps=1e-6, tie_word_embeddings=True, attention_bias=False),
         shards=2, seed=2),
    # Qwen3 with GQA ratio 3 and odd sizes (head_dim 80, 6 query heads over 2 kv heads).
    dict(name="qwen3-gqa-tiny", cls=(Qwen3Config, Qwen3ForCausalLM), template="qwen3",
         config=dict(hidden_size=96, intermediate_size=200, num_hidden_layers=2, num_attention_heads=6,
                     num_key_value_heads=2, head_dim=80, max_position_embeddings=4096, rope_theta=10000.0,
                     rms_norm_eps=1e-5, tie_word_embeddings=False, attention_bias=False),
         shards=1, seed=3),
    # Qwen2 with sliding-window attention on the layers from max_window_layers on (window 16,
    # shorter than the prompts) and yarn rope scaling.
    dict(name="qwen2-window-tiny", cls=(Qwen2Config, Qwen2ForCausalLM), template="qwen2.5-7b-instruct",
         config=dict(hidden_size=128, intermediate_size=96, num_hidden_layers=3, num_attention_heads=2,
                     num_key_value_heads=2, max_position_embeddings=4096, rope_theta=10000.0,
                     rms_norm_eps=1e-6, tie_word_embeddings=True, use_sliding_window=True,
                     sliding_window=16, max_window_layers=1,
                     rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                   "original_max_position_embeddings": 1024}),
         shards=1, seed=4),
]

REQUESTS = [
    {"name": "hello", "messages": [{"role": "user", "content": "Hello! Who are you?"}], "max_tokens": 12},
    {"name": "system_multiturn", "messages": [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "Count to three."},
        {"role": "assistant", "content": "1, 2, 3."},
        {"role": "user", "content": "Now in French, please: un, deux…"}], "max_tokens": 10},
    {"name": "unicode_code", "messages": [
        {"role": "user", "content": "def f(x):\n\treturn x**2  # 平方 🚀\n\nWhat does f(12) return?"}],
     "max_tokens": 16},
]


def load_template(name):
    """The chat template of a vendored model's tokenizer_config.json (tests/fixtures/templates)."""
    path = TEMPLATES / name / "tokenizer_config.json"
    if not path.exists():
        raise SystemExit(f"missing chat template {path}")
    return json.loads(path.read_text(encoding="utf-8"))["chat_template"]


def reinit(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=g))
            elif name == "lm_head.weight":
                # Wide logits: top-1/top-2 margins far above the f32 tolerance.
                p.copy_(torch.randn(p.shape, generator=g) * 0.8)
            else:
                fan_in = p.shape[-1]
                p.copy_(torch.randn(p.shape, generator=g) * (2.0 / fan_in) ** 0.5)
            # Round to bf16 so the stored checkpoint and the f32 reference agree exactly.
            p.copy_(p.to(torch.bfloat16).to(torch.float32))


def save_weights(model, outdir, shards):
    sd = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        sd.pop("lm_head.weight", None)
    names = sorted(sd)
    if shards == 1:
        save_file(sd, str(outdir / "model.safetensors"), metadata={"format": "pt"})
        return
    per = (len(names) + shards - 1) // shards
    weight_map = {}
    total = 0
    for i in range(shards):
        part = names[i * per:(i + 1) * per]
        fname = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        save_file({k: sd[k] for k in part}, str(outdir / fname), metadata={"format": "pt"})
        for k in part:
            weight_map[k] = fname
            total += sd[k].numel() * 2
    (outdir / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2) + "\n")


def build(spec):
    name = spec["name"]
    mdir = FIX / "models" / name
    gdir = FIX / "goldens" / name
    shutil.rmtree(mdir, ignore_errors=True)
    shutil.rmtree(gdir, ignore_errors=True)
    mdir.mkdir(parents=True)
    gdir.mkdir(parents=True)

    cfg_cls, model_cls = spec["cls"]
    torch.manual_seed(spec["seed"])
    cfg = cfg_cls(vocab_size=VOCAB, bos_token_id=ENDOFTEXT, eos_token_id=IM_END, **spec["config"])
    cfg.architectures = [model_cls.__name__]
    model = model_cls(cfg).to(torch.float32).eval()
    reinit(model, spec["seed"])
    model.config.save_pretrained(mdir)
    gen = {"bos_token_id": ENDOFTEXT, "eos_token_id": [IM_END, ENDOFTEXT], "pad_token_id": ENDOFTEXT,
           "do_sample": True, "temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.05}
    (mdir / "generation_config.json").write_text(json.dumps(gen, indent=2) + "\n")
    save_weights(model, mdir, spec["shards"])

    shutil.copy(TOKENIZER_DIR / "tokenizer.json", mdir / "tokenizer.json")
    tcfg = json.loads((TOKENIZER_DIR / "tokenizer_config.json").read_text(encoding="utf-8"))
    tcfg["chat_template"] = load_template(spec["template"])
    (mdir / "tokenizer_config.json").write_text(json.dumps(tcfg, ensure_ascii=False, indent=2) + "\n",
                                                encoding="utf-8")

    # Reference: reload exactly as a user would, in f32.
    tok = AutoTokenizer.from_pretrained(mdir)
    ref = AutoModelForCausalLM.from_pretrained(mdir, dtype=torch.float32).eval()
    cases = []
    hidden = {}
    for req in REQUESTS:
        prompt = tok.apply_chat_template(req["messages"], tokenize=False, add_generation_prompt=True)
        ids = tok(prompt, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            out = ref(torch.tensor([ids]), output_hidden_states=True)
            hs = out.hidden_states  # [embeddings, layer0 out, ..., layer L-2 out, final norm(layer L-1)]
            L = cfg.num_hidden_layers
            hidden[f"{req['name']}.embed"] = hs[0][0].contiguous()
            for i in range(L - 1):
                hidden[f"{req['name']}.blk.{i}.out"] = hs[i + 1][0].contiguous()
            hidden[f"{req['name']}.final_norm"] = hs[L][0].contiguous()
            hidden[f"{req['name']}.prompt_logits"] = out.logits[0, -1:].contiguous()
            gen_out = ref.generate(torch.tensor([ids]), max_new_tokens=req["max_tokens"], do_sample=False,
                                   output_logits=True, return_dict_in_generate=True, eos_token_id=[IM_END],
                                   pad_token_id=ENDOFTEXT)
        new = gen_out.sequences[0, len(ids):].tolist()
        steps = []
        for step, logits in enumerate(gen_out.logits):
            lp = torch.log_softmax(logits[0].double(), dim=-1)
            top = torch.topk(lp, 5)
            steps.append({
                "token": new[step],
                "logprob": lp[new[step]].item(),
                "top5": [[int(i), float(v)] for v, i in zip(top.values.tolist(), top.indices.tolist())],
                "margin": float(top.values[0] - top.values[1]),
            })
        cases.append({
            "name": req["name"],
            "messages": req["messages"],
            "max_tokens": req["max_tokens"],
            "prompt": prompt,
            "prompt_ids": ids,
            "output_ids": new,
            "output_text": tok.decode(new, skip_special_tokens=True),
            "steps": steps,
            "min_margin": min(s["margin"] for s in steps),
        })
    save_file(hidden, str(gdir / "hidden.safetensors"))
    meta = {"model": name, "transformers": __import__("transformers").__version__,
            "torch": torch.__version__, "num_hidden_layers": cfg.num_hidden_layers, "cases": cases}
    (gdir / "cases.json").write_text(json.dumps(meta, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"{name}: min margins {[round(c['min_margin'], 3) for c in cases]}")


def main():
    for spec in MODELS:
        build(spec)


if __name__ == "__main__":
    main()
