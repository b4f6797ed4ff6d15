"""The exercise format: shipped exercises validate; every kind of mistake in a copy of
exercises/reclaim.yaml is refused with one line naming the file and the step/field; the JSON
Schema agrees with the loader on shipped files and on unknown keys."""

from __future__ import annotations

import copy

import jsonschema
import pytest
from helpers import assert_one_line_input_error
import yaml

from kailab import workloads
from kailab.errors import InputError
from kailab.exercise.load import load_exercise
from kailab.exercise.spec import Exercise, json_schema
from kailab.inputs import read_yaml
from kailab.paths import PROJECT_ROOT

EXERCISES = sorted((PROJECT_ROOT / "exercises").glob("*.yaml"))
STEP0 = "steps[0] (prod borrows research's idle share)"
STEP1 = "steps[1] (research comes back)"


@pytest.fixture(autouse=True)
def _shipped_fleets(monkeypatch):
    monkeypatch.delenv("KAILAB_FLEETS", raising=False)
    monkeypatch.delenv("KAILAB_EXERCISES", raising=False)


@pytest.fixture
def reclaim() -> dict:
    """A fresh, mutable copy of exercises/reclaim.yaml."""
    doc = yaml.safe_load((PROJECT_ROOT / "exercises" / "reclaim.yaml").read_text())
    assert doc["steps"][0]["name"] == "prod borrows research's idle share"
    assert doc["steps"][1]["name"] == "research comes back"
    # the mistakes below edit these items: say so plainly if reclaim.yaml changes shape
    assert "pods" in doc["steps"][0]["apply"][0]
    assert [sorted(e) for e in doc["steps"][1]["expect"][:3]] == [
        ["bound", "queue", "why"], ["evicted", "why", "workload"], ["bound", "queue"]]
    assert "eventReason" in doc["steps"][1]["expect"][3] and len(doc["steps"][1]["expect"]) == 4
    return copy.deepcopy(doc)


def write(tmp_path, doc: dict, name: str | None = None):
    """Write `doc` as <its exercise name>.yaml (or `name`.yaml) in a directory of its own."""
    name = name or doc["exercise"]
    folder = tmp_path / "ex"
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def refused(path, *fragments: str) -> str:
    return assert_one_line_input_error(load_exercise, path, *fragments)


# ----------------------------------------------------------------------------- shipped exercises
def test_there_are_shipped_exercises():
    assert EXERCISES, "exercises/ holds no *.yaml"


@pytest.mark.parametrize("path", EXERCISES, ids=[p.stem for p in EXERCISES])
def test_shipped_exercise_validates(path):
    ex = load_exercise(path)
    assert isinstance(ex, Exercise)
    assert ex.exercise == path.stem
    assert ex.steps


def test_reclaim_reads_as_written(reclaim):
    ex = load_exercise(PROJECT_ROOT / "exercises" / "reclaim.yaml")
    assert ex.fleet == reclaim["fleet"]
    assert [n for n, _, _ in ex.queue_tree()] == ["lab", "research", "prod"]
    assert ex.leaf_queues() == {"research", "prod"}
    pods = reclaim["steps"][0]["apply"][0]["pods"]
    assert ex.steps[0].apply[0].workload.priority_class == pods.get("priorityClass", "train")
    prod = reclaim["queues"]["lab"]["children"]["prod"]["gpu"]
    assert ex.queues["lab"].children["prod"].gpu.over_quota_weight == prod.get("overQuotaWeight", 1)
    raw_event = reclaim["steps"][1]["expect"][3]
    event = ex.steps[1].expect[3]
    assert event.event_reason == raw_event["eventReason"]
    assert event.count.min == raw_event["count"]["min"]


def test_unmodified_copy_validates(tmp_path, reclaim):
    assert load_exercise(write(tmp_path, reclaim)).exercise == "reclaim"


# ----------------------------------------------------------------------------- mistakes
def _set(where: list, value):
    def mutate(doc):
        target = doc
        for key in where[:-1]:
            target = target[key]
        target[where[-1]] = value
    return mutate


def _pods(**changes):
    return lambda doc: doc["steps"][0]["apply"][0]["pods"].update(changes)


def _expect(item: dict):
    return lambda doc: doc["steps"][1]["expect"].append(item)


def _dup_queue(doc):
    doc["queues"]["lab"]["children"]["prod"]["children"] = {"research": {"gpu": {"quota": 1}}}


