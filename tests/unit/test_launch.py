"""run_local: local processes in a gloo group on 127.0.0.1, failures reported, joins retried."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from attnlab import launch


def _fails(rank: int, world_size: int) -> None:
    raise ValueError(f"rank {rank} of {world_size}")


def test_run_local_reports_a_failing_rank() -> None:
    with pytest.raises(RuntimeError, match="ValueError: rank"):
        launch.run_local(_fails, 2)


def _world(rank: int, world_size: int) -> int:
    return int(torch.distributed.get_world_size())


def test_run_local_forks_every_rank_before_the_store_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The store serves from a thread of its own; a rank forked while it runs can inherit
    a lock held by that thread and hang before it joins. So no rank is forked after it."""
    import multiprocessing

    alive_at_store: list[int] = []
    make_store = launch._free_store

    def recording_store(timeout: Any) -> Any:
        alive_at_store.append(len(multiprocessing.active_children()))
        return make_store(timeout)

    monkeypatch.setattr(launch, "_free_store", recording_store)
    assert launch.run_local(_world, 3) == [3, 3, 3]
    assert alive_at_store == [3]


def _join_failing_once(marker: Path) -> Any:
    """A stand-in for ``launch._join`` whose first caller (across the forked ranks) fails
    the way gloo now and then does; everyone else joins for real."""
    real_join = launch._join

    def join(port_reader: Any, rank: int, world_size: int, timeout_s: float) -> None:
        try:
            marker.touch(exist_ok=False)
        except FileExistsError:
            return real_join(port_reader, rank, world_size, timeout_s)
        raise RuntimeError("Gloo connectFullMesh failed: Connection closed by peer (simulated)")

    return join


def test_run_local_starts_again_when_a_rank_cannot_join(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed join stops every rank and starts them all again; fn's results come back."""
    marker = tmp_path / "failed-once"
    monkeypatch.setattr(launch, "_join", _join_failing_once(marker))
    assert launch.run_local(_world, 3, timeout_s=20.0) == [3, 3, 3]
    assert marker.exists()


def test_run_local_gives_up_after_join_attempts(monkeypatch: pytest.MonkeyPatch) -> None:
    def never_joins(*_: Any) -> None:
        raise RuntimeError("Gloo connectFullMesh failed (simulated)")

    monkeypatch.setattr(launch, "_join", never_joins)
    with pytest.raises(RuntimeError, match=r"could not join:(.|\n)*simulated(.|\n)*attempt 3 of 3"):
        launch.run_local(_world, 2)


def _fails_recording_the_rank(rank: int, world_size: int, counter: Path) -> None:
    with counter.open("a") as file:
        file.write(f"{rank}\n")
    raise ValueError("inside fn")


def test_run_local_never_retries_a_failure_inside_fn(tmp_path: Path) -> None:
    counter = tmp_path / "calls"
    with pytest.raises(RuntimeError, match="ValueError: inside fn"):
        launch.run_local(_fails_recording_the_rank, 2, counter)
    assert sorted(counter.read_text().split()) == ["0", "1"]  # one attempt: each rank once
