"""Workload operators as data: the registry and its refusals, what a lab's record says of them, and the
manifests a run makes of an operator's kinds (labels on every pod template, how many pods it makes).
Their behaviour on a lab is tests/live/test_operators_live.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kailab import operators, workloads
from kailab.errors import KailabError

import cli_zygote

CONTAINER = {"name": "main", "image": "kailab.io/never-pulled"}


def _template(**labels) -> dict:
    return {"metadata": {"labels": dict(labels)}, "spec": {"containers": [dict(CONTAINER)]}}


def pytorchjob(master: int = 1, workers: int = 3) -> dict:
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "train"},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": master, "template": _template()},
                                             "Worker": {"replicas": workers, "template": _template(a="b")}}}}


def test_names_are_parsed_to_pinned_versions_in_registry_order():
    assert operators.parse("ray, kubeflow") == ("kubeflow@v1.9.3", "ray@v1.5.1")
    assert operators.parse(["lws", "jobset@v0.9.0"]) == ("jobset@v0.9.0", "lws@v0.7.0")
    assert operators.parse("") == ()
    # the versions KAI v0.17.0's go.mod pins
    assert {n: p["version"] for n, p in operators.pins().items()} == {
        "kubeflow": "v1.9.3", "jobset": "v0.10.1", "lws": "v0.7.0", "ray": "v1.5.1"}


@pytest.mark.parametrize("bad, says", [("kubeflow,spark", "unknown operator 'spark': choose from kubeflow, jobset, lws, ray"),
                                       ("ray@1.5", "'ray@1.5': a version looks like v1.2.3 (the pinned one: ray@v1.5.1)")])
def test_an_unknown_operator_or_version_is_one_line_naming_the_choices(bad, says):
    with pytest.raises(KailabError) as err:
        operators.parse(bad)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_each_operator_is_a_named_component_with_loopback_ports_and_its_own_build():
    for item in operators.parse("kubeflow,jobset,lws,ray"):
        op = operators.get(item)
        [process] = op.processes()
        assert op.recipe().binaries == {process: op.recipe().binaries[process]}
        assert op.recipe().module == operators.pins()[op.name]["module"] and op.recipe().version == op.version
        assert all(p.startswith(process + ".") for p in op.port_names())
        assert op.health_url(process, {p: 1234 for p in op.port_names()}).startswith("http://127.0.0.1:1234/")
    assert operators.get("ray@v1.4.2").version == "v1.4.2"


def test_the_kinds_an_operator_owns_are_found_and_a_lab_without_it_is_refused_by_name():
    assert operators.owner_of("kubeflow.org/v1", "PyTorchJob") == "kubeflow"
    assert operators.owner_of("ray.io/v1", "RayCluster") == "ray"
    assert operators.owner_of("batch/v1", "Job") is None
    with pytest.raises(KailabError) as err:
        operators.missing_for([pytorchjob(), {"apiVersion": "batch/v1", "kind": "Job"}], {"ray": "v1.5.1"}, "x.yaml: apply")
    assert str(err.value) == ("x.yaml: apply: PyTorchJob (kubeflow) needs its operator, which this lab does not run "
                              "(operators: ray): bring the lab up with `kailab up --operators ray,kubeflow`")
    operators.missing_for([pytorchjob()], {"kubeflow": "v1.9.3"}, "x")  # present: nothing said


def test_a_manifest_of_an_operator_kind_labels_every_pod_template_and_counts_its_pods():
    made = workloads.adopt(pytorchjob(), "ns", "team")
    templates = workloads.pod_templates(made)
    assert len(templates) == 2
    for t in templates:
        assert t["metadata"]["labels"][workloads.OWNER_LABEL] == "train"
        assert t["metadata"]["labels"][workloads.QUEUE_LABEL] == "team"
        assert t["spec"]["schedulerName"] == workloads.SCHEDULER_NAME
    assert templates[1]["metadata"]["labels"]["a"] == "b"  # the user's own labels kept
    assert made["metadata"]["labels"][workloads.QUEUE_LABEL] == "team"  # KAI reads the top owner's
    assert workloads.pods_made(made) == 4
    assert workloads.pods_made(pytorchjob()) == 0  # unlabelled: its pods are not the workload's


def test_pods_made_by_each_operator_kind():
    job = lambda replicas, parallelism: {"replicas": replicas, "template": {"spec": {  # noqa: E731
        "parallelism": parallelism, "template": _template(**{workloads.OWNER_LABEL: "x"})}}}
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "x"},
              "spec": {"replicatedJobs": [job(2, 2), job(1, 3)]}}
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "x"},
           "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 4, "workerTemplate": _template(**{workloads.OWNER_LABEL: "x"})}}}
    ray = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "x"},
           "spec": {"headGroupSpec": {"template": _template(**{workloads.OWNER_LABEL: "x"})},
                    "workerGroupSpecs": [{"replicas": 3, "template": _template(**{workloads.OWNER_LABEL: "x"})}]}}
    assert [workloads.pods_made(o) for o in (jobset, lws, ray)] == [7, 8, 4]


def test_up_refuses_an_unknown_operator_and_another_runtime_in_one_line_before_anything_starts(tmp_path):
    env = {"KAILAB_STATE": str(tmp_path / "state"), "PATH": "/usr/bin:/bin"}
    for args, says in [(["--operators", "kubeflow,nope"], "unknown operator 'nope'"),
                       (["--operators", "ray", "--runtime", "existing", "--kubeconfig", "/nonexistent"],
                        "the existing runtime runs no workload operators yet")]:
        done = cli_zygote.run(["up", "--name", "ops-refused", *args], env)
        assert done.returncode != 0 and says in done.stderr, done.stderr
        assert len([line for line in done.stderr.splitlines() if line.strip()]) == 1, done.stderr
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").iterdir())


# ---------------------------------------------------------------- the user's own KWOK stages
EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "stages-entrypoint-tester.yaml"


def test_the_users_stages_follow_kailabs_in_kwoks_configuration():
    from kailab import kwok_stages
    from kailab.runtimes.labkit import kwok_config_text

    stages = kwok_stages.load(EXAMPLE)
    assert [s["metadata"]["name"] for s in stages] == ["entrypoint-tester-exits"]
    text = kwok_config_text(1000, 1.0, kwok_stages.text(stages))  # a large fleet: kailab's heartbeat scaled, theirs untouched
    names = [d["metadata"]["name"] for d in yaml.safe_load_all(text) if d and d.get("kind") == "Stage"]
    assert names[-1] == "entrypoint-tester-exits" and all(n.startswith("kailab-") for n in names[:-1])


@pytest.mark.parametrize("doc, says", [
    ({"apiVersion": "v1", "kind": "Pod"}, "apiVersion/kind: 'v1'/'Pod' is not a KWOK Stage"),
    ({"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": "kailab-pod-running"}, "spec": {}},
     "metadata.name: 'kailab-pod-running': names starting with 'kailab-' are kailab's own stages"),
    ({"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": "s"},
      "spec": {"resourceRef": {"kind": "Pod"}, "next": {}}}, "spec.selector: missing"),
    ({"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": "s"},
      "spec": {"resourceRef": {"kind": "Deployment"}, "selector": {}, "next": {}}}, "spec.resourceRef.kind: 'Deployment'"),
])
def test_a_bad_stage_is_one_line_naming_its_file_document_and_field(tmp_path, doc, says):
    from kailab import kwok_stages
    from kailab.errors import InputError

    folder = tmp_path / "stages"
    folder.mkdir()
    (folder / "a.yaml").write_text(EXAMPLE.read_text())
    (folder / "b.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(InputError) as err:
        kwok_stages.load(folder)
    assert str(err.value).startswith(f"{folder / 'b.yaml'}: document 1: ") and says in str(err.value), str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("stack", ["kueue", "kueue+kai", "volcano"])
def test_a_stack_that_cannot_run_an_operators_kind_refuses_it_by_name(stack):
    from kailab.stacks import get_stack

    made = workloads.adopt(pytorchjob(), "ns", "team")
    with pytest.raises(KailabError) as err:
        get_stack(stack).workload_objects([made], "x.yaml: step 's' apply train")
    assert str(err.value).startswith(f"x.yaml: step 's' apply train PyTorchJob: not on the {stack} stack: ")
    assert "run it on the kai stack" in str(err.value)
    assert get_stack("kai").workload_objects([made], "x") == [made]  # KAI's podgrouper takes the kind as it is


def test_a_trace_row_names_its_kind_and_a_kind_a_replay_cannot_play_is_refused_with_why(tmp_path):
    from kailab.errors import InputError
    from kailab.replay import player
    from kailab.replay.trace import load_trace, operators_for

    head = "arrival_s,queue,pods,gpus,duration_s,name,kind,min_members\n"
    path = tmp_path / "t.csv"
    path.write_text(head + "0,a,4,1,60,t,pytorchjob,2\n1,a,3,1,60,s,jobset,1\n2,a,1,1,60,j,,1\n")
    trace = load_trace(path)
    assert [j.kind for j in trace.jobs] == ["pytorchjob", "jobset", "job"] and operators_for(trace) == ("kubeflow", "jobset")
    [torch] = player.job_objects(trace.jobs[0], "ns", 10)
    assert torch["kind"] == "PyTorchJob" and workloads.pods_made(torch) == 4
    specs = torch["spec"]["pytorchReplicaSpecs"]
    assert specs["Master"]["replicas"] == 1 and specs["Worker"]["replicas"] == 3
    assert torch["spec"]["runPolicy"] == {"schedulingPolicy": {"minAvailable": 2}}
    assert specs["Worker"]["template"]["spec"]["containers"][0]["name"] == "pytorch"
    assert specs["Worker"]["template"]["metadata"]["labels"][workloads.OWNER_LABEL] == "t"
    [jobset] = player.job_objects(trace.jobs[1], "ns", 10)
    assert jobset["kind"] == "JobSet" and workloads.pods_made(jobset) == 3
    for bad, says in (("spark", "unknown kind 'spark'"),
                      ("RayService", "unknown kind 'rayservice'")):
        path.write_text(head + f"0,a,1,1,60,x,{bad},1\n")
        with pytest.raises(InputError) as err:
            load_trace(path)
        assert f"{path}: row 1, field kind: {says}" in str(err.value) and "\n" not in str(err.value), str(err.value)

