#!/usr/bin/env python3
"""Regenerates tests/fixtures/media_audio/: small deterministic clips (sine + chirp, 1-1.5 s, mono and stereo,
8k/16k/22.05k/44.1k/48k) encoded with the ffmpeg CLI in each format loom::media's audio decoder is tested on,
and the references the C++ tests (tests/media_audio) compare against:
    <clip>.<ext>     the encoded clip
    <clip>.cli.f32   the ffmpeg CLI's decode to mono 16 kHz float32 (little-endian), with the same settings as
                     audio_decode.cpp: float conversion, channel mean (pan), libswresample's soxr engine at its
                     defaults:  -af aformat=sample_fmts=flt,pan=mono|c0=0.5*c0+0.5*c1,aresample=16000:resampler=soxr
    <clip>.tf.f32    lossless clips only: transformers.audio_utils.load_audio's soundfile backend (= librosa.load:
                     soundfile decode, mean over channels, python-soxr "soxr_hq", length ceil(n * 16000 / sr))
    zero.wav         a valid WAV header with no samples
    goldens.json     per clip: ffprobe's rate/channels/codec/duration, decoded source samples, reference lengths,
                     and (all clips soundfile can read) max |cli - transformers| for the README
Also prints, for float WAV test signals at 8k/22.05k/44.1k/48k, how far several libswresample settings are from
transformers/librosa (the table in src/media/README.md): python3 tools/reference/make_audio_fixtures.py --measure
Deterministic for a given ffmpeg build (bitexact muxing, single-threaded encoders). Run from the repo root:
    python3 tools/reference/make_audio_fixtures.py
Needs: numpy, transformers, soundfile, soxr (pip install soundfile soxr librosa).
"""
import json
import math
import os
import subprocess
import sys
import tempfile
import wave

import numpy as np
import soundfile as sf
from transformers.audio_utils import _load_audio_soundfile

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures", "media_audio")
TARGET = 16000

# name, ext, rate, channels, seconds, encoder args, lossless (store the transformers reference)
CLIPS = [
    ("pcm16_mono_8k", "wav", 8000, 1, 1.0, ["-c:a", "pcm_s16le"], True),
    ("pcm24_stereo_16k", "wav", 16000, 2, 1.0, ["-c:a", "pcm_s24le"], True),  # already 16 kHz: no resampling
    ("f32_mono_22k", "wav", 22050, 1, 1.0, ["-c:a", "pcm_f32le"], True),
    ("flac_stereo_22k", "flac", 22050, 2, 1.0, ["-c:a", "flac"], True),
    ("mp3_stereo_44k", "mp3", 44100, 2, 1.0, ["-c:a", "libmp3lame", "-b:a", "64k"], False),
    ("vorbis_mono_48k", "ogg", 48000, 1, 1.0, ["-c:a", "libvorbis", "-q:a", "2"], False),
    ("opus_stereo_48k", "opus", 48000, 2, 1.5, ["-c:a", "libopus", "-b:a", "48k"], False),
    ("aac_mono_44k", "m4a", 44100, 1, 1.0, ["-c:a", "aac", "-b:a", "64k"], False),
]


def signal(rate, channels, seconds):
    """Sine (440 Hz) + linear chirp (100 Hz -> 0.45 * rate, at most 12 kHz); stereo channels differ."""
    t = np.arange(int(round(rate * seconds)), dtype=np.float64) / rate
    sine = 0.5 * np.sin(2 * np.pi * 440.0 * t)
    f0, f1 = 100.0, min(0.45 * rate, 12000.0)
    chirp = 0.4 * np.sin(2 * np.pi * (f0 * t + 0.5 * (f1 - f0) / seconds * t * t))
    if channels == 1:
        x = (0.6 * sine + 0.4 * chirp)[:, None]
    else:
        x = np.stack([sine + 0.2 * chirp, chirp], axis=1)
    return x.astype("<f4")


def run(cmd, stdin=None):
    return subprocess.run(cmd, input=stdin, check=True, capture_output=True).stdout


def encode(x, rate, channels, args, path):
    run(["ffmpeg", "-v", "error", "-y", "-f", "f32le", "-ar", str(rate), "-ac", str(channels), "-i", "pipe:0",
         "-threads", "1", "-map_metadata", "-1", "-fflags", "+bitexact", "-flags:a", "+bitexact"] + args + [path],
        stdin=x.tobytes())


