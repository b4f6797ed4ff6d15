"""The two axes hold in the code: nothing in kailab/runtimes or kailab/exercise names KAI except the
lab's own knobs, and a stack is found by name in one registry (docs/architecture.md)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from kailab import labs
from kailab.labs import with_addon
from kailab.runtimes.addon import Addon
from kailab.runtimes.base import LabSpec
from kailab.stacks import STACKS, get_stack

ROOT = Path(__file__).resolve().parents[2] / "kailab"
# the lab's knobs (--kai-version names the release line whose Kubernetes the lab runs; --without-kai
# is the "none" stack), the evidence file of a stack's own metrics, the kind image set's chart field
ALLOWED = {"kai_version", "with_kai", "DEFAULT_KAI", "kai_release", "KailabError", "KAI_METRICS", "kai_chart"}


def kai_names(path: Path) -> set[str]:
    """Identifiers, attributes, arguments, definitions and imports that name KAI (code, not prose)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, ast.arg):
            names = [node.arg]
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] + [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        found |= {n for n in names if re.search(r"kai(?!lab)", n, re.I) and n not in ALLOWED}
    return found


@pytest.mark.parametrize("folder", ["runtimes", "exercise"])
def test_no_kai_name_in_runtimes_or_the_exercise_layer(folder):
    offenders = {str(p.relative_to(ROOT)): sorted(kai_names(p)) for p in sorted((ROOT / folder).glob("*.py"))}
    assert {k: v for k, v in offenders.items() if v} == {}


KAI_API = re.compile(r"^(scheduling\.run\.ai|kai\.scheduler)/[\w.-]+$")


def kai_api_strings(path: Path) -> set[str]:
    """String constants that are a KAI apiVersion or label key on their own (not prose about one)."""
    return {n.value for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and KAI_API.match(n.value)}


@pytest.mark.parametrize("where", ["runtimes", "exercise", "evidence.py"])
def test_no_kai_object_is_written_below_the_stack(where):
    """The runner, the observer and the evidence write and read KAI's objects only through the stack."""
    paths = [ROOT / where] if where.endswith(".py") else sorted((ROOT / where).glob("*.py"))
    offenders = {str(p.relative_to(ROOT)): sorted(kai_api_strings(p)) for p in paths}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_api_check_can_fail(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text('x = Field(None, description="kai.scheduler/queue, as prose")\n'
                   'kube.delete("scheduling.run.ai/v2", "Queue", name)\n')
    assert kai_api_strings(bad) == {"scheduling.run.ai/v2"}


def test_the_check_can_fail(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("from ..stacks.kai import install\nx = install.KAI_NAMESPACE\n")
    assert kai_names(bad) == {"stacks.kai", "KAI_NAMESPACE"}


def test_every_registered_stack_loads_and_hands_the_runtime_an_addon():
    assert {"kai", "none"} <= set(STACKS)
    for name in STACKS:
        stack = get_stack(name)
        assert stack.name == name
        assert isinstance(stack.addon(LabSpec(kai_version="v0.17.0")), Addon)


def test_every_registered_runtime_is_keyed_by_its_own_name_and_the_cli_offers_each():
    from click import Choice

    from kailab.cli.labs import up
    from kailab.runtimes import RUNTIMES, get_runtime

    for name in RUNTIMES:
        assert get_runtime(name).name == name
    runtime = next(p for p in up.params if p.name == "runtime")
    assert isinstance(runtime.type, Choice) and set(runtime.type.choices) == {"auto", *RUNTIMES}
    scheduler = next(p for p in up.params if p.name == "stack")
    assert all(name in scheduler.help for name in STACKS)


def test_without_kai_is_the_none_stack_and_kai_its_own():
    assert with_addon(LabSpec(stack="none")).addon.record()["name"] == "none"
    kai = with_addon(LabSpec(kai_version="v0.17.0")).addon
    assert kai.record()["name"] == "kai" and kai.version == "v0.17.0" and "scheduler" in kai.processes()


def test_a_runtime_used_bare_refuses_a_lab_that_asks_for_a_scheduler(tmp_path, monkeypatch):
    """A caller that skips kailab.labs must not get a lab with nothing scheduling, silently."""
    from kailab.errors import LabError
    from kailab.runtimes import get_runtime as bare

    monkeypatch.setenv("KAILAB_STATE", str(tmp_path))
    monkeypatch.setenv("KAILAB_CACHE", str(tmp_path / "cache"))
    with pytest.raises(LabError, match="kailab.labs"):
        bare("binary").up(LabSpec(name="bare", runtime="binary", fleet="tiny", kai_version="v0.17.0"))
    assert not (tmp_path / "bare").exists()


def test_an_unknown_stack_is_one_line_naming_the_choices():
    from kailab.errors import KailabError

    with pytest.raises(KailabError, match="choose one of kai, none"):
        get_stack("volcanoo")
    assert labs.runtime("binary").name == "binary"


def test_a_stack_refuses_a_runtime_it_cannot_run_on_in_one_line():
    """Kueue and Volcano install as processes (binary) or from their charts (kind), not by adopting a
    cluster: the existing runtime refuses them in one line; kind refuses none of them now."""
    from kailab.errors import LabError
    from kailab.runtimes.addon import AdoptsCluster, InstallsFromCharts, need

    for stack in ("kueue", "kueue+kai", "volcano"):
        addon = with_addon(LabSpec(stack=stack, kai_version="v0.17.0")).addon
        need(addon, InstallsFromCharts, "kind")  # a kind lab of each installs its chart
        with pytest.raises(LabError) as err:
            need(addon, AdoptsCluster, "existing")
        assert f"{stack} scheduler stack cannot run on the existing runtime" in str(err.value)
        assert "\n" not in str(err.value)


def test_kueue_is_a_stack_of_its_own_package():
    """The kueue stack: its processes, ports and webhooks named by its package, nothing in a runtime."""
    addon = with_addon(LabSpec(stack="kueue", kai_version="v0.17.0")).addon
    assert addon.name == "kueue" and addon.processes() == ["kube-scheduler", "kueue"]
    assert {r.component for r in addon.recipes()} == {"kueue", "kubernetes-node"}  # kube-scheduler: the lab's own Kubernetes build
    assert "kube-scheduler" in addon.recipes()[1].binaries
    assert all(p.split(".")[0] in addon.processes() for p in addon.port_names())
