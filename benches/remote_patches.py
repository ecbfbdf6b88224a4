#!/usr/bin/env python3
"""Remote slides (issue 17): random 256² level-0 patches and a level-0 scan of one SVS in an S3
bucket, slidestream vs tiffslide (fsspec + s3fs) in the same run, through the fault/delay proxy.

usage: python benches/remote_patches.py --proxy http://127.0.0.1:PORT [--url s3://bench/big.svs]
           [--key K --secret S] [--rtt-ms 0,20] [--batch 256] [--batches 4]
           [--serial-patches 32] [--threads 16,32] [--scan 8192] [--json LOG.json] [--md OUT.md]

Setup (see docs/benchmarks.md, "Remote patches (issue 17)"): an S3 server (SeaweedFS
``weed server -s3``) holding the slide, and ``scripts/faultproxy.py --upstream S3_URL`` in front
of it. Every request of both readers goes through the proxy; the script sets its added delay
(``POST /__proxy/config``, RTT/2 each way) for each ``--rtt-ms`` value and counts requests and
body bytes from its ``GET /__proxy/stats`` counters (control requests are not counted).

Per RTT:

* open: requests and bytes of opening each reader (slidestream: fresh ``Slide``; tiffslide: a
  fresh ``TiffSlide`` plus its first ``zarr_group``, which reads the tile offsets and counts).
* random patches: ``--batches`` batches of ``--batch`` seeded random 256² level-0 patches (new
  locations per batch, the same locations for every reader). slidestream reads each batch with
  one ``read_regions`` call; tiffslide with ``read_region`` per patch, serially (first
  ``--serial-patches`` of the batch) and from a thread pool of N threads (each thread its own
  ``TiffSlide``; opened before the clock starts) and from a process pool of N workers (each
  its own ``TiffSlide``, patches sent back to the parent, as ``torch`` DataLoader workers).
  Threads do not overlap tiffslide's requests: tifffile's zarr 3 store reads a tile's bytes
  with a blocking call inside its ``async get``, on zarr's single event-loop thread, so every
  tile read of the process is serial; processes do overlap them.
  Reported: patches/s, requests per patch, and read amplification = body bytes received / bytes
  needed, where needed = the compressed bytes of the distinct level-0 tiles the patches touch
  (TileByteCounts, read from the slide with tifffile before the runs).
* scan: every level-0 tile of a ``--scan``² region at (0, 0): slidestream as rows of 256² patches
  (one ``read_regions`` per row), as one ``read_regions`` call of all its patches, and as one
  ``read_region`` per row (``--scan`` × 256); tiffslide as one ``read_region`` per row.
* tiffslide is run twice: s3fs defaults (``readahead`` cache of ``default_block_size`` blocks,
  50 MiB: serial on ``--defaults-patches`` patches of the first batch, and the scan, only) and
  ``default_cache_type="none"`` (one ranged GET per tile read: every mode).

Also at the last RTT: the reopen with ``SLIDESTREAM_REMOTE_INDEX_CACHE`` set to a fresh
directory (first open: miss, second: hit; requests at open from the proxy and from
``io_stats()["remote"]``), and the pixels of both readers on the first patches (max |diff|).

slidestream runs with its default settings; for the random batches its slide has no tile cache
(``cache_bytes=0``: no batch is served from an earlier one; tiles shared within a batch are
still fetched and decoded once), for the scan a private 256 MiB one (the default capacity: a
tile under two rows of patches is fetched once). tiffslide keeps no tile cache of its own.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import multiprocessing
import os
import platform
import random
import sys
import tempfile
import threading
import time
import urllib.request

import numpy as np  # noqa: E402
import s3fs  # noqa: E402
import tifffile  # noqa: E402
import tiffslide  # noqa: E402

import slidestream  # noqa: E402


SCAN_CACHE = 256 << 20  # bytes: the scan slide's private tile cache (the default capacity)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command line (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--proxy", required=True, help="faultproxy base URL, http://127.0.0.1:PORT")
    ap.add_argument("--url", default="s3://bench/big.svs")
    ap.add_argument("--key", default="benchkey")
    ap.add_argument("--secret", default="benchsecret")
    ap.add_argument("--region", default="us-east-1")
    ap.add_argument("--rtt-ms", default="0,20", help="comma-separated added RTTs in ms")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--patch", type=int, default=256)
    ap.add_argument("--serial-patches", type=int, default=32,
                    help="tiffslide serial read_region: this many patches of each batch")
    ap.add_argument("--defaults-patches", type=int, default=8,
                    help="tiffslide with s3fs defaults: serial patches (first batch only)")
    ap.add_argument("--threads", default="16,32", help="tiffslide thread-pool sizes")
    ap.add_argument("--processes", default="16",
                    help="tiffslide process-pool sizes (each worker its own TiffSlide)")
    ap.add_argument("--scan", type=int, default=8192, help="level-0 scan region side, px")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--check", type=int, default=16, help="patches compared between readers")
    ap.add_argument("--no-default-s3fs", action="store_true",
                    help="skip tiffslide with s3fs default caching")
    ap.add_argument("--json", help="write the JSON log here")
    ap.add_argument("--md", help="write the Markdown tables here")
    a = ap.parse_args(argv)
    a.rtts = [float(x) for x in a.rtt_ms.split(",") if x.strip()]
    a.thread_counts = [int(x) for x in a.threads.split(",") if x.strip()]
    a.process_counts = [int(x) for x in a.processes.split(",") if x.strip()]
    if a.batch < 1 or a.batches < 1 or a.patch < 1 or a.scan < a.patch:
        ap.error("--batch, --batches, --patch must be >= 1 and --scan >= --patch")
    return a


class Proxy:
    """Client of faultproxy's control API: counters and the added delay."""

    def __init__(self, base: str) -> None:
        self.base = base.rstrip("/")

    def _call(self, method: str, path: str, body: dict | None = None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read() or b"{}")

    def stats(self) -> tuple[int, int]:
        """(requests, body bytes) forwarded since the proxy started."""
        s = self._call("GET", "/__proxy/stats")
        return int(s["requests"]), int(s["bytes"])

    def set_rtt(self, rtt_ms: float) -> None:
        """Added round-trip time per request: rtt_ms/2 each way."""
        self._call("POST", "/__proxy/config", {"delay_ms": rtt_ms / 2})


