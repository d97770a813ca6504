#!/usr/bin/env python3
"""Goldens for the Qwen2-VL / Qwen2.5-VL video processor (src/models/qwen_vl/video_processor.*).

Runs transformers' Qwen2VLVideoProcessor (torchvision backend; the class AutoVideoProcessor picks for
qwen2_vl / qwen2_5_vl) on already-decoded synthetic frame stacks (random uint8, do_sample_frames off)
and writes tests/fixtures/vl_video_processor/:
  <config>/<file>          the configs the C++ loader reads (processor_config.json "video_processor",
                           video_preprocessor_config.json, or the preprocessor_config.json fallback)
  goldens.safetensors:     per case <case>.frames (U8 [n, h, w, 3]), <case>.pixel_values (F32
                           [t*h*w, C*T*P*P]), <case>.grid_thw (I64 [3]);
                           __metadata__["cases"]: JSON list of {name, config, frames, width, height};
                           __metadata__["configs"]: per config the values transformers resolved
                           (size, patch sizes, cap_pixels_per_frame, max_video_tokens), so the C++
                           loader's defaults are checked against the Python class defaults.

Usage: python3 tools/reference/make_vl_video_processor_goldens.py [--out tests/fixtures/vl_video_processor]
Deterministic: fixed seeds, no network.
"""
import argparse
import json
import os

import numpy as np
import torch
from safetensors.numpy import save_file
from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

CONFIGS = {
    # transformers v5 single-file layout: processor_config.json with a nested "video_processor".
    # Small patch size keeps the fixture small; explicit cap off.
    "cfg_nested": (
        "processor_config.json",
        {
            "processor_class": "Qwen2VLProcessor",
            "image_processor": {"image_processor_type": "Qwen2VLImageProcessor", "patch_size": 14},
            "video_processor": {
                "video_processor_type": "Qwen2VLVideoProcessor",
                "size": {"shortest_edge": 256, "longest_edge": 2048},
                "patch_size": 4,
                "temporal_patch_size": 2,
                "merge_size": 2,
                "cap_pixels_per_frame": False,
            },
        },
    ),
    # Legacy video_preprocessor_config.json, real patch size 14, Qwen's shipped mean/std.
    "cfg_video_file": (
        "video_preprocessor_config.json",
        {
            "video_processor_type": "Qwen2VLVideoProcessor",
            "size": {"shortest_edge": 3136, "longest_edge": 6272},
            "patch_size": 14,
            "temporal_patch_size": 2,
            "merge_size": 2,
            "image_mean": [0.48145466, 0.4578275, 0.40821073],
            "image_std": [0.26862954, 0.26130258, 0.27577711],
            "resample": 3,
            "cap_pixels_per_frame": False,
        },
    ),
    # Only preprocessor_config.json (how Qwen2-VL checkpoints ship): the video processor falls back to
    # it; top-level min_pixels/max_pixels override size. Cap unset -> transformers' current default
    # (no cap). temporal_patch_size 3 exercises padding with two repeated frames.
    "cfg_image_file": (
        "preprocessor_config.json",
        {
            "image_processor_type": "Qwen2VLImageProcessor",
            "min_pixels": 128,
            "max_pixels": 1024,
            "patch_size": 4,
            "temporal_patch_size": 3,
            "merge_size": 2,
            "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5],
        },
    ),
    # Total-pixel budget: max_video_tokens small enough that the per-frame share
    # (int(tokens * factor^2 * 0.9) * temporal // frames) bites and depends on the frame count.
    "cfg_capped": (
        "video_preprocessor_config.json",
        {
            "video_processor_type": "Qwen2VLVideoProcessor",
            "size": {"shortest_edge": 64, "longest_edge": 4096},
            "patch_size": 4,
            "temporal_patch_size": 2,
            "merge_size": 2,
            "cap_pixels_per_frame": True,
            "max_video_tokens": 40,
        },
    ),
    # Rescale only, no normalize; merge_size 1.
    "cfg_rescale_only": (
        "video_preprocessor_config.json",
        {
            "video_processor_type": "Qwen2VLVideoProcessor",
            "size": {"shortest_edge": 64, "longest_edge": 1024},
            "patch_size": 4,
            "temporal_patch_size": 2,
            "merge_size": 1,
            "do_normalize": False,
            "cap_pixels_per_frame": False,
        },
    ),
    # No size at all: the class defaults (shortest_edge 128*28*28, longest_edge 28*28*768) apply.
    # Only the resolved config is recorded (outputs at that size would be too large for a fixture).
    "cfg_defaults": (
        "video_preprocessor_config.json",
        {"video_processor_type": "Qwen2VLVideoProcessor"},
    ),
}

