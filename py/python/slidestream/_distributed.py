"""The rank split of :class:`slidestream.PatchBatches` under ``torch.distributed``:
which rank this process is, and which rows of an epoch it reads. Internal; documented in
docs/python.md, "Several GPUs and torch.distributed".

Finite row sets follow ``torch.utils.data.DistributedSampler``'s rule, so that a slidestream
loader and a ``DataLoader(sampler=DistributedSampler(...))`` give every rank the same rows:

1. the epoch's order of the ``n`` rows (the same on every rank: the same seed);
2. ``drop_last=False``: the order is padded by repeating it from its start until its length
   is ``ceil(n / world_size) * world_size``; ``drop_last=True``: its tail is cut to
   ``(n // world_size) * world_size``;
3. rank ``r`` takes every ``world_size``-th entry from position ``r``: ``order[r::world_size]``.

torch is never imported here: the defaults read ``torch.distributed`` only when the caller
already imported it (``sys.modules``).
"""

from __future__ import annotations

import sys
from typing import Any, Optional, Tuple

import numpy as np

from ._args import check_int

__all__ = ["resolve_rank", "rank_share", "share_size"]


def _torch_rank() -> Optional[Tuple[int, int]]:
    """``(rank, world_size)`` of the default ``torch.distributed`` process group when torch is
    already imported and the group is initialised; None otherwise (torch is not imported)."""
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return None
    if not (dist.is_available() and dist.is_initialized()):
        return None
    return int(dist.get_rank()), int(dist.get_world_size())


def resolve_rank(rank: Any, world_size: Any) -> Tuple[int, int]:
    """This process's ``(rank, world_size)``: the values given (both or neither), else those of
    an initialised ``torch.distributed`` default group (read only when the caller imported
    torch already), else ``(0, 1)``.

    Raises ValueError when only one of the two is given, ``world_size < 1`` or ``rank`` is
    outside ``[0, world_size)``; TypeError for non-integers (bools included)."""
    if (rank is None) != (world_size is None):
        raise ValueError(f"give both rank and world_size or neither (got rank={rank!r}, world_size={world_size!r})")
    if rank is None:
        found = _torch_rank()
        r, ws = found if found is not None else (0, 1)
    else:
        r, ws = check_int(rank, "rank", allow_bool=False), check_int(world_size, "world_size", allow_bool=False)
    if ws < 1:
        raise ValueError(f"world_size must be >= 1, not {ws}")
    if not 0 <= r < ws:
        raise ValueError(f"rank must be in [0, world_size) = [0, {ws}), not {r}")
    return r, ws


def share_size(n: int, world_size: int, drop_last: bool) -> int:
    """How many rows each rank reads per epoch out of ``n``: ``ceil(n / world_size)`` (padded)
    or, with ``drop_last``, ``n // world_size``."""
    return n // world_size if drop_last else -(-n // world_size)


def rank_share(order: np.ndarray, rank: int, world_size: int, drop_last: bool) -> np.ndarray:
    """Rank ``rank``'s part of an epoch's ``order`` (int64 (n,), positions in the row set), by
    the rule of the module docs: int64 (:func:`share_size`,). With ``world_size == 1`` the order
    itself (nothing is padded or cut)."""
    order = np.asarray(order, dtype=np.int64)
    n = order.shape[0]
    if world_size == 1:
        return order
    total = share_size(n, world_size, drop_last) * world_size
    if total > n:  # padding (drop_last False): repeat the order from its start, as often as needed
        order = np.resize(order, total)
    else:
        order = order[:total]
    return np.ascontiguousarray(order[rank::world_size])
