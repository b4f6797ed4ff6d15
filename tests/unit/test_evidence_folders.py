"""Two commands started in the same second each get their own evidence folder: `kailab twin`,
`kailab run`, trial, compare, replay, fill and e2e make theirs through `evidence.new_folder` (or
`made_alone`), which takes <name>-2, -3, ... when another process made <name> first — never a
FileExistsError, never a folder shared by two runs."""

from __future__ import annotations

import datetime as dt
import multiprocessing

import pytest

from kailab import evidence
from kailab.evidence import EvidenceDir, made_alone, new_folder, stamp_of
from kailab.twin.compare import twins_folder

FROZEN = dt.datetime(2026, 11, 29, 3, 38, 20, 123456, tzinfo=dt.timezone.utc)


class _FrozenClock:
    """Stands in for the datetime module inside kailab.evidence: every call is the same instant."""
    timezone, date = dt.timezone, dt.date

    class datetime(dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return FROZEN if tz else FROZEN.replace(tzinfo=None)


@pytest.fixture
def same_second(monkeypatch):
    monkeypatch.setattr(evidence, "dt", _FrozenClock)


def test_two_folders_asked_for_in_the_same_second_are_two(tmp_path, same_second):
    first, second, third = (new_folder(tmp_path / "evidence", "twin") for _ in range(3))
    assert [p.name for p in (first, second, third)] == \
        ["twin-20261129T033820Z", "twin-20261129T033820Z-2", "twin-20261129T033820Z-3"]
    assert all(p.is_dir() for p in (first, second, third))
    assert [stamp_of(p, "twin") for p in (first, second)] == ["20261129T033820Z", "20261129T033820Z-2"]


def test_a_callers_folder_twice_in_one_second(tmp_path, same_second):
    """The twins' comparison folder, as `kailab twin --design A --design B` makes it."""
    a, b = twins_folder(tmp_path), twins_folder(tmp_path)
    assert a != b and a.is_dir() and b.is_dir()


def test_two_runs_of_one_exercise_in_the_same_millisecond(tmp_path, same_second):
    a, b = EvidenceDir(tmp_path, "gang"), EvidenceDir(tmp_path, "gang")
    assert a.path.name == "20261129T033820.123Z-gang" and b.path.name == "20261129T033820.123Z-gang-2"
    a.write("verdict.json", {"passed": True})
    assert not (b.path / "verdict.json").exists()


def _make(root, base, barrier, out):
    barrier.wait()
    out.put(made_alone(root, base).name)


def test_processes_racing_for_one_name_each_get_their_own(tmp_path):
    """Eight processes released at once, one name: eight folders, made with exist_ok=False."""
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(8), ctx.Queue()
    procs = [ctx.Process(target=_make, args=(tmp_path, "run-x", barrier, out)) for _ in range(8)]
    for p in procs:
        p.start()
    names = sorted(out.get(timeout=30) for _ in procs)
    for p in procs:
        p.join(timeout=30)
    assert names == sorted(["run-x"] + [f"run-x-{n}" for n in range(2, 9)])
    assert sorted(p.name for p in tmp_path.iterdir()) == names
