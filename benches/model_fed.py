#!/usr/bin/env python3
"""Model-fed benchmark: how fast real torchvision models train or infer when slidestream (or a
peer reader) feeds them random patches of whole-slide images, next to the same model on a fixed
device tensor (its ceiling), and how fast the loader itself runs while a model keeps the GPU
busy, in one run.

usage:
  model_fed.py --make 8 --from /tmp/big.svs --dir /tmp/tl-slides [--out DIR]      # GPU run
  model_fed.py --slides A.svs B.svs ... [--steps 100] [--warmup 10] [--models resnet50]
  model_fed.py ... --only resnet50-synthetic resnet50-loader-    # some rows (prefixes match)
  model_fed.py ... --taskset 0-3      # adds <first model>-loader-device-taskset (4 host cores)
  model_fed.py ... --profile          # torch.profiler traces + SLIDESTREAM_GPU_TRACE stage
                                      # timings of the loader-under-model rows, in --out
  model_fed.py --quick                # tiny CPU run with the test slide (no GPU needed)

Method. Models: torchvision ResNet-50 (training), ViT-B/16 (inference), ResNet-18 (training),
random initialisation (no downloads), bf16 autocast, channels_last, batches of --batch (256)
random --size² (256²) level-0 patches cropped on the model's device to --crop² (224²; one
random offset per batch, or --crop-mode center), normalised in float, SGD with momentum for
training (cross-entropy against fixed random labels), ``torch.inference_mode`` for inference.
Patches: slide chosen uniformly among the slides given, x/y uniform inside it, seeded (every row
reads the same patches; benches/training_loop.py's make_rows). Every row runs in a fresh
interpreter (killed after --row-timeout s and recorded as failed). A fed row builds the model
and warms it up on a fixed device tensor (--warmup steps), then starts the feeder, makes
--warmup untimed steps on its batches (at least 2 × workers for the DataLoader rows, so the
batches the workers read ahead while starting are not counted), then times --steps steps
ending with one device synchronisation: images/s = steps × batch / seconds. The fed rows also
report ``wait_s``, the time the training loop spent waiting for its next batch, and where the
window went: ``device_step_s`` / ``device_gap_s`` (CUDA events around every step on the model's
stream: device time from a step's start to its end, and the idle time between steps, when the
device waited for the loop to launch the next one), ``process_cores`` (the process's CPU time
over the window: cores in use) and ``loop_thread_cpu_share`` (the loop thread's CPU time over
the window).

Rows, per model M (in --models order), in this order:
  M-synthetic            the model on one fixed device tensor: its ceiling
  M-loader-device        fed by slidestream.torch.PatchLoader(device="cuda")
  loader-alone           (once, before the first model's loader rows) PatchLoader(device="cuda")
                         iterated in a background thread, the main thread idle: patches/s
  M-loader-bg            the same background-thread loader while the main thread runs M on a
                         fixed device tensor without synchronising: the model's images/s and
                         the loader's patches/s over the same window
  M-loader-other-proc    the same with M in another process on the same GPU (no GIL shared)
  M-loader-cpu           fed by PatchLoader's CPU path, each batch .to("cuda", non_blocking=True)
                         (host memory not pinned: slidestream returns plain numpy memory)
  M-dataset-workers      torch DataLoader over slidestream.torch.PatchDataset (CPU path) in
                         --workers processes (RAYON_NUM_THREADS=1 each), pin_memory=True
  M-cucim-workers        the same with cuCIM's CPU read_region, one patch per item, in
                         --peer-workers processes
  M-openslide-workers    the same with OpenSlide
then, with --taskset CPUS, M0-loader-device-taskset (the first model's loader-device row under
``taskset -c CPUS``), then the extra rows (only with --extras or named by --only):
  M-loader-bg-sync       M-loader-bg with a device synchronisation after every model step
  M-loader-cpu-pin       M-loader-cpu with PatchLoader(pin_memory=True): each batch decoded
                         straight into page-locked memory, so the copy to the GPU is asynchronous
Derived: ``of_synthetic`` (a fed row's images/s ÷ M-synthetic's; for the loader-under-model
rows the model's share of its ceiling), ``of_loader_alone`` (the loader-under-model rows' loader
rate ÷ loader-alone's; the fed loader-device rows' images/s ÷ loader-alone's).

With --profile, the loader-under-model rows run under SLIDESTREAM_GPU_TRACE=1 (the engine's
per-stage times, printed per batch, saved with the row's stderr to --out/rows/ROW.stderr.txt) and,
after their timed window, record --profile-steps more steps with torch.profiler (CPU and CUDA
activity of the loader's process: its kernels, copies and the model's when they share it) into
--out/rows/ROW.trace.json.gz (chrome://tracing, Perfetto); the table of the costliest kernels goes
into the JSON line. The timed numbers are not taken under the profiler.

Rows that cannot run here (no GPU, torch or torchvision missing, a reader missing) are printed
as skipped with the reason. Output: one JSON line per row on stdout, then two markdown tables
(the summary in the issue's layout, then every row); with --out DIR also model_fed.jsonl and
model_fed.md there (and rows/: the profiles and failed rows' stderr). Progress goes to stderr. --budget-s bounds the whole run (slide copies
included): no row starts after it, a running one is stopped at it.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RESULT = "MODEL_FED_RESULT "
ALL_MODELS = ["resnet50", "vit_b_16", "resnet18"]
#: feeder -> the summary table's column title
COLUMNS = [
    ("synthetic", "synthetic"), ("loader-device", 'PatchLoader(device="cuda")'), ("loader-cpu", "PatchLoader CPU + .cuda()"),
    ("dataset", "PatchDataset, {workers} workers"), ("cucim", "cuCIM CPU, {peer_workers} workers"),
    ("openslide", "OpenSlide, {peer_workers} workers"),
]


def worker_mod():
    sys.path.insert(0, HERE)
    import model_fed_worker

    return model_fed_worker


def row_specs(models, taskset=None, extras=False):
    """(name, extra spec) of every row, in run order (the order of importance)."""
    rows = []
    for i, m in enumerate(models):
        rows += [(f"{m}-synthetic", {"kind": "fed", "model": m, "feeder": "synthetic"}),
                 (f"{m}-loader-device", {"kind": "fed", "model": m, "feeder": "loader-device"})]
        if i == 0:
            rows.append(("loader-alone", {"kind": "loader-alone", "feeder": "loader-device"}))
        rows += [(f"{m}-loader-bg", {"kind": "loader-bg", "model": m, "feeder": "loader-device", "profiled": True}),
                 (f"{m}-loader-other-proc", {"kind": "loader-other-proc", "model": m, "feeder": "loader-device", "profiled": True}),
                 (f"{m}-loader-cpu", {"kind": "fed", "model": m, "feeder": "loader-cpu"}),
                 (f"{m}-dataset-workers", {"kind": "fed", "model": m, "feeder": "dataset"}),
                 (f"{m}-cucim-workers", {"kind": "fed", "model": m, "feeder": "cucim"}),
                 (f"{m}-openslide-workers", {"kind": "fed", "model": m, "feeder": "openslide"})]
    if taskset and models:
        rows.append((f"{models[0]}-loader-device-taskset", {"kind": "fed", "model": models[0], "feeder": "loader-device", "taskset": taskset}))
    extra = []
    for m in models:
        extra += [(f"{m}-loader-bg-sync", {"kind": "loader-bg", "model": m, "feeder": "loader-device", "sync_each": True, "extra": True}),
                  (f"{m}-loader-cpu-pin", {"kind": "fed", "model": m, "feeder": "loader-cpu", "pin": True, "extra": True})]
    return rows + extra if extras else rows, extra


def run_row(args, name, extra, deadline) -> dict:
    spec = {"row": name, "slides": args.slide_paths, "batch": args.batch, "steps": args.steps, "warmup": args.warmup,
            "size": args.size, "crop": args.crop, "crop_mode": args.crop_mode, "seed": args.seed, "workers": args.workers,
            "peer_workers": args.peer_workers, "prefetch": args.prefetch, "readers": args.readers, "out": args.out,
            "profile": bool(args.profile and extra.get("profiled")), "profile_steps": args.profile_steps}
    spec.update(extra)
    if args.gpu_reason and spec["feeder"] == "loader-device":
        return {"row": name, "status": "skipped", "reason": args.gpu_reason}
    if deadline - time.monotonic() < 5:
        return {"row": name, "status": "skipped", "reason": "--budget-s spent"}
    env = dict(os.environ)
    if spec["feeder"] == "dataset":
        env["RAYON_NUM_THREADS"] = "1"  # workers × decode threads ≈ cores (docs/python.md)
    elif args.threads:
        env["RAYON_NUM_THREADS"] = str(args.threads)
    if spec["profile"]:
        env["SLIDESTREAM_GPU_TRACE"] = "1"
    cmd = [sys.executable, os.path.abspath(__file__), "--_worker", json.dumps(spec)]
    if spec.get("taskset"):
        cmd = ["taskset", "-c", spec["taskset"]] + cmd
    timeout = min(args.row_timeout, max(1.0, deadline - time.monotonic()))
    t = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        tail = (e.stderr or b"")[-800:]
        tail = tail.decode(errors="replace") if isinstance(tail, bytes) else tail
        return {"row": name, "status": "failed", "reason": f"timed out after {timeout:.0f} s", "stderr_tail": tail}
    if args.out and (spec["profile"] or r.returncode != 0):
        with open(os.path.join(args.out, "rows", f"{name}.stderr.txt"), "w") as f:
            f.write(r.stderr)
    for line in r.stdout.splitlines():
        if line.startswith(RESULT):
            res = json.loads(line[len(RESULT):])
            res["wall_s"] = round(time.monotonic() - t, 2)
            if spec.get("taskset"):
                res["taskset"] = spec["taskset"]
            return res
    err = r.stderr.strip().splitlines()
    return {"row": name, "status": "failed", "reason": f"exit {r.returncode}: {err[-1] if err else 'no output'}",
            "stderr_tail": "\n".join(err[-15:])}


def derive(results):
    """of_synthetic and of_loader_alone (module docstring)."""
    by = {r["row"]: r for r in results if r.get("status") == "ok"}
    alone = by.get("loader-alone", {}).get("loader_patches_per_s")
    for r in by.values():
        if r["row"] == "loader-alone":
            continue
        syn = by.get(f"{r.get('model')}-synthetic", {}).get("images_per_s")
        if syn and r.get("images_per_s") and not r["row"].endswith("-synthetic"):
            r["of_synthetic"] = r["images_per_s"] / syn
        if alone and r.get("loader_patches_per_s") is not None:
            r["of_loader_alone"] = r["loader_patches_per_s"] / alone
        elif alone and r.get("feeder") == "loader-device" and r.get("images_per_s"):
            r["of_loader_alone"] = r["images_per_s"] / alone


def _pct(v):
    return f"{100 * v:.0f} %" if v is not None else ""


def _num(v):
    return f"{v:,.0f}" if v is not None else ""


def summary(results, args) -> list:
    """The issue's layout: one line per model, images/s (share of synthetic) per feeder."""
    by = {r["row"]: r for r in results}
    alone = by.get("loader-alone", {})
    head = [t.format(workers=args.workers, peer_workers=args.peer_workers) for _, t in COLUMNS]
    lines = ["| model | " + " | ".join(head) + " | loader alone | loader while the model runs (thread / other process) |",
             "|---|" + "---:|" * (len(head) + 2)]
    row_of = {"loader-device": "loader-device", "loader-cpu": "loader-cpu", "dataset": "dataset-workers", "cucim": "cucim-workers",
              "openslide": "openslide-workers", "synthetic": "synthetic"}
    for m in args.model_list:
        cells = []
        for feeder, _ in COLUMNS:
            r = by.get(f"{m}-{row_of[feeder]}", {})
            if r.get("status") != "ok":
                cells.append(r.get("status", ""))
                continue
            frac = f" ({_pct(r['of_synthetic'])})" if "of_synthetic" in r else ""
            cells.append(_num(r["images_per_s"]) + frac)
        under = []
        for suffix in ("loader-bg", "loader-other-proc"):
            r = by.get(f"{m}-{suffix}", {})
            under.append(f"{_num(r['loader_patches_per_s'])} ({_pct(r.get('of_loader_alone'))})" if r.get("status") == "ok" else r.get("status", "—"))
        kind = "training" if m != "vit_b_16" else "inference"
        lines.append(f"| {m}, {kind} | " + " | ".join(cells) + f" | {_num(alone.get('loader_patches_per_s'))} | {' / '.join(under)} |")
    return lines


