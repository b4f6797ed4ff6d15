"""A replay whose trace rows name the kinds teams submit (`kind: pytorchjob`, `jobset`, `rayjob`,
`raycluster`, `lws`): each variant's lab runs their operators, every row is submitted as its kind and
KAI's podgrouper groups it, on two designs, one lab at a time. Its labs are its own, brought down at
the end."""

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


def _replay(tmp_path, trace_text: str, designs: dict[str, int]):
    """`kailab replay` of the trace on the tiny fleet, one design per name (team-a's quota), one lab at a
    time, at --compress 10; its evidence folder, after it passed."""
    trace = tmp_path / "t.csv"
    trace.write_text(trace_text)
    for name, team_a in designs.items():
        (tmp_path / f"{name}.yaml").write_text(two_teams(name, team_a))
    run = kailab_cli("replay", str(trace), "--designs", ",".join(str(tmp_path / f"{n}.yaml") for n in designs),
                     "--fleet", "tiny", "--compress", "10", "--repeat", "1", "--labs", "1",
                     env={"KAILAB_EVIDENCE": str(tmp_path / "evidence")}, timeout=1200)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    [out] = [p for p in (tmp_path / "evidence").iterdir() if p.name.startswith("replay-")]
    return out


def test_a_trace_of_pytorchjobs_and_jobsets_replays_on_two_designs(tmp_path):
    out = _replay(tmp_path, TRACE, {"even": 4, "a-first": 6})
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


# KubeRay's and LWS's kinds, beside a PyTorchJob and a Job, on the tiny fleet's 8 GPUs. team-a's rows come
# first and bind before team-b's arrive (2 s apart at --compress 10), and run past b-ray3's arrival: b-ray3
# (a RayJob of 3 pods) arrives when 2 GPUs are free and must wait, whole, until a-torch ends. Only team-b
# arrives later, so KAI never reclaims from team-b, over its quota in design a-first: a RayJob it reclaims
# is lost (test_a_rayjob_kai_reclaims_is_lost_and_the_replay_says_so), a race this trace had before
# (2026-11-29: team-a's a-rc arriving with b-ray3 running, one run in four)
RAY_TRACE = """arrival_s,queue,pods,gpus,duration_s,name,kind
0,team-a,3,1,120,a-torch,pytorchjob
20,team-a,1,1,120,a-single,job
40,team-b,2,1,60,b-ray,rayjob
60,team-b,3,1,60,b-ray3,rayjob
150,team-b,2,1,30,b-rc,raycluster
155,team-b,2,1,30,b-lws,lws
"""
ENDED_BY_KAILAB = ("b-ray", "b-ray3", "b-rc", "b-lws")


def test_a_trace_of_rayjobs_beside_pytorchjobs_replays_on_two_designs_each_ended_by_kailab(tmp_path):
    out = _replay(tmp_path, RAY_TRACE, {"even": 4, "a-first": 6})
    for design in ("even", "a-first"):
        lab = json.loads((out / design / "lab.json").read_text())
        assert (lab.get("stack") or {}).get("operators") == {"kubeflow": "v1.9.3", "ray": "v1.5.1", "lws": "v0.7.0"}, lab
        rec = json.loads((out / design / "run-1" / "records.json").read_text())
        jobs = {j["name"]: j for j in rec["jobs"]}
        # every row completes: the Job and the PyTorchJob by their pods' own end, the others ended by kailab
        for name, job in jobs.items():
            assert not job["refused"] and job["started"] is not None and job["finished"] is not None, job
            assert job.get("ended_by", "") == ("kailab" if name in ENDED_BY_KAILAB else ""), job
        intervals = rec["pod_intervals"]
        of = lambda name: [i for i in intervals if i["job"] == name]  # noqa: E731
        for name in ENDED_BY_KAILAB:
            pods = of(name)
            last = [i for i in pods if i["ended"] == "ended_by_kailab"]
            # KAI may evict a pod of it meanwhile (a reclaim, a consolidation: CI saw one) and its operator makes it
            # again: that pod is the job's evicted one; the pods kailab ended are its whole gang
            assert len(last) == jobs[name]["pods"] and {i["ended"] for i in pods} <= {"ended_by_kailab", "evicted"}, pods
            assert sum(i["ended"] == "evicted" for i in pods) == jobs[name]["evicted_pods"], (pods, jobs[name])
            # each pod of the gang kailab ended ran at least the row's duration first
            assert all(i["to"] - i["from"] >= jobs[name]["duration_s"] for i in last), pods
            # and kailab ended it then, not when the trace's last row was submitted (b-ray, 60 s, ran 100 s so)
            whole = max(i["from"] for i in last)
            assert jobs[name]["finished"] - whole < 2 * jobs[name]["duration_s"], (jobs[name], pods)
        # KAI gangs a RayJob's head and workers: the two RayJobs and the rows before them ask 9 GPUs of 8,
        # so one RayJob waits; while it waited, GPUs were free, fewer than its pods, and none of its pods took them
        later = max(("b-ray", "b-ray3"), key=lambda n: min(i["from"] for i in of(n)))
        free = free_while_waiting(intervals, jobs[later], fleet_gpus=8)
        assert any(1 <= f < jobs[later]["pods"] for f in free), (later, free, intervals)
        # the figures count the RayJobs' and the LWS's GPUs as delivered: team-b's 2x60 + 3x60 + 2x30 + 2x30 GPU-seconds
        figures = json.loads((out / design / "run-1" / "figures.json").read_text())
        assert figures["all"]["completed"] == 6 and figures["all"]["evicted_pods"] == 0, figures["all"]
        team_b = figures["queues"]["team-b"]
        assert team_b["gpu_hours_delivered"] == team_b["gpu_hours_requested"] == round(420 / 3600, 2), team_b
        # KAI's podgrouper grouped each pod under its kind's top owner
        grouper = (out / design / "run-1" / "logs" / "podgrouper.log").read_text()
        assert "Using PyTorchJob Grouper plugin" in grouper, grouper[-2000:]
        for name, kind in (("b-ray", "RayJob"), ("b-ray3", "RayJob"), ("b-rc", "RayCluster"), ("b-lws", "LeaderWorkerSet")):
            assert f"Found top owner: replay-run-1/{name}, kind: {kind}" in grouper, (name, kind)
        # a RayJob in InteractiveMode: KubeRay never asked Ray's dashboard (no fake node runs one) for its job
        ray_log = (out / design / "run-1" / "logs" / "ray-operator.log").read_text()
        assert "RayJob" in ray_log and "Failed to get job info" not in ray_log, ray_log[-2000:]
    assert not list(state_dir().glob(f"{out.name.lower()}-*")), "the replay's labs were not taken down"