class Counter:
    """Context manager: requests, bytes and wall seconds of its body, from the proxy."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy

    def __enter__(self) -> "Counter":
        self.r0, self.b0 = self.proxy.stats()
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self.t0
        r1, b1 = self.proxy.stats()
        self.requests, self.bytes = r1 - self.r0, b1 - self.b0


class TileIndex:
    """Level-0 tile geometry and compressed sizes of the slide (tifffile, read once)."""

    def __init__(self, fs: s3fs.S3FileSystem, path: str) -> None:
        with fs.open(path, "rb", cache_type="readahead", block_size=1 << 20) as f:
            with tifffile.TiffFile(f) as tf:
                page = tf.series[0].levels[0].keyframe
                self.width, self.height = page.imagewidth, page.imagelength
                self.tw, self.th = page.tilewidth, page.tilelength
                self.counts = np.asarray(page.databytecounts, dtype=np.int64)
        self.across = -(-self.width // self.tw)

    def tiles(self, x: int, y: int, w: int, h: int) -> set[int]:
        """Indices of the level-0 tiles a w×h region at (x, y) touches."""
        c0, c1 = x // self.tw, (x + w - 1) // self.tw
        r0, r1 = y // self.th, (y + h - 1) // self.th
        return {r * self.across + c for r in range(r0, r1 + 1) for c in range(c0, c1 + 1)}

    def needed(self, regions) -> tuple[int, int]:
        """(distinct tiles, their compressed bytes) for regions (x, y, w, h)."""
        ts: set[int] = set()
        for reg in regions:
            ts |= self.tiles(*reg)
        return len(ts), int(self.counts[list(ts)].sum())


def open_tiffslide(url: str, so: dict) -> tiffslide.TiffSlide:
    """A TiffSlide with its zarr group made (that is when it reads the level's tile index)."""
    s = tiffslide.TiffSlide(url, storage_options=so)
    s.zarr_group  # noqa: B018 - reads offsets/counts of the levels
    return s


def ts_patch(s: tiffslide.TiffSlide, loc, size: int) -> np.ndarray:
    """One tiffslide patch as an RGB uint8 array (h, w, 3)."""
    return s.read_region(loc, 0, (size, size), as_array=True)[..., :3]


_WORKER: dict = {}


def _proc_init(url: str, so: dict) -> None:
    """Process-pool initializer: this worker's own TiffSlide."""
    _WORKER["s"] = open_tiffslide(url, so)


def _proc_patch(loc_size) -> np.ndarray:
    """One patch in a pool worker (returned to the parent, as a DataLoader worker would)."""
    loc, size = loc_size
    return ts_patch(_WORKER["s"], loc, size)


def _proc_ready(_) -> int:
    """Warm-up task: the worker's pid, once its slide is open."""
    time.sleep(0.2)
    return os.getpid()


def result(c: Counter, patches: int, needed_bytes: int) -> dict:
    """Row of a measurement."""
    return {"patches": patches, "seconds": round(c.seconds, 4),
            "patches_per_s": round(patches / c.seconds, 2), "requests": c.requests,
            "requests_per_patch": round(c.requests / patches, 3), "bytes": c.bytes,
            "needed_bytes": needed_bytes,
            "amplification": round(c.bytes / needed_bytes, 3) if needed_bytes else None}


def run_rtt(a, proxy: Proxy, index: TileIndex, ss_opts: dict, ts_configs: dict,
            rtt: float) -> dict:
    """All measurements at one added RTT."""
    proxy.set_rtt(rtt)
    t = time.perf_counter()
    proxy.stats()
    control_ms = (time.perf_counter() - t) * 1000
    out: dict = {"rtt_ms": rtt, "control_call_ms": round(control_ms, 2)}
    rng = random.Random(a.seed)
    batches = [[(rng.randrange(0, index.width - a.patch), rng.randrange(0, index.height - a.patch))
                for _ in range(a.batch)] for _ in range(a.batches)]
    p = a.patch

    # slidestream
    with Counter(proxy) as c:
        slide = slidestream.Slide(a.url, storage_options=ss_opts, cache_bytes=0)
    out["slidestream_open"] = {"requests": c.requests, "bytes": c.bytes,
                               "seconds": round(c.seconds, 4),
                               "io_stats_remote": slide.io_stats().get("remote")}
    rows = []
    for locs in batches:
        _, need = index.needed([(x, y, p, p) for x, y in locs])
        with Counter(proxy) as c:
            arr = slide.read_regions(locs, 0, (p, p))
        assert arr.shape == (len(locs), p, p, 3)
        rows.append(result(c, len(locs), need))
    out["slidestream_batches"] = rows
    scan_rows = [[(x, y) for x in range(0, a.scan, p)] for y in range(0, a.scan, p)]
    _, need = index.needed([(0, 0, a.scan, a.scan)])
    ss_check = slide.read_regions(batches[0][: a.check], 0, (p, p))
    slide.close()
    scan_slide = slidestream.Slide(a.url, storage_options=ss_opts, cache_bytes=SCAN_CACHE)
    with Counter(proxy) as c:
        for row in scan_rows:
            scan_slide.read_regions(row, 0, (p, p))
    out["slidestream_scan"] = result(c, sum(map(len, scan_rows)), need)
    scan_slide.close()
    for mode in ("scan_one_call", "scan_read_region_rows"):
        scan_slide = slidestream.Slide(a.url, storage_options=ss_opts, cache_bytes=SCAN_CACHE)
        with Counter(proxy) as c:
            if mode == "scan_one_call":
                scan_slide.read_regions([loc for row in scan_rows for loc in row], 0, (p, p))
            else:
                for y in range(0, a.scan, p):
                    scan_slide.read_region((0, y), 0, (a.scan, p))
        out[f"slidestream_{mode}"] = result(c, sum(map(len, scan_rows)), need)
        scan_slide.close()

    # tiffslide, per s3fs configuration
    for name, so in ts_configs.items():
        res: dict = {}
        with Counter(proxy) as c:
            ts = open_tiffslide(a.url, so)
        res["open"] = {"requests": c.requests, "bytes": c.bytes, "seconds": round(c.seconds, 4)}
        light = name == "s3fs_defaults"  # 50 MiB readahead blocks: a few patches only
        serial = []
        for locs in batches[:1] if light else batches:
            sub = locs[: a.defaults_patches if light else a.serial_patches]
            _, need = index.needed([(x, y, p, p) for x, y in sub])
            with Counter(proxy) as c:
                for loc in sub:
                    ts_patch(ts, loc, p)
            serial.append(result(c, len(sub), need))
        res["serial"] = serial
        if name == "cache_none":
            diffs = [int(np.abs(ts_patch(ts, loc, p).astype(np.int16) - ss_check[i]).max())
                     for i, loc in enumerate(batches[0][: a.check])]
            out["pixel_check"] = {"patches": len(diffs), "max_abs_diff": max(diffs),
                                  "patches_identical": sum(d == 0 for d in diffs)}
        for n in [] if light else a.thread_counts:
            local = threading.local()
            handles = []

            def init() -> None:
                local.s = open_tiffslide(a.url, so)
                handles.append(local.s)

            pool = concurrent.futures.ThreadPoolExecutor(n, initializer=init)
            # start every worker (each opens its handle) before the clock
            list(pool.map(lambda _: time.sleep(0.05), range(n * 2)))
            rows = []
            for locs in batches:
                _, need = index.needed([(x, y, p, p) for x, y in locs])
                with Counter(proxy) as c:
                    list(pool.map(lambda loc: ts_patch(local.s, loc, p), locs))
                rows.append(result(c, len(locs), need))
            pool.shutdown()
            res[f"threads_{n}"] = rows
            res[f"threads_{n}_handles"] = len(handles)
        for n in [] if light else a.process_counts:
            ctx = multiprocessing.get_context("spawn")
            with concurrent.futures.ProcessPoolExecutor(n, mp_context=ctx, initializer=_proc_init,
                                                        initargs=(a.url, so)) as pool:
                pids = set(pool.map(_proc_ready, range(n * 3)))
                rows = []
                for locs in batches:
                    _, need = index.needed([(x, y, p, p) for x, y in locs])
                    with Counter(proxy) as c:
                        got = list(pool.map(_proc_patch, [(loc, p) for loc in locs],
                                            chunksize=max(1, len(locs) // (4 * n))))
                    assert len(got) == len(locs)
                    rows.append(result(c, len(locs), need))
            res[f"processes_{n}"] = rows
            res[f"processes_{n}_workers_seen"] = len(pids)
        _, need = index.needed([(0, 0, a.scan, a.scan)])
        with Counter(proxy) as c:
            for y in range(0, a.scan, p):
                ts.read_region((0, y), 0, (a.scan, p), as_array=True)
        res["scan"] = result(c, sum(map(len, scan_rows)), need)
        out[f"tiffslide_{name}"] = res
    return out


def index_cache(a, proxy: Proxy, ss_opts: dict) -> dict:
    """Open twice with SLIDESTREAM_REMOTE_INDEX_CACHE at a fresh directory."""
    out = {}
    with tempfile.TemporaryDirectory() as d:
        with slidestream.config.set("SLIDESTREAM_REMOTE_INDEX_CACHE", d):
            for name in ("first_open", "reopen"):
                with Counter(proxy) as c:
                    s = slidestream.Slide(a.url, storage_options=ss_opts)
                r = s.io_stats().get("remote") or {}
                with Counter(proxy) as c2:
                    s.read_region((1000, 1000), 0, (256, 256))
                out[name] = {"proxy_requests": c.requests, "proxy_bytes": c.bytes,
                             "seconds": round(c.seconds, 4),
                             "open_requests": r.get("open_requests"),
                             "index_cache": r.get("index_cache"),
                             "first_patch_requests": c2.requests}
                s.close()
    return out


def mean(rows: list[dict], key: str) -> float:
    """Mean of one key over the rows."""
    return sum(r[key] for r in rows) / len(rows)


def markdown(log: dict) -> str:
    """Tables of the log."""
    lines = []
    for r in log["runs"]:
        lines += [f"### Added RTT {r['rtt_ms']:g} ms", "",
                  "| reader | mode | patches | patches/s | requests/patch | amplification |",
                  "|---|---|---:|---:|---:|---:|"]

        def row(reader: str, mode: str, rows) -> None:
            rows = rows if isinstance(rows, list) else [rows]
            pats = sum(x["patches"] for x in rows)
            secs = sum(x["seconds"] for x in rows)
            req = sum(x["requests"] for x in rows)
            byt = sum(x["bytes"] for x in rows)
            need = sum(x["needed_bytes"] for x in rows)
            lines.append(f"| {reader} | {mode} | {pats} | {pats / secs:.1f} | {req / pats:.2f} "
                         f"| {byt / need:.2f} |")

        row("slidestream", f"read_regions, batches of {log['args']['batch']}",
            r["slidestream_batches"])
        for k in [k for k in r if k.startswith("tiffslide_")]:
            cfg = k[len("tiffslide_"):]
            row(f"tiffslide ({cfg})", "read_region, serial", r[k]["serial"])
            for n in [n for n in log["args"]["thread_counts"] if f"threads_{n}" in r[k]]:
                row(f"tiffslide ({cfg})", f"read_region, {n} threads", r[k][f"threads_{n}"])
            for n in [n for n in log["args"]["process_counts"] if f"processes_{n}" in r[k]]:
                row(f"tiffslide ({cfg})", f"read_region, {n} processes", r[k][f"processes_{n}"])
        lines += ["", f"Level-0 scan, {log['args']['scan']}² at (0, 0):", "",
                  "| reader | mode | seconds | patches/s | requests | amplification |",
                  "|---|---|---:|---:|---:|---:|"]
        for key, mode in (("slidestream_scan", "read_regions per row of 256²"),
                          ("slidestream_scan_one_call", "read_regions, one call"),
                          ("slidestream_scan_read_region_rows", "read_region per row")):
            s = r[key]
            lines.append(f"| slidestream | {mode} | {s['seconds']:.2f} | "
                         f"{s['patches_per_s']:.1f} | {s['requests']} | "
                         f"{s['amplification']:.2f} |")
        for k in [k for k in r if k.startswith("tiffslide_")]:
            s = r[k]["scan"]
            lines.append(f"| tiffslide ({k[10:]}) | read_region per row | {s['seconds']:.2f} | "
                         f"{s['patches_per_s']:.1f} | {s['requests']} | "
                         f"{s['amplification']:.2f} |")
        lines += ["", "Open: | reader | requests | bytes | seconds |", "|---|---:|---:|---:|"]
        o = r["slidestream_open"]
        lines.append(f"| slidestream | {o['requests']} | {o['bytes']} | {o['seconds']:.3f} |")
        for k in [k for k in r if k.startswith("tiffslide_")]:
            o = r[k]["open"]
            lines.append(f"| tiffslide ({k[10:]}) | {o['requests']} | {o['bytes']} | "
                         f"{o['seconds']:.3f} |")
        if "pixel_check" in r:
            pc = r["pixel_check"]
            lines += ["", f"Pixels: {pc['patches']} patches, max |slidestream − tiffslide| = "
                      f"{pc['max_abs_diff']}, identical patches {pc['patches_identical']}."]
        lines.append("")
    ic = log.get("index_cache")
    if ic:
        lines += ["Index cache (`SLIDESTREAM_REMOTE_INDEX_CACHE`=dir):", "",
                  "| open | requests (proxy) | open_requests (io_stats) | index_cache | "
                  "first patch requests |", "|---|---:|---:|---|---:|"]
        for k, v in ic.items():
            lines.append(f"| {k} | {v['proxy_requests']} | {v['open_requests']} | "
                         f"{v['index_cache']} | {v['first_patch_requests']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the Markdown; write the logs asked for."""
    a = parse_args(argv)
    proxy = Proxy(a.proxy)
    ss_opts = {"endpoint": a.proxy, "access_key_id": a.key, "secret_access_key": a.secret,
               "region": a.region}
    s3_base = {"key": a.key, "secret": a.secret,
               "client_kwargs": {"endpoint_url": a.proxy, "region_name": a.region}}
    ts_configs = {} if a.no_default_s3fs else {"s3fs_defaults": dict(s3_base)}
    ts_configs["cache_none"] = dict(s3_base, default_cache_type="none")
    proxy.set_rtt(0)
    fs = s3fs.S3FileSystem(**s3_base)
    path = a.url.split("://", 1)[1]
    index = TileIndex(fs, path)
    log = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs",
           "python": sys.version.split()[0],
           "versions": {"slidestream": getattr(slidestream, "__version__", "?"),
                        "tiffslide": tiffslide.__version__, "s3fs": s3fs.__version__,
                        "tifffile": tifffile.__version__},
           "s3fs_default_block_size": fs.default_block_size,
           "slide": {"url": a.url, "size": fs.info(path)["size"], "level0": [index.width,
                     index.height], "tile": [index.tw, index.th], "tiles": len(index.counts)},
           "args": {k: v for k, v in vars(a).items()}, "runs": []}
    for rtt in a.rtts:
        log["runs"].append(run_rtt(a, proxy, index, ss_opts, ts_configs, rtt))
        print(f"done RTT {rtt:g} ms", file=sys.stderr)
    log["index_cache"] = index_cache(a, proxy, ss_opts)
    md = markdown(log)
    print(md)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(log, f, indent=1)
    if a.md:
        with open(a.md, "w") as f:
            f.write(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