def _gang(doc):
    doc["steps"][0]["apply"][0] = {"job": {"name": "prod-train", "queue": "prod", "parallelism": 2, "gang": 4}}


MISTAKES = [
    ("unknown-step-field", _set(["steps", 1, "colour"], "red"), [f"{STEP1}.colour", "unknown step field"]),
    ("unknown-step-field-first-step", _set(["steps", 0, "expects"], []), [f"{STEP0}.expects", "unknown step field"]),
    ("unknown-expect-field", _set(["steps", 1, "expect", 0, "colour"], 1), [f"{STEP1}.expect[0].colour", "unknown field"]),
    ("unknown-event-expect-field", _set(["steps", 1, "expect", 3, "colour"], 1),
     [f"{STEP1}.expect[3].colour", "unknown field"]),
    ("unknown-workload-field", _pods(colour="red"), [f"{STEP0}.apply[0].pods.colour", "unknown field"]),
    ("unknown-queue-field", _set(["queues", "lab", "gpu", "weight"], 2), ["queues.lab.gpu.weight", "unknown field"]),
    ("queue-not-in-tree", _pods(queue="nope"), [f"{STEP0}.apply[0].pods.queue", "'nope' is not in the queue tree"]),
    ("non-leaf-queue", _pods(queue="lab"), [f"{STEP0}.apply[0].pods.queue", "'lab' has children"]),
    ("pod-larger-than-any-node", _pods(gpus=16),
     [f"{STEP0}.apply[0].pods.gpus", "16 GPUs per pod", "'small'", "(8)", "unschedulable: true"]),
    ("queue-twice-in-tree", _dup_queue, ["queues", "'research' appears twice"]),
    ("delete-never-applied", _set(["steps", 1, "delete"], [{"workload": "ghost"}]),
     [f"{STEP1}.delete[0].workload", "'ghost'"]),
    ("expect-unknown-workload", _set(["steps", 1, "expect", 1, "workload"], "ghost"), [f"{STEP1}.expect[1]", "'ghost'"]),
    ("event-unknown-workload", _set(["steps", 1, "expect", 3, "workload"], "ghost"), [f"{STEP1}.expect[3]", "'ghost'"]),
    ("condition-unknown-workload",
     lambda d: d["steps"][1]["expect"].append({"podgroupOf": "ghost", "reason": "OverLimit"}),
     [f"{STEP1}.expect[4]", "'ghost'"]),
    ("expect-workload-of-later-step", _set(["steps", 0, "expect", 0], {"workload": "research-train", "bound": 0}),
     [f"{STEP0}.expect[0]", "'research-train'"]),
    ("expect-unknown-queue", _set(["steps", 1, "expect", 0, "queue"], "nope"), [f"{STEP1}.expect[0].queue", "'nope'"]),
    ("stays-unknown-workload", _set(["steps", 0, "stays"], {"for": "10s", "that": [{"workload": "ghost", "bound": 1}]}),
     [f"{STEP0}.stays.that[0]", "'ghost'"]),
    ("gang-larger-than-parallelism", _gang, [f"{STEP0}.apply[0].job", "gang 4 is larger than parallelism 2"]),
    ("range-min-above-max-event", _set(["steps", 1, "expect", 3, "count"], {"min": 5, "max": 2}),
     [f"{STEP1}.expect[3].count", "min 5 is greater than max 2"]),
    ("range-min-above-max-bound", _set(["steps", 1, "expect", 0, "bound"], {"min": 5, "max": 2}),
     [f"{STEP1}.expect[0].bound", "min 5 is greater than max 2"]),
    ("range-empty", _set(["steps", 1, "expect", 0, "bound"], {"why": "no bounds"}),
     [f"{STEP1}.expect[0].bound", "needs min, max or both"]),
    ("negative-count", _set(["steps", 1, "expect", 0, "bound"], -3), [f"{STEP1}.expect[0].bound", "greater than or equal"]),
    ("pods-count-zero", _pods(count=0), [f"{STEP0}.apply[0].pods.count", "greater than or equal to 1"]),
    ("pods-count-string", _pods(count="many"), [f"{STEP0}.apply[0].pods.count", "valid integer, not 'many' (write a whole number, like 2)"]),
    ("bad-timeout", _set(["steps", 1, "timeout"], "15 seconds"), [f"{STEP1}.timeout", "pattern"]),
    ("bad-settle", _set(["steps", 1, "settle"], "15 seconds"), [f"{STEP1}.settle", "pattern"]),
    ("bad-run-duration", _pods(runDuration="15 seconds"), [f"{STEP0}.apply[0].pods.runDuration", "pattern"]),
    ("bad-stays-for", _set(["steps", 0, "stays"], {"for": "15 seconds", "that": [{"queue": "prod", "bound": 1}]}),
     [f"{STEP0}.stays.for", "pattern"]),
    ("stays-object-unknown-workload", _set(["steps", 0, "stays"], {"for": "15s", "that": [{"object": "Pod", "of": "x"}]}),
     [f"{STEP0}.stays.that[0]", "'x'"]),
    ("object-unknown-kind", _expect({"object": "Secret", "name": "x"}), [f"{STEP1}.expect[4].object", "'Pod'"]),
    ("object-chooses-nothing", _expect({"object": "Pod"}), [f"{STEP1}.expect[4]", "by name, of (a workload) or labelSelector"]),
    ("object-bad-regex", _expect({"object": "Pod", "of": "prod-train", "match": {"status": {"phase": {"regex": "("}}}}),
     [f"{STEP1}.expect[4]", "match.status.phase.regex: not a regular expression"]),
    ("object-min-above-max", _expect({"object": "BindRequest", "of": "prod-train",
                                      "match": {"spec": {"receivedGPU": {"portion": {"min": 1, "max": 0.5}}}}}),
     [f"{STEP1}.expect[4]", "portion: min 1 is greater than max 0.5"]),
    ("object-queue-of-a-workload", _expect({"object": "Queue", "of": "prod-train"}), [f"{STEP1}.expect[4]", "by name"]),
    ("object-unknown-workload", _expect({"object": "PodGroup", "of": "ghost"}), [f"{STEP1}.expect[4]", "'ghost'"]),
    ("object-unknown-queue", _expect({"object": "Queue", "name": "nope"}), [f"{STEP1}.expect[4].name", "'nope'"]),
    ("object-unknown-node", _expect({"object": "Node", "name": "z-9"}), [f"{STEP1}.expect[4].name", "'z-9'"]),
    ("object-unknown-placeholder", _expect({"object": "PodGroup", "of": "prod-train",
                                            "match": {"spec": {"queue": "${queue:nope}"}}}),
     [f"{STEP1}.expect[4]", "unknown name ${queue:nope}", "${queue:prod}"]),
    ("object-count-negative", _expect({"object": "Pod", "of": "prod-train", "count": -1}), [f"{STEP1}.expect[4].count"]),
    ("on-unknown-node", _expect({"workload": "prod-train", "bound": 1, "on": {"node": "z-9"}}),
     [f"{STEP1}.expect[4].on.node", "'z-9' is not in fleet 'small'"]),
    ("on-node-and-selector", _expect({"workload": "prod-train", "bound": 1,
                                      "on": {"node": "a100-0", "nodeSelector": {"zone": "b"}}}),
     [f"{STEP1}.expect[4].on", "exactly one of: node, nodeSelector"]),
    ("on-selector-matches-nothing", _expect({"workload": "prod-train", "bound": 1, "on": {"nodeSelector": {"zone": "q"}}}),
     [f"{STEP1}.expect[4].on.nodeSelector", "no node of fleet 'small'"]),
    ("on-pending", _expect({"workload": "prod-train", "pending": 1, "on": {"node": "a100-0"}}),
     [f"{STEP1}.expect[4]", "a pending pod is on none"]),
    ("nodes-unknown-node", _set(["steps", 1, "nodes"], [{"node": "z-9", "cordon": True}]),
     [f"{STEP1}.nodes[0].node", "'z-9'"]),
    ("nodes-nothing-to-do", _set(["steps", 1, "nodes"], [{"node": "a100-0"}]),
     [f"{STEP1}.nodes[0]", "needs one of: label"]),
    ("nodes-reserved-label", _set(["steps", 1, "nodes"], [{"node": "a100-0", "unlabel": ["kailab.io/pool"]}]),
     [f"{STEP1}.nodes[0]", "'kailab.io/pool' is set by kailab", "reserved: true"]),
    ("nodes-bad-label", _set(["steps", 1, "nodes"], [{"node": "a100-0", "label": {"bad key": "x"}}]),
     [f"{STEP1}.nodes[0]", "'bad key' is not a valid label key"]),
    ("nodes-bad-taint", _set(["steps", 1, "nodes"], [{"node": "a100-0", "taint": [{"key": "k", "effect": "Sometimes"}]}]),
     [f"{STEP1}.nodes[0].taint[0].effect"]),
    ("nodes-selector-matches-nothing", _set(["steps", 1, "nodes"], [{"nodeSelector": {"rack": "r9"}, "cordon": True}]),
     [f"{STEP1}.nodes[0].nodeSelector", "no node of fleet 'small'"]),
    ("nodes-cordon-and-uncordon", _set(["steps", 1, "nodes"], [{"node": "a100-0", "cordon": True, "uncordon": True}]),
     [f"{STEP1}.nodes[0]", "cancel out"]),
    ("manifest-unknown-placeholder", lambda d: d["steps"][1]["apply"].append({"manifest": {"object": {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"q": "${queue}"}}}}),
     [f"{STEP1}.apply[1].manifest.object", "unknown name ${queue}"]),
    ("expect-neither-queue-nor-workload", _set(["steps", 1, "expect", 0], {"bound": 1}),
     [f"{STEP1}.expect[0]", "exactly one of: queue, workload"]),
    ("apply-two-kinds", _set(["steps", 0, "apply", 0, "job"], {"name": "j", "queue": "prod", "parallelism": 1}),
     [f"{STEP0}.apply[0]", "exactly one of: pods, job, deployment"]),
    ("patch-unknown-queue", _set(["steps", 1, "patch"], [{"queue": "nope", "gpu": {"quota": 1}}]),
     [f"{STEP1}.patch[0].queue", "'nope'"]),
    ("patch-unknown-deployment", _set(["steps", 1, "patch"], [{"deployment": "web", "replicas": 2}]),
     [f"{STEP1}.patch[0].deployment", "'web'"]),
    ("workload-name-invalid", _pods(name="Prod_Train"), [f"{STEP0}.apply[0].pods.name", "'Prod_Train'"]),
    ("queue-name-invalid", _set(["queues", "lab", "children", "Prod_Queue"], {}), ["queues.Prod_Queue", "valid name"]),
    ("unknown-invariant", _set(["invariants"], ["no-gpu-overcommit", "fast"]), ["invariants[1]"]),
    ("missing-steps", lambda d: d.pop("steps"), ["steps", "required field is missing"]),
    ("empty-queues", _set(["queues"], {}), ["queues", "at least 1"]),
    ("step-not-a-mapping", lambda d: d["steps"].append("do things"), ["steps[2] (?)", "valid dictionary"]),
    ("unknown-fleet", _set(["fleet"], "huge"), ["fleet", "unknown fleet 'huge'"]),
    ("unknown-top-level-key", _set(["author"], "me"), ["author", "unknown field"]),
    ("step-name-with-newline", lambda d: d["steps"][1].update(name="research\ncomes back", colour=1),
     ["steps[1] (research\\ncomes back).colour"]),
    ("queue-name-with-newline", _set(["queues", "lab", "children", "a\nb"], {}), ["queues.a\\nb"]),
    ("unknown-key-with-newline", _set(["x\ny"], 1), ["x\\ny", "unknown field"]),
    ("wait-unknown-queue", _set(["steps", 1, "expect", 0], {"waitOf": "nope", "p99": {"max": 30}}),
     [f"{STEP1}.expect[0].waitOf", "'nope' is not in the queue tree"]),
    ("wait-no-bound", _set(["steps", 1, "expect", 0], {"waitOf": "prod"}),
     [f"{STEP1}.expect[0]", "at least one of: p50, p95, p99, max"]),
    ("wait-negative", _set(["steps", 1, "expect", 0], {"waitOf": "prod", "p99": {"max": -1}}),
     [f"{STEP1}.expect[0].p99.max", "greater than or equal to 0"]),
    ("usage-bad-window", _set(["steps", 0, "scheduler"], {"usage": {"windowSize": "1 week"}}),
     [f"{STEP0}.scheduler.usage.windowSize", "pattern"]),
    ("usage-k-value-zero", _set(["steps", 0, "scheduler"], {"usage": {"kValue": 0}}),
     [f"{STEP0}.scheduler.usage.kValue", "greater than 0"]),
    ("usage-tumbling-window", _set(["steps", 0, "scheduler"], {"usage": {"windowType": "tumbling"}}),
     [f"{STEP0}.scheduler.usage.windowType", "unknown field"]),
]