def cli_filter(channels, rate=TARGET, extra=""):
    pan = "pan=mono|c0=" + "+".join(f"{1.0 / channels:.17g}*c{i}" for i in range(channels)) + ","
    return f"aformat=sample_fmts=flt,{pan if channels > 1 else ''}aresample={rate}:resampler=soxr{extra}"


def cli_decode(path, channels, af=None):
    af = af or cli_filter(channels)
    return np.frombuffer(run(["ffmpeg", "-v", "error", "-threads", "1", "-i", path, "-af", af, "-f", "f32le",
                              "pipe:1"]), dtype="<f4")


def source_samples(path, channels):
    raw = run(["ffmpeg", "-v", "error", "-threads", "1", "-i", path, "-f", "f32le", "pipe:1"])
    return len(raw) // 4 // channels


def probe(path):
    j = json.loads(run(["ffprobe", "-v", "error", "-print_format", "json", "-show_format", "-show_streams", path]))
    st = [s for s in j["streams"] if s["codec_type"] == "audio"][0]
    return {"sample_rate": int(st["sample_rate"]), "channels": int(st["channels"]), "codec": st["codec_name"],
            "duration_s": float(j["format"]["duration"])}


def measure():
    settings = {
        "swr default (filter_size 32, cutoff 0.97)": "",
        "swr filter_size 64, cutoff 0.91": "SWR:filter_size=64:cutoff=0.91",
        "soxr defaults (precision 20, cutoff 0)": "SOXR",
        "soxr precision 20, cutoff 0.913": "SOXR:cutoff=0.913",
        "soxr precision 28": "SOXR:precision=28",
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in settings.items():
            worst = 0.0
            for rate in (8000, 22050, 44100, 48000):
                for ch in (1, 2):
                    p = os.path.join(tmp, f"t{rate}_{ch}.wav")
                    sf.write(p, signal(rate, ch, 1.0), rate, subtype="FLOAT")
                    ref = _load_audio_soundfile(p, TARGET)
                    pan = ("pan=mono|c0=0.5*c0+0.5*c1," if ch == 2 else "")
                    if extra.startswith("SOXR"):
                        af = f"{pan}aresample={TARGET}:resampler=soxr" + extra[4:]
                    else:
                        af = f"{pan}aresample={TARGET}" + extra[3:]
                    y = cli_decode(p, ch, af)
                    n = min(len(y), len(ref))
                    worst = max(worst, float(np.abs(y[:n] - ref[:n]).max()))
            print(f"{name}: max |ffmpeg - transformers| = {worst:.3g}")


def main():
    if "--measure" in sys.argv:
        measure()
        return
    os.makedirs(OUT, exist_ok=True)
    goldens = {"target_rate": TARGET, "clips": {}}
    for name, ext, rate, ch, seconds, args, lossless in CLIPS:
        path = os.path.join(OUT, f"{name}.{ext}")
        encode(signal(rate, ch, seconds), rate, ch, args, path)
        info = probe(path)
        cli = cli_decode(path, ch)
        cli.astype("<f4").tofile(os.path.join(OUT, f"{name}.cli.f32"))
        n_src = source_samples(path, ch)
        g = dict(info, file=f"{name}.{ext}", source_samples=n_src, cli_samples=len(cli),
                 expected_samples=math.ceil(n_src * TARGET / rate) if rate != TARGET else n_src)
        try:
            tf = _load_audio_soundfile(path, TARGET)
            n = min(len(tf), len(cli))
            g["transformers_samples"] = len(tf)
            g["cli_vs_transformers_max_abs"] = float(np.abs(tf[:n] - cli[:n]).max())
            if lossless:
                tf.astype("<f4").tofile(os.path.join(OUT, f"{name}.tf.f32"))
                g["transformers_ref"] = f"{name}.tf.f32"
        except Exception as e:  # soundfile cannot read this format (e.g. m4a)
            g["transformers_error"] = type(e).__name__
        goldens["clips"][name] = g
        print(name, g)
    with wave.open(os.path.join(OUT, "zero.wav"), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
    with open(os.path.join(OUT, "goldens.json"), "w") as f:
        json.dump(goldens, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
