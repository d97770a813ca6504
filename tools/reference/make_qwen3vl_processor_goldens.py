#!/usr/bin/env python3
"""Goldens for the Qwen3-VL processor side (src/models/qwen3_vl/{processor,video_processor,mrope}*).

Everything comes from transformers 5.24's own classes, built from config dicts (no hub):
  - Qwen3VLVideoProcessor (torchvision backend): frame sampling (sample_frames), the video smart_resize,
    resize + normalise + patchify -> pixel_values_videos / video_grid_thw;
  - Qwen2VLImageProcessor with Qwen3-VL settings (patch_size 16, mean/std 0.5): what AutoImageProcessor
    picks for qwen3_vl;
  - Qwen3VLProcessor (with the test tokenizer of tests/fixtures/tokenizer, which has Qwen's special
    tokens): per-frame timestamps (_calculate_timestamps) and the expanded prompt text / input_ids /
    mm_token_type_ids;
  - Qwen3VLModel.get_rope_index and compute_3d_position_ids, called unbound on a stand-in `self` that
    only carries config.vision_config.spatial_merge_size and rope_deltas (all those methods read), so no
    model weights are needed.

Video clips are tests/fixtures/media_video/* (tiny ffmpeg testsrc clips). Python decodes them with the
ffmpeg CLI (rgb24, every frame, passthrough timing: the same libswscale conversion loom's decoder is
tested bit-exact against); the C++ test decodes them with loom::media, samples with our
sampler and compares. Metadata (total frames = packets, fps = avg_frame_rate) is taken from
tests/fixtures/media_video/goldens.json, the values loom::media::probe_video is tested to return.

Writes tests/fixtures/q3vl_processor/:
  <cfg>/...                config files as a checkpoint ships them (read by the C++ loader)
  goldens.json             configs resolved by transformers; sampling, smart_resize, timestamp cases;
                           per pixel case its metadata; per prompt case the text, expanded text,
                           input ids, grids, positions, rope delta and decode positions
  goldens.safetensors      <case>.frames (U8 [n,h,w,3], synthetic cases only), <case>.pixel_values (F32),
                           <case>.image<i>.rgb (U8 [h,w,3]), <case>.image<i>.pixel_values (F32)

Usage: python3 tools/reference/make_qwen3vl_processor_goldens.py
Deterministic: fixed seeds, no network.
"""
import json
import os
import subprocess
import types

import numpy as np
import torch
from safetensors.numpy import save_file
from transformers import AutoTokenizer
from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor
from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLModel
from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor
from transformers.models.qwen3_vl import video_processing_qwen3_vl as q3v
from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor
from transformers.video_utils import VideoMetadata

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
OUT = os.path.join(ROOT, "tests", "fixtures", "q3vl_processor")
MEDIA_VIDEO = os.path.join(ROOT, "tests", "fixtures", "media_video")
TOKENIZER = os.path.join(ROOT, "tests", "fixtures", "tokenizer")

# Qwen3-VL checkpoints' preprocessor_config.json / video_preprocessor_config.json (Qwen3-VL-*-Instruct).
QWEN3_IMAGE = {
    "size": {"longest_edge": 16777216, "shortest_edge": 65536},
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "processor_class": "Qwen3VLProcessor",
    "image_processor_type": "Qwen2VLImageProcessorFast",
}
QWEN3_VIDEO = {
    "size": {"longest_edge": 25165824, "shortest_edge": 4096},
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "processor_class": "Qwen3VLProcessor",
    "video_processor_type": "Qwen3VLVideoProcessor",
}

