"""An imported Alibaba-format trace replayed through real KAI on its own fleet: every task runs,
GPU-model constraints land on nodes of those models, a fraction shares a GPU, CPU-only tasks run
too. Small files of the trace's format, written here (the real data stays in the user's clone)."""

from __future__ import annotations

import json

import pytest

from kailab.paths import state_dir
from alibaba_sample import clone

from helpers import kailab_cli

pytestmark = [pytest.mark.lab, pytest.mark.kai, pytest.mark.xdist_group("own_labs")]


def test_an_imported_trace_runs_on_its_fleet_with_its_constraints(tmp_path):
    env = {"KAILAB_EVIDENCE": str(tmp_path / "evidence")}
    out = tmp_path / "imported"
    imp = kailab_cli("trace", "import", "alibaba-gpu-2023", str(clone(tmp_path / "clusterdata")), "--out", str(out),
                     env=env, timeout=60)
    assert imp.returncode == 0, imp.stderr
    run = kailab_cli("replay", str(out / "trace.csv"), "--designs", str(out / "design-binpack.yaml"), "--fleet",
                     str(out / "fleet.yaml"), "--compress", "10", "--repeat", "1", "--expect", "all.completed >= 6",
                     env=env, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    [replay] = [p for p in (tmp_path / "evidence").iterdir() if p.name.startswith("replay-")]
    rec = json.loads((replay / "binpack" / "run-1" / "records.json").read_text())
    jobs = {j["name"]: j for j in rec["jobs"]}
    assert all(j["finished"] is not None for j in jobs.values()), jobs
    nodes = {i["job"]: i["node"] for i in rec["pod_intervals"]}
    assert nodes["openb-pod-0000"].startswith("v100m32-")  # gpu_spec V100M32
    assert nodes["openb-pod-0003"].startswith("t4-")  # gpu_spec T4, two GPUs
    assert nodes["openb-pod-0004"].startswith("v100m32-")  # V100M16|V100M32: the fleet has only the latter
    # this replay's labs only (replay-<its time>-<label>): another group's replay may run beside it
    assert not list(state_dir().glob(f"{replay.name.lower()}-*")), "the replay's lab was not taken down"