@pytest.mark.parametrize("mutate, fragments", [(m, f) for _, m, f in MISTAKES], ids=[i for i, _, _ in MISTAKES])
def test_mistake_is_refused_with_one_line(tmp_path, reclaim, mutate, fragments):
    mutate(reclaim)
    refused(write(tmp_path, reclaim, "reclaim"), *fragments)


def test_exercise_name_must_match_file_name(tmp_path, reclaim):
    path = write(tmp_path, reclaim, "other")
    refused(path, "exercise", "'reclaim' differs from the file name 'other'")


def test_exercise_name_must_be_a_name(tmp_path, reclaim):
    reclaim["exercise"] = "Reclaim"
    refused(write(tmp_path, reclaim), "exercise", "'Reclaim' is not a valid name")


def test_unschedulable_allows_a_pod_larger_than_any_node(tmp_path, reclaim):
    _pods(gpus=16, unschedulable=True)(reclaim)
    ex = load_exercise(write(tmp_path, reclaim))
    assert ex.steps[0].apply[0].workload.gpus == 16


def test_pod_as_large_as_the_largest_node_is_fine(tmp_path, reclaim):
    _pods(gpus=8, count=4)(reclaim)
    assert load_exercise(write(tmp_path, reclaim)).steps[0].apply[0].workload.gpus == 8


