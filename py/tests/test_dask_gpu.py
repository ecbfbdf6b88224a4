"""slidestream.dask on GPUs (issue 18): one GPU per Dask worker (SlidestreamWorkers(gpus=...)),
map_patches(device="worker") equal to the CPU path. Skipped without CUDA (CI); run on the lent
H200 (docs/gpu.md)."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import slidestream

pytestmark = pytest.mark.skipif(not slidestream.cuda_available(), reason="no usable CUDA device")

REPO = pathlib.Path(__file__).resolve().parents[2]
CMU = REPO / "assets" / "CMU-1-Small-Region.svs"


def _means_and_device(batch, rows):
    host = batch.cpu() if isinstance(batch, slidestream.DeviceArray) else batch
    dev = batch.device if isinstance(batch, slidestream.DeviceArray) else -1
    return {"mean": host.reshape(len(host), -1).mean(axis=1), "device": np.full(len(host), dev)}


def test_one_gpu_per_worker_and_device_reads_equal_cpu(tmp_path):
    distributed = pytest.importorskip("distributed")
    pytest.importorskip("pandas")
    import slidestream.dask as ssd
    from slidestream.sampling import GridSampler

    ngpu = len(slidestream.gpu_probe()["devices"])
    paths = []
    for i in range(4):
        p = tmp_path / f"s{i}.svs"
        p.write_bytes(CMU.read_bytes())
        paths.append(str(p))
    with slidestream.Slide(CMU) as s:
        grid = GridSampler(s, 128, min_tissue=0).patches
    rows = np.concatenate([np.column_stack([np.full(len(grid), i), grid[:, 1:]]) for i in range(4)])
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        devices = ssd.setup_workers(client, gpus="all")
        names = client.run(lambda dask_worker: dask_worker.name)
        assert {a: devices[a] for a in devices} == {a: int(names[a]) % ngpu for a in names}
        gpu = client.compute(ssd.map_patches(paths, rows, _means_and_device, 128, device="worker", task_tiles=32)).result().sort_index()
    cpu = ssd.map_patches(paths, rows, _means_and_device, 128, task_tiles=32).compute(scheduler="threads").sort_index()
    assert np.array_equal(gpu["mean"].to_numpy(), cpu["mean"].to_numpy())
    assert set(gpu["device"].unique()) <= set(range(ngpu)) and (cpu["device"] == -1).all()
    if ngpu >= 2:
        assert set(gpu["device"].unique()) == {0, 1}  # both workers' GPUs did work
