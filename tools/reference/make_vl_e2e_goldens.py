#!/usr/bin/env python3
"""End-to-end reference goldens for tiny Qwen2.5-VL and Qwen3-VL checkpoints (ENGINEERING.md §3).

Writes, deterministically (fixed seeds, no network):

  tests/fixtures/models/qwen2_5-vl-tiny/   Qwen2_5_VLForConditionalGeneration
  tests/fixtures/models/qwen3-vl-tiny/     Qwen3VLForConditionalGeneration
      config.json, generation_config.json, model.safetensors (f32, tied embeddings, < 1.5 MB),
      and whatever `processor.save_pretrained` writes in transformers 5.24: tokenizer_config.json,
      chat_template.jinja, processor_config.json (image + video processor configs nested in it);
      tokenizer.json is tests/fixtures/tokenizer/tokenizer.json unchanged.
  tests/fixtures/vl_e2e/media/             the synthetic images the requests use (PNG/JPEG)
  tests/fixtures/vl_e2e/<model>/<case>/
      request.json        an OpenAI chat request (image_url / video_url parts, temperature 0,
                          max_tokens 8); local media are paths RELATIVE to the repo root, one image
                          is a data: URL
      golden.json         rendered prompt (and the text after placeholder expansion), input ids after
                          expansion, grid_thw, pixel_values shapes (+ sums), sampled video frame
                          indices, M-RoPE position ids (3, T), rope delta, decode positions, greedy
                          output ids, per-step top-5 logprobs and top1-top2 margins, how much the
                          last logits move when the pixels are zeroed
      golden.safetensors  f32 logits of every generated step ("step_logits" [steps, vocab]; row 0 is
                          the last prompt token), "prompt_logits_last" [vocab] from a separate full
                          forward, top-5 of every prompt position, the merged decoder input
                          embeddings, every decoder layer's output but the last, the final norm, the
                          vision features at the pad positions (and Qwen3-VL deepstack features),
                          ids and positions. tests/fixtures/vl_e2e/README.md lists every field.

How the reference runs (what the C++ side must reproduce):
  * Template input. transformers 5.24 has no rule for OpenAI "video_url" parts (the Qwen templates
    print nothing for them), so, as Loom's server does (see render_mm_templates.py), they become the
    native {"type": "video", "url": U} block; everything else goes to processor.apply_chat_template
    as in the request (it turns image_url into {"type": "image", "url": U} itself). golden.json keeps
    the messages given to the template ("template_messages").
  * Images: transformers.image_utils.load_image (PIL open, EXIF transpose, RGB), then the saved
    processor (AutoProcessor.from_pretrained(model dir): Qwen2VLImageProcessor, torchvision backend,
    antialiased bicubic).
  * Videos: no PyAV / torchcodec / torchvision video decoder is installed, so every frame is decoded
    with the ffmpeg CLI to raw rgb24 in decoder output order (`-vsync 0 -pix_fmt rgb24`: libswscale
    bicubic, the conversion Loom's media/video_decode.cpp mirrors). The full frame stack and its
    metadata (ffprobe frame count, avg_frame_rate) go to the processor with do_sample_frames on, so
    transformers' own sample_frames picks the frames (fps 2 from the saved video processor config);
    the chosen indices are recorded ("frames_indices"). The decoded frames are checked against
    tests/fixtures/media_video/<clip>.rgb (the per-frame `select` decode the media tests use).
  * Model: f32 on CPU, attn_implementation="eager" (text and vision), reloaded from the saved folder.
    Prompt logits and hidden states come from one full forward; the continuation from
    model.generate(do_sample=False, max_new_tokens=8, output_logits=True), stopping at the
    generation_config's eos ids (<|im_end|>, <|endoftext|>). generation_config.json carries no
    sampling defaults (no repetition penalty), so greedy is plain argmax.
  * Weights are re-initialised with larger std than the library default (wide logit margins, vision
    features as large as token embeddings), then rounded to bf16 values (stored as f32) so a bf16
    GPU run loads exactly the same weights. The seeds (MODELS[*]["seed"]) were picked from a scan of
    seeds 1-80 for wide greedy margins (>= 1.1 nats at every step of every case) with some variety
    in the generated tokens.

Usage: python3 tools/reference/make_vl_e2e_goldens.py   (torch, transformers 5.24, safetensors, Pillow,
       ffmpeg/ffprobe CLI)
"""
import base64
import copy
import hashlib
import io
import json
import os
import pathlib
import shutil
import subprocess

