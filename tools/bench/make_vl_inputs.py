#!/usr/bin/env python3
"""Deterministic benchmark media for the vision preprocessing and image-TTFT benchmarks (not
committed: generated into --out, /tmp by default).

  python3 tools/bench/make_vl_inputs.py --out /tmp/vlbench
    -> image_1920x1080.jpg  (gradients + shapes + noise, quality 90, 4:2:0)
       image_1280x720.jpg   (the same scene at 1280x720, for image TTFT)
       video_30s_720p.mp4   (ffmpeg testsrc2, 1280x720, 30 fps, 30 s, libx264 yuv420p; --no-video skips it)

Needs numpy, Pillow and the ffmpeg CLI (apt-get install -y ffmpeg).
"""
import argparse
import pathlib
import shutil
import subprocess

import numpy as np
from PIL import Image, ImageDraw


def scene(width, height, seed=0):
    """Structure a resize kernel cannot shortcut: smooth gradients, hard-edged shapes, sensor-like noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    r = 255 * x / (width - 1)
    g = 255 * y / (height - 1)
    b = 127.5 + 127.5 * np.sin(2 * np.pi * (x + y) / 173.0)
    img = Image.fromarray(np.stack([r, g, b], -1).astype(np.uint8))
    draw = ImageDraw.Draw(img)
    s = width / 1920  # shapes scale with the image so both sizes show the same scene
    for i in range(60):
        cx, cy = rng.uniform(0, width), rng.uniform(0, height)
        w, h = rng.uniform(20, 260) * s, rng.uniform(20, 260) * s
        color = tuple(int(c) for c in rng.integers(0, 256, 3))
        box = [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]
        if i % 3 == 0:
            draw.ellipse(box, fill=color)
        elif i % 3 == 1:
            draw.rectangle(box, fill=color)
        else:
            draw.line(box, fill=color, width=max(1, int(6 * s)))
    arr = np.asarray(img).astype(np.int16) + rng.normal(0, 6, (height, width, 3)).astype(np.int16)
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/vlbench")
    ap.add_argument("--no-video", action="store_true")
    a = ap.parse_args()
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for w, h in ((1920, 1080), (1280, 720)):
        p = out / f"image_{w}x{h}.jpg"
        scene(w, h).save(p, quality=90, subsampling=2)
        print(p, p.stat().st_size, "bytes")
    if a.no_video:
        return
    if shutil.which("ffmpeg") is None:
        raise SystemExit("ffmpeg CLI not found (apt-get install -y ffmpeg)")
    p = out / "video_30s_720p.mp4"
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30",
                    "-t", "30", "-c:v", "libx264", "-preset", "medium", "-crf", "23", "-pix_fmt", "yuv420p",
                    "-threads", "1", "-bitexact", str(p)], check=True)
    print(p, p.stat().st_size, "bytes")


if __name__ == "__main__":
    main()