# name -> {file name: content}. "image" / "video" say which dicts build the processors.
CONFIGS = {
    # The shipped Qwen3-VL layout (two files), shipped values.
    "cfg_qwen3": {
        "preprocessor_config.json": QWEN3_IMAGE,
        "video_preprocessor_config.json": QWEN3_VIDEO,
    },
    # transformers v5 single file, small pixel bounds so the prompt cases' images stay small; fps 3,
    # explicit cap off.
    "cfg_nested": {
        "processor_config.json": {
            "processor_class": "Qwen3VLProcessor",
            "image_processor": dict(QWEN3_IMAGE, size={"shortest_edge": 1024, "longest_edge": 4096}),
            "video_processor": dict(
                QWEN3_VIDEO, size={"shortest_edge": 2048, "longest_edge": 16384}, fps=3, cap_pixels_per_frame=False
            ),
        },
    },
    # Small patches (factor 8) so the tiny clips are scaled down; total-pixel cap on; min/max frames.
    "cfg_small_patch": {
        "video_preprocessor_config.json": dict(
            QWEN3_VIDEO,
            size={"shortest_edge": 256, "longest_edge": 4000},
            patch_size=4,
            cap_pixels_per_frame=True,
            max_video_tokens=6,
            min_frames=3,
            max_frames=7,
        ),
    },
    # num_frames mode (fps must be null: transformers refuses both), temporal_patch_size 3, merge 1,
    # rescale only.
    "cfg_num_frames": {
        "video_preprocessor_config.json": dict(
            QWEN3_VIDEO,
            size={"shortest_edge": 64, "longest_edge": 3000},
            patch_size=4,
            temporal_patch_size=3,
            merge_size=1,
            num_frames=7,
            fps=None,
            do_normalize=False,
        ),
    },
    # No keys at all: Qwen3VLVideoProcessor's class defaults (resolution only, outputs too large).
    "cfg_defaults": {"video_preprocessor_config.json": {"video_processor_type": "Qwen3VLVideoProcessor"}},
}


def write_configs():
    for name, files in CONFIGS.items():
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        for fname, content in files.items():
            with open(os.path.join(d, fname), "w") as f:
                json.dump(content, f, indent=2)
                f.write("\n")


def video_dict(name):
    files = CONFIGS[name]
    if "processor_config.json" in files:
        return dict(files["processor_config.json"]["video_processor"])
    return dict(files["video_preprocessor_config.json"])


def image_dict(name):
    files = CONFIGS[name]
    if "processor_config.json" in files:
        return dict(files["processor_config.json"]["image_processor"])
    return dict(files["preprocessor_config.json"])


def video_proc(name):
    return Qwen3VLVideoProcessor.from_dict(video_dict(name))


def image_proc(name):
    return Qwen2VLImageProcessor.from_dict(image_dict(name))


def resolved_video(p):
    return {
        "shortest_edge": int(p.size["shortest_edge"]) if p.size["shortest_edge"] else None,
        "longest_edge": int(p.size["longest_edge"]) if p.size["longest_edge"] else None,
        "patch_size": int(p.patch_size),
        "temporal_patch_size": int(p.temporal_patch_size),
        "merge_size": int(p.merge_size),
        "image_mean": [float(x) for x in p.image_mean],
        "image_std": [float(x) for x in p.image_std],
        "do_normalize": bool(p.do_normalize),
        "do_sample_frames": bool(p.do_sample_frames),
        "cap_pixels_per_frame": bool(p.cap_pixels_per_frame),
        "max_video_tokens": int(p.max_video_tokens),
        "min_frames": int(p.min_frames),
        "max_frames": int(p.max_frames),
        "fps": None if p.fps is None else float(p.fps),
        "num_frames": None if p.num_frames is None else int(p.num_frames),
    }


def resolved_image(p):
    return {
        "shortest_edge": int(p.size["shortest_edge"]),
        "longest_edge": int(p.size["longest_edge"]),
        "patch_size": int(p.patch_size),
        "merge_size": int(p.merge_size),
        "image_mean": [float(x) for x in p.image_mean],
    }


# ---------------------------------------------------------------------------------------------------
# Clips: decoded by the ffmpeg CLI, metadata from media_video/goldens.json.


def clip_meta():
    g = json.load(open(os.path.join(MEDIA_VIDEO, "goldens.json")))
    return {c["file"]: c for c in g["clips"]}


def decode_clip(fname, meta):
    raw = subprocess.run(
        ["ffmpeg", "-v", "error", "-i", os.path.join(MEDIA_VIDEO, fname), "-vsync", "0", "-pix_fmt", "rgb24",
         "-f", "rawvideo", "-"],
        check=True, capture_output=True,
    ).stdout
    w, h = meta["width"], meta["height"]
    frames = np.frombuffer(raw, dtype=np.uint8).reshape(-1, h, w, 3)
    assert frames.shape[0] == meta["num_frames"], (fname, frames.shape, meta["num_frames"])
    return frames