import numpy as np
import torch
import transformers
from PIL import Image
from safetensors.torch import save_file
from transformers import (AutoModelForImageTextToText, AutoProcessor, AutoTokenizer, Qwen2_5_VLConfig,
                          Qwen2_5_VLForConditionalGeneration, Qwen2_5_VLProcessor, Qwen3VLConfig,
                          Qwen3VLForConditionalGeneration, Qwen3VLProcessor)
from transformers.image_utils import load_image
from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor
from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor
from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor
from transformers.video_utils import VideoMetadata

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
TOKENIZER_DIR = FIX / "tokenizer"
E2E = FIX / "vl_e2e"
MEDIA = E2E / "media"
# Output roots (inputs are read from FIX / E2E); overridable for a seed search in a scratch folder.
OUT_MODELS = FIX / "models"
OUT_E2E = E2E

# tests/fixtures/tokenizer: 4056 BPE tokens + 26 added tokens (Qwen3's, renumbered from 4056).
VOCAB = 4082
ENDOFTEXT, IM_START, IM_END = 4056, 4057, 4058
VISION_START, VISION_END, VISION_PAD, IMAGE_PAD, VIDEO_PAD = 4065, 4066, 4067, 4068, 4069
MAX_TOKENS = 8
ATTN = "eager"

QWEN25_TEMPLATE = FIX / "templates" / "qwen2.5-vl-7b-instruct" / "chat_template.json"
# Qwen3-VL-*-Instruct's template (see tests/fixtures/vl_e2e/README.md for where it comes from).
QWEN3_TEMPLATE = E2E / "templates" / "qwen3-vl-instruct" / "chat_template.jinja"
QWEN3_TEMPLATE_SHA256 = "3636d0f0bd6bef02654cdffdc447b79cb2cef8ab02cc75267345946291a489e4"

CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]