def test_largest_node_depends_on_the_fleet(tmp_path, reclaim):
    """8 GPUs fit a node of 'small' but not of 'tiny' (4 per node)."""
    _pods(gpus=8)(reclaim)
    reclaim["fleet"] = "tiny"
    refused(write(tmp_path, reclaim), f"{STEP0}.apply[0].pods.gpus", "'tiny'", "(4)")


def test_valid_ranges_and_durations(tmp_path, reclaim):
    reclaim["steps"][1]["expect"][0]["bound"] = {"min": 16, "max": 16, "why": "exact"}
    reclaim["steps"][1]["expect"][1]["bound"] = {"max": 16}
    reclaim["steps"][1]["timeout"] = "2m"
    reclaim["steps"][1]["settle"] = "500ms"
    reclaim["steps"][0]["stays"] = {"for": "1.5s", "that": [{"queue": "prod", "bound": {"min": 0}}]}
    ex = load_exercise(write(tmp_path, reclaim))
    assert str(ex.steps[1].expect[0].bound) == "16..16"
    assert str(ex.steps[1].expect[1].bound) == "<= 16"


def test_delete_and_patch_of_applied_workloads(tmp_path, reclaim):
    reclaim["steps"][0]["apply"].append({"deployment": {"name": "web", "queue": "prod", "replicas": 1}})
    reclaim["steps"][1]["patch"] = [{"deployment": "web", "replicas": 0},
                                    {"queue": "prod", "gpu": {"quota": 8, "limit": 16}}]
    reclaim["steps"][1]["delete"] = [{"workload": "prod-train"}]
    ex = load_exercise(write(tmp_path, reclaim))
    assert ex.steps[1].delete[0].workload == "prod-train"