def clip_fps(meta):
    return meta["fps_num"] / meta["fps_den"]


# ---------------------------------------------------------------------------------------------------
# Sampling and smart_resize on synthetic inputs (no pixels).

# (total_num_frames, video fps or None, overrides of the sampling settings)
SAMPLING = [
    (25, 10.0, {}), (36, 12.0, {}), (60, 30000 / 1001, {}), (9, 6.0, {}), (16, 8.0, {}),
    (1, 30.0, {}), (2, 30.0, {}), (3, 30.0, {}), (7, 29.97002997002997, {}), (100, 29.97002997002997, {}),
    (301, 30.0, {}), (1000, 23.976023976023978, {}), (4000, 60.0, {}), (60, 1.0, {}), (997, 25.0, {}),
    (359, 29.97, {}), (5000, 24.0, {"max_frames": 768}), (5000, 2.0, {}), (50, None, {}),
    (40, 10.0, {"fps": 0.5}), (40, 10.0, {"fps": 7.3}), (40, 10.0, {"min_frames": 1, "fps": 0.1}),
    (40, 10.0, {"max_frames": 5}), (40, 10.0, {"fps": None, "num_frames": 6}),
    (40, 10.0, {"fps": None, "num_frames": 1}), (5, 10.0, {"fps": None, "num_frames": 9}),
    (40, 10.0, {"fps": None}), (3, 10.0, {"fps": None}), (40, 10.0, {"num_frames": 6}),
]


def sampling_cases():
    out = []
    for total, fps, over in SAMPLING:
        p = Qwen3VLVideoProcessor()
        settings = {"fps": 2, "num_frames": None, "min_frames": 4, "max_frames": 768}
        settings.update(over)
        # As preprocess() does: the instance holds the settings (sample_frames falls back to self.fps
        # when its fps argument is None, so a null fps must be null on the instance too).
        p.min_frames = settings["min_frames"]
        p.max_frames = settings["max_frames"]
        p.fps = settings["fps"]
        p.num_frames = settings["num_frames"]
        meta = VideoMetadata(total_num_frames=total, fps=fps)
        case = {"total_num_frames": total, "video_fps": fps, **settings}
        try:
            idx = p.sample_frames(meta, num_frames=settings["num_frames"], fps=settings["fps"])
            case["indices"] = [int(i) for i in idx]
            # The processor's timestamps (metadata.fps: 24 when the video had none; sample_frames set it).
            proc = Qwen3VLProcessor.__new__(Qwen3VLProcessor)
            for tps in (1, 2, 3):
                ts = proc._calculate_timestamps(idx, meta.fps if meta.fps is not None else 24, tps)
                case[f"timestamps_t{tps}"] = [float(t) for t in ts]
                case[f"timestamps_t{tps}_text"] = [f"<{t:.1f} seconds>" for t in ts]
        except ValueError as e:
            case["error"] = type(e).__name__
        out.append(case)
    return out


# (num_frames, height, width, temporal_factor, factor, min_pixels, max_pixels)
SMART_RESIZE = [
    (2, 24, 32, 2, 32, 4096, 25165824), (4, 24, 32, 2, 32, 4096, 25165824), (5, 25, 33, 2, 32, 4096, 25165824),
    (1, 64, 64, 2, 32, 4096, 25165824), (2, 10, 500, 2, 32, 64, 10**9), (3, 1, 300, 2, 32, 64, 10**9),
    (2, 1, 7000, 2, 32, 64, 10**9), (8, 480, 640, 2, 32, 131072, 786432), (8, 1080, 1920, 2, 32, 4096, 25165824),
    (768, 1080, 1920, 2, 32, 4096, 25165824), (4, 24, 32, 2, 8, 256, 4000), (7, 24, 32, 2, 8, 256, 4000),
    (3, 100, 37, 3, 28, 10000, 60000), (6, 17, 90, 3, 8, 20000, 400000), (2, 33, 33, 2, 32, 1, 10**9),
    (2, 48, 48, 2, 32, 1, 10**9), (2, 80, 80, 2, 32, 1, 10**9), (9, 720, 1280, 2, 32, 131072, 786432),
    (4, 31, 31, 2, 32, 4096, 25165824), (4, 32, 6500, 2, 32, 4096, 25165824),
]


