#!/usr/bin/env python3
"""Goldens for Whisper log-mel features and Qwen2.5-Omni audio token counts (src/models/qwen_omni/).

Runs transformers' WhisperFeatureExtractor exactly as Qwen2_5OmniProcessor._process_audio calls it
(padding="max_length", truncation default True, sampling_rate=16000, return_attention_mask=True)
with Qwen2.5-Omni's shipped preprocessor_config.json values (feature_size 128, hop 160, n_fft 400,
chunk_length 300 -> n_samples 4_800_000, dither 0) on deterministic synthetic signals, and writes
tests/fixtures/audio_features/:
  preprocessor_config.json        the config the C++ loader reads
  goldens.safetensors             per case <case>.full (F32 [128, frames]) when frames <= 100, else
                                  <case>.head / .mid / .tail (F32 [128, 8]) slices;
                                  __metadata__["cases"]: JSON list of {name, signal, samples,
                                  valid_frames, tokens, mid_start, sum, sum_sq, min, max,
                                  max_abs_torch_vs_f64 (full cases: transformers' own float32 torch
                                  path vs its float64 numpy path, informational)}
                                  <case>.f64 (F32 [128, frames]) for F64_CASES: the float64 numpy
                                  path (_np_extract_fbank_features) rounded to f32
  token_counts.json               [{samples, valid_frames, tokens}] for 0.1 s .. 10 min (the real
                                  extractor's attention mask and the processor's formula)
Signals are regenerated bit-identically by the C++ test (double math, integer xorshift noise, cast
to float32), so no PCM is stored.

Usage: python3 tools/reference/make_audio_feature_goldens.py [--out tests/fixtures/audio_features]
Deterministic: no randomness outside the xorshift generator, no network.
"""
import argparse
import json
import os

import numpy as np
from safetensors.numpy import save_file
from transformers import WhisperFeatureExtractor
from transformers.models.qwen2_5_omni.processing_qwen2_5_omni import _get_feat_extract_output_lengths

SR = 16000
CONFIG = {
    "feature_extractor_type": "WhisperFeatureExtractor",
    "processor_class": "Qwen2_5OmniProcessor",
    "feature_size": 128,
    "sampling_rate": SR,
    "hop_length": 160,
    "n_fft": 400,
    "chunk_length": 300,
    "n_samples": 4800000,
    "nb_max_frames": 30000,
    "padding_side": "right",
    "padding_value": 0.0,
    "dither": 0.0,
    "return_attention_mask": True,
}
SLICE = 8
# Cases also stored from transformers' float64 numpy path: our double-precision math is compared with
# it at a tighter tolerance than with the float32 torch path the processor actually runs.
F64_CASES = {"chirp_1s", "clipped_1s", "sine_0p1s", "noise_n1601"}
FULL_MAX_FRAMES = 100


def xorshift_noise(n, seed):
    """Uniform [-1, 1) from xorshift64 (same integer recurrence as the C++ test)."""
    mask = (1 << 64) - 1
    s = seed & mask
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        s ^= (s << 13) & mask
        s ^= s >> 7
        s ^= (s << 17) & mask
        out[i] = (s >> 11) * (2.0 ** -53) * 2.0 - 1.0
    return out


def make_signal(kind, n):
    t = np.arange(n, dtype=np.float64) / SR
    if kind == "sine":
        x = 0.5 * np.sin(2 * np.pi * 440.0 * t) + 0.25 * np.sin(2 * np.pi * 3000.0 * t)
    elif kind == "chirp":
        x = 0.8 * np.sin(2 * np.pi * (100.0 * t + 100.0 * t * t))
    elif kind == "noise":
        x = 0.3 * xorshift_noise(n, 0x9E3779B97F4A7C15)
    elif kind == "silence":
        x = np.zeros(n)
    elif kind == "clipped":
        x = np.clip(1.5 * np.sin(2 * np.pi * 220.0 * t), -1.0, 1.0)
    elif kind == "tail_click":
        # Quiet tone, loud click in the last 50 samples: the global max comes from frames at the end.
        x = 1e-3 * np.sin(2 * np.pi * 1000.0 * t)
        x[max(0, n - 50):] = 1.0
    else:
        raise ValueError(kind)
    return x.astype(np.float32)


