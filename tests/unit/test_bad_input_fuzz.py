"""Property-based: whatever a user writes into a fleet or exercise file, loading it either gives a
valid model or raises InputError with one line naming the file (an exercise: a line per problem) -
never any other exception.

Documents are random mutations of valid ones (wrong types, negative or huge integers, unknown
keys, deleted keys, renamed keys, random names), plus raw random text. Files go to a temporary
directory made inside each example (hypothesis runs many examples per test function).
"""

from __future__ import annotations

import copy
import re
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kailab.errors import InputError
from kailab.exercise.load import load_exercise
from kailab.exercise.spec import Exercise
from kailab.fleet import Fleet, load_fleet
from kailab.paths import PROJECT_ROOT

FUZZ = settings(max_examples=150, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

SMALL_FLEET = yaml.safe_load((PROJECT_ROOT / "fleets" / "small.yaml").read_text())
RECLAIM = yaml.safe_load((PROJECT_ROOT / "exercises" / "reclaim.yaml").read_text())
# a richer exercise than reclaim: every workload kind, patch, delete, stays and all expectation kinds
RICH = copy.deepcopy(RECLAIM)
RICH["steps"][0]["apply"].append({"deployment": {"name": "web", "queue": "research", "replicas": 1}})
RICH["steps"][0]["stays"] = {"for": "2s", "that": [{"queue": "prod", "bound": {"min": 0, "max": 32}}]}
RICH["steps"][1]["apply"].append({"job": {"name": "burst", "queue": "research", "parallelism": 2, "gang": 2,
                                          "runDuration": "30s", "preemptible": True}})
RICH["steps"][1]["patch"] = [{"deployment": "web", "replicas": 0}, {"queue": "prod", "gpu": {"quota": 8}}]
RICH["steps"][1]["delete"] = [{"workload": "web"}]
RICH["steps"][1]["expect"].append({"podgroupOf": "burst", "reason": "OverLimit", "present": False})
RICH["steps"][1]["settle"] = "500ms"
# the object assertion, placement by node, node steps, run names in a manifest
RICH["steps"][1]["nodes"] = [{"node": "a100-0", "label": {"team": "x"}, "taint": [{"key": "k", "effect": "NoSchedule"}]},
                             {"nodeSelector": {"kailab.io/pool": "l40s"}, "cordon": True, "untaint": ["dedicated"]}]
RICH["steps"][1]["expect"] += [
    {"object": "BindRequest", "of": "burst", "match": {"spec": {"receivedGPU": {"portion": {"min": 0.5, "max": 1}},
                                                               "receivedResourceType": {"regex": "^Reg"}}}},
    {"object": "Node", "name": "a100-0", "match": {"metadata": {"labels": {"team": "x"}}}, "count": 1},
    {"workload": "burst", "bound": 2, "on": {"nodeSelector": {"team": "x"}}}]
RICH["steps"][1]["stays"] = {"for": "1s", "that": [{"object": "PodGroup", "of": "burst", "count": 0,
                                                   "match": {"spec": {"queue": "${queue:research}"}}},
                                                  {"workload": "burst", "evicted": 0}]}
RICH["steps"][1]["apply"].append({"manifest": {"queue": "research", "object": {
    "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "note"}, "data": {"ns": "${namespace}"}}}})

NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

names = st.one_of(
    st.text(max_size=30),
    st.from_regex(r"[a-z0-9][-a-z0-9]{0,50}", fullmatch=True),
    st.sampled_from(["", "lab", "prod", "research", "prod-train", "research-train", "web", "burst",
                     "a100", "h100", "small", "tiny", "large", "Prod", "a_b", "a" * 41, "-x", "x-"]),
)
junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-10, max_value=100),
    st.integers(min_value=-(10 ** 30), max_value=10 ** 30),
    st.sampled_from([0, -1, 64, 65, 5000, 5001, 10 ** 4, 2 ** 63, -(2 ** 63)]),
    st.floats(allow_nan=True, allow_infinity=True),
    names,
    st.sampled_from(["15 seconds", "15s", "500ms", "2m", "-1s", "1e9", ".nan", "eight", "true", "null", "{}"]),
    st.lists(st.one_of(st.integers(), st.text(max_size=5)), max_size=3),
    st.dictionaries(st.text(max_size=8), st.one_of(st.integers(), st.text(max_size=5), st.none()), max_size=3),
    st.fixed_dictionaries({"min": st.integers(-3, 40), "max": st.integers(-3, 40)}),
)
keys = st.one_of(names, st.integers(min_value=-5, max_value=5),
                 st.sampled_from(["colour", "count", "gpus", "name", "for", "event", "condition", "int",
                                  "Range", "podgroupOf", "eventReason", "bound", "children", "queue"]))


def all_paths(doc, prefix=()):
    """Every place in the document: () is the root, then each key / index, depth first."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from all_paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from all_paths(v, prefix + (i,))


def at(doc, path):
    for p in path:
        doc = doc[p]
    return doc


@st.composite
def mutated(draw, base: dict):
    """`base` with one to four random mutations."""
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 4))):
        if not isinstance(doc, (dict, list)):
            break
        path = draw(st.sampled_from(list(all_paths(doc))))
        op = draw(st.sampled_from(["replace", "delete", "add-key", "rename-key", "rename-value"]))
        if not path:
            if op == "replace":
                doc = draw(junk)
            elif isinstance(doc, dict):
                doc[draw(keys)] = draw(junk)
            continue
        parent, last = at(doc, path[:-1]), path[-1]
        if op == "replace":
            parent[last] = draw(junk)
        elif op == "delete":
            del parent[last]
        elif op == "add-key":
            target = parent[last]
            if isinstance(target, dict):
                target[draw(keys)] = draw(junk)
            elif isinstance(target, list):
                target.append(draw(junk))
            else:
                parent[last] = draw(junk)
        elif op == "rename-key" and isinstance(parent, dict):
            parent[draw(keys)] = parent.pop(last)
        else:  # rename-value: a random name where a value was
            parent[last] = draw(names)
    return doc


def dump(doc) -> str:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


def check_one_line(err: InputError, path: Path) -> None:
    """Each problem is one line naming the file (an exercise's several problems: a line each)."""
    for each in getattr(err, "errors", [err]):
        msg = str(each)
        assert len(msg.splitlines()) == 1 and "\n" not in msg and "\r" not in msg, repr(msg)
        assert str(path) in msg, msg


def load_fleet_text(text: str | bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.yaml"
        path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
        try:
            fleet = load_fleet(str(path))
        except InputError as err:
            check_one_line(err, path)
            return
        assert isinstance(fleet, Fleet)
        assert fleet.pools and fleet.nodes_total <= 5000
        assert fleet.gpus_total == sum(p.count * p.gpus for p in fleet.pools)
        names = [n["metadata"]["name"] for n in fleet.node_manifests()]
        assert len(names) == len(set(names)) == fleet.nodes_total


def load_exercise_text(text: str | bytes, stem: str = "reclaim") -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{stem}.yaml"
        path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
        try:
            ex = load_exercise(path)
        except InputError as err:
            check_one_line(err, path)
            return
        assert isinstance(ex, Exercise)
        assert ex.exercise == stem
        assert ex.steps and ex.queues


def stem_for(doc) -> str:
    """Name the file like its `exercise:` field when that can be a file name, so the fuzz gets past
    the name check to the cross-reference checks."""
    name = doc.get("exercise") if isinstance(doc, dict) else None
    return name if isinstance(name, str) and NAME.match(name) and len(name) <= 40 else "reclaim"


@pytest.fixture(autouse=True)
def _shipped_fleets(monkeypatch):
    monkeypatch.delenv("KAILAB_FLEETS", raising=False)


def test_bases_are_valid():
    load_fleet_text(dump(SMALL_FLEET))
    for doc in (RECLAIM, RICH):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "reclaim.yaml"
            path.write_text(dump(doc))
            assert load_exercise(path).exercise == "reclaim"


@FUZZ
@given(mutated(SMALL_FLEET))
def test_mutated_fleet(doc):
    load_fleet_text(dump(doc))


@FUZZ
@given(mutated(RECLAIM))
def test_mutated_reclaim_exercise(doc):
    load_exercise_text(dump(doc), stem_for(doc))


@FUZZ
@given(mutated(RICH))
def test_mutated_rich_exercise(doc):
    load_exercise_text(dump(doc), stem_for(doc))


@FUZZ
@given(st.one_of(st.text(max_size=300), st.binary(max_size=300)))
def test_random_text_as_fleet(text):
    load_fleet_text(text)


@FUZZ
@given(st.one_of(st.text(max_size=300), st.binary(max_size=300)))
def test_random_text_as_exercise(text):
    load_exercise_text(text)


@FUZZ
@given(st.data())
def test_damaged_yaml_text(data):
    """Valid files with characters cut out or inserted: mostly syntax errors, some still valid."""
    source = data.draw(st.sampled_from([dump(SMALL_FLEET), dump(RICH)]))
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(source)))
        if data.draw(st.booleans()):
            source = source[:i] + source[i + data.draw(st.integers(1, 20)):]
        else:
            source = source[:i] + data.draw(st.sampled_from(
                ["&a ", "*a", ": ", "- ", "\t", "[", "}", "'", '"', "\n", "!!python/object:os.system ",
                 "!!binary ", "? ", "2024-13-45", "1" * 5000, "%YAML 1.1\n", "---\n", "...\n"])) + source[i:]
    if "pools:" in source:
        load_fleet_text(source)
    else:
        load_exercise_text(source)


@FUZZ
@given(st.integers(1, 12), st.integers(1, 12), st.booleans())
def test_alias_expansion_is_bounded(breadth, depth, self_loop):
    """Nested aliases of any shape: a file that expands to too much (or into itself) is one line,
    refused quickly; one that stays small loads."""
    import time

    lines = ['l0: &l0 "x"'] + [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * breadth)}]" for i in range(1, depth + 1)]
    if self_loop:
        lines.append("loop: &loop [*loop]")
    text = "\n".join(lines) + "\n" + dump(RECLAIM)
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "reclaim.yaml"
        path.write_text(text)
        with pytest.raises(InputError) as err:  # the l* keys are unknown even when small
            load_exercise(path)
        check_one_line(err.value, path)
        sizes = [1]  # nodes each l<i> expands to; their sum is about the file's (the rest is small)
        for _ in range(depth):
            sizes.append(1 + breadth * sizes[-1])
        chain = sum(1 + n for n in sizes)
        if 100_000 - 2_000 < chain <= 100_000:
            return  # the rest of the file decides: either answer is right
        big = chain > 100_000
        msg = str(err.value)
        # the first problem found while sizing is named: a loop, or a chain expanding too far
        assert ("expand to more than" in msg) == big if not self_loop else \
            ("refers to itself" in msg or (big and "expand to more than" in msg))
    assert time.monotonic() - start < 5
