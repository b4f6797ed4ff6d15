"""A cold CI builds the kind images in the background (.ci/run, .ci/images): the tests marked `kind`
wait for the file that says they are ready, and come last (kailab/testing/plugin.py)."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from kailab.testing import plugin
from kailab.testing.labs import IMAGE_STAGES, PENDING_ENV, wait_for_kind_images

ROOT = Path(__file__).resolve().parents[2]


def _say(status: Path, text: str) -> None:
    """Write the status file as .ci/images and .ci/run do once a test may read it: whole, by a rename."""
    status.with_name("new").write_text(text)
    status.with_name("new").replace(status)


def test_the_wait_returns_once_the_file_says_done(tmp_path):
    status = tmp_path / "status"
    status.write_text("running\n")
    threading.Timer(0.3, lambda: _say(status, "done\n")).start()
    started = time.monotonic()
    wait_for_kind_images(str(status), timeout=10, every=0.05)
    assert time.monotonic() - started >= 0.25


def test_each_stage_frees_the_tests_that_name_it_or_an_earlier_one(tmp_path):
    status = tmp_path / "status"
    status.write_text("main\n")
    wait_for_kind_images(str(status), timeout=10, every=0.05, stage="main")
    for later in ("trial", "done"):
        with pytest.raises(pytest.fail.Exception, match="still building after 0.2 s"):
            wait_for_kind_images(str(status), timeout=0.2, every=0.05, stage=later)
    _say(status, "trial\n")
    wait_for_kind_images(str(status), timeout=10, every=0.05, stage="main")
    wait_for_kind_images(str(status), timeout=10, every=0.05, stage="trial")
    with pytest.raises(pytest.fail.Exception, match="still building after 0.2 s"):
        wait_for_kind_images(str(status), timeout=0.2, every=0.05)
    threading.Timer(0.2, lambda: _say(status, "done\n")).start()
    wait_for_kind_images(str(status), timeout=10, every=0.05)


def test_a_stage_of_no_such_name_is_named_not_waited_on(tmp_path):
    status = tmp_path / "status"
    status.write_text("running\n")
    with pytest.raises(pytest.fail.Exception, match=r"images='vcluster'\): no such stage .*main, trial, done"):
        wait_for_kind_images(str(status), timeout=10, every=0.05, stage="vcluster")


def test_a_failed_build_fails_the_test_with_what_the_file_says(tmp_path):
    status = tmp_path / "status"
    status.write_text("failed: .ci/images exited 2 (its log: /tmp/x)\n")
    with pytest.raises(pytest.fail.Exception, match=r"not ready: failed: \.ci/images exited 2"):
        wait_for_kind_images(str(status), timeout=10, every=0.05)


def test_a_build_still_running_at_the_deadline_fails_the_test(tmp_path):
    status = tmp_path / "status"
    status.write_text("running\n")
    with pytest.raises(pytest.fail.Exception, match="still building after 0.2 s"):
        wait_for_kind_images(str(status), timeout=0.2, every=0.05)


def test_a_missing_file_is_named_not_waited_on(tmp_path):
    with pytest.raises(pytest.fail.Exception, match=r"no such file"):
        wait_for_kind_images(str(tmp_path / "gone"), timeout=10, every=0.05)


def _marked(kind: dict, alone: bool):
    marks = {"kind": SimpleNamespace(kwargs=kind), "alone": SimpleNamespace(kwargs={}) if alone else None}
    return SimpleNamespace(get_closest_marker=marks.get)


def test_a_kind_test_waits_for_the_stage_it_names_else_main_or_every_image_when_alone():
    assert plugin.images_stage(_marked({}, alone=False)) == "main"
    assert plugin.images_stage(_marked({}, alone=True)) == "done"
    assert plugin.images_stage(_marked({"images": "trial"}, alone=True)) == "trial"


def test_ci_images_says_each_stage_in_the_order_the_tests_read_them():
    said = re.findall(r'^ready "\$\{1:-\}" (\w+)$', (ROOT / ".ci" / "images").read_text(), re.M)
    assert said == list(IMAGE_STAGES[1:-1]), said  # "done" is .ci/run's, once the script has ended


class _Item:
    """The one call the ordering makes on a collected test."""

    def __init__(self, name: str, kind: bool):
        self.name, self.kind = name, kind

    def get_closest_marker(self, name):
        return object() if (name == "kind" and self.kind) else None


def _items():
    return [_Item("kind-a", True), _Item("lab-a", False), _Item("kind-b", True), _Item("lab-b", False)]


def test_while_images_build_the_kind_tests_come_last_in_their_order(monkeypatch, tmp_path):
    monkeypatch.setenv(PENDING_ENV, str(tmp_path / "status"))
    items = _items()
    plugin._kind_after_images_still_building(items)
    assert [i.name for i in items] == ["lab-a", "lab-b", "kind-a", "kind-b"]


def test_without_images_building_the_order_is_untouched(monkeypatch):
    monkeypatch.delenv(PENDING_ENV, raising=False)
    items = _items()
    plugin._kind_after_images_still_building(items)
    assert [i.name for i in items] == ["kind-a", "lab-a", "kind-b", "lab-b"]


def test_an_empty_file_is_named_not_waited_on(tmp_path):
    status = tmp_path / "status"
    status.write_text("")
    with pytest.raises(pytest.fail.Exception, match=r"not ready: \(an empty file\)"):
        wait_for_kind_images(str(status), timeout=10, every=0.05)
