"""Run a function in ``P`` local processes that form a ``torch.distributed`` group.

How the site runs [`ring_attention`][attnlab.ring.ring_attention] on one CPU.
"""

from __future__ import annotations

import datetime
import os
import pickle
import queue
import traceback
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed import TCPStore  # type: ignore[attr-defined]

__all__ = ["JOIN_ATTEMPTS", "run_local"]


def _free_store(timeout: datetime.timedelta) -> TCPStore:
    """A rendezvous store on 127.0.0.1 at a port the OS picks (never a fixed port)."""
    return TCPStore("127.0.0.1", 0, is_master=True, timeout=timeout, wait_for_workers=False)


JOIN_ATTEMPTS = 3
"""How many times ``run_local`` starts the ranks when some rank fails to join the group."""


class _JoinError(RuntimeError):
    """A rank could not join the process group (before ``fn`` ran anywhere)."""


def _join(port_reader: Any, rank: int, world_size: int, timeout_s: float) -> None:
    """Get the store's port from the parent, then join the gloo group through it."""
    if not port_reader.poll(timeout_s):
        raise RuntimeError(f"no rendezvous port from the parent within {timeout_s} s")
    timeout = datetime.timedelta(seconds=timeout_s)
    store = TCPStore("127.0.0.1", port_reader.recv(), is_master=False, timeout=timeout)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size, timeout=timeout)


def _rank_main(
    fn: Callable[..., Any],
    rank: int,
    world_size: int,
    port_reader: Any,
    timeout_s: float,
    results: Any,
    args: tuple[Any, ...],
) -> None:
    """Body of one local process: join, run ``fn``, report to the parent, leave.

    The report is ``(rank, status, payload)``: status ``"ok"`` with ``fn``'s pickled
    result, ``"join"`` or ``"fn"`` with the traceback of a failure in that step.
    """
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"  # gloo talks over loopback only
    torch.set_num_threads(1)
    try:
        _join(port_reader, rank, world_size, timeout_s)
    except Exception:
        results.put((rank, "join", traceback.format_exc().encode()))
        return
    try:
        try:
            payload = (rank, "ok", pickle.dumps(fn(rank, world_size, *args)))
        finally:
            dist.destroy_process_group()
    except Exception:  # report any failure to the parent, which re-raises it
        payload = (rank, "fn", traceback.format_exc().encode())
    results.put(payload)


def _run_ranks(
    fn: Callable[..., Any], world_size: int, args: tuple[Any, ...], timeout_s: float
) -> list[Any]:
    """One attempt of ``run_local``: start the ranks, collect their results, clean up."""
    ctx = mp.get_context("fork")
    results = ctx.Queue()
    pipes = [ctx.Pipe(duplex=False) for _ in range(world_size)]  # (reader, writer) per rank
    processes = [
        ctx.Process(
            target=_rank_main,
            args=(fn, rank, world_size, reader, timeout_s, results, args),
            daemon=True,
        )
        for rank, (reader, _) in enumerate(pipes)
    ]
    outputs: dict[int, Any] = {}
    store = None
    finished = False
    try:
        for process in processes:
            process.start()
        # The store serves its clients from a thread of its own. Forking while that
        # thread runs can copy a lock it holds into a child, where nothing ever
        # releases it (a rank then hangs before joining): so every rank is forked
        # first, and is told the store's port once the store exists.
        store = _free_store(datetime.timedelta(seconds=timeout_s))
        for _, writer in pipes:
            writer.send(store.port)
        for _ in range(world_size):
            try:
                rank, status, payload = results.get(timeout=timeout_s)
            except queue.Empty:
                raise RuntimeError(f"no result from a rank within {timeout_s} s") from None
            if status == "join":
                raise _JoinError(f"rank {rank} could not join:\n{payload.decode()}")
            if status != "ok":
                raise RuntimeError(f"rank {rank} failed:\n{payload.decode()}")
            outputs[rank] = pickle.loads(payload)
        finished = True
    finally:
        for process in processes:
            # after a failure, the other ranks may wait on the failed one: stop them now
            process.join(timeout=5 if finished else 0)
            if process.is_alive():
                process.terminate()
                process.join()
        for reader, writer in pipes:
            reader.close()
            writer.close()
        del store
    return [outputs[rank] for rank in range(world_size)]


def run_local(
    fn: Callable[..., Any], world_size: int, *args: Any, timeout_s: float = 60.0
) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` in ``world_size`` local processes, one per rank.

    The processes are forked (so ``fn`` may be defined anywhere, a docs block included),
    join a gloo group that talks on 127.0.0.1 only (at a port the OS picks), and are
    always joined or terminated before this returns; ``fn``'s results must pickle.
    Joining can fail now and then on a loaded machine (gloo's connections; PyTorch's own
    gloo tests meet the same): then every rank is restarted, up to ``JOIN_ATTEMPTS``
    times. A failure inside ``fn`` is never retried. ``timeout_s`` bounds the
    rendezvous, each collective and the wait for results.

    Returns:
        ``[fn's result on rank 0, ..., on rank P - 1]``.

    Raises:
        RuntimeError: A rank raised in ``fn`` or timed out, or the ranks could not join
            in ``JOIN_ATTEMPTS`` attempts (the last traceback is in the message).
    """
    attempt = 1
    while True:
        try:
            return _run_ranks(fn, world_size, args, timeout_s)
        except _JoinError as failure:
            if attempt == JOIN_ATTEMPTS:
                raise RuntimeError(f"{failure} (attempt {attempt} of {JOIN_ATTEMPTS})") from None
            attempt += 1
