#!/usr/bin/env python3
"""Writes a Hugging Face model folder with random bf16 weights for a real model's shapes
(speed depends on shapes, not values). Needs only numpy.

Usage: tools/bench/make_random_checkpoint.py --preset qwen2.5-0.5b --out /tmp/qwen05
The tokenizer and chat template are copied from tests/fixtures/models/qwen2-tiny (token ids
beyond its vocabulary are never produced by it, so the large vocabulary is still exercised by
the lm_head GEMM).
"""
import argparse
import json
import pathlib
import shutil

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]

PRESETS = {
    "qwen2.5-0.5b": dict(architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=896,
                         intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                         num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True,
                         max_position_embeddings=32768, rope_theta=1000000.0, rms_norm_eps=1e-6),
    "qwen2.5-7b": dict(architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=3584,
                       intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
                       num_key_value_heads=4, vocab_size=152064, tie_word_embeddings=False,
                       max_position_embeddings=32768, rope_theta=1000000.0, rms_norm_eps=1e-6),
    "qwen3-8b": dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", hidden_size=4096,
                     intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32,
                     num_key_value_heads=8, head_dim=128, vocab_size=151936, tie_word_embeddings=False,
                     max_position_embeddings=40960, rope_theta=1000000.0, rms_norm_eps=1e-6),
}


def tensors(cfg):
    H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    Hq, Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = cfg.get("head_dim", H // Hq)
    qwen2 = cfg["model_type"] == "qwen2"
    yield "model.embed_tokens.weight", (V, H)
    yield "model.norm.weight", (H,)
    if not cfg["tie_word_embeddings"]:
        yield "lm_head.weight", (V, H)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        yield p + "input_layernorm.weight", (H,)
        yield p + "post_attention_layernorm.weight", (H,)
        yield p + "self_attn.q_proj.weight", (Hq * D, H)
        yield p + "self_attn.k_proj.weight", (Hkv * D, H)
        yield p + "self_attn.v_proj.weight", (Hkv * D, H)
        yield p + "self_attn.o_proj.weight", (H, Hq * D)
        if qwen2:
            yield p + "self_attn.q_proj.bias", (Hq * D,)
            yield p + "self_attn.k_proj.bias", (Hkv * D,)
            yield p + "self_attn.v_proj.bias", (Hkv * D,)
        else:
            yield p + "self_attn.q_norm.weight", (D,)
            yield p + "self_attn.k_norm.weight", (D,)
        yield p + "mlp.gate_proj.weight", (I, H)
        yield p + "mlp.up_proj.weight", (I, H)
        yield p + "mlp.down_proj.weight", (H, I)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", choices=sorted(PRESETS), required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    cfg = dict(PRESETS[args.preset])
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps({**cfg, "hidden_act": "silu", "torch_dtype": "bfloat16"}, indent=2))
    # One 64 MiB block of random bf16 values, tiled over every tensor: values are random and
    # non-zero (zeros can run faster than real data), and a 15 GB model is written in seconds.
    rng = np.random.default_rng(0)
    block = (rng.standard_normal(1 << 25, dtype=np.float32) * 0.02).view(np.uint32) >> 16
    block = block.astype(np.uint16)
    norm_block = (np.abs(rng.standard_normal(1 << 16, dtype=np.float32)) + 0.5).view(np.uint32) >> 16
    norm_block = norm_block.astype(np.uint16)
    header, offset, specs = {}, 0, list(tensors(cfg))
    for name, shape in specs:
        n = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    hdr = json.dumps(header).encode()
    hdr += b" " * ((8 - len(hdr) % 8) % 8)
    with open(out / "model.safetensors", "wb") as f:
        f.write(len(hdr).to_bytes(8, "little"))
        f.write(hdr)
        for name, shape in specs:
            n = int(np.prod(shape))
            src = norm_block if name.endswith("norm.weight") else block
            while n > 0:
                k = min(n, src.size)
                f.write(src[:k].tobytes())
                n -= k
    src = ROOT / "tests/fixtures/models/qwen2-tiny"
    for fname in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        shutil.copy(src / fname, out / fname)
    print(f"{args.preset}: {offset / 1e9:.2f} GB of bf16 weights -> {out}")


if __name__ == "__main__":
    main()