def test_invalid_yaml_and_alias(tmp_path):
    folder = tmp_path / "ex"
    folder.mkdir()
    broken = folder / "broken.yaml"
    broken.write_text("exercise: broken\nsteps: [\n")
    refused(broken, "line", "not valid YAML")
    alias = folder / "alias.yaml"  # an alias is fine; the unknown key it helped write is not
    alias.write_text("exercise: alias\nq: &q {lab: {}}\nqueues: *q\n")
    with pytest.raises(InputError) as raised:  # every problem, a line each: the missing fields and `q`
        load_exercise(alias)
    lines = str(raised.value).splitlines()
    assert f"{alias}: title: required field is missing (add it)" in lines, lines
    assert f"{alias}: q: unknown field (remove it or check its spelling)" in lines, lines


def test_missing_exercise_file(tmp_path):
    refused(tmp_path / "nope.yaml", "not found")


# ----------------------------------------------------------------------------- JSON Schema
@pytest.fixture(scope="module")
def validator():
    schema = json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_schema_uses_the_yaml_names():
    text = str(json_schema())
    for alias in ("priorityClass", "overQuotaWeight", "'for'", "podgroupOf", "eventReason", "runDuration",
                  "labelSelector", "nodeSelector", "'object'", "'untaint'", "'uncordon'", "'on'"):
        assert alias in text, alias
    for python_name in ("priority_class", "over_quota_weight", "for_", "podgroup_of", "event_reason",
                        "label_selector", "node_selector"):
        assert python_name not in text, python_name


