#!/usr/bin/env python3
"""transformers' Qwen2-VL processors on the inputs of tools/bench/preprocess_bench.cpp, same config
folder, same thread count. Prints median and min ms per item and writes JSON.

  python3 tools/bench/preprocess_bench.py --config tools/bench/configs/qwen2.5-vl \
      --image /tmp/vlbench/image_1920x1080.jpg --video /tmp/vlbench/video_30s_720p.mp4 \
      --threads 2 --reps 20 --video-reps 3 --json hf_pre.json

Image, decode included: PIL.Image.open(path).convert("RGB"), then
  slow: Qwen2VLImageProcessorPil (PIL resize + numpy), fast: Qwen2VLImageProcessor (torchvision, the
  transformers 5 default), both return_tensors="pt".
Video, decode included: transformers.video_utils.load_video(path, backend="pyav") with the video
processor's own sample_frames (fps from the config) as sample_indices_fn -- transformers' PyAV
reader; fetch_videos() would need torchcodec -- then Qwen2VLVideoProcessor on the decoded frames
(do_sample_frames=False: already sampled). Needs `pip install av`.
torch.set_num_threads(--threads); one untimed warm-up per item. Wall time and, for the totals, the
process CPU time (all threads): on a busy machine the CPU time is the steadier figure.
"""
import argparse
import functools
import json
import statistics
import time

import torch
import transformers
from PIL import Image
from transformers import Qwen2VLImageProcessor, Qwen2VLVideoProcessor
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil


def stats(samples):
    return {"median_ms": statistics.median(samples), "min_ms": min(samples), "samples_ms": samples}


def timed(fn, reps):
    """Wall ms and process CPU ms (all threads; steadier on a busy machine) per call."""
    fn()  # warm-up
    wall, cpu = [], []
    for _ in range(reps):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        wall.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    return {**stats(wall), "cpu": stats(cpu)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--image")
    ap.add_argument("--video")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--video-reps", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    res = {"tool": "transformers processors", "transformers": transformers.__version__,
           "torch": torch.__version__, "threads": a.threads, "config": a.config}
    print(f"{'item':<8} {'processor':<34} {'median ms':>10} {'min ms':>10}")

    if a.image:
        procs = {"slow (Qwen2VLImageProcessorPil)": Qwen2VLImageProcessorPil.from_pretrained(a.config),
                 "fast (Qwen2VLImageProcessor)": Qwen2VLImageProcessor.from_pretrained(a.config)}
        res["image"] = {"path": a.image, "reps": a.reps}
        for name, proc in procs.items():
            def run(proc=proc):
                img = Image.open(a.image).convert("RGB")
                return proc(images=img, return_tensors="pt")
            out = run()
            r = timed(run, a.reps)
            r["pixel_values_shape"] = list(out["pixel_values"].shape)
            r["grid_thw"] = out["image_grid_thw"][0].tolist()
            res["image"][name] = r
            print(f"{'image':<8} {name:<34} {r['median_ms']:>10.2f} {r['min_ms']:>10.2f}")
            print(f"{'':<8} {'  process CPU time':<34} {r['cpu']['median_ms']:>10.2f} {r['cpu']['min_ms']:>10.2f}")

    if a.video:
        from transformers.video_utils import load_video
        vp = Qwen2VLVideoProcessor.from_pretrained(a.config)
        sample = functools.partial(vp.sample_frames, fps=vp.fps)

        def run_video():
            t0 = time.perf_counter()
            frames, meta = load_video(a.video, backend="pyav", sample_indices_fn=sample)
            t1 = time.perf_counter()
            out = vp(videos=[frames], video_metadata=[meta], do_sample_frames=False, return_tensors="pt")
            return out, frames, (t1 - t0) * 1e3, (time.perf_counter() - t1) * 1e3

        out, frames, _, _ = run_video()  # warm-up
        dec, proc, tot, cpu = [], [], [], []
        for _ in range(a.video_reps):
            c0, t0 = time.process_time(), time.perf_counter()
            _, _, d, p = run_video()
            tot.append((time.perf_counter() - t0) * 1e3)
            cpu.append((time.process_time() - c0) * 1e3)
            dec.append(d)
            proc.append(p)
        name = "Qwen2VLVideoProcessor (+pyav)"
        res["video"] = {"path": a.video, "reps": a.video_reps, "sampled_frames": int(frames.shape[0]),
                        "grid_thw": out["video_grid_thw"][0].tolist(),
                        "pixel_values_shape": list(out["pixel_values_videos"].shape)}
        for stage, v in (("load_video (pyav, sampled)", dec), ("video processor", proc), ("total", tot),
                         ("total, process CPU time", cpu)):
            res["video"][stage] = stats(v)
            print(f"{'video':<8} {stage:<34} {statistics.median(v):>10.2f} {min(v):>10.2f}")
        print(f"         {name}: {frames.shape[0]} frames, grid {res['video']['grid_thw']}")

    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=2)
        print("wrote", a.json)


if __name__ == "__main__":
    main()