def smart_resize_cases():
    out = []
    for n, h, w, tf, f, mn, mx in SMART_RESIZE:
        c = {"num_frames": n, "height": h, "width": w, "temporal_factor": tf, "factor": f, "min_pixels": mn,
             "max_pixels": mx}
        try:
            rh, rw = q3v.smart_resize(num_frames=n, height=h, width=w, temporal_factor=tf, factor=f,
                                      min_pixels=mn, max_pixels=mx)
            c["resized"] = [int(rh), int(rw)]
        except ValueError as e:
            c["error"] = type(e).__name__
        out.append(c)
    return out


# ---------------------------------------------------------------------------------------------------
# Pixel cases.

# Decoded clips, sampled by transformers from the full frame stack + metadata.
CLIP_CASES = [
    ("clip_h264_qwen3", "h264_bframes.mp4", "cfg_qwen3"),      # fps 2 -> 5 frames: odd, padded
    ("clip_vp9_nested", "vp9.webm", "cfg_nested"),             # fps 3 -> 9 frames
    ("clip_mjpeg_small_patch", "mjpeg_ntsc.mov", "cfg_small_patch"),  # 29.97 fps, cap, scale down
    ("clip_mpeg4_num_frames", "mpeg4_odd.mkv", "cfg_num_frames"),     # 33x25, 7 frames, T = 3
    ("clip_bt709_small_patch", "h264_bt709_full.mkv", "cfg_small_patch"),
]

# Synthetic frame stacks, no sampling (do_sample_frames off): (name, config, frames, width, height).
SYNTH_CASES = [
    ("synth_qwen3_4f_70x50", "cfg_qwen3", 4, 70, 50),
    ("synth_nested_3f_20x13_up", "cfg_nested", 3, 20, 13),     # sides below the factor: scaled up first
    ("synth_small_patch_6f_40x30", "cfg_small_patch", 6, 40, 30),
    ("synth_num_frames_5f_23x19", "cfg_num_frames", 5, 23, 19),
    ("synth_nested_2f_100x20_down", "cfg_nested", 2, 100, 20),
]


def video_outputs(p, frames, metadata=None, do_sample=False):
    kw = {"do_sample_frames": do_sample, "return_tensors": "pt", "return_metadata": True}
    if metadata is not None:
        kw["video_metadata"] = [metadata]
    res = p(videos=[frames], **kw)
    pv = res["pixel_values_videos"].numpy().astype(np.float32)
    thw = [int(x) for x in res["video_grid_thw"][0]]
    assert pv.shape[0] == thw[0] * thw[1] * thw[2]
    md = res["video_metadata"][0]
    return pv, thw, md


