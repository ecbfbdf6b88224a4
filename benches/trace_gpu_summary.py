#!/usr/bin/env python3
"""Where the device time of a torch.profiler trace went, by stream and by operation: the GPU
kernels, copies and memsets of a Chrome trace (``prof.export_chrome_trace``; ``.json`` or
``.json.gz``, e.g. the traces ``model_fed.py --profile`` writes), summed per CUDA stream and
per operation name, so a loader's device work (its own streams, nvJPEG's copies) can be told
from a model's (PyTorch's streams) and weighed against the window.

usage: trace_gpu_summary.py TRACE [--top 25]

Prints the window (first start to last end of any device event), then per stream: events,
device time (sum of durations, µs → ms) and its share of the window, then the --top operations
by device time with their count, mean duration and streams.
"""
from __future__ import annotations

import argparse
import collections
import gzip
import json
import sys

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def load(path: str) -> list:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    ev = [e for e in load(a.trace) if e.get("ph") == "X" and e.get("cat") in GPU_CATS]
    if not ev:
        print("no GPU events in the trace (profiled without CUDA activity?)")
        return 1
    t0 = min(e["ts"] for e in ev)
    t1 = max(e["ts"] + e.get("dur", 0) for e in ev)
    window = t1 - t0
    print(f"window {window / 1e3:.1f} ms, {len(ev)} device events")
    by_stream = collections.defaultdict(lambda: [0, 0.0])
    by_name = collections.defaultdict(lambda: [0, 0.0, set()])
    for e in ev:
        s = e.get("args", {}).get("stream", "?")
        d = float(e.get("dur", 0))
        by_stream[s][0] += 1
        by_stream[s][1] += d
        name = e.get("name", "?")
        name = name if len(name) <= 70 else name[:67] + "..."
        k = (e["cat"], name)
        by_name[k][0] += 1
        by_name[k][1] += d
        by_name[k][2].add(s)
    print("\n| stream | events | device ms | share of window |\n|---|---:|---:|---:|")
    for s, (n, d) in sorted(by_stream.items(), key=lambda kv: -kv[1][1]):
        print(f"| {s} | {n} | {d / 1e3:.1f} | {100 * d / window:.1f} % |")
    print("\n| operation | kind | count | device ms | mean µs | streams |\n|---|---|---:|---:|---:|---|")
    for (cat, name), (n, d, ss) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[: a.top]:
        print(f"| {name} | {cat} | {n} | {d / 1e3:.1f} | {d / n:.1f} | {','.join(map(str, sorted(ss, key=str)))[:40]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
