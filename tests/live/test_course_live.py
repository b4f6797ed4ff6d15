"""The kubectl commands the course pages tell a learner to type, run against a real lab (the ones about
KAI's resources only where KAI runs), and a lesson refused on a lab that cannot run it."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess

import pytest

from kailab.stacks import stack_of
from kailab import course

from helpers import involves_kai, kailab_cli as kailab, page_commands


@pytest.fixture(scope="module")
def kubectl() -> str:
    path = shutil.which("kubectl")
    if path is None:
        pytest.fail("kubectl is not on PATH: the course tells learners to type kubectl commands, and this "
                    "test runs them; install kubectl (https://kubernetes.io/docs/tasks/tools/)", pytrace=False)
    return path


def run_commands(kubectl: str, kubeconfig: str, commands: list[tuple[str, str]]) -> list[str]:
    env = {**os.environ, "KUBECONFIG": kubeconfig}
    failures = []
    for page, cmd in commands:
        out = subprocess.run([kubectl, *shlex.split(cmd)[1:]], capture_output=True, text=True, env=env,
                             timeout=60, stdin=subprocess.DEVNULL)
        if out.returncode != 0:
            failures.append(f"{page}: `{cmd}` exited {out.returncode}: {out.stderr.strip()[-300:]}")
    return failures


def _of_operator_lessons(page: str) -> bool:
    """A page of a lesson whose exercise needs workload operators (its kinds are served only with them)."""
    return page.split("-", 1)[-1].removesuffix(".md") in {
        lesson.name for lesson in course.lessons() if lesson.exercise.operators}


def _commands(operators: bool) -> list[tuple[str, str]]:
    return [(p, c) for p, c in page_commands() if _of_operator_lessons(p) == operators]


@pytest.mark.lab
def test_course_kubectl_commands_without_kai_resources_run_on_a_lab(infra_lab, kubectl):
    commands = [(p, c) for p, c in _commands(operators=False) if not involves_kai(c)]
    assert len(commands) >= 5
    failures = run_commands(kubectl, infra_lab.kubeconfig, commands)
    assert not failures, "\n".join(failures)


@pytest.mark.lab
@pytest.mark.kai
def test_every_course_kubectl_command_runs_on_a_lab_with_kai(infra_lab, kubectl):
    assert stack_of(infra_lab).kai_inside, f"lab {infra_lab.name} has no KAI"
    failures = run_commands(kubectl, infra_lab.kubeconfig, _commands(operators=False))
    assert not failures, "\n".join(failures)


@pytest.mark.lab
@pytest.mark.kai
@pytest.mark.xdist_group("operator_labs")
def test_the_operator_lessons_kubectl_commands_run_on_a_lab_with_their_operators(kailab_labs, kubectl):
    from kailab import operators

    commands = _commands(operators=True)
    assert any("pytorchjobs" in c for _, c in commands), commands
    lab = kailab_labs.get("small", operators=tuple(operators.OPERATORS))
    failures = run_commands(kubectl, lab.kubeconfig, commands)
    assert not failures, "\n".join(failures)


@pytest.mark.lab
def test_lesson_on_a_lab_that_cannot_run_it_fails_with_one_line_and_marks_nothing(infra_lab):
    """The session's tiny lab is either without KAI or the wrong size for the small-fleet lessons."""
    before = course.load_status()["done"].get("quota")
    out = kailab("lesson", "quota", "--no-pause", "--name", infra_lab.name)
    assert out.returncode != 0
    assert len(out.stderr.strip().splitlines()) == 1 and out.stderr.startswith("kailab: error: ")
    assert ("runs without KAI" in out.stderr) if not stack_of(infra_lab).kai_inside else ("sized for fleet small" in out.stderr)
    assert course.load_status()["done"].get("quota") == before