def main():
    os.makedirs(OUT, exist_ok=True)
    write_configs()
    torch.manual_seed(0)
    clips = clip_meta()
    tensors = {}
    gold = {"transformers": __import__("transformers").__version__, "configs": {}}

    for name in CONFIGS:
        entry = {"video": resolved_video(video_proc(name))}
        if any(k in CONFIGS[name] for k in ("preprocessor_config.json", "processor_config.json")):
            entry["image"] = resolved_image(image_proc(name))
        gold["configs"][name] = entry

    gold["sampling"] = sampling_cases()
    gold["smart_resize"] = smart_resize_cases()

    proc_for_ts = Qwen3VLProcessor.__new__(Qwen3VLProcessor)
    gold["clip_cases"] = []
    for name, fname, cfg in CLIP_CASES:
        meta = clips[fname]
        frames = decode_clip(fname, meta)
        p = video_proc(cfg)
        md = {"total_num_frames": int(meta["num_frames"]), "fps": clip_fps(meta)}
        pv, thw, out_md = video_outputs(p, frames, md, do_sample=True)
        indices = [int(i) for i in out_md.frames_indices]
        # A copy: _calculate_timestamps pads a list argument in place (the processor passes an array).
        ts = proc_for_ts._calculate_timestamps(list(indices), out_md.fps, p.temporal_patch_size)
        tensors[f"{name}.pixel_values"] = np.ascontiguousarray(pv)
        gold["clip_cases"].append({
            "name": name, "file": fname, "config": cfg, "total_num_frames": md["total_num_frames"],
            "fps": md["fps"], "indices": indices, "grid_thw": thw, "timestamps": [float(t) for t in ts],
        })
        print(f"{name}: indices {indices} grid {thw} pv {list(pv.shape)} ts {ts}")

    gold["synth_cases"] = []
    for i, (name, cfg, n, w, h) in enumerate(SYNTH_CASES):
        rng = np.random.default_rng(3000 + i)
        frames = rng.integers(0, 256, size=(n, h, w, 3), dtype=np.uint8)
        pv, thw, _ = video_outputs(video_proc(cfg), frames)
        tensors[f"{name}.frames"] = frames
        tensors[f"{name}.pixel_values"] = np.ascontiguousarray(pv)
        gold["synth_cases"].append({"name": name, "config": cfg, "frames": n, "width": w, "height": h,
                                    "grid_thw": thw})
        print(f"{name}: grid {thw} pv {list(pv.shape)}")

    gold["prompt_cases"] = prompt_cases(clips, tensors)

    with open(os.path.join(OUT, "goldens.json"), "w") as f:
        json.dump(gold, f, indent=1)
        f.write("\n")
    save_file(tensors, os.path.join(OUT, "goldens.safetensors"))
    total = sum(os.path.getsize(os.path.join(dp, fn)) for dp, _, fns in os.walk(OUT) for fn in fns)
    print(f"wrote {OUT} ({total} bytes)")


# ---------------------------------------------------------------------------------------------------
# Prompts: Qwen3VLProcessor expansion + get_rope_index.

IMG = "<|vision_start|><|image_pad|><|vision_end|>"
VID = "<|vision_start|><|video_pad|><|vision_end|>"


def chat(body):
    return f"<|im_start|>user\n{body}<|im_end|>\n<|im_start|>assistant\n"


# (name, config, prompt, image sizes (w, h), video clip files)
PROMPTS = [
    ("text_only", "cfg_nested", chat("Hello there, no media."), [], []),
    ("one_image", "cfg_nested", chat(IMG + "Describe this image."), [(40, 30)], []),
    ("one_video", "cfg_nested", chat(VID + "What happens?"), [], ["h264_bframes.mp4"]),
    ("image_video_image", "cfg_nested",
     chat("First " + IMG + " then a clip " + VID + " and last " + IMG + " compare."),
     [(64, 33), (23, 70)], ["vp9.webm"]),
    ("two_videos_image", "cfg_nested",
     chat(VID + VID + "Between them:" + IMG + "end"), [(50, 50)], ["mjpeg_ntsc.mov", "h264_bt709_full.mkv"]),
    ("video_small_patch", "cfg_small_patch_prompt", chat("Clip: " + VID + "?"), [], ["mpeg4_odd.mkv"]),
]


def stand_in_model(merge):
    """A `self` for Qwen3VLModel's position methods: they read config.vision_config.spatial_merge_size and
    rope_deltas, and call get_vision_position_ids."""
    m = types.SimpleNamespace()
    m.config = types.SimpleNamespace(vision_config=types.SimpleNamespace(spatial_merge_size=merge))
    m.rope_deltas = None
    m.get_vision_position_ids = lambda *a, **k: Qwen3VLModel.get_vision_position_ids(m, *a, **k)
    m.get_rope_index = lambda *a, **k: Qwen3VLModel.get_rope_index(m, *a, **k)
    return m


class _Cache:
    def __init__(self, n):
        self.n = n

    def get_seq_length(self):
        return self.n