# a RayJob of the fleet's 8 GPUs, team-b's (quota 2 in design a-first), running when team-a's Job of 4 arrives
# (its cluster long provisioned): KAI reclaims the GPUs team-a's quota promises
LOST_TRACE = """arrival_s,queue,pods,gpus,duration_s,name,kind
0,team-b,8,1,600,b-ray,rayjob
100,team-a,4,1,30,a-job,job
"""


def test_a_rayjob_kai_reclaims_is_lost_and_the_replay_says_so(tmp_path):
    """KAI evicts the RayJob whole (its gang) and KubeRay v1.5.1 makes no new head for a RayJob's cluster
    once provisioned: it never runs again. The replay does not wait for it (not timed out); its record says
    it failed, its head evicted, and the figures count it."""
    out = _replay(tmp_path, LOST_TRACE, {"a-first": 6})
    rec = json.loads((out / "a-first" / "run-1" / "records.json").read_text())
    jobs = {j["name"]: j for j in rec["jobs"]}
    ray, a_job = jobs["b-ray"], jobs["a-job"]
    assert a_job["finished"] is not None and not rec["timed_out"], (a_job, rec["timed_out"])
    assert ray["started"] is not None and ray["finished"] is None and ray["ended_by"] == "", ray
    assert ray["evicted_pods"] == 8, ray
    assert ray["outcome"] == "Failed (its head evicted: KubeRay makes no new head for a RayJob's cluster once provisioned)", ray
    # none of its pods ran again: every interval of it ended evicted, before team-a's job started; a worker
    # KubeRay made again between KAI's evictions (one run in four here) waits for good, and is listed
    ray_pods = [i for i in rec["pod_intervals"] if i["job"] == "b-ray"]
    assert len(ray_pods) == 8 and all(i["ended"] == "evicted" and i["to"] <= a_job["started"] + 1 for i in ray_pods), ray_pods
    assert {p["job"] for p in rec["pending_at_end"]} <= {"b-ray"}, rec["pending_at_end"]
    figures = json.loads((out / "a-first" / "run-1" / "figures.json").read_text())
    assert figures["queues"]["team-b"]["jobs_failed"] == 1 and figures["queues"]["team-b"]["completed"] == 0, figures
    # why, in KubeRay's words
    ray_log = (out / "a-first" / "run-1" / "logs" / "ray-operator.log").read_text()
    assert "skipping head creation to let RayJob controller handle the failure" in ray_log, ray_log[-2000:]
    scheduler = (out / "a-first" / "run-1" / "logs" / "scheduler.log").read_text()
    assert "reclaim" in scheduler.lower(), "KAI's scheduler log names no reclaim"


def free_gpus_at(intervals: list[dict], t: float, fleet_gpus: int, but: str) -> float:
    return fleet_gpus - sum(i["gpus"] for i in intervals if i["job"] != but and i["from"] <= t < i["to"])


def free_while_waiting(intervals: list[dict], job: dict, fleet_gpus: int) -> list[float]:
    """The fleet's free GPUs, piece by piece, from the job's submission to its first pod's bind."""
    start, first = job["submitted"], min(i["from"] for i in intervals if i["job"] == job["name"])
    cuts = sorted({start, first, *(t for i in intervals if i["job"] != job["name"] for t in (i["from"], i["to"])
                                   if start < t < first)})
    return [free_gpus_at(intervals, (a + b) / 2, fleet_gpus, job["name"]) for a, b in zip(cuts, cuts[1:])]
