#!/usr/bin/env python3
"""Goldens for the Qwen2.5-VL vision tower on CUDA (tests/cuda_vision/).

The same tiny random tower and cases as make_vl_vision_goldens.py (tests/fixtures/vl_vision/), with
one change the CUDA backend needs: 1 head of head_dim 64 instead of 2 heads of 32 (the CUDA paged
attention kernels take head_dim 64, 80 or 128). The weights are rounded to bf16 before the forward
and stored as bf16, so the CUDA path (bf16 weights) and the f32 transformers golden use the very same
weights; the only difference left is bf16 activations.

It also runs transformers itself in bf16 (CPU, same weights, pixel values rounded to bf16) and stores
that run's error against the f32 golden per stage in the metadata ("bf16_reference"): the scale
the C++ bf16 tolerance is stated against.

Usage: python3 tools/reference/make_cuda_vision_goldens.py [--out tests/fixtures/cuda_vision]
Deterministic: fixed seeds, no network.
"""
import argparse
import json
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import Qwen2_5_VLConfig
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VisionTransformerPretrainedModel
from transformers.vision_utils import get_vision_window_index

sys.path.insert(0, os.path.dirname(__file__))
import make_vl_vision_goldens as base  # noqa: E402

VISION = dict(base.VISION, num_heads=1)  # head_dim 64


def run(model, pixel_values, grid_thw):
    captured = {}
    hooks = [model.patch_embed.register_forward_hook(lambda m, i, o: captured.__setitem__("patch_embed", o.clone()))]
    for bi, blk in enumerate(model.blocks):
        hooks.append(blk.register_forward_hook(lambda m, i, o, bi=bi: captured.__setitem__(f"blk.{bi}.out", o.clone())))
    with torch.no_grad():
        res = model(pixel_values, grid_thw=grid_thw)
    for h in hooks:
        h.remove()
    captured["merger"] = res.pooler_output
    return captured


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "../../tests/fixtures/cuda_vision"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)

    cfg = Qwen2_5_VLConfig(vision_config=VISION, text_config=base.TEXT)
    cfg.vision_config._attn_implementation = "eager"
    model = Qwen2_5_VisionTransformerPretrainedModel(cfg.vision_config).eval().float()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or "ln_q" in name:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
            elif "patch_embed" in name:
                p.copy_(0.05 * torch.randn_like(p))
            else:
                p.copy_(0.2 * torch.randn_like(p))
            p.copy_(p.to(torch.bfloat16).float())  # bf16-exact weights

    cfg.save_pretrained(args.out)
    weights = {"model.visual." + k: v.to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
    save_file(weights, os.path.join(args.out, "model.safetensors"), metadata={"format": "pt"})

    model_bf16 = Qwen2_5_VisionTransformerPretrainedModel(cfg.vision_config).eval()
    model_bf16.load_state_dict(model.state_dict())
    model_bf16 = model_bf16.to(torch.bfloat16)

    v = cfg.vision_config
    patch_dim = v.in_channels * v.temporal_patch_size * v.patch_size * v.patch_size
    out = {}
    bf16_err = {}
    g = torch.Generator().manual_seed(1)
    for case, grids in base.CASES.items():
        grid_thw = torch.tensor(grids, dtype=torch.int64)
        patches = int(grid_thw.prod(-1).sum())
        pixel_values = torch.randn(patches, patch_dim, generator=g)
        ref = run(model, pixel_values, grid_thw)
        low = run(model_bf16, pixel_values.to(torch.bfloat16), grid_thw)
        window_index, _ = get_vision_window_index(grid_thw, v.spatial_merge_size, v.window_size, v.patch_size)
        out[f"{case}.pixel_values"] = pixel_values
        out[f"{case}.grid_thw"] = grid_thw
        out[f"{case}.window_index"] = window_index.to(torch.int64)
        for k, t in ref.items():
            out[f"{case}.{k}"] = t
            e = low[k].float() - t
            bf16_err[f"{case}.{k}"] = {
                "max_abs": float(e.abs().max()),
                "rel_l2": float(e.norm() / t.norm()),
                "ref_rms": float(t.pow(2).mean().sqrt()),
            }
            print(case, k, bf16_err[f"{case}.{k}"])
    out = {k: t.contiguous() for k, t in out.items()}
    save_file(
        out,
        os.path.join(args.out, "goldens.safetensors"),
        metadata={"cases": json.dumps(list(base.CASES)), "bf16_reference": json.dumps(bf16_err)},
    )


if __name__ == "__main__":
    main()
