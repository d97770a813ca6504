#!/usr/bin/env python3
"""Writes a Hugging Face model folder with random bf16 weights for a real model's shapes
(speed depends on shapes, not values). Needs only numpy.

Usage: tools/bench/make_random_checkpoint.py --preset qwen2.5-0.5b --out /tmp/qwen05
The tokenizer and chat template are copied from tests/fixtures/models/qwen2-tiny (token ids
beyond its vocabulary are never produced by it, so the large vocabulary is still exercised by
the lm_head GEMM).

Vision-language: --preset qwen2.5-vl-7b writes a Qwen2_5_VLForConditionalGeneration folder in the
transformers 5 layout (model.language_model.*, model.visual.*, lm_head.*) with Qwen2.5-VL-7B's
text and vision config, the processor configs of tools/bench/configs/qwen2.5-vl/, and the tokenizer
and chat template of tests/fixtures/models/qwen2_5-vl-tiny. That tokenizer numbers its special
tokens differently from the real one (<|image_pad|> is 4068, not 151655), so config.json's
image/video/vision_start/vision_end token ids are set to the tiny tokenizer's ids (the real ones
are kept under "real_token_ids" for reference); shapes, and so speed, are unaffected.
--layers N / --vision-depth N shrink the decoder / vision tower (for a quick local load check).
"""
import argparse
import json
import pathlib
import shutil

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]

PRESETS = {
    "qwen2.5-0.5b": dict(architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=896,
                         intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                         num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True,
                         max_position_embeddings=32768, rope_theta=1000000.0, rms_norm_eps=1e-6),
    "qwen2.5-7b": dict(architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=3584,
                       intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
                       num_key_value_heads=4, vocab_size=152064, tie_word_embeddings=False,
                       max_position_embeddings=32768, rope_theta=1000000.0, rms_norm_eps=1e-6),
    "qwen3-8b": dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", hidden_size=4096,
                     intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32,
                     num_key_value_heads=8, head_dim=128, vocab_size=151936, tie_word_embeddings=False,
                     max_position_embeddings=40960, rope_theta=1000000.0, rms_norm_eps=1e-6),
}

# Qwen/Qwen2.5-VL-7B-Instruct's config.json, in transformers 5's nested layout.
VL_PRESETS = {
    "qwen2.5-vl-7b": dict(
        text=dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
                  num_key_value_heads=4, vocab_size=152064, max_position_embeddings=128000,
                  rms_norm_eps=1e-6, hidden_act="silu", sliding_window=32768, max_window_layers=28,
                  use_sliding_window=False, attention_dropout=0.0,
                  rope_parameters=dict(rope_type="default", rope_theta=1000000.0, mrope_section=[16, 24, 24])),
        vision=dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, in_channels=3,
                    out_hidden_size=3584, patch_size=14, spatial_merge_size=2, temporal_patch_size=2,
                    window_size=112, fullatt_block_indexes=[7, 15, 23, 31], tokens_per_second=2,
                    hidden_act="silu"),
        tie_word_embeddings=False,
        # The real checkpoint's ids; config.json uses the copied tiny tokenizer's (see the docstring).
        real_token_ids=dict(bos_token_id=151643, eos_token_id=151645, vision_start_token_id=151652,
                            vision_end_token_id=151653, vision_token_id=151654, image_token_id=151655,
                            video_token_id=151656),
    ),
}
VL_TOKENIZER = "tests/fixtures/models/qwen2_5-vl-tiny"
VL_PROCESSOR = "tools/bench/configs/qwen2.5-vl"


def vl_config(preset, layers=None, vision_depth=None):
    p = VL_PRESETS[preset]
    text = dict(p["text"], model_type="qwen2_5_vl_text")
    vision = dict(p["vision"], model_type="qwen2_5_vl_vision")
    if layers is not None:
        text["num_hidden_layers"] = text["max_window_layers"] = layers
    if vision_depth is not None:
        vision["depth"] = vision_depth
        vision["fullatt_block_indexes"] = [i for i in vision["fullatt_block_indexes"] if i < vision_depth] or [
            vision_depth - 1]
    text["layer_types"] = ["full_attention"] * text["num_hidden_layers"]
    tok = json.loads((ROOT / VL_TOKENIZER / "tokenizer.json").read_text())
    ids = {t["content"]: t["id"] for t in tok["added_tokens"]}
    return {
        "architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl",
        "dtype": "bfloat16", "tie_word_embeddings": p["tie_word_embeddings"],
        "text_config": dict(text, bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
                            pad_token_id=ids["<|endoftext|>"]),
        "vision_config": vision,
        "image_token_id": ids["<|image_pad|>"], "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"], "vision_end_token_id": ids["<|vision_end|>"],
        "real_token_ids": p["real_token_ids"],
    }