# Sizes: the tied 4082 x 64 embedding is 1.04 MB of the < 1.5 MB budget, so the vision towers are
# narrow (hidden 16, 2 heads of 8); the text decoders follow the brief (hidden 64, 4 heads over 2 kv
# heads, head_dim 16, mrope sections summing to head_dim / 2 = 8).
MODELS = [
    dict(
        name="qwen2_5-vl-tiny", seed=55,
        config_cls=Qwen2_5_VLConfig, model_cls=Qwen2_5_VLForConditionalGeneration,
        processor_cls=Qwen2_5_VLProcessor, video_processor_cls=Qwen2VLVideoProcessor,
        template=lambda: json.loads(QWEN25_TEMPLATE.read_text(encoding="utf-8"))["chat_template"],
        text=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, rms_norm_eps=1e-6, max_position_embeddings=4096,
                  rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [2, 3, 3]}),
        # window 56 px = 4x4 patches = 2x2 merged units; block 1 full attention.
        vision=dict(depth=2, hidden_size=16, intermediate_size=48, num_heads=2, patch_size=14,
                    spatial_merge_size=2, temporal_patch_size=2, window_size=56, fullatt_block_indexes=[1],
                    out_hidden_size=64, tokens_per_second=2, hidden_act="silu"),
        # factor 28: images between 2x2 and 4x4 merged tokens (56^2 .. 112^2 pixels).
        image_processor=dict(patch_size=14, temporal_patch_size=2, merge_size=2, image_mean=CLIP_MEAN,
                             image_std=CLIP_STD, size={"shortest_edge": 56 * 56, "longest_edge": 112 * 112}),
        video_processor=dict(patch_size=14, temporal_patch_size=2, merge_size=2, image_mean=CLIP_MEAN,
                             image_std=CLIP_STD, size={"shortest_edge": 56 * 56, "longest_edge": 112 * 112},
                             do_sample_frames=True, fps=2.0, min_frames=4, max_frames=768,
                             cap_pixels_per_frame=False),
    ),
    dict(
        name="qwen3-vl-tiny", seed=51,
        config_cls=Qwen3VLConfig, model_cls=Qwen3VLForConditionalGeneration,
        processor_cls=Qwen3VLProcessor, video_processor_cls=Qwen3VLVideoProcessor,
        template=lambda: QWEN3_TEMPLATE.read_text(encoding="utf-8"),
        # Interleaved M-RoPE: [4, 2, 2] is Qwen3-VL's [24, 20, 20] shape scaled to 8 frequencies
        # (H on 1, 4; W on 2, 5; T on 0, 3, 6, 7).
        text=dict(hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, max_position_embeddings=4096,
                  rope_parameters={"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [4, 2, 2],
                                   "mrope_interleaved": True}),
        # 6x6 learned position grid (bilinearly interpolated to each image), deepstack from both blocks
        # into decoder layers 0 and 1.
        vision=dict(depth=2, hidden_size=16, intermediate_size=48, num_heads=2, patch_size=16,
                    spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=64, num_position_embeddings=36,
                    deepstack_visual_indexes=[0, 1], hidden_act="gelu_pytorch_tanh"),
        # factor 32: images between 2x2 and 4x4 merged tokens.
        image_processor=dict(patch_size=16, temporal_patch_size=2, merge_size=2, image_mean=[0.5, 0.5, 0.5],
                             image_std=[0.5, 0.5, 0.5], size={"shortest_edge": 64 * 64, "longest_edge": 128 * 128}),
        # Qwen3-VL's video budget counts all frames (t * h * w).
        video_processor=dict(patch_size=16, temporal_patch_size=2, merge_size=2, image_mean=[0.5, 0.5, 0.5],
                             image_std=[0.5, 0.5, 0.5], size={"shortest_edge": 4 * 64 * 64, "longest_edge": 6 * 96 * 96},
                             do_sample_frames=True, fps=2, min_frames=4, max_frames=768,
                             cap_pixels_per_frame=False),
    ),
]

VIDEOS = {
    # B-frames: decoder output order differs from packet order. 25 frames at 10 fps.
    "h264": "tests/fixtures/media_video/h264_bframes.mp4",
    # 36 frames at 12 fps.
    "vp9": "tests/fixtures/media_video/vp9.webm",
}


# ----------------------------------------------------------------------------------------------
# Media


def make_images():
    """Synthetic, smooth (compressible) test images; deterministic bytes for a given Pillow."""
    MEDIA.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)

    def pattern(w, h, seed):
        y, x = np.mgrid[0:h, 0:w].astype(np.float64)
        r = rng.uniform(0.3, 1.0, 6) + seed * 0.01
        img = np.stack([
            127 + 120 * np.sin(x * r[0] * 0.21 + y * r[1] * 0.05),
            127 + 120 * np.cos(y * r[2] * 0.17 - x * r[3] * 0.03),
            127 + 120 * np.sin((x + y) * r[4] * 0.11 + r[5]),
        ], axis=-1)
        cx, cy, rad = w * 0.6, h * 0.4, min(w, h) * 0.25
        disk = (x - cx) ** 2 + (y - cy) ** 2 < rad ** 2
        img[disk] = [250, 40, 30]
        img[h // 5:h // 5 + max(2, h // 8), w // 8:w // 2] = [20, 30, 220]
        return np.clip(img, 0, 255).astype(np.uint8)

    # 75x57: inside both models' pixel range after rounding (no min/max rescale).
    Image.fromarray(pattern(75, 57, 1)).save(MEDIA / "odd_75x57.png", optimize=False, compress_level=9)
    # 160x120 JPEG: above max_pixels -> downscaled.
    Image.fromarray(pattern(160, 120, 2)).save(MEDIA / "large_160x120.jpg", quality=90, subsampling=2)
    # 50x38: rounds below min_pixels for Qwen2.5-VL -> upscaled.
    Image.fromarray(pattern(50, 38, 3)).save(MEDIA / "small_50x38.png", optimize=False, compress_level=9)
    # 33x47 (portrait) for the data: URL.
    buf = io.BytesIO()
    Image.fromarray(pattern(33, 47, 4)).save(buf, format="PNG", optimize=False, compress_level=9)
    (MEDIA / "portrait_33x47.png").write_bytes(buf.getvalue())


def data_url(path):
    return "data:image/png;base64," + base64.b64encode((ROOT / path).read_bytes()).decode()


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True).stdout