# (name, config, frames, width, height)
CASES = [
    ("nested_2f_32x24_noresize", "cfg_nested", 2, 32, 24),
    ("nested_4f_60x50_down", "cfg_nested", 4, 60, 50),
    ("nested_6f_30x22", "cfg_nested", 6, 30, 22),
    ("nested_3f_odd_20x13_up", "cfg_nested", 3, 20, 13),
    ("nested_1f_single_40x40", "cfg_nested", 1, 40, 40),
    ("video_file_2f_70x50", "cfg_video_file", 2, 70, 50),
    ("video_file_3f_odd_60x45", "cfg_video_file", 3, 60, 45),
    ("image_file_4f_t3_33x21", "cfg_image_file", 4, 33, 21),
    ("image_file_6f_t3_17x25", "cfg_image_file", 6, 17, 25),
    ("capped_2f_48x48", "cfg_capped", 2, 48, 48),
    ("capped_6f_48x48", "cfg_capped", 6, 48, 48),
    ("capped_7f_odd_50x30", "cfg_capped", 7, 50, 30),
    ("rescale_only_3f_23x19", "cfg_rescale_only", 3, 23, 19),
]


def resolved(proc):
    return {
        "shortest_edge": int(proc.size["shortest_edge"]),
        "longest_edge": int(proc.size["longest_edge"]),
        "patch_size": int(proc.patch_size),
        "temporal_patch_size": int(proc.temporal_patch_size),
        "merge_size": int(proc.merge_size),
        "cap_pixels_per_frame": bool(proc.cap_pixels_per_frame),
        "max_video_tokens": int(proc.max_video_tokens),
        "do_normalize": bool(proc.do_normalize),
        "image_mean": [float(x) for x in proc.image_mean],
    }


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "..", "tests", "fixtures", "vl_video_processor"))
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    procs, cfg_meta = {}, {}
    for name, (fname, cfg) in CONFIGS.items():
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, fname), "w") as f:
            json.dump(cfg, f, indent=2)
            f.write("\n")
        procs[name] = Qwen2VLVideoProcessor.from_pretrained(d)
        cfg_meta[name] = resolved(procs[name])

    tensors, meta = {}, []
    for i, (name, cfg_name, n, w, h) in enumerate(CASES):
        rng = np.random.default_rng(2000 + i)
        frames = rng.integers(0, 256, size=(n, h, w, 3), dtype=np.uint8)
        proc = procs[cfg_name]
        # A 4-D uint8 array is one video of n frames, channels last; frames are used as given.
        res = proc(videos=[frames], do_sample_frames=False, return_tensors="pt")
        pv = res["pixel_values_videos"].numpy().astype(np.float32)
        thw = res["video_grid_thw"].numpy().astype(np.int64)[0]
        assert pv.shape[0] == int(np.prod(thw)), (pv.shape, thw)
        tensors[f"{name}.frames"] = frames
        tensors[f"{name}.pixel_values"] = np.ascontiguousarray(pv)
        tensors[f"{name}.grid_thw"] = thw
        meta.append({"name": name, "config": cfg_name, "frames": n, "width": w, "height": h})
        print(f"{name}: {n}x{w}x{h} -> grid_thw {thw.tolist()} pixel_values {list(pv.shape)}")
    save_file(
        tensors,
        os.path.join(out, "goldens.safetensors"),
        metadata={"cases": json.dumps(meta), "configs": json.dumps(cfg_meta)},
    )
    print("wrote", out)


if __name__ == "__main__":
    torch.manual_seed(0)
    main()
