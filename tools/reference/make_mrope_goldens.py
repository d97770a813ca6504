#!/usr/bin/env python3
"""Dumps transformers' M-RoPE position ids (Qwen2-VL / Qwen2.5-VL `get_rope_index`) and the decode
positions that follow (`compute_3d_position_ids` with a cache) into
tests/fixtures/vl_mrope/goldens.json (checked by tests/vl_mrope/mrope_positions_test.cpp).

The positions come from the real model classes built from tiny configs (one decoder layer, a one-block
vision tower): get_rope_index only reads config.vision_config.{spatial_merge_size, tokens_per_second},
so the model's size does not matter. mm_token_type_ids is built exactly as the processor does it
(ProcessorMixin.create_mm_token_type_ids: image pad -> 1, video pad -> 2, else 0), and
second_per_grid_ts is a float32 tensor as the processor returns it. Deterministic: no randomness
beyond a fixed-seed choice of text token ids.

Usage: python3 tools/reference/make_mrope_goldens.py
"""
import json
import pathlib
import random

import torch
import transformers
from transformers import Qwen2_5_VLConfig, Qwen2VLConfig
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLModel
from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Qwen2-VL / Qwen2.5-VL special token ids (tokenizer_config.json of the released checkpoints).
VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD = 151652, 151653, 151655, 151656

_rng = random.Random(1234)


def text(n):
    return [_rng.randrange(0, 151000) for _ in range(n)]


def image(grid, merge=2):
    t, h, w = grid
    return [VISION_START] + [IMAGE_PAD] * (t * h * w // (merge * merge)) + [VISION_END]


def video(grid, merge=2):
    t, h, w = grid
    return [VISION_START] + [VIDEO_PAD] * (t * h * w // (merge * merge)) + [VISION_END]


def build_model(family, merge, tps):
    small_text = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=1, vocab_size=152064,
                      rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 3]})
    small_vision = dict(depth=1, hidden_size=16, num_heads=2, spatial_merge_size=merge)
    if family == "qwen2_5_vl":
        small_vision.update(intermediate_size=32, out_hidden_size=32, tokens_per_second=tps, fullatt_block_indexes=[0])
        cfg = Qwen2_5_VLConfig(text_config=small_text, vision_config=small_vision, image_token_id=IMAGE_PAD,
                               video_token_id=VIDEO_PAD, vision_start_token_id=VISION_START)
        return Qwen2_5_VLModel(cfg).eval()
    small_vision.update(embed_dim=16, mlp_ratio=2)
    cfg = Qwen2VLConfig(text_config=small_text, vision_config=small_vision, image_token_id=IMAGE_PAD,
                        video_token_id=VIDEO_PAD, vision_start_token_id=VISION_START)
    return Qwen2VLModel(cfg).eval()


class _FakeCache:
    """Only what compute_3d_position_ids reads from a cache."""

    def __init__(self, n):
        self.n = n

    def get_seq_length(self):
        return self.n