@pytest.mark.parametrize("path", EXERCISES, ids=[p.stem for p in EXERCISES])
def test_schema_accepts_shipped_exercise(validator, path):
    doc = read_yaml(path)  # kailab reads YAML 1.2 booleans: `on:` is a key, not True
    errors = [e.message for e in validator.iter_errors(doc)]
    assert errors == []


def test_schema_and_loader_agree_on_every_alias(tmp_path, validator, reclaim):
    reclaim["steps"][0]["stays"] = {"for": "5s", "that": [{"queue": "research", "bound": 0}]}
    reclaim["steps"][1]["expect"].append({"podgroupOf": "prod-train", "reason": "OverLimit", "present": False})
    reclaim["steps"][1]["apply"].append(
        {"job": {"name": "burst", "queue": "research", "parallelism": 2, "gang": 2, "runDuration": "30s",
                 "priorityClass": "build", "preemptible": False}})
    assert list(validator.iter_errors(reclaim)) == []
    load_exercise(write(tmp_path, reclaim))


def test_schema_rejects_unknown_top_level_key(validator, reclaim):
    reclaim["author"] = "me"
    errors = list(validator.iter_errors(reclaim))
    assert errors and any("author" in e.message for e in errors)


def test_schema_rejects_unknown_step_field(validator, reclaim):
    reclaim["steps"][1]["colour"] = "red"
    assert not validator.is_valid(reclaim)


def test_step_operations_run_in_the_order_written(tmp_path, reclaim):
    step = reclaim["steps"][1]
    reordered = {"name": step["name"], "expect": step["expect"], "apply": step["apply"], "stays": step["stays"]}
    reclaim["steps"][1] = reordered
    ex = load_exercise(write(tmp_path, reclaim))
    assert [k for k, _ in ex.steps[1].operations()] == ["expect", "apply", "stays"]
    assert [k for k, _ in ex.steps[0].operations()] == ["apply", "expect"]


def test_an_expectation_naming_two_kinds_is_refused_not_guessed(tmp_path, reclaim):
    reclaim["steps"][1]["expect"][3]["podgroupOf"] = "prod-train"  # an Evict event item, now also a condition
    refused(write(tmp_path, reclaim), STEP1, "expect[3] names podgroupOf and eventReason: one kind per item")


def test_topology_constraints_name_a_level_of_the_exercises_topology(tmp_path, reclaim):
    reclaim["steps"][0]["apply"][0]["pods"]["topology"] = {"required": "kailab.io/rack"}
    refused(write(tmp_path, reclaim), f"{STEP0}.apply[0].pods.topology.required", "not a level",
            "none (add topology:)")
    reclaim["topology"] = ["topology.kubernetes.io/zone", "kailab.io/rack"]
    ex = load_exercise(write(tmp_path, reclaim))
    pod = ex.steps[0].apply[0].manifests("ns", "q", "x-topology")[0]
    assert pod["metadata"]["annotations"]["kai.scheduler/topology-required-placement"] == "kailab.io/rack"
    assert pod["metadata"]["annotations"]["kai.scheduler/topology"] == "x-topology"


def test_domains_needs_its_level(tmp_path, reclaim):
    reclaim["steps"][1]["expect"][0] = {"queue": "prod", "domains": 1}
    refused(write(tmp_path, reclaim), f"{STEP1}.expect[0]", "domains and level go together")


