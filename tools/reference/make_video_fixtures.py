#!/usr/bin/env python3
"""Regenerates tests/fixtures/media_video/: tiny clips (ffmpeg CLI, testsrc pattern) in each container/codec
loom::media's video decoder is tested on, and the references the C++ tests compare against:
    <clip>.<ext>      the encoded clip
    <clip>.rgb        raw rgb24 pixels of the frames listed in goldens.json ("frames"), concatenated in that
                      order, decoded by the ffmpeg CLI: -vf select=eq(n\\,K) -vsync 0 -pix_fmt rgb24 (the CLI
                      converts with libswscale, flags=bicubic: the same library and flags video_decode.cpp uses)
    goldens.json      per clip: ffprobe's stream metadata (size, avg_frame_rate, packet and decoded-frame counts,
                      pts of every frame) and transformers' Qwen2VLVideoProcessor.sample_frames indices for several
                      FrameSampling settings; plus "sampling": sample_frames on synthetic metadata (edge cases).
Deterministic for a given ffmpeg build (encoders run single-threaded, bitexact). Run from the repo root:
    python3 tools/reference/make_video_fixtures.py
"""
import json
import os
import subprocess

import numpy as np
from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor
from transformers.video_utils import VideoMetadata

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures", "media_video")

# name, ext, size, rate, seconds, encoder args
CLIPS = [
    ("h264_bframes", "mp4", "32x24", "10", 2.5,
     ["-c:v", "libx264", "-preset", "veryfast", "-bf", "2", "-g", "10", "-pix_fmt", "yuv420p", "-threads", "1"]),
    ("vp9", "webm", "32x24", "12", 3,
     ["-c:v", "libvpx-vp9", "-b:v", "100k", "-g", "12", "-pix_fmt", "yuv420p", "-threads", "1"]),
    ("mpeg4_odd", "mkv", "33x25", "8", 2,
     ["-c:v", "mpeg4", "-q:v", "5", "-bf", "1", "-pix_fmt", "yuv420p", "-threads", "1"]),
    ("mjpeg_ntsc", "mov", "32x24", "30000/1001", 2,
     ["-c:v", "mjpeg", "-q:v", "6", "-pix_fmt", "yuvj420p", "-threads", "1"]),
    # Flags a non-default matrix and full range in the bitstream (VUI): exercises the per-frame colorspace
    # and range that the CLI's scale filter applies (and video_decode.cpp mirrors).
    ("h264_bt709_full", "mkv", "32x24", "6", 1.5,
     ["-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p", "-colorspace", "bt709",
      "-color_primaries", "bt709", "-color_trc", "bt709", "-color_range", "pc", "-threads", "1"]),
]

# FrameSampling settings (fps, min_frames, max_frames, temporal_patch_size, num_frames); num_frames 0 = fps mode.
SETTINGS = [
    (2.0, 4, 768, 2, 0),   # Qwen2-VL / Qwen2.5-VL defaults
    (1.0, 4, 768, 2, 0),
    (3.0, 4, 10, 2, 0),    # max_frames binds
    (0.5, 8, 768, 2, 0),   # min_frames binds
    (2.0, 4, 768, 1, 0),
    (0.0, 4, 768, 2, 6),   # explicit num_frames
]

# Synthetic metadata for sampling edge cases: (total_num_frames, fps).
SYNTHETIC = [(1, 30.0), (2, 30.0), (3, 30.0), (5, 24.0), (7, 29.97002997002997), (100, 29.97002997002997),
             (301, 30.0), (1000, 23.976023976023978), (4000, 60.0), (60, 1.0), (11, 7.5), (997, 25.0),
             (359, 29.97)]  # 359 @ 29.97: transformers returns 23 indices, the last == total


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True).stdout


def sample(total, fps, s):
    fps_s, min_f, max_f, tps, num = s
    proc = Qwen2VLVideoProcessor()
    meta = VideoMetadata(total_num_frames=total, fps=fps)
    try:
        if num:
            idx = proc.sample_frames(meta, temporal_patch_size=tps, min_frames=min_f, max_frames=max_f,
                                     num_frames=num, fps=None)
        else:
            idx = proc.sample_frames(meta, temporal_patch_size=tps, min_frames=min_f, max_frames=max_f,
                                     fps=fps_s)
    except (ValueError, ZeroDivisionError) as e:
        return {"error": type(e).__name__}
    return {"indices": [int(i) for i in idx]}


def setting_json(s):
    return {"fps": s[0], "min_frames": s[1], "max_frames": s[2], "temporal_patch_size": s[3], "num_frames": s[4]}


def main():
    os.makedirs(OUT, exist_ok=True)
    goldens = {"ffmpeg": run(["ffmpeg", "-hide_banner", "-version"]).decode().splitlines()[0],
               "clips": [], "sampling": []}
    for name, ext, size, rate, secs, enc in CLIPS:
        path = os.path.join(OUT, f"{name}.{ext}")
        run(["ffmpeg", "-y", "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i",
             f"testsrc=size={size}:rate={rate}:duration={secs}", *enc, "-fflags", "+bitexact",
             "-flags:v", "+bitexact", "-map_metadata", "-1", path])
        probe = json.loads(run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-count_frames",
                                "-count_packets", "-show_entries",
                                "stream=width,height,avg_frame_rate,nb_read_frames,nb_read_packets",
                                "-show_entries", "format=duration", "-of", "json", path]))
        st = probe["streams"][0]
        num, den = (int(v) for v in st["avg_frame_rate"].split("/"))
        fps = num / den
        total = int(st["nb_read_frames"])
        assert int(st["nb_read_packets"]) == total, (name, st)
        # pts of every decoded frame, in decoder output order (what select's n counts).
        frames = json.loads(run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                                 "frame=best_effort_timestamp_time", "-of", "json", path]))["frames"]
        pts = [float(f["best_effort_timestamp_time"]) for f in frames]
        assert len(pts) == total
        sampled = [sample(total, fps, s) for s in SETTINGS]
        wanted = set([0, total - 1, total // 2 + 1])
        for r in sampled:
            wanted.update(r.get("indices", []))
        wanted = sorted(wanted)
        raw = b""
        for k in wanted:
            # One frame per CLI run: select's n counts decoded frames in output order from 0.
            raw += run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-i", path, "-vf",
                        f"select=eq(n\\,{k})", "-vsync", "0", "-pix_fmt", "rgb24", "-f", "rawvideo", "-"])
        w, h = int(st["width"]), int(st["height"])
        assert len(raw) == len(wanted) * w * h * 3, (name, len(raw))
        with open(os.path.join(OUT, f"{name}.rgb"), "wb") as f:
            f.write(raw)
        goldens["clips"].append({
            "file": f"{name}.{ext}", "width": w, "height": h, "fps_num": num, "fps_den": den,
            "num_frames": total, "duration_s": float(probe["format"]["duration"]), "pts_s": pts,
            "frames": wanted,
            "sampling": [dict(setting_json(s), **r) for s, r in zip(SETTINGS, sampled)],
        })
    for total, fps in SYNTHETIC:
        for s in SETTINGS:
            goldens["sampling"].append(dict(setting_json(s), total_num_frames=total, video_fps=fps,
                                            **sample(total, fps, s)))
    with open(os.path.join(OUT, "goldens.json"), "w") as f:
        json.dump(goldens, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
