#!/usr/bin/env python3
"""Multimodal chat-template goldens: OpenAI-style requests with images and videos, rendered as
transformers' ProcessorMixin.apply_chat_template(tokenize=False) renders them.

Writes tests/fixtures/requests_mm/:
  conversations.json  request bodies ({"messages": [...], ...}) with image_url (object and string
                      shorthand), image, video_url, video (file and list of frames) parts, several
                      images, multi-turn with images in earlier turns. Media URLs use placeholders the
                      C++ tests substitute: @MEDIA@ = tests/fixtures/media, @VIDEO@ =
                      tests/fixtures/media_video (absolute); data: URLs are inline.
  goldens.json        for each Qwen-VL-family template (tests/fixtures/templates/) x conversation x
                      variant: the rendered text, and the image / video sources in the order
                      transformers collects them (ProcessorMixin._multimodal_inputs_from_conversations).

The path is transformers 5.24's own code: ProcessorMixin._normalize_conversations (drops None-valued
message keys, turns {"type": "image_url", "image_url": {"url": U} | U} into {"type": "image", "url": U}),
the special tokens merged under the caller's kwargs, and chat_template_utils.render_jinja_template.
Neither method reads `self`, so they are called unbound.

One mapping is ours: transformers has no rule for OpenAI "video_url" parts (they reach the template
unchanged and the Qwen templates print nothing for them). Loom maps them to the transformers-native
block {"type": "video", "url": U} (server::template_messages), so the golden for a request with
video_url is transformers' rendering of that native block, which is what a transformers user writes for
the same video. The step is marked "ours" below.

Usage:  python3 tools/reference/render_mm_templates.py           # regenerate
        python3 tools/reference/render_mm_templates.py --check   # fail if the committed files differ
"""

import base64
import copy
import json
import os
import sys

import jinja2
import transformers
import transformers.utils.chat_template_utils as ctu
from transformers.processing_utils import ProcessorMixin

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_common import FIXTURES_DIR, TEMPLATES_DIR, dump_json, regenerate_or_check  # noqa: E402
from render_templates import load_model_dir, choose_template  # noqa: E402

OUT_DIR = os.path.join(FIXTURES_DIR, "requests_mm")
MEDIA_DIR = os.path.join(FIXTURES_DIR, "media")

TEMPLATES = ["qwen2-vl-7b-instruct", "qwen2.5-vl-7b-instruct", "qwen2.5-omni-7b"]
VARIANTS = {
    "gen": {"add_generation_prompt": True, "extra": {}},
    "no_gen": {"add_generation_prompt": False, "extra": {}},
    "vision_id": {"add_generation_prompt": True, "extra": {"add_vision_id": True}},
}


def data_url(name, mime):
    with open(os.path.join(MEDIA_DIR, name), "rb") as f:
        return f"data:{mime};base64," + base64.b64encode(f.read()).decode()


PNG_DATA = data_url("png_rgb.png", "image/png")
JPEG_DATA = data_url("jpeg_420.jpg", "image/jpeg")


def user(*parts):
    return {"role": "user", "content": list(parts)}


def text(t):
    return {"type": "text", "text": t}


def image_url(url, detail=None):
    v = {"url": url}
    if detail is not None:
        v["detail"] = detail
    return {"type": "image_url", "image_url": v}


CONVERSATIONS = [
    {"id": "one_image_url", "request": {"messages": [
        user(image_url("@MEDIA@/png_rgb.png", "high"), text("What is in this image?"))]}},
    {"id": "image_url_shorthand", "request": {"messages": [
        user(text("Describe:"), {"type": "image_url", "image_url": PNG_DATA})]}},
    {"id": "several_images", "request": {"messages": [
        {"role": "system", "content": "You compare pictures."},
        user(text("First:"), image_url(PNG_DATA), text("second:"), image_url("file://@MEDIA@/jpeg_exif6.jpg"),
             text("third:"), {"type": "image", "image": "@MEDIA@/webp_lossless.webp"},
             text("Which differ?"))]}},
    {"id": "video_url", "request": {"messages": [
        user({"type": "video_url", "video_url": {"url": "@VIDEO@/vp9.webm"}}, text("What happens?"))],
        "mm_processor_kwargs": {"fps": 1.0}}},
    {"id": "video_frames_and_image", "request": {"messages": [
        user({"type": "video", "video": ["@MEDIA@/png_rgb.png", JPEG_DATA, "@MEDIA@/webp_lossy.webp"]},
             image_url("@MEDIA@/gif_static.gif"), text("Is the picture one of the frames?"))]}},
    {"id": "multi_turn", "request": {"messages": [
        {"role": "system", "content": "You are a careful observer."},
        user(image_url("@MEDIA@/png_rgb.png"), text("What colour dominates?")),
        {"role": "assistant", "content": "Mostly red."},
        user(text("And here?"), image_url(JPEG_DATA), {"type": "video_url", "video_url": "@VIDEO@/h264_bframes.mp4"}),
        {"role": "assistant", "content": [text("Blue, and the clip moves left.")]},
        user({"type": "video", "url": "@VIDEO@/mpeg4_odd.mkv"}, text("Last one?"))]}},
]


def to_native(messages):
    """Ours: OpenAI video_url -> transformers' native video block (see the module docstring)."""
    out = copy.deepcopy(messages)
    for m in out:
        if isinstance(m.get("content"), list):
            m["content"] = [
                {"type": "video", "url": p["video_url"]["url"] if isinstance(p["video_url"], dict) else p["video_url"]}
                if p.get("type") == "video_url" and "video_url" in p else p
                for p in m["content"]
            ]
    return out


def render(templates, special, request, variant):
    conversations, _ = ProcessorMixin._normalize_conversations(None, to_native(request["messages"]))
    kwargs = dict(variant["extra"])
    template_kwargs = {**special, **kwargs}
    rendered, _ = ctu.render_jinja_template(
        conversations=conversations,
        tools=None,
        documents=None,
        chat_template=choose_template(templates, None),
        add_generation_prompt=variant["add_generation_prompt"],
        **template_kwargs,
    )
    images, videos, _, _ = ProcessorMixin._multimodal_inputs_from_conversations(
        None, copy.deepcopy(conversations), {}, False)
    return rendered[0], images[0], videos[0]


def build_goldens():
    goldens = []
    for model in TEMPLATES:
        templates, special = load_model_dir(os.path.join(TEMPLATES_DIR, model))
        for conv in CONVERSATIONS:
            for vname, variant in VARIANTS.items():
                out, images, videos = render(templates, special, conv["request"], variant)
                goldens.append({"template": model, "conversation": conv["id"], "variant": vname,
                                "output": out, "images": images, "videos": videos})
    return goldens


def main():
    return regenerate_or_check(__doc__, OUT_DIR, lambda: {
        "conversations.json": dump_json({"variants": VARIANTS, "conversations": CONVERSATIONS}),
        "goldens.json": dump_json({"jinja2": jinja2.__version__, "transformers": transformers.__version__,
                                   "goldens": build_goldens()}),
    })


if __name__ == "__main__":
    sys.exit(main())