def markdown(results, args) -> str:
    lines = [f"Model-fed benchmark: {len(args.slide_paths)} slide(s), batches of {args.batch} random {args.size}² level-0 patches, "
             f"{args.crop}² {args.crop_mode} crops, bf16 autocast, channels_last, {args.warmup} warm-up + {args.steps} timed steps per "
             "row (fresh interpreter per row). images/s (share of synthetic); loader columns: patches/s (share of loader alone)."]
    env = {k: v for k, v in sorted(os.environ.items()) if k.startswith("SLIDESTREAM_") or k == "RAYON_NUM_THREADS"}
    lines += [f"Settings in the environment: {', '.join(f'{k}={v}' for k, v in env.items()) or 'none (defaults)'}.", ""]
    lines += summary(results, args)
    lines += ["", "| row | status | images/s | of synthetic | loader patches/s | of loader alone | notes |", "|---|---|---:|---:|---:|---:|---|"]
    for r in results:
        if r.get("status") != "ok":
            lines.append(f"| {r['row']} | {r.get('status')} | | | | | {r.get('reason', '')} |")
            continue
        notes = []
        if r.get("wait_s") is not None:
            notes.append(f"waited {r['wait_s']:.2f} of {r['seconds']:.2f} s")
        if r.get("device_step_s") is not None:
            notes.append(f"device in steps {r['device_step_s']:.2f} s, idle between steps {r['device_gap_s']:.2f} s")
        if r.get("process_cores") is not None:
            notes.append(f"process used {r['process_cores']:.1f} cores, the loop thread ran {100 * r['loop_thread_cpu_share']:.0f} % of the window")
        for k in ("workers", "version", "taskset", "pinned", "trace_file"):
            if r.get(k):
                notes.append(f"{k}: {os.path.basename(str(r[k])) if k == 'trace_file' else r[k]}")
        lines.append(f"| {r['row']} | ok | {_num(r.get('images_per_s'))} | {_pct(r.get('of_synthetic'))} | {_num(r.get('loader_patches_per_s'))} "
                     f"| {_pct(r.get('of_loader_alone'))} | {'; '.join(notes)} |")
    return "\n".join(lines) + "\n"


