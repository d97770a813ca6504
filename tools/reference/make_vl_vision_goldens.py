#!/usr/bin/env python3
"""Goldens for the Qwen2.5-VL vision tower (src/models/qwen_vl/vision_tower.h).

Builds a tiny random Qwen2.5-VL vision tower with transformers (f32, eager attention) and writes
tests/fixtures/vl_vision/:
  config.json          a full Qwen2_5_VLConfig (tiny text config) whose vision_config the C++ reads
  model.safetensors    the vision tower only, transformers 5 names ("model.visual.*")
  goldens.safetensors  per case <case>.pixel_values [patches, C*T*P*P] F32, <case>.grid_thw I64 [n, 3],
                       <case>.patch_embed [patches, hidden]            (processor order)
                       <case>.blk.<i>.out [patches, hidden]            (WINDOW order, as transformers
                                                                          keeps hidden states)
                       <case>.window_index I64 [patches / merge^2]
                       <case>.merger [patches / merge^2, out_hidden]    (processor order, after the
                                                                          reverse index)
                       __metadata__["cases"]: JSON list of case names.
Weights are re-initialised larger than the default init (linears std 0.2, biases 0.1, patch embed
0.05, norm weights 1 + 0.2 N(0,1)) so every block visibly changes its input and attention is far from
uniform (a wrong window or rope frequency gives O(1) errors). Patch size 7 / window 28 (not 14 / 56)
keeps the fixtures at ~1.4 MB; the window is still 2x2 merged units.

Usage: python3 tools/reference/make_vl_vision_goldens.py [--out tests/fixtures/vl_vision]
Deterministic: fixed seeds, no network.
"""
import os
import sys

import torch
from transformers import Qwen2_5_VLConfig
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VisionTransformerPretrainedModel
from transformers.vision_utils import get_vision_window_index

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_common import (  # noqa: E402
    capture_vision_stages,
    eager_f32,
    init_qwen25_vision_weights,
    save_goldens,
    save_vision_weights,
    vision_cases,
    vision_output_dir,
)

VISION = {
    "depth": 4,
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_heads": 2,
    "patch_size": 7,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "window_size": 28,  # 28 / 7 / 2 = 2x2 merged units per window (patch 7 keeps fixtures small)
    "fullatt_block_indexes": [1, 3],
    "out_hidden_size": 48,
    "in_channels": 3,
    "hidden_act": "silu",
}
TEXT = {
    "hidden_size": 48,
    "intermediate_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "vocab_size": 256,
}

# Grids (t, h, w) in patches. h/w not multiples of the 4-patch window -> padded windows; t = 2 ->
# two frames with separate full-attention segments.
CASES = {
    "one_image": [[1, 8, 8]],
    "two_images": [[1, 6, 10], [2, 4, 4]],
}


def main():
    out_dir = vision_output_dir("vl_vision")
    cfg = Qwen2_5_VLConfig(vision_config=VISION, text_config=TEXT)
    model = eager_f32(Qwen2_5_VisionTransformerPretrainedModel, cfg)
    init_qwen25_vision_weights(model)

    cfg.save_pretrained(out_dir)
    save_vision_weights(model, out_dir)

    v = cfg.vision_config
    unit = v.spatial_merge_size**2
    out = {}
    for case, grid_thw, patches, pixel_values in vision_cases(CASES, v):
        captured, res = capture_vision_stages(model, pixel_values, grid_thw)
        window_index, _ = get_vision_window_index(
            grid_thw, v.spatial_merge_size, v.window_size, v.patch_size
        )
        out[f"{case}.pixel_values"] = pixel_values
        out[f"{case}.grid_thw"] = grid_thw
        out[f"{case}.window_index"] = window_index.to(torch.int64)
        for k, t in captured.items():
            out[f"{case}.{k}"] = t
        out[f"{case}.merger"] = res.pooler_output
        assert res.pooler_output.shape == (patches // unit, v.out_hidden_size)
        print(case, "merger rms", float(res.pooler_output.pow(2).mean().sqrt()))
    save_goldens(out, out_dir, CASES)


if __name__ == "__main__":
    main()
