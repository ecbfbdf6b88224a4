"""PatchLoader(device="cuda") rate alone, and in a background thread while
the main thread trains ResNet-50 (bf16 autocast, channels_last, batch 256, 224²) on a fixed
tensor without synchronising (the GIL and the GPU shared, as in a training script that reads
ahead in a thread). Also the model's own rate alone and with the loader. One JSON line.

usage: python benches/loader_under_model.py SLIDE [SLIDE ...]   (GPU, torch, torchvision)
"""
import json
import os
import sys
import threading
import time

import numpy as np
import torch
import torchvision
import slidestream
from slidestream.torch import PatchLoader

paths = sys.argv[1:]
slides = [slidestream.Slide(p) for p in paths]
rng = np.random.default_rng(0)
W, H = slides[0].dimensions


def rows(n):
    return np.stack([rng.integers(0, len(slides), n), np.zeros(n, np.int64), rng.integers(0, W - 256, n), rng.integers(0, H - 256, n)], axis=1)


ROWS = rows(256 * 4000)
counter = {"n": 0}
stop = threading.Event()


def loader_thread():
    loader = PatchLoader(slides, ROWS, 256, batch_size=256, device="cuda")
    for x, meta in loader:
        counter["n"] += x.shape[0]
        del x
        if stop.is_set():
            break
    loader.close()


def rate(seconds):
    n0, t0 = counter["n"], time.perf_counter()
    time.sleep(seconds)
    return (counter["n"] - n0) / (time.perf_counter() - t0)


model = torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(256, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
y = torch.randint(0, 1000, (256,), device="cuda")


def step():
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


for _ in range(15):
    step()
torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(40):
    step()
torch.cuda.synchronize()
synthetic = 40 * 256 / (time.perf_counter() - t0)

th = threading.Thread(target=loader_thread, daemon=True)
th.start()
time.sleep(8)  # engine start + warm-up
alone = rate(6)
# Train in the main thread; measure loader rate meanwhile.
res = {}
box = {}


def meter():
    time.sleep(2)
    box["under"] = rate(8)


m = threading.Thread(target=meter)
m.start()
t0 = time.perf_counter()
steps = 0
while m.is_alive():
    step()
    steps += 1
torch.cuda.synchronize()
model_with_loader = steps * 256 / (time.perf_counter() - t0)
stop.set()
st = slidestream.gpu_stats()
print(json.dumps({"priority_env": os.environ.get("SLIDESTREAM_GPU_STREAM_PRIORITY", "(default)"), "stream_priority": st["stream_priority"], "cuda_connections": st["cuda_connections"],
                  "synthetic_img_s": round(synthetic), "loader_alone_patches_s": round(alone), "loader_under_resnet50_patches_s": round(box["under"]),
                  "ratio": round(box["under"] / alone, 3), "model_img_s_with_loader_thread": round(model_with_loader),
                  "decoded_hardware": st["decoded_hardware"], "decoded_cpu": st["decoded_cpu"]}), flush=True)
os._exit(0)
