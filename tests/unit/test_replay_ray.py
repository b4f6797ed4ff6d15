"""Trace rows of kind rayjob and raycluster: the objects a replay submits, and how a job kailab ends
(by deleting its object once its gang has run its duration) is recorded and counted."""

from __future__ import annotations

import pytest

from kailab import workloads
from kailab.errors import InputError
from kailab.replay import figures, player
from kailab.replay.trace import load_trace, operators_for


def _trace(tmp_path, rows: str):
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,queue,pods,gpus,duration_s,name,kind,min_members\n" + rows)
    return load_trace(path)


def test_a_rayjob_row_is_a_rayjob_in_interactive_mode_of_a_head_and_workers_that_run_until_deleted(tmp_path):
    trace = _trace(tmp_path, "0,a,4,2,60,r,rayjob,1\n1,a,3,1,60,m,rayjob,2\n2,a,1,1,60,h,raycluster,1\n")
    assert operators_for(trace) == ("ray",)
    [ray] = player.job_objects(trace.jobs[0], "ns", 10)
    assert ray["kind"] == "RayJob" and ray["apiVersion"] == "ray.io/v1"
    # no submitter pod, no call to Ray's dashboard: measured, see player.RAYJOB_SUBMISSION_MODE
    assert ray["spec"]["submissionMode"] == "InteractiveMode" and "entrypoint" not in ray["spec"]
    assert ray["metadata"]["labels"][workloads.QUEUE_LABEL] == "a"
    cluster = ray["spec"]["rayClusterSpec"]
    [workers] = cluster["workerGroupSpecs"]
    assert workers["replicas"] == 3 and "minReplicas" not in workers  # KAI then gangs head + 3 workers
    assert workloads.pods_made({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {}, "spec": cluster}) == 4
    for template in (cluster["headGroupSpec"]["template"], workers["template"]):
        assert template["metadata"]["labels"][workloads.OWNER_LABEL] == "r"
        assert workloads.RUN_DURATION_ANNOTATION not in (template["metadata"].get("annotations") or {})
        assert template["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"
        assert template["spec"]["schedulerName"] == workloads.SCHEDULER_NAME and "restartPolicy" not in template["spec"]
    [smaller] = player.job_objects(trace.jobs[1], "ns", 10)
    assert smaller["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["minReplicas"] == 1  # min_members 2: head + 1
    [alone] = player.job_objects(trace.jobs[2], "ns", 10)
    assert alone["kind"] == "RayCluster" and "workerGroupSpecs" not in alone["spec"] and workloads.pods_made(alone) == 1


def test_an_lws_row_is_one_group_of_a_leader_and_workers_gangs_whole_and_runs_until_deleted(tmp_path):
    trace = _trace(tmp_path, "0,a,4,1,60,l,lws,4\n")
    assert operators_for(trace) == ("lws",)
    [lws] = player.job_objects(trace.jobs[0], "ns", 10)
    assert lws["kind"] == "LeaderWorkerSet" and lws["spec"]["replicas"] == 1 and workloads.pods_made(lws) == 4
    template = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert workloads.RUN_DURATION_ANNOTATION not in (template["metadata"].get("annotations") or {})
    assert template["metadata"]["labels"][workloads.OWNER_LABEL] == "l" and "restartPolicy" not in template["spec"]
    with pytest.raises(InputError) as err:
        _trace(tmp_path, "0,a,4,1,60,l,lws,2\n")
    assert "row 1, field min_members: 2 for an LWS group of 4 pods" in str(err.value), str(err.value)


def _ledger(pods: dict[str, player.PodRecord], ended: dict[str, float]) -> player.Ledger:
    ledger = player.Ledger(pods=pods, planned={"r": 0.0, "j": 0.0}, submitted={"r": 0.0, "j": 0.0})
    ledger.ended.update(ended)
    return ledger


def test_a_job_kailab_ended_is_finished_at_its_end_and_its_gpus_are_delivered_not_lost(tmp_path):
    trace = _trace(tmp_path, "0,a,2,1,60,r,rayjob,1\n0,a,1,1,60,j,job,1\n")
    pods = {"r-head": player.PodRecord("r", seen=0.0, bound=1.0, gone=8.0),  # went with the RayJob at 7.5
            "r-w1": player.PodRecord("r", seen=0.0, bound=1.2, gone=3.0),  # evicted before: it came back
            "r-w2": player.PodRecord("r", seen=3.1, bound=1.5),  # still terminating at the run's end
            "j-0": player.PodRecord("j", seen=0.0, bound=1.0, succeeded=7.0)}
    clock = {"t0": 0.0, "end": 9.0, "wall_t0": 0.0, "wall_end": 9.0, "timed_out": False, "watch_errors": []}
    rec = player.records(trace, _ledger(pods, {"r": 7.5}), clock, compress=10)
    jobs = {j["name"]: j for j in rec["jobs"]}
    assert jobs["r"]["finished"] == 75.0 and jobs["r"]["ended_by"] == "kailab" and jobs["r"]["evicted_pods"] == 1
    assert jobs["j"]["finished"] == 70.0 and "ended_by" not in jobs["j"]
    ended = sorted((i["from"], i["ended"]) for i in rec["pod_intervals"] if i["job"] == "r")
    assert ended == [(10.0, "ended_by_kailab"), (12.0, "evicted"), (15.0, "ended_by_kailab")]
    f = figures.run_figures(rec, 8)["all"]
    assert f["completed"] == 2 and f["evicted_pods"] == 1
    # delivered: each pod that ran its duration (2 of r's, kailab ended; j's, succeeded) x 60 s x 1 GPU
    assert f["gpu_hours_delivered"] == round(3 * 60 / 3600, 2) and f["gpu_hours_lost_to_evictions"] == round(18 / 3600, 2)


def test_a_job_kailab_did_not_end_is_not_finished():
    trace_jobs = player.TraceJob(name="r", arrival_s=0, queue="a", pods=1, gpus=1, duration_s=60, kind="rayjob")
    trace = player.Trace(path=None, jobs=[trace_jobs])
    pods = {"r-head": player.PodRecord("r", seen=0.0, bound=1.0)}
    clock = {"t0": 0.0, "end": 9.0, "wall_t0": 0.0, "wall_end": 9.0, "timed_out": True, "watch_errors": []}
    ledger = _ledger(pods, {})
    ledger.end_errors["r"] = "ApiException: (500)"
    [job] = player.records(trace, ledger, clock, compress=10)["jobs"]
    assert job["finished"] is None and job["ended_by"] == "" and job["end_error"] == "ApiException: (500)"


def test_a_rayjob_whose_head_was_evicted_is_lost_even_with_a_worker_made_again():
    """KubeRay v1.5.1 makes no new head for a RayJob's cluster once provisioned: a RayJob KAI evicts is
    lost, even when KubeRay made a worker again between KAI's evictions (it stays Pending for good). Its
    record says so (a failed job, the waiting worker listed), and the replay does not wait for it."""
    job = player.TraceJob(name="r", arrival_s=0, queue="a", pods=2, gpus=1, duration_s=60, kind="rayjob")
    trace = player.Trace(path=None, jobs=[job])
    clock = {"t0": 0.0, "end": 9.0, "wall_t0": 0.0, "wall_end": 9.0, "timed_out": False, "watch_errors": []}
    lost = {"h": player.PodRecord("r", seen=0.0, bound=1.0, gone=3.0, head=True),
            "w": player.PodRecord("r", seen=0.0, bound=1.0, gone=3.0),
            "w-again": player.PodRecord("r", seen=2.9)}  # Pending: its gang has no head
    ledger = _ledger(lost, {})
    assert player.lost_jobs(ledger, {"r": "rayjob"}) == {"r"} and not player._live(ledger, {"r"})
    records = player.records(trace, ledger, clock, compress=10)
    [rec] = records["jobs"]
    assert rec["finished"] is None and rec["evicted_pods"] == 2 and rec["outcome"] == f"Failed ({player.HEAD_LOST})"
    assert records["pending_at_end"] == [{"job": "r", "seen": 29.0}]
    assert figures.run_figures(records, 8)["all"]["jobs_failed"] == 1
    # a head made again (its cluster not yet provisioned): not lost
    back = {**lost, "h2": player.PodRecord("r", seen=3.5, head=True)}
    assert player.lost_jobs(_ledger(back, {}), {"r": "rayjob"}) == set()
    [rec] = player.records(trace, _ledger(back, {}), clock, compress=10)["jobs"]
    assert rec["outcome"] == "" and rec["finished"] is None


def test_an_lws_evicted_and_never_made_again_failed():
    job = player.TraceJob(name="r", arrival_s=0, queue="a", pods=2, gpus=1, duration_s=60, kind="lws")
    clock = {"t0": 0.0, "end": 9.0, "wall_t0": 0.0, "wall_end": 9.0, "timed_out": False, "watch_errors": []}
    gone = {"l": player.PodRecord("r", seen=0.0, bound=1.0, gone=3.0), "w": player.PodRecord("r", seen=0.0, bound=1.0, gone=3.0)}
    [rec] = player.records(player.Trace(path=None, jobs=[job]), _ledger(gone, {}), clock, compress=10)["jobs"]
    assert rec["outcome"] == f"Failed ({player.LOST})"
    assert player.lost_jobs(_ledger(gone, {}), {"r": "lws"}) == set()  # only a RayJob's head is never made again


def test_a_pod_made_again_under_the_same_name_is_a_new_pod():
    """An LWS's pods are a StatefulSet's: one KAI evicts comes back with its name and a new uid."""
    ledger = player.Ledger()
    watch = player.PodWatch(kube=None, namespace="ns", ledger=ledger)

    def pod(uid, **status):
        return {"metadata": {"name": "w-0-1", "uid": uid, "labels": {workloads.OWNER_LABEL: "w"}},
                "spec": {"nodeName": "n1"}, "status": status}

    watch._see("ADDED", pod("u1"))
    watch._see("DELETED", pod("u1"))
    watch._see("ADDED", pod("u2"))
    first, again = ledger.pods["u1"], ledger.pods["u2"]
    assert first.gone is not None and again.gone is None and again.bound is not None
    assert player._live(ledger)


def test_kailab_ends_its_kinds_jobs_while_later_rows_wait_to_be_submitted():
    """Between two submissions the replay keeps ending what falls due: a RayJob's end waited for the last
    row's submission before (a RayJob of 60 s ran 100 s in a trace whose rows arrived until 155 s)."""
    import threading
    import time

    class Clock:  # an Ender whose next end is always 50 ms away: how often it is asked
        ticks = 0

        def tick(self) -> float:
            self.ticks += 1
            return 0.05

    ender, start = Clock(), time.monotonic()
    player.wait_ending(ender, threading.Event(), start + 0.5)
    assert time.monotonic() - start >= 0.5 and ender.ticks >= 5
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(KeyboardInterrupt):
        player.wait_ending(ender, cancel, time.monotonic() + 5)