def extract(fe, pcm):
    out = fe(pcm, sampling_rate=SR, return_attention_mask=True, padding="max_length", return_tensors="np")
    feats = out["input_features"][0]  # [128, 30000]
    valid = int(out["attention_mask"][0].sum())
    return feats, valid


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/fixtures/audio_features")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "preprocessor_config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2)
    fe = WhisperFeatureExtractor.from_pretrained(args.out)
    assert fe.n_samples == 4800000 and fe.feature_size == 128

    cases = []
    lengths = [("0p1s", 1600), ("1s", 16000), ("7p3s", 116800), ("30s", 480000), ("31s", 496000)]
    plan = [(sig, ln) for sig in ["sine", "chirp", "noise", "silence", "clipped"] for ln in lengths]
    plan += [("tail_click", ("1s", 16000)), ("tail_click", ("7p3s", 116800))]
    plan += [("noise", (f"n{n}", n)) for n in [1, 159, 161, 250, 1601]]
    plan += [("chirp", ("301s", 301 * SR))]  # longer than chunk_length: the processor truncates
    tensors = {}
    for sig, (lname, n) in plan:
        name = f"{sig}_{lname}"
        pcm = make_signal(sig, n)
        feats, valid = extract(fe, pcm)
        v = feats[:, :valid].astype(np.float64)
        tokens = int(_get_feat_extract_output_lengths(np.array([valid]))[0])
        meta = {"name": name, "signal": sig, "samples": n, "valid_frames": valid, "tokens": tokens,
                "sum": float(v.sum()), "sum_sq": float((v * v).sum()), "min": float(v.min()) if valid else 0.0,
                "max": float(v.max()) if valid else 0.0, "mid_start": 0}
        if valid <= FULL_MAX_FRAMES:
            tensors[name + ".full"] = np.ascontiguousarray(feats[:, :valid].astype(np.float32))
            padded = np.zeros(fe.n_samples, np.float64)
            padded[:n] = pcm
            f64 = fe._np_extract_fbank_features(padded[None], "cpu")[0][:, :valid]
            meta["max_abs_torch_vs_f64"] = float(np.abs(f64 - feats[:, :valid]).max()) if valid else 0.0
            if name in F64_CASES:
                tensors[name + ".f64"] = np.ascontiguousarray(f64.astype(np.float32))
        else:
            mid = (valid - SLICE) // 2
            meta["mid_start"] = mid
            tensors[name + ".head"] = np.ascontiguousarray(feats[:, :SLICE])
            tensors[name + ".mid"] = np.ascontiguousarray(feats[:, mid:mid + SLICE])
            tensors[name + ".tail"] = np.ascontiguousarray(feats[:, valid - SLICE:valid])
        cases.append(meta)
        print(name, valid, tokens)
    save_file(tensors, os.path.join(args.out, "goldens.safetensors"), metadata={"cases": json.dumps(cases)})

    # Token counts: valid frames from the extractor's own attention mask (silence is enough: the mask
    # depends on the length only), tokens from the processor's formula.
    counts = []
    secs = [0.1, 0.5, 1.0, 1.01, 2.0, 3.3, 7.3, 10.0, 29.99, 30.0, 30.01, 31.0, 59.7, 60.0, 120.5, 299.99,
            300.0, 300.01, 301.0, 450.0, 599.9, 600.0]
    ns = sorted(set([int(round(s * SR)) for s in secs] + [1, 2, 159, 160, 161, 319, 320, 321, 399, 400, 401,
                                                          479, 480, 481, 639, 640, 641, 4799840, 4799999]))
    for n in ns:
        _, valid = extract(fe, np.zeros(n, dtype=np.float32))
        tokens = int(_get_feat_extract_output_lengths(np.array([valid]))[0])
        counts.append({"samples": n, "valid_frames": valid, "tokens": tokens})
    with open(os.path.join(args.out, "token_counts.json"), "w") as f:
        json.dump(counts, f, indent=1)


if __name__ == "__main__":
    main()
