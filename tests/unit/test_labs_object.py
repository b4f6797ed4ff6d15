"""The Lab as the object callers hold: opened by name, its record's stack one word, refusals in one line."""

import json

import pytest

from kailab import labs
from kailab.errors import KailabError
from kailab.runtimes.base import LabRecord, Unsupported


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("KAILAB_STATE", str(tmp_path))
    return tmp_path


def _record(name="x", runtime="binary", stack="kai") -> LabRecord:
    return LabRecord(name=name, runtime=runtime, kai_version="v0.17.0", fleet="tiny", nodes=2, gpus=8,
                     kubeconfig="/nowhere", stack={"name": stack})


def test_a_lab_opened_by_name_holds_its_record_runtime_and_stack(state):
    _record(stack="volcano").save()
    lab = labs.open("x")
    assert (lab.name, lab.kubeconfig, lab.runtime.name, lab.stack.name) == ("x", "/nowhere", "binary", "volcano")
    assert labs.open(lab.record).record == lab.record  # a record opens as the same lab


def test_opening_a_lab_that_is_not_there_is_one_line(state):
    with pytest.raises(KailabError, match=r"^no lab named 'gone': bring one up with `kailab up --name gone`$"):
        labs.open("gone")


def test_a_record_written_before_the_stack_was_its_one_word_still_loads(state):
    for name, with_kai in (("old-kai", True), ("old-none", False)):
        rec = _record(name=name)
        data = {**rec.__dict__, "with_kai": with_kai, "stack": {}}
        rec.dir.mkdir(parents=True)
        (rec.dir / "lab.json").write_text(json.dumps(data))
    assert labs.open("old-kai").stack.name == "kai" and labs.open("old-none").stack.name == "none"


def test_what_a_lab_cannot_do_is_refused_by_its_capability_in_one_line(state):
    adopted = labs.Lab(_record(runtime="existing"))
    assert not adopted.can(labs.ControlsProcesses) and labs.Lab(_record()).can(labs.ControlsProcesses)
    with pytest.raises(Unsupported, match="existing runtime runs no processes of its own, so it cannot kill binder"):
        adopted.kill("binder")
    with pytest.raises(Unsupported, match=r"^--operators: the existing runtime runs no workload operators yet"):
        labs.refuse_operators("existing", ("kubeflow",))
    labs.refuse_operators("binary", ("kubeflow",))  # no refusal there


def test_without_kai_is_the_none_stack_in_the_spec_and_the_record(state):
    from kailab.labs import LabSpec, with_addon

    addon = with_addon(LabSpec(stack="none")).addon
    assert addon.kai_version("v0.17.0") == "none"
    assert with_addon(LabSpec(kai_version="v0.17.0")).addon.kai_version("v0.17.0") == "v0.17.0"
    assert with_addon(LabSpec(stack="kueue+kai", kai_version="v0.17.0")).addon.kai_version("v0.17.0") == "v0.17.0"
    assert not hasattr(LabSpec(), "with_kai")
