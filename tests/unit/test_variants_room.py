"""The variants room: every driver that compares runs its variants through one side-by-side runner."""

import ast
import threading
import time
from pathlib import Path

import pytest

from kailab.variants import at_once_for, side_by_side

KAILAB = Path(__file__).resolve().parents[2] / "kailab"
DRIVERS = ["compare.py", "trial.py", "twin/compare.py", "replay/session.py", "replay/fill.py", "e2e/session.py",
           "vcluster/run.py"]


def test_every_variant_runs_and_no_more_than_at_once_together():
    lock, now, most, ran = threading.Lock(), [0], [0], []

    def one(v):
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        time.sleep(0.05)
        with lock:
            now[0] -= 1
            ran.append(v)

    side_by_side(list(range(6)), one, at_once=2)
    assert sorted(ran) == list(range(6)) and most[0] == 2


def test_the_first_error_stops_the_others_and_is_raised_once_all_have_ended():
    stop, ended = threading.Event(), []

    def one(v):
        if v == "broken":
            raise RuntimeError("lab broken: etcd died")
        assert stop.wait(5), "the stop never came"  # a variant that watches the stop ends early
        ended.append(v)

    with pytest.raises(RuntimeError, match="etcd died"):
        side_by_side(["a", "broken", "b"], one, stop=stop)
    assert sorted(ended) == ["a", "b"]  # both had ended (their labs down) before the error came out


def test_at_once_is_asked_or_one_per_two_cores_never_more_than_the_variants():
    assert at_once_for(5, 3) == 3 and at_once_for(2, 8) == 2 and at_once_for(0) == 1
    assert 1 <= at_once_for(64) <= 64


@pytest.mark.parametrize("driver", DRIVERS)
def test_no_driver_runs_its_own_thread_pool(driver):
    """Each runs its variants through kailab/variants (duplicates and the drawing see one room)."""
    tree = ast.parse((KAILAB / driver).read_text())
    froms = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert "ThreadPoolExecutor" not in {a.name for n in froms for a in n.names}, driver
    assert any((n.module or "").split(".")[0] == "variants" for n in froms), f"{driver} runs nothing through kailab/variants"


def test_the_fanout_package_keeps_only_how_a_unit_runs_as_a_job():
    assert sorted(p.name for p in (KAILAB / "fanout").glob("*.py")) == ["__init__.py", "costs.py", "run.py", "unit.py"]
