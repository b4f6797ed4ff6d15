"""The course on a real lab with KAI: every lesson runs live (in course order, one lab), and a
lesson is used as a person would use it - in a terminal, typing a prediction at each prompt and
reading the screen."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import time

import pytest

from kailab import course
from helpers import KAILAB

pytestmark = [pytest.mark.lab, pytest.mark.kai]
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


class Terminal:
    """A program on a pseudo-terminal: `expect` text on the screen, `type` keys."""

    def __init__(self, argv: list[str], env: dict[str, str]):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the program, with the pty as its terminal
            os.execvpe(argv[0], argv, env)
        self.screen = ""
        self.pos = 0  # where the next expect starts looking
        self.code: int | None = None

    def _read(self, seconds: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], seconds)
        if not ready:
            return True
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # the program ended and closed the terminal
            return False
        if not data:
            return False
        self.screen += ANSI.sub("", data.decode(errors="replace")).replace("\r\n", "\n")
        return True

    def expect(self, text: str, timeout: float = 300) -> int:
        """Wait for `text` after the previous match (as pexpect does); returns where it starts."""
        deadline = time.time() + timeout
        while (at := self.screen.find(text, self.pos)) < 0:
            if time.time() > deadline or not self._read(1):
                raise AssertionError(f"{text!r} never appeared; screen ends with:\n{self.screen[-2000:]}")
        self.pos = at + len(text)
        return at

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def wait(self, timeout: float = 300) -> int:
        deadline = time.time() + timeout
        while time.time() < deadline and self._read(1):
            pass
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        self.code = os.waitstatus_to_exitcode(status)
        return self.code


@pytest.fixture(scope="module")
def small_lab(kailab_labs):
    return kailab_labs.get("small")


def test_a_lesson_in_a_terminal_asks_runs_reveals_then_explains_step_by_step(small_lab, tmp_path):
    env = {**os.environ, "KAILAB_COURSE_STATUS": str(tmp_path / "progress.json"), "TERM": "dumb",
           "COLUMNS": "200"}
    term = Terminal([*KAILAB, "lesson", "borrow", "--name", small_lab.name,
                     "--evidence", str(tmp_path / "evidence"), "--watch"], env)
    term.expect("How many of its 24 pods run?")
    term.expect("your prediction> ")
    step1_asked = len(term.screen)
    term.type("16\n")  # a learner who expects prod to stop at its quota
    term.expect("running this step on the lab")
    verdict_at = term.expect("NOT what KAI did")
    assert "your answer: 16  |  KAI: queue prod bound = 24" in term.screen
    # --watch: kailab top's picture of the lab as the step left it, prod holding its 24 GPUs
    picture_at = term.expect("kailab top ·")
    term.expect("Enter for the next step> ")
    prod = [line.split() for line in term.screen[picture_at:].splitlines() if re.match(r"\s+\S+-prod\s", line)]
    assert prod and prod[0][1:2] == ["24"], term.screen[picture_at:]
    step2_at = len(term.screen)
    # the second step's explanation gives its answer away: it must not show before the step ran
    borrow = {lesson.name: lesson for lesson in course.lessons()}["borrow"]
    hint = borrow.steps[1].explain.split(";")[0].strip()
    assert hint not in term.screen[:step2_at], "step 2's explanation was shown before it ran"
    assert step1_asked < verdict_at
    term.type("\n")
    term.expect("Step 2/2")
    observed_at = term.expect("observed:")
    why_at = term.expect("why:")
    hint_at = term.expect(hint)
    assert observed_at < why_at < hint_at
    term.expect("verdict: PASSED")
    assert term.wait() == 0, term.screen[-2000:]
    # the whole lesson ran and passed, recorded as done: test_every_lesson_runs_live leaves borrow to this test
    assert json.loads((tmp_path / "progress.json").read_text())["done"].get("borrow"), (tmp_path / "progress.json").read_text()


IN_A_TERMINAL = "borrow"  # run whole, as a learner would, by the terminal test above


def _lesson_params():
    """One test per lesson (labs side by side, pytest -n, share them out); those of another fleet than
    small go to one worker, so only one worker brings up the dra and racks labs."""
    def marks(ex):
        if ex.operators:  # on the session's lab with the workload operators
            return [pytest.mark.xdist_group("operator_labs")]
        return [] if ex.fleet == "small" else [pytest.mark.xdist_group("other_fleets")]

    return [pytest.param(lesson.name, id=lesson.name, marks=marks(lesson.exercise))
            for lesson in course.lessons() if lesson.name != IN_A_TERMINAL]


@pytest.mark.parametrize("name", _lesson_params())
def test_every_lesson_runs_live(kailab_labs, tmp_path, monkeypatch, name):
    monkeypatch.setenv("KAILAB_COURSE_STATUS", str(tmp_path / "progress.json"))
    shown: list[str] = []
    (lesson,) = [lesson for lesson in course.lessons() if lesson.name == name]
    ops = tuple(lesson.exercise.operators)
    lab = kailab_labs.get(lesson.exercise.fleet, operators=ops)
    if lab.fleet != lesson.exercise.fleet:  # --kailab-lab gave another fleet's lab
        lab = kailab_labs.get(lesson.exercise.fleet, own=True, operators=ops)
    code = course.run_lesson(lesson, lab.name, False, shown.append, evidence_root=tmp_path / "ev")
    assert code == 0, "\n".join(shown[-40:])
    assert course.load_status()["done"].get(lesson.name), lesson.name


GOOD_TREE = """
org:
  gpu: {quota: 32, limit: -1, overQuotaWeight: 1}
  children:
    training:  {gpu: {quota: 16, limit: -1, overQuotaWeight: 1}}
    research:  {gpu: {quota: 8, limit: -1, overQuotaWeight: 1}}
    inference: {gpu: {quota: 8, limit: -1, overQuotaWeight: 1}}
"""


@pytest.mark.parametrize("design, change, message", [
    ("good", None, None),
    ("starves-research", ("research:  {gpu: {quota: 8,", "research:  {gpu: {quota: 0,"),
     "queue research: quota 0 is below the team's guarantee of 8 GPUs"),
    ("never-lends", ("research:  {gpu: {quota: 8, limit: -1, overQuotaWeight: 1}}",
                     "research:  {gpu: {quota: 8, limit: 8, overQuotaWeight: 1}}"),
     "queue research: limit 8 leaves no room to borrow above its quota 8"),
])
def test_capstone_check_on_a_real_lab(small_lab, tmp_path, monkeypatch, design, change, message):
    monkeypatch.setenv("KAILAB_COURSE_STATUS", str(tmp_path / "progress.json"))
    text = GOOD_TREE if change is None else GOOD_TREE.replace(*change)
    assert text != GOOD_TREE or change is None
    path = tmp_path / "org-queues.yaml"
    path.write_text(text)
    shown: list[str] = []
    code = course.run_capstone(path, small_lab.name, shown.append, tmp_path / "ev")
    screen = "\n".join(shown)
    if message is None:
        assert code == 0, screen
        assert "PASS  idle GPUs are lent" in screen and "verdict: PASSED" in screen
    else:
        assert code == 1 and message in screen, screen
        assert "nothing was run" in screen