RAW_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "raw", "annotations": {"note": "mine"}},
           "spec": {"schedulerName": "kai-scheduler",
                    "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


@pytest.mark.parametrize("change, fragment", [
    (lambda o: o.pop("kind"), "object.kind is required"),
    (lambda o: o["metadata"].update(namespace="elsewhere"), "set by the run"),
    (lambda o: o["metadata"].update(name="Not_A_Name"), "is not a valid name"),
])
def test_a_raw_manifest_is_still_validated(tmp_path, reclaim, change, fragment):
    import copy

    obj = copy.deepcopy(RAW_POD)
    change(obj)
    reclaim["steps"][0]["apply"].append({"manifest": {"queue": "prod", "object": obj}})
    refused(write(tmp_path, reclaim), f"{STEP0}.apply[1].manifest", fragment)


def test_a_raw_manifest_becomes_a_workload_of_the_run(tmp_path, reclaim):
    import copy

    reclaim["steps"][0]["apply"].append({"manifest": {"queue": "prod", "object": copy.deepcopy(RAW_POD)}})
    ex = load_exercise(write(tmp_path, reclaim))
    item = ex.steps[0].apply[1]
    (pod,) = item.manifests("kx-ns", "x1-prod")
    assert pod["metadata"]["namespace"] == "kx-ns" and pod["metadata"]["annotations"] == {"note": "mine"}
    assert pod["metadata"]["labels"] == {"kailab.io/workload": "raw", "kai.scheduler/queue": "x1-prod",
                                         "kailab.io/queue": "x1-prod"}
    assert item.kind == "manifest" and item.workload.name == "raw"


def test_fractional_pods_are_written_as_a_user_would_write_them():
    # no imitation of KAI's webhook: the GPU-sharing config map's name is the webhook's to choose
    ex = load_exercise(PROJECT_ROOT / "exercises" / "fractional.yaml")
    objs = ex.steps[0].apply[0].manifests("ns", "q", "")
    assert [o["kind"] for o in objs] == ["Pod"] * 4
    assert all("runai/shared-gpu-configmap" not in p["metadata"]["annotations"] for p in objs)
    assert all(p["metadata"]["annotations"].get("gpu-fraction") for p in objs)


def test_the_sharing_config_maps_follow_the_name_kais_webhook_gave_a_fractional_pod():
    pod = {"metadata": {"name": "f-0", "namespace": "ns", "annotations": {
        "gpu-fraction": "0.5", "runai/shared-gpu-configmap": "f-0-abc1234-shared-gpu"}}}
    assert [c["metadata"]["name"] for c in workloads.sharing_config_maps(pod)] == [
        "f-0-abc1234-shared-gpu-0", "f-0-abc1234-shared-gpu-0-evar"]
    whole = {"metadata": {"name": "w", "namespace": "ns", "annotations": {}}}
    assert workloads.sharing_config_maps(whole) == []


def test_a_fleet_file_resolves_from_the_exercise_file_not_the_working_directory(tmp_path, reclaim, monkeypatch):
    folder = tmp_path / "course"
    (folder / "fleets").mkdir(parents=True)
    (folder / "fleets" / "mine.yaml").write_text((PROJECT_ROOT / "fleets" / "small.yaml").read_text())
    reclaim["fleet"] = "fleets/mine.yaml"
    path = folder / "reclaim.yaml"
    path.write_text(yaml.safe_dump(reclaim, sort_keys=False))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    ex = load_exercise(path)
    assert ex.fleet == str((folder / "fleets" / "mine.yaml").resolve())
    monkeypatch.chdir(folder.parent)  # a directory where fleets/mine.yaml means nothing
    assert load_exercise(path).fleet == ex.fleet
    reclaim["fleet"] = "fleets/absent.yaml"
    path.write_text(yaml.safe_dump(reclaim, sort_keys=False))
    refused(path, "fleet", "unknown fleet", "absent.yaml")


def test_anchors_and_merge_keys_save_repeating_a_workload(tmp_path, reclaim):
    text = yaml.safe_dump(reclaim, sort_keys=False).replace(
        "  - pods:\n      name: prod-train", "  - pods: &train\n      name: prod-train", 1)
    text = text.replace("  - pods:\n      name: research-train", "  - pods:\n      <<: *train\n      name: research-train", 1)
    path = tmp_path / "reclaim.yaml"
    path.write_text(text)
    assert "*train" in text and "&train" in text
    ex = load_exercise(path)
    first, second = ex.steps[0].apply[0].pods, ex.steps[1].apply[0].pods
    assert second.name == "research-train" and second.priority_class == first.priority_class


def test_a_node_step_may_change_a_reserved_label_when_it_says_so(tmp_path, reclaim):
    reclaim["steps"][1]["nodes"] = [{"node": "a100-0", "label": {"nvidia.com/gpu.product": "H200"}, "reserved": True},
                                    {"nodeSelector": {"kailab.io/pool": "l40s"}, "cordon": True}]
    ex = load_exercise(write(tmp_path, reclaim))
    assert [c.describe() for c in ex.steps[1].nodes] == ["label nvidia.com/gpu.product=H200", "cordon"]
    assert [k for k, _ in ex.steps[1].operations()][-1] == "nodes"  # in the order written