def decode_video(rel):
    """All frames of the clip as uint8 [n, h, w, 3] (ffmpeg CLI, decoder output order) + metadata."""
    path = str(ROOT / rel)
    probe = json.loads(run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-count_frames", "-show_entries",
                            "stream=width,height,avg_frame_rate,nb_read_frames", "-show_entries", "format=duration",
                            "-of", "json", path]))
    st = probe["streams"][0]
    w, h, n = int(st["width"]), int(st["height"]), int(st["nb_read_frames"])
    num, den = (int(v) for v in st["avg_frame_rate"].split("/"))
    raw = run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-i", path, "-vsync", "0", "-pix_fmt", "rgb24",
               "-f", "rawvideo", "-"])
    assert len(raw) == n * h * w * 3, (rel, len(raw), n, h, w)
    frames = np.frombuffer(raw, dtype=np.uint8).reshape(n, h, w, 3).copy()
    # Same pixels as the per-frame `select` decode the media tests compare Loom's decoder against.
    vg = json.loads((FIX / "media_video" / "goldens.json").read_text())
    clip = next(c for c in vg["clips"] if c["file"] == os.path.basename(rel))
    ref = np.fromfile(FIX / "media_video" / (os.path.splitext(os.path.basename(rel))[0] + ".rgb"), dtype=np.uint8)
    ref = ref.reshape(len(clip["frames"]), h, w, 3)
    assert np.array_equal(frames[clip["frames"]], ref), rel
    meta = {"total_num_frames": n, "fps": num / den, "width": w, "height": h,
            "duration": float(probe["format"]["duration"]), "video_backend": "ffmpeg-cli"}
    return frames, meta, {"fps_num": num, "fps_den": den}


# ----------------------------------------------------------------------------------------------
# Requests


def img(path):
    return {"type": "image_url", "image_url": {"url": path}}


def vid(path):
    return {"type": "video_url", "video_url": {"url": path}}


def txt(t):
    return {"type": "text", "text": t}


def cases():
    odd, large, small = ("tests/fixtures/vl_e2e/media/odd_75x57.png", "tests/fixtures/vl_e2e/media/large_160x120.jpg",
                         "tests/fixtures/vl_e2e/media/small_50x38.png")
    # 13x7 JPEG with EXIF orientation 6: transposed to 7x13, far below min_pixels (upscaled).
    exif = "tests/fixtures/media/jpeg_exif6.jpg"
    portrait = data_url("tests/fixtures/vl_e2e/media/portrait_33x47.png")
    return {
        "one_image": [{"role": "user", "content": [img(odd), txt("Describe this image.")]}],
        "multi_image": [{"role": "user", "content": [
            txt("Compare these pictures:"), img(exif), img(large), img(small), txt("Which one is largest?")]}],
        "video": [{"role": "user", "content": [vid(VIDEOS["h264"]), txt("What happens in this video?")]}],
        "mixed": [{"role": "user", "content": [
            img(small), txt("First a picture, then a clip:"), vid(VIDEOS["vp9"]), img(odd),
            txt("Does the clip show either picture?")]}],
        "multi_turn": [
            {"role": "system", "content": "You are a terse assistant."},
            {"role": "user", "content": [img(large), txt("What color is the disk?")]},
            {"role": "assistant", "content": "The disk is red."},
            {"role": "user", "content": [img(portrait), txt("And in this one?")]},
        ],
    }


