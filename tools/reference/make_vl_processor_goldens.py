#!/usr/bin/env python3
"""Goldens for the Qwen2-VL image processor (src/models/qwen_vl/).

Runs transformers' default AutoImageProcessor (transformers 5: the torchvision backend,
Qwen2VLImageProcessor, antialiased bicubic on uint8 tensors) on small deterministic RGB images and
writes tests/fixtures/vl_processor/:
  <config>/preprocessor_config.json or processor_config.json   (the configs the C++ loader reads)
  goldens.safetensors: per case  <case>.image (U8 [h, w, 3]), <case>.pixel_values (F32),
                       <case>.grid_thw (I64 [3]); __metadata__["cases"] is a JSON list of
                       {name, config, width, height, max_abs_diff_vs_pil}.
The PIL backend (Qwen2VLImageProcessorPil) is also run; its max abs difference from the default
backend is recorded per case (informational; the C++ path matches the default backend).

Usage: python3 tools/reference/make_vl_processor_goldens.py [--out tests/fixtures/vl_processor]
Deterministic: fixed seeds, no network.
"""
import argparse
import json
import os

import numpy as np
import torch
from safetensors.numpy import save_file
from transformers import AutoImageProcessor

CONFIGS = {
    # Legacy file, Qwen2-VL's shipped values (min_pixels/max_pixels top-level override size).
    "cfg_default": (
        "preprocessor_config.json",
        {
            "image_processor_type": "Qwen2VLImageProcessor",
            "min_pixels": 3136,
            "max_pixels": 12845056,
            "patch_size": 14,
            "temporal_patch_size": 2,
            "merge_size": 2,
            "image_mean": [0.48145466, 0.4578275, 0.40821073],
            "image_std": [0.26862954, 0.26130258, 0.27577711],
            "processor_class": "Qwen2VLProcessor",
        },
    ),
    # Legacy file with size{} and a small max_pixels to force downscaling.
    "cfg_small": (
        "preprocessor_config.json",
        {
            "image_processor_type": "Qwen2VLImageProcessor",
            "size": {"shortest_edge": 784, "longest_edge": 4704},
            "patch_size": 14,
            "temporal_patch_size": 2,
            "merge_size": 2,
            "image_mean": [0.48145466, 0.4578275, 0.40821073],
            "image_std": [0.26862954, 0.26130258, 0.27577711],
            "rescale_factor": 0.00392156862745098,
            "resample": 3,
        },
    ),
    # transformers v5 single processor_config.json, nested "image_processor"; other mean/std.
    "cfg_nested": (
        "processor_config.json",
        {
            "processor_class": "Qwen2VLProcessor",
            "image_processor": {
                "image_processor_type": "Qwen2VLImageProcessor",
                "size": {"shortest_edge": 1568, "longest_edge": 6272},
                "patch_size": 14,
                "temporal_patch_size": 2,
                "merge_size": 2,
                "image_mean": [0.5, 0.5, 0.5],
                "image_std": [0.5, 0.5, 0.5],
            },
        },
    ),
    # Rescale without normalize.
    "cfg_rescale_only": (
        "preprocessor_config.json",
        {
            "image_processor_type": "Qwen2VLImageProcessor",
            "size": {"shortest_edge": 784, "longest_edge": 4704},
            "do_normalize": False,
        },
    ),
}

# (name, config, width, height): no-resize, downscale, upscale, extreme aspect, tiny, odd sizes.
CASES = [
    ("exact_84x56", "cfg_default", 84, 56),
    ("exact_56x56_small", "cfg_small", 56, 56),
    ("odd_131x97_down", "cfg_small", 131, 97),
    ("down_150x200", "cfg_small", 150, 200),
    ("up_tiny_7x5", "cfg_small", 7, 5),
    ("wide_400x10", "cfg_small", 400, 10),
    ("tall_20x300", "cfg_small", 20, 300),
    ("mixed_45x30", "cfg_small", 45, 30),
    ("nested_61x47", "cfg_nested", 61, 47),
    ("rescale_only_33x71", "cfg_rescale_only", 33, 71),
]


def make_image(seed, w, h):
    """Gradient + noise: smooth structure plus full-range high-frequency content."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    base = np.stack(
        [255 * xx / max(w - 1, 1), 255 * yy / max(h - 1, 1), 127 + 120 * np.sin((xx + yy) / 5.0)], axis=-1
    )
    noise = rng.normal(0, 60, size=(h, w, 3))
    return np.clip(base + noise, 0, 255).astype(np.uint8)


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "..", "tests", "fixtures", "vl_processor"))
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    procs = {}
    for name, (fname, cfg) in CONFIGS.items():
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, fname), "w") as f:
            json.dump(cfg, f, indent=2)
            f.write("\n")
        procs[name] = AutoImageProcessor.from_pretrained(d)
        assert type(procs[name]).__name__ == "Qwen2VLImageProcessor", type(procs[name])
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    tensors, meta = {}, []
    for i, (name, cfg_name, w, h) in enumerate(CASES):
        img = make_image(1000 + i, w, h)
        proc = procs[cfg_name]
        res = proc(images=[img], return_tensors="pt")
        pv = res["pixel_values"].numpy().astype(np.float32)
        thw = res["image_grid_thw"].numpy().astype(np.int64)[0]
        pil = Qwen2VLImageProcessorPil(**{k: v for k, v in proc.to_dict().items() if k != "image_processor_type"})
        pv_pil = pil(images=[img], return_tensors="np")["pixel_values"].astype(np.float32)
        diff = float(np.abs(pv_pil - pv).max()) if pv_pil.shape == pv.shape else None
        tensors[f"{name}.image"] = img
        tensors[f"{name}.pixel_values"] = np.ascontiguousarray(pv)
        tensors[f"{name}.grid_thw"] = thw
        meta.append({"name": name, "config": cfg_name, "width": w, "height": h, "max_abs_diff_vs_pil": diff})
        print(f"{name}: {w}x{h} -> grid_thw {thw.tolist()} pixel_values {list(pv.shape)} pil_diff {diff}")
    save_file(tensors, os.path.join(out, "goldens.safetensors"), metadata={"cases": json.dumps(meta)})
    print("wrote", out)


if __name__ == "__main__":
    main()
