"""A kind lab for real: KAI installed from its own chart (operator, admission webhook), KWOK and
fake-gpu-operator in the cluster, every image built here from source when no registry answers.

One lab for the module, in the order a user meets it: up, status, the exercises where the runtime
differs, then down, after which nothing of it is left: containers, networks, files.

The lab is the session's kind lab of the small fleet, the one the vCluster trial adopts as its host
(test_kind_host_vcluster_trial.py): both run in `make test`'s `alone` phase, the trial first, this
module after it and its `down` last (tests/conftest.py orders them), so the suite starts one kind
cluster for both instead of two (~300 s of a kind cluster's start and KAI's chart install)."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from kailab.exercise.runner import run_exercise
from kailab.exercise.load import load_exercise
from kailab.kube import Kube
from kailab.paths import exercises_dir, lab_dir
from kailab import labs
from kailab.runtimes import metrics
from kailab.runtimes.kind import metrics as kind_metrics
from kailab.runtimes.kind.host import current_docker_host
from kailab.runtimes.waits import wait_until
from kailab.testing.labs import kind_docker

import pod_endings
from helpers import kailab_cli
from top_scenario import EXPECTED, scene, shown, top_json

# alone: the light stream (beside the vCluster trial's host), with KAI's operator suites; its lab down last
pytestmark = [pytest.mark.kind(images="main"), pytest.mark.kai, pytest.mark.lab, pytest.mark.alone, pytest.mark.xdist_group("kind_light")]
FLEET = "small"


def _docker(*args: str) -> str:
    with kind_docker():
        return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=120).stdout


@pytest.fixture(scope="module")
def kind_lab(kailab_labs):
    return kailab_labs.get_kind(FLEET)


def test_up_installs_kai_from_its_chart_with_operator_and_webhook(kind_lab):
    assert kind_lab.runtime == "kind" and kind_lab.fleet == FLEET and kind_lab.state == "up"
    with kind_docker():
        info = labs.open(kind_lab).status()
    assert info["state"] == "up", info
    assert {"kai-operator", "admission", "kai-scheduler-default", "binder"} <= set(info["components"])
    assert all(c["state"] == "running" for c in info["components"].values()), info["components"]
    assert (info["nodes"], info["gpus"]) == (info["expected_nodes"], info["expected_gpus"])
    kube = Kube(kind_lab.kubeconfig)
    try:
        hooks = kube.list("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration")
        shards = kube.list("kai.scheduler/v1", "SchedulingShard")
    finally:
        kube.close()
    assert any("kai" in h["metadata"]["name"] for h in hooks), [h["metadata"]["name"] for h in hooks]
    assert shards, "KAI's operator objects (SchedulingShard) are there to configure the scheduler"


def test_the_clusters_dns_is_ready_on_kailabs_coredns(kind_lab):
    """kubeadm's CoreDNS runs kailab's CoreDNS build (a main linking the plugins a lab's Corefiles use): its
    pods are ready, which CoreDNS's `ready` plugin says only once every plugin of kubeadm's Corefile is (the
    kubernetes plugin's caches synced with the API server); a plugin missing from the build is a crash at start."""
    kube = Kube(kind_lab.kubeconfig)

    def ready():
        dns = kube.get("apps/v1", "Deployment", "coredns", "kube-system")
        return dns["spec"]["replicas"] >= 1 and dns["status"].get("readyReplicas", 0) == dns["spec"]["replicas"]

    try:
        wait_until("CoreDNS's pods ready", ready, timeout=120)
    finally:
        kube.close()


def test_the_images_a_lab_runs_come_in_the_node_image_and_up_loads_none_of_them(kind_lab):
    """KWOK's, fake-gpu-operator's, the metrics' and the default KAI version's images are baked into
    kailab's node image: `up`'s `kind load` (which saves every image it is given when any one is
    missing) is given none of them — with the default KAI, no `kind load` at all."""
    from kailab import versions
    from kailab.images import image_set
    from kailab.runtimes.kind.images import node_images

    s = image_set(kind_lab.kai_version)
    baked = [*s.base_images, *image_set(versions.DEFAULT_KAI).kai_images]
    with kind_docker():
        held = node_images(f"kailab-{kind_lab.name}-control-plane")
        ids = {ref: _docker("image", "inspect", "--format", "{{.Id}}", ref).strip() for ref in baked}
    assert s.base_images and all(held.get(ref) == ids[ref] != "" for ref in baked), (held, ids)
    loads = [line.split() for line in (lab_dir(kind_lab.name) / "logs" / "kind-runtime.log").read_text().splitlines()
             if line.startswith("$ kind load docker-image")]
    assert not any(set(load) & set(baked) for load in loads), loads
    if kind_lab.kai_version == versions.DEFAULT_KAI:
        assert loads == [], loads


def test_kai_runs_as_its_operator_renders_it_for_the_fleet_kailab_made(kind_lab):
    """The binder runs with --fake-gpu-nodes, which KAI's operator gives it only once fake-gpu-operator
    has marked the fleet's nodes: the lab is in the state any later reconcile of the operator (its own
    restart, say) renders, so nothing of KAI rolls out after `up` (a vCluster trial's host did)."""
    from kailab.stacks.kai import kind as kai_kind

    kube = Kube(kind_lab.kubeconfig)
    try:
        marked = [n["metadata"]["name"] for n in kube.list("v1", "Node", label_selector=f"{kai_kind.FAKE_GPU_LABEL}=true")]
        binder = kube.get("apps/v1", "Deployment", "binder", kai_kind.namespace())
        config = kube.get(kai_kind.CONFIG_API, kai_kind.CONFIG_KIND, kai_kind.CONFIG_NAME)
    finally:
        kube.close()
    assert marked, "fake-gpu-operator marked none of the fleet's nodes"
    assert kai_kind.FAKE_GPU_FLAG in binder["spec"]["template"]["spec"]["containers"][0]["args"], binder["spec"]
    assert config is not None


# What a kind lab does differently from a binary one, one exercise each: KAI's configuration through
# its operator's SchedulingShard (placement), a node failing in the cluster (node-failure), GPU sharing
# through fake-gpu-operator and a RuntimeClass (fractional), BindRequests committing a gang (gang), and
# eviction with pods ended by KWOK's Stage CRs (reclaim). Every other exercise runs the same way on both
# runtimes and passes on the binary one in test_lessons_live; the whole set on both side by side is
# `kailab bench compare-labs BINARY_LAB,KIND_LAB` (docs/dev/testing.md: what each tier covers).
KIND_SAMPLE = ("fractional", "gang", "node-failure", "placement", "reclaim")


def test_the_exercises_where_the_runtime_differs_pass_on_kind(kind_lab, tmp_path):
    """The sample passes against KAI installed from its chart; each name is a small-fleet exercise."""
    paths = [exercises_dir() / f"{name}.yaml" for name in KIND_SAMPLE]
    assert all(load_exercise(p).fleet == FLEET for p in paths), "the sample is of the kind lab's fleet"
    outcomes = [run_exercise(path, kind_lab, tmp_path) for path in paths]
    print("\n" + "\n".join(f"{o.exercise:28} {o.verdict}" for o in outcomes))
    failed = [o.report() for o in outcomes if o.verdict != "passed"]
    assert not failed, "\n".join(failed)
    runs = [json.loads((Path(o.evidence) / "run.json").read_text()) for o in outcomes]
    assert {r["runtime"] for r in runs} == {"kind"} and all("helm chart" in r["install"] for r in runs)


def test_a_kai_container_killed_in_the_cluster_is_a_death_with_how_it_ended(kind_lab):
    """The cluster restarts a killed KAI container itself; the runtime still reports it as a death,
    with the kubelet's account of how it ended and its previous instance's last log lines."""
    lab = labs.open(kind_lab)  # one Lab for the run: what log_mark marks, dead_components reads
    lab.log_mark()
    assert lab.dead_components(set()) == []
    node = f"kailab-{kind_lab.name}-control-plane"
    # the binder's process in the node: its image's entry point with the binder's own flag (not this
    # shell, whose own command line holds the flag too: /proc's pids come in string order, and once
    # pids grew past the binder's digits the shell came first and was "killed" instead)
    pids = _docker("exec", node, "sh", "-c", "for p in /proc/[0-9]*; do c=$(tr '\\0' ' ' < $p/cmdline 2>/dev/null); "
                   "case \"$c\" in sh\\ *) ;; *--resource-reservation-namespace*) echo ${p#/proc/};; esac; done").split()
    assert len(pids) == 1, pids
    pid = pids[0]
    _docker("exec", node, "kill", "-9", pid)
    dead = wait_until("the binder's restart to show", lambda: lab.dead_components(set()) or None,
                      timeout=60, hint=f"kubectl -n kai-scheduler get pods ({kind_lab.kubeconfig})")
    assert [name for name, _ in dead] == ["binder"]
    assert "exit code 137" in dead[0][1] and "its last log lines:" in dead[0][1], dead[0][1]


@pytest.mark.parametrize("check", [pod_endings.deleted_job_pod_fails_its_backoff_limit_0_job,
                                   pod_endings.pod_exiting_0_on_termination_ends_succeeded,
                                   pod_endings.conditions_set_before_deletion_stay_until_the_end,
                                   pod_endings.run_time_pods_complete_their_job], ids=lambda f: f.__name__)
def test_pods_end_as_kubelets_end_them(kind_lab, check):
    """The same KWOK stages as Stage CRs in the cluster: the checks test_pod_endings runs on a binary lab."""
    kube = Kube(kind_lab.kubeconfig)
    try:
        check(kube, "a100-0")
    finally:
        kube.close()


def _query(url: str, promql: str) -> list[dict]:
    args = urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(f"{url}/api/v1/query?{args}", timeout=10) as resp:  # noqa: S310
        return json.load(resp)["data"]["result"]


def test_prometheus_and_kube_state_metrics_are_lab_components_scraping_kai(kind_lab):
    lab = labs.open(kind_lab)
    with kind_docker():
        info = lab.status()
    assert {c: info["components"][c]["state"] for c in kind_metrics.DEPLOYMENTS} == \
        {"prometheus": "running", "kube-state-metrics": "running"}, info["components"]
    url = metrics.url(kind_lab.ports)
    assert url.startswith("http://127.0.0.1:") and info["prometheus"] == url
    assert lab.usage_db_url() == kind_metrics.IN_CLUSTER_URL
    # every target scraped, KAI's queue-controller (kai_queue_allocated_gpus: the usage KAI reads) among them
    wanted = {"queue-controller", "kai-scheduler-default", "kube-state-metrics"}

    def scraped() -> bool:
        up, down = {r["metric"]["job"] for r in _query(url, "up == 1")}, metrics.targets_down(kind_lab.ports)
        if not wanted <= up or down:  # said on timeout: which were up, and why the others were not
            raise AssertionError(f"up: {sorted(up)}; down: {down}")
        return True

    # a loaded machine's scrapes time out now and then (the earlier tests on this lab killed a KAI container)
    wait_until("every target scraped, KAI's and kube-state-metrics' among them", scraped, timeout=180)
    # KAI's default GPU capacity query, served by the real kube-state-metrics: the fleet's GPUs
    capacity = wait_until("the fleet's GPU capacity in Prometheus", lambda: _query(
        url, 'sum(kube_node_status_capacity{resource="nvidia_com_gpu"})'), timeout=60)
    assert float(capacity[0]["value"][1]) == kind_lab.gpus


def test_top_shows_what_it_shows_on_a_binary_lab(kind_lab):
    """The scene of tests/live/test_top_live.py, here on KAI installed from its chart: the same
    picture (EXPECTED is what both tests hold the picture to)."""
    with scene(Kube(kind_lab.kubeconfig)) as (_, q):
        assert shown(top_json("--name", kind_lab.name), q) == EXPECTED


def test_a_component_that_dies_during_a_run_is_named_with_its_last_lines(kind_lab):
    """On kind the cluster restarts a crashed container itself: the death shows as a restart since
    the run began, and the run's verdict names the component (runner.check_components)."""
    import subprocess

    lab = labs.open(kind_lab)  # one Lab for the run: what log_mark marks, dead_components reads
    lab.log_mark()  # a run begins
    assert lab.dead_components(set()) == []
    with kind_docker():
        out = subprocess.run(["docker", "exec", f"kailab-{kind_lab.name}-control-plane",
                              "pkill", "-f", "^/bin/prometheus"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    dead = wait_until("the restart to show", lambda: lab.dead_components(set()), timeout=120)
    assert [name for name, _ in dead] == ["prometheus"], dead
    assert lab.dead_components({"prometheus"}) == []
    with kind_docker():  # the cluster brought it back
        wait_until("prometheus running again",
                   lambda: lab.status()["components"]["prometheus"]["state"] == "running",
                   timeout=120)


def test_a_failed_up_says_what_the_cluster_held(kind_lab, tmp_path):
    """What a failed kind `up` adds to its error (the lab, and its log, may be gone when it is read): a
    node that is not Ready is named with its condition, and kwok-controller's INFO lines are left out."""
    from kailab.runtimes.kind.runtime import _diagnosis

    kube = Kube(kind_lab.kubeconfig)
    node = "kailab-not-ready"  # no KWOK annotation, no kubelet: nothing ever reports it Ready
    try:
        kube.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
        with kind_docker():
            text = _diagnosis(kind_lab.kubeconfig, {}, tmp_path / "log")
    finally:
        kube.delete("v1", "Node", node)
        kube.close()
    nodes = text.split("nodes not Ready:\n", 1)[1].split("\npods not Running:", 1)[0]
    assert nodes.splitlines() == [f"{node} Ready=none"], text  # the fleet's KWOK nodes are Ready: not listed
    assert "kwok-controller's last warnings and errors:" in text and '"level":"INFO"' not in text
    assert (tmp_path / "log").read_text().strip() == text


def test_down_leaves_no_container_network_or_file(kind_lab, kailab_labs):
    """`kailab down` as from a new shell, DOCKER_HOST unset: the lab is taken down in the engine it was
    made in (the tests' private one, when KAILAB_KIND_DOCKER_HOST names it), as its record says."""
    cluster = f"kailab-{kind_lab.name}"
    with kind_docker():
        made_in = current_docker_host()
    assert json.loads((lab_dir(kind_lab.name) / "lab.json").read_text())["docker_host"] == made_in
    out = kailab_cli("down", "--name", kind_lab.name, without=("DOCKER_HOST",), timeout=300)
    kailab_labs.forget(kind_lab.name)
    assert out.returncode == 0, out.stderr
    assert not lab_dir(kind_lab.name).exists()
    containers = _docker("ps", "-a", "--filter", f"label=io.x-k8s.kind.cluster={cluster}", "--format", "{{.Names}}")
    assert containers.strip() == ""
    volumes = _docker("volume", "ls", "--format", "{{json .}}")
    assert cluster not in volumes
    others = _docker("ps", "-a", "--filter", "label=io.x-k8s.kind.cluster", "--format", "{{.Names}}").strip()
    networks = json.loads(_docker("network", "ls", "--format", "{{json .Name}}").replace("\n", ",").rstrip(",").join("[]") or "[]")
    if not others:  # kind's shared network goes with the last kind cluster on the engine
        assert "kind" not in networks, networks