def prompt_cases(clips, tensors):
    tok = AutoTokenizer.from_pretrained(TOKENIZER)
    out = []
    for ci, (name, cfg, text, image_sizes, video_files) in enumerate(PROMPTS):
        vcfg = "cfg_small_patch" if cfg == "cfg_small_patch_prompt" else cfg
        icfg = "cfg_nested"
        processor = Qwen3VLProcessor(image_processor=image_proc(icfg), tokenizer=tok,
                                     video_processor=video_proc(vcfg))
        rng = np.random.default_rng(4000 + ci)
        images = [rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8) for (w, h) in image_sizes]
        videos, metas = [], []
        for vf in video_files:
            meta = clips[vf]
            videos.append(decode_clip(vf, meta))
            metas.append({"total_num_frames": int(meta["num_frames"]), "fps": clip_fps(meta)})
        kw = {"text": [text], "return_tensors": "pt"}
        if images:
            kw["images"] = images
        if videos:
            kw["videos"] = videos
            kw["video_metadata"] = metas
            kw["do_sample_frames"] = True
        res = processor(**kw)
        ids = res["input_ids"]
        mm = res["mm_token_type_ids"]
        image_grid = res.get("image_grid_thw")
        video_grid = res.get("video_grid_thw")
        case = {"name": name, "video_config": vcfg, "image_config": icfg, "text": text,
                "image_sizes": [list(s) for s in image_sizes], "videos": video_files,
                "input_ids": [int(x) for x in ids[0]], "mm_token_type_ids": [int(x) for x in mm[0]],
                "image_grid_thw": [] if image_grid is None else image_grid.tolist(),
                "video_grid_thw": [] if video_grid is None else video_grid.tolist()}
        # The expanded text, rebuilt exactly as __call__ does (same replacement hooks); checked below
        # against the ids the processor returned.
        v_repl = []
        if videos:
            vres = processor.video_processor(videos=videos, video_metadata=metas, do_sample_frames=True,
                                             return_metadata=True, return_tensors="pt")
            v_repl = [processor.replace_video_token(vres, i) for i in range(len(videos))]
            case["video_indices"] = [[int(i) for i in m.frames_indices] for m in vres["video_metadata"]]
            case["video_timestamps"] = [
                [float(t) for t in processor._calculate_timestamps(
                    list(m.frames_indices), m.fps, processor.video_processor.temporal_patch_size)]
                for m in vres["video_metadata"]]
            assert torch.equal(vres["video_grid_thw"], video_grid)
        i_repl = [processor.replace_image_token(res, i) for i in range(len(images))]
        expanded, _ = processor.get_text_with_replacements([text], i_repl, v_repl)
        case["expanded_text"] = expanded[0]
        assert tok(expanded[0])["input_ids"] == case["input_ids"]
        for ii, img in enumerate(images):
            tensors[f"{name}.image{ii}.rgb"] = img
            rows = _video_rows(image_grid, ii)
            tensors[f"{name}.image{ii}.pixel_values"] = np.ascontiguousarray(
                res["pixel_values"][rows].numpy().astype(np.float32))

        merge = processor.video_processor.merge_size
        assert merge == processor.image_processor.merge_size
        model = stand_in_model(merge)
        pos, delta = Qwen3VLModel.get_rope_index(model, ids, mm_token_type_ids=mm, image_grid_thw=image_grid,
                                                 video_grid_thw=None if video_grid is None else video_grid.clone())
        case["spatial_merge_size"] = merge
        case["positions"] = pos[:, 0, :].tolist()
        case["rope_delta"] = int(delta.reshape(-1)[0])
        # Decode: three steps after the prompt, through compute_3d_position_ids with a cache.
        model.rope_deltas = delta
        n = ids.shape[1]
        steps = []
        for k in range(3):
            emb = torch.zeros(1, 1, 4)
            p = Qwen3VLModel.compute_3d_position_ids(model, input_ids=None, inputs_embeds=emb, cache=_Cache(n + k))
            steps.append([int(p[r, 0, 0]) for r in range(3)])
        case["decode_positions"] = steps
        out.append(case)
        print(f"prompt {name}: {n} tokens, delta {case['rope_delta']}, images {case['image_grid_thw']} "
              f"videos {case['video_grid_thw']}")
    return out


def _video_rows(grids, i):
    start = int(sum(int(torch.prod(g)) for g in grids[:i]))
    return slice(start, start + int(torch.prod(grids[i])))


if __name__ == "__main__":
    main()