def gpu_reason():
    """None when slidestream and torch both see a usable CUDA device, else why not."""
    try:
        import slidestream
    except ImportError as e:
        return f"slidestream does not import: {e}"
    if not slidestream.cuda_available():
        return "no usable CUDA device (slidestream.cuda_available() is False)"
    return None


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--_worker":
        return worker_mod().worker_main(sys.argv[2], RESULT)
    if len(sys.argv) == 3 and sys.argv[1] == "--_model_proc":
        return worker_mod().model_proc_main(sys.argv[2])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--slides", nargs="+", help="slide files")
    ap.add_argument("--make", type=int, help="make N copies of --from in --dir and use them")
    ap.add_argument("--from", dest="from_", help="the slide to copy (--make)")
    ap.add_argument("--dir", help="folder of the copies (--make; default a new temporary folder)")
    ap.add_argument("--models", nargs="+", default=ALL_MODELS, choices=ALL_MODELS, help="models, in run order (default all three)")
    ap.add_argument("--steps", type=int, default=100, help="timed steps per row (default 100)")
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps first (default 10)")
    ap.add_argument("--batch", type=int, default=256, help="patches per batch (default 256)")
    ap.add_argument("--size", type=int, default=256, help="patch edge in level-0 pixels (default 256)")
    ap.add_argument("--crop", type=int, default=224, help="crop edge fed to the model (default 224)")
    ap.add_argument("--crop-mode", choices=["random", "center"], default="random", help="one random offset per batch, or center")
    ap.add_argument("--workers", type=int, default=8, help="DataLoader workers of the PatchDataset rows (default 8)")
    ap.add_argument("--peer-workers", type=int, default=14, help="DataLoader workers of the cuCIM and OpenSlide rows (default 14)")
    ap.add_argument("--threads", type=int, default=0, help="RAYON_NUM_THREADS of the slidestream rows but the worker ones (default: unset)")
    ap.add_argument("--prefetch", type=int, default=2, help="PatchLoader prefetch (default 2)")
    ap.add_argument("--readers", type=int, default=1, help="PatchLoader readers (default 1)")
    ap.add_argument("--taskset", metavar="CPUS", help="add the first model's loader-device row under `taskset -c CPUS` (e.g. 0-3)")
    ap.add_argument("--extras", action="store_true", help="also run the extra rows (loader-bg-sync, loader-cpu-pin)")
    ap.add_argument("--profile", action="store_true", help="profile the loader-under-model rows (module docstring)")
    ap.add_argument("--profile-steps", type=int, default=5, help="model steps recorded by --profile (default 5)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", nargs="+", metavar="ROW", help="run only these rows (names or prefixes)")
    ap.add_argument("--row-timeout", type=float, default=150.0, help="seconds per row before it is killed (default 150)")
    ap.add_argument("--budget-s", type=float, default=540.0, help="seconds for the whole run (default 540)")
    ap.add_argument("--out", help="folder for model_fed.jsonl / .md, profiles and failed rows' stderr")
    ap.add_argument("--quick", action="store_true",
                    help="tiny run (2 copies of CMU-1-Small-Region.svs, batches of 4 64² patches cropped to 48², 1+2 steps, "
                         "2 workers): runs on a CPU-only machine with CPU torch")
    args = ap.parse_args()
    deadline = time.monotonic() + args.budget_s
    if args.quick:
        for k, v in (("steps", 2), ("warmup", 1), ("batch", 4), ("size", 64), ("crop", 48), ("workers", 2), ("peer_workers", 2),
                     ("row_timeout", 150.0)):
            if getattr(args, k) == ap.get_default(k):
                setattr(args, k, v)
    if args.crop > args.size:
        sys.exit(f"--crop {args.crop} is larger than --size {args.size}")
    if args.warmup < 1 or args.steps < 1:
        sys.exit("--warmup and --steps must be ≥ 1")
    w = worker_mod()
    args.slide_paths = [os.path.abspath(p) for p in w.tl.prepare_slides(args)]
    if args.out:
        os.makedirs(os.path.join(args.out, "rows"), exist_ok=True)
    args.gpu_reason = gpu_reason()
    args.model_list = list(args.models)
    rows, extra = row_specs(args.model_list, args.taskset, args.extras)
    if args.only:
        every = rows + [r for r in extra if r not in rows]
        rows = [r for r in every if any(r[0] == o or r[0].startswith(o) for o in args.only)]
        if not rows:
            sys.exit(f"--only {args.only}: no such row (rows: {', '.join(r[0] for r in every)})")
    w.tl.log(f"reading {len(args.slide_paths)} slide file(s) once (page cache warm)")
    w.tl.warm_page_cache(args.slide_paths)
    results = []
    for name, extra_spec in rows:
        w.tl.log(f"== {name}")
        res = run_row(args, name, extra_spec, deadline)
        results.append(res)
        if res.get("status") == "ok":
            parts = [f"{res['images_per_s']:,.0f} images/s" if res.get("images_per_s") else "",
                     f"loader {res['loader_patches_per_s']:,.0f} patches/s" if res.get("loader_patches_per_s") else ""]
            w.tl.log("   " + ", ".join(p for p in parts if p))
        else:
            w.tl.log(f"   {res.get('status')}: {res.get('reason')}")
    derive(results)
    for r in results:
        print(json.dumps(r), flush=True)
    md = markdown(results, args)
    print()
    print(md)
    if args.out:
        with open(os.path.join(args.out, "model_fed.jsonl"), "w") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")
        with open(os.path.join(args.out, "model_fed.md"), "w") as f:
            f.write(md)
    return 1 if any(r.get("status") == "failed" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