def to_template_messages(messages):
    """The one mapping transformers lacks (Loom's server::template_messages, as in
    render_mm_templates.py): OpenAI video_url -> the native {"type": "video", "url": U} block.
    image_url parts stay: processor.apply_chat_template normalises them to {"type": "image", "url": U}
    itself (ProcessorMixin._normalize_conversations)."""
    out = copy.deepcopy(messages)
    for m in out:
        if isinstance(m["content"], list):
            m["content"] = [{"type": "video", "url": p["video_url"]["url"]} if p["type"] == "video_url" else p
                            for p in m["content"]]
    return out


def media_in_order(messages):
    """(kind, url) of every image/video part in message order (the order placeholders appear)."""
    res = []
    for m in messages:
        if isinstance(m["content"], str):
            continue
        for p in m["content"]:
            if p["type"] == "image_url":
                res.append(("image", p["image_url"]["url"]))
            elif p["type"] == "video_url":
                res.append(("video", p["video_url"]["url"]))
    return res


# ----------------------------------------------------------------------------------------------
# Model


def reinit(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            shape = p.shape
            if name == "model.language_model.norm.weight":
                # Final norm x2: logits (tied to the unit-variance embedding) std ~16, wide margins.
                v = 2.0 * (1.0 + 0.2 * torch.randn(shape, generator=g))
            elif "norm" in name or "ln_q" in name:  # RMSNorm / LayerNorm weights (and biases)
                v = (1.0 + 0.2 * torch.randn(shape, generator=g)) if name.endswith("weight") else \
                    0.1 * torch.randn(shape, generator=g)
            elif name.endswith("bias"):
                v = (0.5 if "language_model" in name else 0.1) * torch.randn(shape, generator=g)
            elif "embed_tokens" in name:
                v = torch.randn(shape, generator=g)
            elif "pos_embed" in name:
                v = 0.5 * torch.randn(shape, generator=g)
            else:
                fan_in = int(np.prod(shape[1:]))
                v = torch.randn(shape, generator=g) * (2.0 / fan_in) ** 0.5
            p.copy_(v.to(torch.bfloat16).to(torch.float32))


def build_model_dir(spec):
    mdir = OUT_MODELS / spec["name"]
    shutil.rmtree(mdir, ignore_errors=True)
    mdir.mkdir(parents=True)

    tok = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    for t, i in (("<|vision_start|>", VISION_START), ("<|vision_end|>", VISION_END), ("<|image_pad|>", IMAGE_PAD),
                 ("<|video_pad|>", VIDEO_PAD), ("<|im_end|>", IM_END)):
        assert tok.convert_tokens_to_ids(t) == i, t
    assert len(tok) == VOCAB
    image_processor = Qwen2VLImageProcessor(**spec["image_processor"])
    video_processor = spec["video_processor_cls"](**spec["video_processor"])
    processor = spec["processor_cls"](image_processor=image_processor, tokenizer=tok,
                                      video_processor=video_processor, chat_template=spec["template"]())
    processor.save_pretrained(mdir)
    # transformers 5 re-serialises tokenizer.json with the pre-tokenizer/decoder its Qwen2Tokenizer
    # class rebuilds on load anyway; keep the repo's tokenizer fixture byte for byte instead (the
    # reference below reloads the folder, so the goldens are made with this file).
    shutil.copy(TOKENIZER_DIR / "tokenizer.json", mdir / "tokenizer.json")

    torch.manual_seed(spec["seed"])
    text = dict(spec["text"], vocab_size=VOCAB)
    cfg = spec["config_cls"](text_config=text, vision_config=spec["vision"], image_token_id=IMAGE_PAD,
                             video_token_id=VIDEO_PAD, vision_start_token_id=VISION_START,
                             vision_end_token_id=VISION_END, tie_word_embeddings=True)
    cfg.text_config.bos_token_id = ENDOFTEXT
    cfg.text_config.eos_token_id = IM_END
    cfg.text_config.pad_token_id = ENDOFTEXT
    cfg.architectures = [spec["model_cls"].__name__]
    model = spec["model_cls"](cfg).to(torch.float32).eval()
    reinit(model, spec["seed"])
    model.save_pretrained(mdir)
    gen = {"bos_token_id": ENDOFTEXT, "eos_token_id": [IM_END, ENDOFTEXT], "pad_token_id": ENDOFTEXT}
    (mdir / "generation_config.json").write_text(json.dumps(gen, indent=2) + "\n")
    size = (mdir / "model.safetensors").stat().st_size
    assert size < 1_500_000, size
    return mdir


# ----------------------------------------------------------------------------------------------
# Goldens


def topk_steps(logits_list, new_ids):
    steps = []
    for step, logits in enumerate(logits_list):
        lp = torch.log_softmax(logits.double(), dim=-1)
        top = torch.topk(lp, 5)
        steps.append({
            "token": int(new_ids[step]),
            "logprob": float(lp[new_ids[step]]),
            "top5": [[int(i), float(v)] for v, i in zip(top.values.tolist(), top.indices.tolist())],
            "margin": float(top.values[0] - top.values[1]),
        })
    return steps


def run_case(spec, processor, model, case, messages, videos):
    outdir = OUT_E2E / spec["name"] / case
    shutil.rmtree(outdir, ignore_errors=True)
    outdir.mkdir(parents=True)
    request = {"model": spec["name"], "messages": messages, "temperature": 0, "max_tokens": MAX_TOKENS}
    (outdir / "request.json").write_text(json.dumps(request, indent=1, ensure_ascii=False) + "\n")

    tmsgs = to_template_messages(messages)
    prompt = processor.apply_chat_template(tmsgs, tokenize=False, add_generation_prompt=True)
    images, vids, vmeta, media_info = [], [], [], []
    for kind, url in media_in_order(messages):
        if kind == "image":
            im = load_image(url if url.startswith("data:") else str(ROOT / url))
            images.append(im)
            media_info.append({"kind": "image", "source": url if not url.startswith("data:") else "data-url",
                               "width": im.width, "height": im.height})
        else:
            frames, meta, extra = videos[url]
            vids.append(frames)
            vmeta.append(dict(meta))
            media_info.append({"kind": "video", "source": url, "total_num_frames": meta["total_num_frames"],
                               "width": meta["width"], "height": meta["height"], **extra})
    kwargs = {}
    if images:
        kwargs["images"] = images
    if vids:
        kwargs["videos"] = vids
        kwargs["video_metadata"] = vmeta
    inputs = processor(text=[prompt], return_tensors="pt", **kwargs)
    input_ids = inputs["input_ids"]
    T = input_ids.shape[1]

    # Sampled frame indices (transformers' sample_frames on the full decoded stack).
    if vids:
        vp = processor.video_processor
        vi = 0
        for info in media_info:
            if info["kind"] != "video":
                continue
            md = VideoMetadata(**vmeta[vi])
            idx = vp.sample_frames(md, **({"temporal_patch_size": vp.temporal_patch_size,
                                           "min_frames": vp.min_frames, "max_frames": vp.max_frames}
                                          if isinstance(vp, Qwen2VLVideoProcessor) else {}), fps=vp.fps)
            info["frames_indices"] = [int(i) for i in idx]
            info["grid_thw"] = inputs["video_grid_thw"][vi].tolist()
            info["num_tokens"] = int(inputs["video_grid_thw"][vi].prod()) // vp.merge_size ** 2
            if "second_per_grid_ts" in inputs:
                info["second_per_grid_ts"] = float(torch.as_tensor(inputs["second_per_grid_ts"])[vi])
            if isinstance(processor, Qwen3VLProcessor):
                info["timestamps"] = [float(t) for t in processor._calculate_timestamps(
                    list(info["frames_indices"]), vmeta[vi]["fps"], vp.temporal_patch_size)]
            vi += 1
        # The recorded indices are the frames the processor used: re-process exactly those frames
        # without sampling and compare the pixels.
        vinfo = [i for i in media_info if i["kind"] == "video"]
        again = processor.video_processor(videos=[v[i["frames_indices"]] for v, i in zip(vids, vinfo)],
                                          do_sample_frames=False, return_tensors="pt")
        assert torch.equal(again["pixel_values_videos"], inputs["pixel_values_videos"])
    ii = 0
    for info in media_info:
        if info["kind"] == "image":
            info["grid_thw"] = inputs["image_grid_thw"][ii].tolist()
            info["num_tokens"] = int(inputs["image_grid_thw"][ii].prod()) // processor.image_processor.merge_size ** 2
            ii += 1

    # Capture what reaches the decoder (merged embeddings, positions, deepstack) on every call.
    calls = []

    def pre_hook(_m, args, kw):
        pos = kw.get("position_ids")
        calls.append({
            "inputs_embeds": kw.get("inputs_embeds").detach().clone() if kw.get("inputs_embeds") is not None else None,
            "position_ids": pos.detach().clone() if pos is not None else None,
            "deepstack": [d.detach().clone() for d in kw["deepstack_visual_embeds"]]
            if kw.get("deepstack_visual_embeds") is not None else None,
        })

    layer_out = {}
    lm = model.model.language_model
    hooks = [lm.register_forward_pre_hook(pre_hook, with_kwargs=True)]
    for li, layer in enumerate(lm.layers):
        hooks.append(layer.register_forward_hook(
            lambda m, a, o, li=li: layer_out.__setitem__(li, (o[0] if isinstance(o, tuple) else o).detach().clone())))

    with torch.no_grad():
        full = model(**inputs, use_cache=False)
    prefill_call = calls[-1]
    layers = {li: layer_out[li][0] for li in sorted(layer_out)}
    with torch.no_grad():
        final_norm = model.model(**inputs, use_cache=False).last_hidden_state[0]
    prompt_logits = full.logits[0]  # [T, vocab]

    # How much the vision input matters: the same prompt with all-zero pixel values (same grids).
    with torch.no_grad():
        zeroed = {k: (torch.zeros_like(v) if k.startswith("pixel_values") else v) for k, v in inputs.items()}
        pixel_sensitivity = float((model(**zeroed, use_cache=False).logits[0, -1] - prompt_logits[-1]).abs().max())

    calls.clear()
    with torch.no_grad():
        gen = model.generate(**inputs, max_new_tokens=MAX_TOKENS, do_sample=False, output_logits=True,
                             return_dict_in_generate=True)
    for h in hooks:
        h.remove()
    new = gen.sequences[0, T:].tolist()
    step_logits = torch.stack([lg[0] for lg in gen.logits]).float()
    steps = topk_steps(step_logits, new)
    finish = "stop" if new and new[-1] in (IM_END, ENDOFTEXT) else "length"

    pos = prefill_call["position_ids"]
    mrope = pos[-3:, 0]  # [3, T] (transformers 5 prepends a text-position row: [4, B, T])
    assert mrope.shape == (3, T)
    # rope delta: decode step k (0-based, the token at index T+k) sits at T + k + delta on all 3 axes.
    delta = int(mrope.max()) + 1 - T
    decode_positions = []
    for c in calls[1:]:
        p = c["position_ids"][-3:, 0]
        assert p.shape[1] == 1 and bool((p == p[0]).all()), p
        decode_positions.append(int(p[0, 0]))
    assert decode_positions == [T + k + delta for k in range(len(decode_positions))], (decode_positions, T, delta)

    tensors = {
        "input_ids": input_ids[0].to(torch.int64).contiguous(),
        "position_ids": mrope.to(torch.int64).contiguous(),
        "step_logits": step_logits.contiguous(),
        "prompt_logits_last": prompt_logits[-1].float().contiguous(),
        "prompt_top5_ids": torch.topk(prompt_logits, 5).indices.to(torch.int64).contiguous(),
        "prompt_top5_logits": torch.topk(prompt_logits, 5).values.float().contiguous(),
        "hidden.embed": prefill_call["inputs_embeds"][0].float().contiguous(),
        "hidden.final_norm": final_norm.float().contiguous(),
    }
    # Every decoder layer's output but the last (the final norm of the last one is hidden.final_norm).
    for li, t in layers.items():
        if li + 1 < len(layers):
            tensors[f"hidden.blk.{li}.out"] = t.float().contiguous()
    if "image_grid_thw" in inputs:
        tensors["image_grid_thw"] = inputs["image_grid_thw"].to(torch.int64).contiguous()
    if "video_grid_thw" in inputs:
        tensors["video_grid_thw"] = inputs["video_grid_thw"].to(torch.int64).contiguous()
    # Merged visual features at their placeholder positions, in sequence order.
    vis_mask = (input_ids[0] == IMAGE_PAD) | (input_ids[0] == VIDEO_PAD)
    tensors["vision.embeds"] = prefill_call["inputs_embeds"][0][vis_mask].float().contiguous()
    if prefill_call["deepstack"] is not None:
        for i, d in enumerate(prefill_call["deepstack"]):
            tensors[f"vision.deepstack.{i}"] = d.float().contiguous()
    # The same forward as generate's prefill: its logits must agree with the full forward.
    assert torch.allclose(step_logits[0], prompt_logits[-1], atol=1e-4, rtol=0), \
        float((step_logits[0] - prompt_logits[-1]).abs().max())

    def shape_and_sums(key):
        if key not in inputs:
            return None
        t = inputs[key].double()
        return {"shape": list(t.shape), "sum": float(t.sum()), "sum_sq": float((t * t).sum())}

    golden = {
        "model": spec["name"], "case": case,
        "transformers": transformers.__version__, "torch": torch.__version__, "attn_implementation": ATTN,
        "dtype": "float32", "device": "cpu",
        "request": "request.json",
        "template_messages": tmsgs,
        "prompt": prompt,
        # The prompt after placeholder expansion (Qwen3-VL adds "<t seconds>" text per video frame pair).
        "expanded_prompt": processor.tokenizer.decode(input_ids[0].tolist(), skip_special_tokens=False),
        "input_ids": input_ids[0].tolist(),
        "num_prompt_tokens": T,
        "media": media_info,
        "image_grid_thw": inputs["image_grid_thw"].tolist() if "image_grid_thw" in inputs else [],
        "video_grid_thw": inputs["video_grid_thw"].tolist() if "video_grid_thw" in inputs else [],
        "pixel_values": shape_and_sums("pixel_values"),
        "pixel_values_videos": shape_and_sums("pixel_values_videos"),
        "position_ids": mrope.tolist(),
        "rope_delta": delta,
        "decode_position_ids": decode_positions,
        "output_ids": new,
        "output_text": processor.tokenizer.decode(new, skip_special_tokens=True),
        "finish_reason": finish,
        "steps": steps,
        "min_margin": min(s["margin"] for s in steps),
        "last_logits_max_abs_change_if_pixels_zeroed": pixel_sensitivity,
        "prompt_min_top1_top2_logit_gap": float((tensors["prompt_top5_logits"][:, 0] -
                                                 tensors["prompt_top5_logits"][:, 1]).min()),
        "tensors": {k: {"dtype": str(v.dtype).replace("torch.", ""), "shape": list(v.shape)}
                    for k, v in sorted(tensors.items())},
    }
    (outdir / "golden.json").write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    # No metadata: safetensors writes a multi-key metadata map in random order (bytes would vary).
    save_file(tensors, str(outdir / "golden.safetensors"))
    print(f"{spec['name']}/{case}: T={T} grids img {golden['image_grid_thw']} vid {golden['video_grid_thw']} "
          f"delta {delta} out {new} ({finish}) min margin {golden['min_margin']:.3f}")
    return golden


def main():
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    assert hashlib.sha256(QWEN3_TEMPLATE.read_bytes()).hexdigest() == QWEN3_TEMPLATE_SHA256
    make_images()
    videos = {}
    for rel in VIDEOS.values():
        videos[rel] = decode_video(rel)
    reqs = cases()
    for spec in MODELS:
        mdir = build_model_dir(spec)
        # Reload exactly as a user would.
        processor = AutoProcessor.from_pretrained(mdir)
        model = AutoModelForImageTextToText.from_pretrained(mdir, dtype=torch.float32, attn_implementation=ATTN).eval()
        assert type(model) is spec["model_cls"], type(model)
        shutil.rmtree(OUT_E2E / spec["name"], ignore_errors=True)
        for case, messages in reqs.items():
            run_case(spec, processor, model, case, copy.deepcopy(messages), videos)


if __name__ == "__main__":
    main()
