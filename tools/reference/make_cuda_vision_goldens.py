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
import os
import sys

import torch
from transformers import Qwen2_5_VLConfig
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VisionTransformerPretrainedModel
from transformers.vision_utils import get_vision_window_index

sys.path.insert(0, os.path.dirname(__file__))
import make_vl_vision_goldens as base  # noqa: E402
from reference_common import (  # noqa: E402
    capture_vision_stages,
    eager_f32,
    init_qwen25_vision_weights,
    save_goldens,
    save_vision_weights,
    vision_cases,
    vision_output_dir,
)

VISION = dict(base.VISION, num_heads=1)  # head_dim 64


def run(model, pixel_values, grid_thw):
    captured, res = capture_vision_stages(model, pixel_values, grid_thw)
    captured["merger"] = res.pooler_output
    return captured


def main():
    out_dir = vision_output_dir("cuda_vision")
    cfg = Qwen2_5_VLConfig(vision_config=VISION, text_config=base.TEXT)
    model = eager_f32(Qwen2_5_VisionTransformerPretrainedModel, cfg)
    init_qwen25_vision_weights(model, bf16_exact=True)

    cfg.save_pretrained(out_dir)
    save_vision_weights(model, out_dir, dtype=torch.bfloat16)

    model_bf16 = Qwen2_5_VisionTransformerPretrainedModel(cfg.vision_config).eval()
    model_bf16.load_state_dict(model.state_dict())
    model_bf16 = model_bf16.to(torch.bfloat16)

    v = cfg.vision_config
    out = {}
    bf16_err = {}
    for case, grid_thw, patches, pixel_values in vision_cases(base.CASES, v):
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
    save_goldens(out, out_dir, base.CASES, bf16_reference=bf16_err)


if __name__ == "__main__":
    main()
