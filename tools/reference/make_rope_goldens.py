#!/usr/bin/env python3
"""Dumps transformers' rotary inverse frequencies and attention factors for each rope type we
support, into tests/fixtures/goldens/rope.json (checked by tests/models/rope_test.cpp)."""
import json
import pathlib

from transformers import Qwen2Config
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

ROOT = pathlib.Path(__file__).resolve().parents[2]

CASES = [
    {"name": "default", "head_dim": 128, "max_pos": 32768, "rope": {"rope_type": "default", "rope_theta": 1000000.0}},
    {"name": "default_hd80", "head_dim": 80, "max_pos": 4096, "rope": {"rope_type": "default", "rope_theta": 10000.0}},
    {"name": "linear", "head_dim": 64, "max_pos": 8192, "rope": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0}},
    {"name": "yarn_qwen", "head_dim": 128, "max_pos": 131072,
     "rope": {"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0, "original_max_position_embeddings": 32768}},
    {"name": "yarn_betas", "head_dim": 64, "max_pos": 65536,
     "rope": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 8.0, "original_max_position_embeddings": 8192,
              "beta_fast": 16, "beta_slow": 2, "mscale": 0.707, "mscale_all_dim": 1.0}},
    {"name": "llama3", "head_dim": 128, "max_pos": 131072,
     "rope": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
              "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}},
]


def main():
    out = []
    for c in CASES:
        heads = 4
        cfg = Qwen2Config(hidden_size=c["head_dim"] * heads, num_attention_heads=heads, head_dim=c["head_dim"],
                          max_position_embeddings=c["max_pos"], rope_parameters=dict(c["rope"]))
        kind = c["rope"]["rope_type"]
        if kind == "default":
            from transformers.models.qwen2.modeling_qwen2 import Qwen2RotaryEmbedding
            inv, att = Qwen2RotaryEmbedding.compute_default_rope_parameters(cfg)
        else:
            inv, att = ROPE_INIT_FUNCTIONS[kind](cfg, "cpu")
        out.append({**c, "inv_freq": [float(x) for x in inv.tolist()], "attention_factor": float(att)})
    path = ROOT / "tests/fixtures/goldens/rope.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
