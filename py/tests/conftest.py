"""Shared pytest fixtures.

``remote_servers``: the local S3 (moto) and HTTP (nginx) servers holding the test slides, with
a fault proxy in front of each (scripts/remote_servers.py). When ``SLIDESTREAM_TEST_SERVERS``
names a state file (scripts/test-all.sh starts the servers once for the Rust and Python tests),
that file is read; otherwise the servers are started for this session and stopped after it.

``dask_client``: a ``distributed`` client on a LocalCluster of 2 worker processes × 1 thread,
one per test module (skipped without ``distributed``).
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import sys

import pytest

SCRIPTS = pathlib.Path(__file__).resolve().parents[2] / "scripts"


def _remote_servers_module():
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    import remote_servers  # scripts/remote_servers.py

    return remote_servers


@pytest.fixture(scope="session")
def remote_servers():
    """The server state dict (see scripts/remote_servers.py: ``s3``, ``http``, ``bucket``,
    ``credentials``, ``objects``, ``vendor_objects``...)."""
    rs = _remote_servers_module()
    state_file = os.environ.get(rs.STATE_ENV)
    if state_file:
        yield rs.load_state(state_file)
        return
    if importlib.util.find_spec("boto3") is None or importlib.util.find_spec("moto") is None:
        pytest.skip("moto[server] not installed (pip install -r scripts/requirements-test.txt)")
    try:
        rs.find_nginx()
    except rs.ServerError as exc:
        pytest.skip(str(exc))
    state = rs.start_servers()
    try:
        yield state
    finally:
        rs.stop_servers(state)


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()
