#!/usr/bin/env python3
"""Goldens for the Qwen3-VL vision tower (src/models/qwen3_vl/vision_tower.h).

Builds a tiny random Qwen3-VL vision tower with transformers' Qwen3VLVisionModel (f32, eager
attention) and writes tests/fixtures/q3vl_vision/:
  config.json          a full Qwen3VLConfig (tiny text config) whose vision_config the C++ reads
  model.safetensors    the vision tower only, transformers 5 names ("model.visual.*")
  goldens.safetensors  per case <case>.pixel_values [patches, C*T*P*P] F32, <case>.grid_thw I64 [n, 3],
                       <case>.interp_indices I64 [patches, 4], <case>.interp_weights F32 [patches, 4],
                       <case>.position_ids I64 [patches, 2], <case>.cu_seqlens I32 [frames + 1]
                                                                   (transformers.vision_utils helpers)
                       <case>.patch_embed [patches, hidden]        (Conv3d output, before pos embeds)
                       <case>.embed [patches, hidden]              (patch_embed + interpolated pos embeds,
                                                                     the input of block 0)
                       <case>.blk.<i>.out [patches, hidden]        (processor order; no window reorder)
                       <case>.merger [patches / merge^2, out_hidden]   (pooler_output)
                       <case>.deepstack.<k> [patches / merge^2, out_hidden]  (deepstack_features[k])
                       __metadata__["cases"]: JSON list of case names.
num_position_embeddings 16 (a 4 x 4 learned grid) so every case resamples it: grids 6 x 8 and 2 x 10
(fractional bilinear weights, up- and down-sampling) and a 4 x 4 video with t = 2 (identity grid,
two frames = two attention segments). Weights are re-initialised larger than the default init
(linears std 1.2/sqrt(fan_in), biases 0.1, patch embed 0.05, pos embed 1.0, norm weights
1 + 0.2 N(0,1), norm biases 0.1 N(0,1)) so every block visibly changes its input, attention is far
from uniform and the pos embeds matter: a wrong interpolation tap, rope frequency or segment gives
O(1) errors.

Usage: python3 tools/reference/make_qwen3vl_vision_goldens.py [--out tests/fixtures/q3vl_vision]
Deterministic: fixed seeds, no network.
"""
import math
import os
import sys

import torch
from transformers import Qwen3VLConfig
from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLVisionModel
from transformers.vision_utils import (
    get_vision_cu_seqlens,
    get_vision_interpolation_indices_and_weights,
    get_vision_position_ids,
)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_common import (  # noqa: E402
    capture_vision_stages,
    eager_f32,
    save_goldens,
    save_vision_weights,
    vision_cases,
    vision_output_dir,
)

VISION = {
    "depth": 3,
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_heads": 2,
    "patch_size": 16,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "out_hidden_size": 24,
    "in_channels": 3,
    "hidden_act": "gelu_pytorch_tanh",
    "num_position_embeddings": 16,
    "deepstack_visual_indexes": [0, 1],
}
TEXT = {
    "hidden_size": 24,
    "intermediate_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 12,
    "vocab_size": 256,
}

# Grids (t, h, w) in patches, in processor order.
CASES = {
    "one_image": [[1, 6, 8]],
    "mixed": [[1, 2, 10], [2, 4, 4]],
}


def main():
    out_dir = vision_output_dir("q3vl_vision")
    cfg = Qwen3VLConfig(vision_config=VISION, text_config=TEXT)
    model = eager_f32(Qwen3VLVisionModel, cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                if name.endswith("weight"):
                    p.copy_(1.0 + 0.2 * torch.randn_like(p))
                else:
                    p.copy_(0.1 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
            elif "patch_embed" in name:
                p.copy_(0.05 * torch.randn_like(p))
            elif "pos_embed" in name:
                p.copy_(torch.randn_like(p))
            else:
                p.copy_(1.2 / math.sqrt(p.shape[1]) * torch.randn_like(p))

    cfg.save_pretrained(out_dir)
    save_vision_weights(model, out_dir)

    v = cfg.vision_config
    unit = v.spatial_merge_size**2
    out = {}
    for case, grid_thw, patches, pixel_values in vision_cases(CASES, v):
        captured, res = capture_vision_stages(model, pixel_values, grid_thw, embed=True)
        out[f"{case}.pixel_values"] = pixel_values
        out[f"{case}.grid_thw"] = grid_thw
        idx, wts = get_vision_interpolation_indices_and_weights(
            grid_thw,
            num_grid_per_side=model.num_grid_per_side,
            mode=model.interpolation_mode,
            align_corners=model.interpolation_align_corners,
            spatial_merge_size=v.spatial_merge_size,
        )
        out[f"{case}.interp_indices"] = idx.to(torch.int64)
        out[f"{case}.interp_weights"] = wts
        out[f"{case}.position_ids"] = get_vision_position_ids(grid_thw, v.spatial_merge_size).to(torch.int64)
        out[f"{case}.cu_seqlens"] = get_vision_cu_seqlens(grid_thw).to(torch.int32)
        for k, t in captured.items():
            out[f"{case}.{k}"] = t
        out[f"{case}.merger"] = res.pooler_output
        assert res.pooler_output.shape == (patches // unit, v.out_hidden_size)
        assert len(res.deepstack_features) == len(v.deepstack_visual_indexes)
        for k, t in enumerate(res.deepstack_features):
            out[f"{case}.deepstack.{k}"] = t
        rms = lambda t: float(t.pow(2).mean().sqrt())
        print(
            case,
            "pos_embed rms",
            rms(captured["embed"] - captured["patch_embed"]),
            "blk rms",
            [rms(captured[f"blk.{i}.out"]) for i in range(v.depth)],
            "merger rms",
            rms(res.pooler_output),
            "deepstack rms",
            [rms(t) for t in res.deepstack_features],
        )
    save_goldens(out, out_dir, CASES)


if __name__ == "__main__":
    main()
