"""A replay whose trace rows name the kinds teams submit (`kind: pytorchjob`, `jobset`): each variant's
lab runs their operators, every row is submitted as its kind and KAI's podgrouper groups it, on two
designs side by side. Its labs are its own, brought down at the end."""

from __future__ import annotations

import json

import pytest

from kailab.paths import state_dir
from kailab.testing.tiny_trace import two_teams

from helpers import kailab_cli

pytestmark = [pytest.mark.lab, pytest.mark.kai, pytest.mark.xdist_group("operator_labs")]

TRACE = """arrival_s,queue,pods,gpus,duration_s,name,kind
0,team-a,1,1,60,a-single,job
5,team-a,4,1,60,a-torch,pytorchjob
10,team-b,3,1,60,b-set,jobset
20,team-b,2,1,60,b-torch,pytorchjob
"""


def test_a_trace_of_pytorchjobs_and_jobsets_replays_on_two_designs(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text(TRACE)
    (tmp_path / "even.yaml").write_text(two_teams("even", 4))
    (tmp_path / "a-first.yaml").write_text(two_teams("a-first", 6))
    run = kailab_cli("replay", str(trace), "--designs", f"{tmp_path / 'even.yaml'},{tmp_path / 'a-first.yaml'}", "--fleet",
                     "tiny", "--compress", "10", "--repeat", "1", env={"KAILAB_EVIDENCE": str(tmp_path / "evidence")},
                     timeout=1200)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    [out] = [p for p in (tmp_path / "evidence").iterdir() if p.name.startswith("replay-")]
    for design in ("even", "a-first"):
        lab = json.loads((out / design / "lab.json").read_text())
        assert (lab.get("stack") or {}).get("operators") == {"kubeflow": "v1.9.3", "jobset": "v0.10.1"}, lab
        rec = json.loads((out / design / "run-1" / "records.json").read_text())
        jobs = {j["name"]: j for j in rec["jobs"]}
        assert not any(j["refused"] for j in jobs.values()), jobs
        # the first two rows run alone on the fleet at first: both start and end, in either design
        for name in ("a-single", "a-torch"):
            assert jobs[name]["started"] is not None and jobs[name]["finished"] is not None, jobs[name]
        # KAI's podgrouper grouped each by its kind (its log names the plugin it used)
        grouper = (out / design / "run-1" / "logs" / "podgrouper.log").read_text()
        for plugin in ("PyTorchJob", "JobSet", "BatchJob"):
            assert f"Using {plugin} Grouper plugin" in grouper, grouper[-2000:]
    assert not list(state_dir().glob(f"{out.name.lower()}-*")), "the replay's labs were not taken down"