def vl_tensors(cfg):
    t, v = cfg["text_config"], cfg["vision_config"]
    H, I, V = t["hidden_size"], t["intermediate_size"], t["vocab_size"]
    Hq, Hkv = t["num_attention_heads"], t["num_key_value_heads"]
    D = H // Hq
    yield "model.language_model.embed_tokens.weight", (V, H)
    yield "model.language_model.norm.weight", (H,)
    if not cfg["tie_word_embeddings"]:
        yield "lm_head.weight", (V, H)
    for i in range(t["num_hidden_layers"]):
        p = f"model.language_model.layers.{i}."
        yield p + "input_layernorm.weight", (H,)
        yield p + "post_attention_layernorm.weight", (H,)
        yield p + "self_attn.q_proj.weight", (Hq * D, H)
        yield p + "self_attn.q_proj.bias", (Hq * D,)
        yield p + "self_attn.k_proj.weight", (Hkv * D, H)
        yield p + "self_attn.k_proj.bias", (Hkv * D,)
        yield p + "self_attn.v_proj.weight", (Hkv * D, H)
        yield p + "self_attn.v_proj.bias", (Hkv * D,)
        yield p + "self_attn.o_proj.weight", (H, Hq * D)
        yield p + "mlp.gate_proj.weight", (I, H)
        yield p + "mlp.up_proj.weight", (I, H)
        yield p + "mlp.down_proj.weight", (H, I)
    C, VI, P, T = v["hidden_size"], v["intermediate_size"], v["patch_size"], v["temporal_patch_size"]
    M = C * v["spatial_merge_size"] ** 2
    yield "model.visual.patch_embed.proj.weight", (C, v["in_channels"], T, P, P)
    for i in range(v["depth"]):
        p = f"model.visual.blocks.{i}."
        yield p + "norm1.weight", (C,)
        yield p + "norm2.weight", (C,)
        yield p + "attn.qkv.weight", (3 * C, C)
        yield p + "attn.qkv.bias", (3 * C,)
        yield p + "attn.proj.weight", (C, C)
        yield p + "attn.proj.bias", (C,)
        for name, shape in (("gate_proj", (VI, C)), ("up_proj", (VI, C)), ("down_proj", (C, VI))):
            yield p + f"mlp.{name}.weight", shape
            yield p + f"mlp.{name}.bias", (shape[0],)
    yield "model.visual.merger.ln_q.weight", (C,)
    yield "model.visual.merger.mlp.0.weight", (M, M)
    yield "model.visual.merger.mlp.0.bias", (M,)
    yield "model.visual.merger.mlp.2.weight", (v["out_hidden_size"], M)
    yield "model.visual.merger.mlp.2.bias", (v["out_hidden_size"],)


def tensors(cfg):
    H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    Hq, Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = cfg.get("head_dim", H // Hq)
    qwen2 = cfg["model_type"] == "qwen2"
    yield "model.embed_tokens.weight", (V, H)
    yield "model.norm.weight", (H,)
    if not cfg["tie_word_embeddings"]:
        yield "lm_head.weight", (V, H)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        yield p + "input_layernorm.weight", (H,)
        yield p + "post_attention_layernorm.weight", (H,)
        yield p + "self_attn.q_proj.weight", (Hq * D, H)
        yield p + "self_attn.k_proj.weight", (Hkv * D, H)
        yield p + "self_attn.v_proj.weight", (Hkv * D, H)
        yield p + "self_attn.o_proj.weight", (H, Hq * D)
        if qwen2:
            yield p + "self_attn.q_proj.bias", (Hq * D,)
            yield p + "self_attn.k_proj.bias", (Hkv * D,)
            yield p + "self_attn.v_proj.bias", (Hkv * D,)
        else:
            yield p + "self_attn.q_norm.weight", (D,)
            yield p + "self_attn.k_norm.weight", (D,)
        yield p + "mlp.gate_proj.weight", (I, H)
        yield p + "mlp.up_proj.weight", (I, H)
        yield p + "mlp.down_proj.weight", (H, I)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", choices=sorted(PRESETS) + sorted(VL_PRESETS), required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, help="decoder layers (vision-language presets; default: the real count)")
    ap.add_argument("--vision-depth", type=int, help="vision blocks (vision-language presets)")
    args = ap.parse_args()
    vl = args.preset in VL_PRESETS
    if not vl and (args.layers is not None or args.vision_depth is not None):
        ap.error("--layers / --vision-depth apply to vision-language presets only")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if vl:
        cfg = vl_config(args.preset, args.layers, args.vision_depth)
        (out / "config.json").write_text(json.dumps(cfg, indent=2))
        specs = list(vl_tensors(cfg))
    else:
        cfg = dict(PRESETS[args.preset])
        (out / "config.json").write_text(json.dumps({**cfg, "hidden_act": "silu", "torch_dtype": "bfloat16"}, indent=2))
        specs = list(tensors(cfg))
    # One 64 MiB block of random bf16 values, tiled over every tensor: values are random and
    # non-zero (zeros can run faster than real data), and a 15 GB model is written in seconds.
    rng = np.random.default_rng(0)
    block = (rng.standard_normal(1 << 25, dtype=np.float32) * 0.02).view(np.uint32) >> 16
    block = block.astype(np.uint16)
    norm_block = (np.abs(rng.standard_normal(1 << 16, dtype=np.float32)) + 0.5).view(np.uint32) >> 16
    norm_block = norm_block.astype(np.uint16)
    header, offset = {}, 0
    for name, shape in specs:
        n = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    hdr = json.dumps(header).encode()
    hdr += b" " * ((8 - len(hdr) % 8) % 8)
    with open(out / "model.safetensors", "wb") as f:
        f.write(len(hdr).to_bytes(8, "little"))
        f.write(hdr)
        for name, shape in specs:
            n = int(np.prod(shape))
            norm = name.endswith(("norm.weight", "norm1.weight", "norm2.weight", "ln_q.weight"))
            src = norm_block if norm else block
            while n > 0:
                k = min(n, src.size)
                f.write(src[:k].tobytes())
                n -= k
    if vl:
        for fname in ("tokenizer.json", "tokenizer_config.json", "generation_config.json", "chat_template.jinja"):
            shutil.copy(ROOT / VL_TOKENIZER / fname, out / fname)
        for fname in ("preprocessor_config.json", "video_preprocessor_config.json"):
            shutil.copy(ROOT / VL_PROCESSOR / fname, out / fname)
    else:
        src = ROOT / "tests/fixtures/models/qwen2-tiny"
        for fname in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
            shutil.copy(src / fname, out / fname)
    print(f"{args.preset}: {offset / 1e9:.2f} GB of bf16 weights -> {out}")


if __name__ == "__main__":
    main()
