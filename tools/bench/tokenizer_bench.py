#!/usr/bin/env python3
"""Encode throughput of the Python `tokenizers` package, for comparison with tokenizer_bench (C++).

Fair comparison: single thread, one encode() per document (add_special_tokens=False, as Loom's
Tokenizer::encode), the first pass (cold cache) and the best of the following passes reported
separately. encode_batch (Rayon thread pool over all cores) is reported on its own line, not as
the comparison number.

Usage:
  tools/reference/tokenizer_goldens.py --bench-out /tmp/bench.jsonl --bench-mb 8
  tools/bench/tokenizer_bench.py --tokenizer ../shared/data/qwen3-tokenizer/tokenizer.json \
      --corpus /tmp/bench.jsonl [--passes 5] [--json out.json]
"""
import argparse
import json
import os
import time

from tokenizers import Tokenizer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--corpus", required=True, help="JSONL, one {\"text\": ...} per line")
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()

    t0 = time.perf_counter()
    tok = Tokenizer.from_file(args.tokenizer)
    load_s = time.perf_counter() - t0
    with open(args.corpus, encoding="utf-8") as f:
        docs = [json.loads(line)["text"] for line in f if line.strip()]
    mb = sum(len(d.encode("utf-8")) for d in docs) / 1e6

    times, cpu_times = [], []
    n_ids = 0
    for _ in range(1 + args.passes):
        t0, c0 = time.perf_counter(), time.process_time()
        n = 0
        for d in docs:
            n += len(tok.encode(d, add_special_tokens=False).ids)
        cpu_times.append(time.process_time() - c0)
        times.append(time.perf_counter() - t0)
        n_ids = n
    warm, warm_cpu = min(times[1:]), min(cpu_times[1:])

    batch_times = []
    for _ in range(3):
        t0 = time.perf_counter()
        tok.encode_batch(docs, add_special_tokens=False)
        batch_times.append(time.perf_counter() - t0)

    threads = os.environ.get("RAYON_NUM_THREADS", str(os.cpu_count()))
    print("tokenizers (Python) encode, 1 thread, one encode() per document")
    print(f"  tokenizer   {args.tokenizer} (tokenizers {__import__('tokenizers').__version__}, load {load_s * 1e3:.0f} ms)")
    print(f"  corpus      {args.corpus}: {len(docs)} docs, {mb:.2f} MB, {n_ids} ids")
    print(f"  cold pass   {mb / times[0]:8.2f} MB/s wall  {mb / cpu_times[0]:8.2f} MB/s cpu")
    print(f"  warm best   {mb / warm:8.2f} MB/s wall  {mb / warm_cpu:8.2f} MB/s cpu  (best of {args.passes})")
    print(f"  encode_batch{mb / min(batch_times):8.2f} MB/s wall  ({threads} threads; not the comparison number)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"tool": "tokenizer_bench.py", "tokenizer": args.tokenizer, "corpus": args.corpus,
                       "docs": len(docs), "megabytes": mb, "ids": n_ids, "load_ms": load_s * 1e3,
                       "cold_mb_per_s": mb / times[0], "warm_mb_per_s": mb / warm,
                       "cold_cpu_mb_per_s": mb / cpu_times[0], "warm_cpu_mb_per_s": mb / warm_cpu,
                       "batch_mb_per_s": mb / min(batch_times), "batch_threads": threads}, f, indent=2)


if __name__ == "__main__":
    main()