# (name, family, spatial_merge_size, tokens_per_second, pieces, image grids, video grids,
#  second_per_grid_ts or None). pieces are token lists concatenated in order.
def cases():
    out = []

    def add(name, family, merge, tps, pieces, images, videos, spg=None):
        out.append(dict(name=name, family=family, merge=merge, tps=tps, ids=sum(pieces, []), images=images,
                        videos=videos, spg=spg))

    g1, g2, g3 = [1, 4, 6], [1, 8, 2], [1, 14, 10]
    add("text_only", "qwen2_5_vl", 2, 2, [text(17)], [], [])
    add("text_only_q2", "qwen2_vl", 2, 0, [text(5)], [], [])
    add("one_image", "qwen2_5_vl", 2, 2, [text(4), image(g1), text(6)], [g1], [])
    add("one_image_q2", "qwen2_vl", 2, 0, [text(4), image(g3), text(3)], [g3], [])
    add("image_first_token", "qwen2_5_vl", 2, 2, [[IMAGE_PAD] * 6, text(3)], [g1], [])
    add("image_last_token", "qwen2_5_vl", 2, 2, [text(3), [IMAGE_PAD] * 4], [g2], [])
    add("images_three_grids", "qwen2_5_vl", 2, 2,
        [text(7), image(g1), text(2), image(g2), image(g3), text(9)], [g1, g2, g3], [])
    add("tall_and_wide", "qwen2_vl", 2, 0, [text(2), image([1, 2, 30]), text(1), image([1, 26, 4]), text(2)],
        [[1, 2, 30], [1, 26, 4]], [])
    add("merge1", "qwen2_5_vl", 1, 2, [text(3), image([1, 3, 5], 1), text(2), video([2, 2, 3], 1), text(1)],
        [[1, 3, 5]], [[2, 2, 3]], [0.5])
    vg = [3, 4, 6]
    for tps in (2, 25):
        for spg in (0.5, 1.0, 2.0):
            add(f"video_tps{tps}_spg{spg}", "qwen2_5_vl", 2, tps, [text(5), video(vg), text(4)], [], [vg], [spg])
    # fps 3 -> 2/3 s per grid: a non-integer interval (16.67) truncated at every k.
    add("video_spg_two_thirds", "qwen2_5_vl", 2, 25, [text(2), video([7, 4, 4]), text(2)], [], [[7, 4, 4]],
        [2.0 / 3.0])
    # Values where float32 and float64 truncate differently (fps 18/7 and 25/7; 2 frames per grid):
    # tps 2, k = 9 -> 14 (f64: 13); tps 25, k = 1 -> 14 (f64: 13), k = 3 -> 42 (f64: 41).
    add("video_spg_float32_tps2", "qwen2_5_vl", 2, 2, [text(3), video([10, 2, 2]), text(2)], [], [[10, 2, 2]],
        [2.0 / (18 / 7)])
    add("video_spg_float32_tps25", "qwen2_5_vl", 2, 25, [text(1), video([4, 2, 4]), text(2)], [], [[4, 2, 4]],
        [2.0 / (25 / 7)])
    add("video_spg_default", "qwen2_5_vl", 2, 2, [text(2), video([4, 2, 4]), text(3)], [], [[4, 2, 4]], None)
    add("video_q2_no_scaling", "qwen2_vl", 2, 0, [text(3), video([5, 4, 2]), text(3)], [], [[5, 4, 2]])
    add("two_videos", "qwen2_5_vl", 2, 2, [text(3), video([2, 4, 4]), text(1), video([6, 2, 6]), text(2)], [],
        [[2, 4, 4], [6, 2, 6]], [2.0, 0.25])
    add("mixed", "qwen2_5_vl", 2, 25,
        [text(11), image(g2), text(3), video([4, 6, 4]), text(5), image(g1), video([2, 2, 2]), text(8)],
        [g2, g1], [[4, 6, 4], [2, 2, 2]], [1.0, 0.5])
    add("mixed_q2", "qwen2_vl", 2, 0, [text(2), video([3, 4, 4]), image(g3), text(4), image(g1), text(1)],
        [g3, g1], [[3, 4, 4]])
    add("long_video_q25", "qwen2_5_vl", 2, 2, [text(20), video([16, 12, 20]), text(30)], [], [[16, 12, 20]], [2.0])
    return out


def main():
    out = []
    for c in cases():
        model = build_model(c["family"], c["merge"], c["tps"])
        ids = torch.tensor([c["ids"]], dtype=torch.long)
        # ProcessorMixin.create_mm_token_type_ids.
        mm = torch.zeros_like(ids, dtype=torch.int32)
        mm[ids == IMAGE_PAD] = 1
        mm[ids == VIDEO_PAD] = 2
        kwargs = dict(input_ids=ids, mm_token_type_ids=mm, attention_mask=torch.ones_like(ids),
                      image_grid_thw=torch.tensor(c["images"], dtype=torch.long) if c["images"] else None,
                      video_grid_thw=torch.tensor(c["videos"], dtype=torch.long) if c["videos"] else None)
        if c["family"] == "qwen2_5_vl" and c["spg"] is not None:
            kwargs["second_per_grid_ts"] = torch.tensor(c["spg"])  # float32, as the processor returns it
        with torch.no_grad():
            pos, delta = model.get_rope_index(**kwargs)
            # Decode: 3 new tokens after the whole prompt (what generate() does after prefill).
            model.rope_deltas = delta
            n_new, cache_len = 3, ids.shape[1]
            dec = model.compute_3d_position_ids(input_ids=None, image_grid_thw=None, video_grid_thw=None,
                                                inputs_embeds=torch.zeros(1, n_new, 4), attention_mask=None,
                                                cache=_FakeCache(cache_len))
        out.append(dict(
            name=c["name"], family=c["family"],
            config=dict(image_token_id=IMAGE_PAD, video_token_id=VIDEO_PAD, vision_start_token_id=VISION_START,
                        spatial_merge_size=c["merge"], tokens_per_second=c["tps"]),
            input_ids=c["ids"], image_grid_thw=c["images"], video_grid_thw=c["videos"],
            second_per_grid_ts=c["spg"] if c["family"] == "qwen2_5_vl" and c["spg"] is not None else [],
            positions=pos[:, 0, :].tolist(), rope_delta=int(delta.item()),
            decode=dict(cache_length=cache_len, count=n_new, positions=dec[:, 0, :].tolist())))
    path = ROOT / "tests/fixtures/vl_mrope/goldens.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = dict(transformers_version=transformers.__version__, generator="tools/reference/make_mrope_goldens.py",
               cases=out)
    # One case per line keeps the file small and diffs readable.
    body = ",\n".join(json.dumps(c, separators=(",", ":")) for c in out)
    head = json.dumps({k: v for k, v in doc.items() if k != "cases"})[:-1]
    path.write_text(f'{head}, "cases": [\n{body}\n]}}\n')
    print(f"wrote {path} ({path.stat().st_size} bytes, {len(out)} cases)")


if __name__ == "__main__":
    main()
