"""The everyday 1/8 copy of Alibaba's GPU cluster (exercises/fills/alibaba-1of8.yaml) run as `make
exercises` runs it, through pytest's collection of exercises/fills/, on real KAI: the item passes,
its expectations (measured thresholds, the file says where from) held, and what must hold whatever
KAI decides holds in every step. Needs the trace registered (`kailab trace source alibaba-gpu-2023
PATH`; .ci/run fails without it): without it the item fails naming that command, and so does this."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from kailab.paths import PROJECT_ROOT, state_dir

# two labs of its own for 12-25 minutes (~900 CPU-s): `make test-full`, not `make test` (docs/dev/testing.md);
# the fill's path runs live in test_fill_live.py on a small generated trace
pytestmark = [pytest.mark.lab, pytest.mark.kai, pytest.mark.full, pytest.mark.xdist_group("fill_labs")]

SHIPPED = PROJECT_ROOT / "exercises" / "fills" / "alibaba-1of8.yaml"
LIMIT_S = 2400  # ~1,300 s under CI's three workers, ~700 s alone; a hung fill is stopped, not waited on


def test_the_1of8_copy_of_alibabas_cluster_passes_as_an_exercise_item(tmp_path):
    env = {**os.environ, "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "pytest", str(SHIPPED), "-p", "no:cacheprovider", "-q",
                             "-o", "addopts=", "--rootdir", str(PROJECT_ROOT), "--kailab-evidence", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=PROJECT_ROOT)
    try:
        out, err = proc.communicate(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        # Ctrl-C, as a user would: each design stops after its step and takes its lab down (a kill
        # would leave both labs running for the rest of the suite)
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        pytest.fail(f"the fill item took over {LIMIT_S} s (interrupted):\n{out[-3000:]}{err[-1000:]}")
    assert proc.returncode == 0, out[-4000:] + err[-2000:]
    [fill] = [p for p in tmp_path.iterdir() if p.name.startswith("fill-")]
    s = json.loads((fill / "fill.json").read_text())
    assert s["ok"] and s["errors"] == {} and s["expectations"], s["expectations"]
    assert all(e["held"] for e in s["expectations"])
    for name, seeds in s["curves"].items():
        for seed, rows in seeds.items():
            assert rows[-1]["arrived_pct"] >= 130, (name, seed, rows[-1])
            for r in rows:  # placed GPU never exceeds what arrived, nor the fleet
                assert r["allocated_pct"] <= min(r["arrived_pct"], 100) + 1e-6, (name, seed, r)
    # this fill's labs only (fill-<its time>-<design>): another worker's fill test may have labs up now
    assert not list(state_dir().glob(f"{fill.name.lower()}-*")), "the fill's labs were not taken down"
