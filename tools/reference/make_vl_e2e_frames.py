#!/usr/bin/env python3
"""Writes, next to each tests/fixtures/vl_e2e/<model>/<case>/golden.json that has videos, the frames the
reference processor used, decoded by the ffmpeg CLI exactly as make_vl_e2e_goldens.py decoded them
(video_<k>.rgb: the sampled frames in order, rgb24), so GPU builds without ffmpeg libraries
(LOOM_VIDEO=OFF, the device bundle) can feed the same pixels (tests/cuda_models/vl_cuda_test.cpp).

Usage: python3 tools/reference/make_vl_e2e_frames.py
"""
import json
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from make_vl_e2e_goldens import FIX, decode_video  # noqa: E402


def main():
    for golden in sorted((FIX / "vl_e2e").glob("*/*/golden.json")):
        g = json.loads(golden.read_text())
        k = 0
        for m in g["media"]:
            if m["kind"] != "video":
                continue
            frames, _, _ = decode_video(m["source"])
            sel = np.ascontiguousarray(frames[m["frames_indices"]])
            (golden.parent / f"video_{k}.rgb").write_bytes(sel.tobytes())
            k += 1


if __name__ == "__main__":
    main()
