#!/usr/bin/env python3
"""Regenerates the safetensors files the checkpoint test reads, written by the reference writers.

  single/model.safetensors   safetensors.torch.save_file with every dtype Loom maps, a scalar, an
                             empty tensor and __metadata__ {"format": "pt"}
  sharded/                   a tiny random Qwen3ForCausalLM saved by transformers' save_pretrained
                             with a small max_shard_size: model-0000k-of-0000n.safetensors +
                             model.safetensors.index.json exactly as Hugging Face lays them out
  */expected.json            per tensor: safetensors dtype, shape, the raw bytes (hex) and (single/
                             only) for float dtypes the values as f32

Usage: python3 tests/checkpoint/reference/make_reference.py   (CPU, deterministic, no network)
"""

import json
import os
import shutil

import torch
from safetensors.torch import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))

ST_DTYPE = {
    torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int64: "I64",
    torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL",
    torch.float8_e4m3fn: "F8_E4M3", torch.float8_e5m2: "F8_E5M2",
}


def describe(tensors, with_f32=True):
    out = {}
    for name, t in sorted(tensors.items()):
        t = t.contiguous()
        raw = t.view(torch.uint8) if t.dim() > 0 and t.numel() > 0 else t.reshape(-1).view(torch.uint8)
        entry = {"dtype": ST_DTYPE[t.dtype], "shape": list(t.shape), "hex": bytes(raw.numpy().tobytes()).hex()}
        if with_f32 and t.dtype in (torch.float32, torch.float16, torch.bfloat16):
            entry["f32"] = [float(x) for x in t.float().reshape(-1).tolist()]
        out[name] = entry
    return out


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")


def make_single():
    g = torch.Generator().manual_seed(1234)
    tensors = {
        "a.f32": torch.randn(3, 5, generator=g),
        "b.bf16": torch.randn(7, generator=g).to(torch.bfloat16),
        "c.f16": torch.randn(2, 3, 4, generator=g).to(torch.float16),
        "d.i64": torch.arange(4, dtype=torch.int64) * 1000 - 7,
        "e.bool": torch.tensor([True, False, True]),
        "f.i8": torch.tensor([-128, -1, 0, 127], dtype=torch.int8),
        "g.u8": torch.tensor([0, 1, 255], dtype=torch.uint8),
        "h.i32": torch.tensor([[-2147483648, 2147483647], [5, -5]], dtype=torch.int32),
        "i.i16": torch.tensor([-32768, 32767, 3], dtype=torch.int16),
        "j.f8_e4m3": torch.tensor([0.5, -1.75, 448.0], dtype=torch.float32).to(torch.float8_e4m3fn),
        "k.f8_e5m2": torch.tensor([0.25, -3.0], dtype=torch.float32).to(torch.float8_e5m2),
        "scalar.f32": torch.tensor(3.5),
        "empty.f32": torch.zeros(0, 3),
    }
    d = os.path.join(HERE, "single")
    os.makedirs(d, exist_ok=True)
    save_file(tensors, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    write_json(os.path.join(d, "expected.json"), describe(load_file(os.path.join(d, "model.safetensors"))))


def make_sharded():
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(99)
    cfg = Qwen3Config(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=8, max_position_embeddings=64,
                      tie_word_embeddings=False)
    model = Qwen3ForCausalLM(cfg).to(torch.bfloat16)
    d = os.path.join(HERE, "sharded")
    shutil.rmtree(d, ignore_errors=True)
    model.save_pretrained(d, max_shard_size="4KB")
    for f in os.listdir(d):  # only the weights matter here
        if not (f.endswith(".safetensors") or f == "model.safetensors.index.json"):
            os.remove(os.path.join(d, f))
    tensors = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors"):
            tensors.update(load_file(os.path.join(d, f)))
    write_json(os.path.join(d, "expected.json"), describe(tensors, with_f32=False))


if __name__ == "__main__":
    make_single()
    make_sharded()
