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
import argparse
import json
import math
import os

import torch
from safetensors.torch import save_file
from transformers import Qwen3VLConfig
from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLVisionModel
from transformers.vision_utils import (
    get_vision_cu_seqlens,
    get_vision_interpolation_indices_and_weights,
    get_vision_position_ids,
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
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "../../tests/fixtures/q3vl_vision"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)

    cfg = Qwen3VLConfig(vision_config=VISION, text_config=TEXT)
    cfg.vision_config._attn_implementation = "eager"
    model = Qwen3VLVisionModel(cfg.vision_config).eval().float()
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

    cfg.save_pretrained(args.out)
    weights = {"model.visual." + k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(weights, os.path.join(args.out, "model.safetensors"), metadata={"format": "pt"})

    v = cfg.vision_config
    patch_dim = v.in_channels * v.temporal_patch_size * v.patch_size * v.patch_size
    unit = v.spatial_merge_size**2
    out = {}
    g = torch.Generator().manual_seed(1)
    for case, grids in CASES.items():
        grid_thw = torch.tensor(grids, dtype=torch.int64)
        patches = int(grid_thw.prod(-1).sum())
        pixel_values = torch.randn(patches, patch_dim, generator=g)
        captured = {}
        hooks = [
            model.patch_embed.register_forward_hook(lambda m, i, o: captured.__setitem__("patch_embed", o.clone())),
            model.blocks[0].register_forward_pre_hook(
                lambda m, args, kwargs: captured.__setitem__("embed", args[0].clone()), with_kwargs=True
            ),
        ]
        for bi, blk in enumerate(model.blocks):
            hooks.append(
                blk.register_forward_hook(lambda m, i, o, bi=bi: captured.__setitem__(f"blk.{bi}.out", o.clone()))
            )
        with torch.no_grad():
            res = model(pixel_values, grid_thw=grid_thw)
        for h in hooks:
            h.remove()
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
    out = {k: t.contiguous() for k, t in out.items()}
    save_file(out, os.path.join(args.out, "goldens.safetensors"), metadata={"cases": json.dumps(list(CASES))})


if __name__ == "__main__":
    main()
