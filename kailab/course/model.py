"""The course model: kailab/data/course.yaml (lesson order, the capstone brief) and the lessons
built from the exercise files, one StepLesson per step."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from pydantic import Field

from .. import evidence
from ..errors import InputError, KailabError
from ..exercise.load import load_exercise
from ..exercise.spec import Exercise, Strict
from ..fleet import load_fleet
from ..paths import exercises_dir
from ..inputs import read_yaml, validate
from .words import action_lines, answer_lines, step_commands

COURSE_FILE = Path(__file__).resolve().parent.parent / "data" / "course.yaml"
CAPSTONE_PAGE = "99-capstone.md"
# the capstone's requirements, one hidden step each: (step name, what it checks)
CAPSTONE_STEPS = [
    ("idle GPUs are lent",
     "the borrowing team, alone on the fleet, runs more pods than its own quota"),
    ("guarantees are honoured and lenders get their GPUs back",
     "every team saturates the fleet; each gets at least its guarantee, taking back what was lent "
     "(KAI evicts borrowed pods)"),
    ("production inference is never evicted",
     "the other teams flood the fleet with more work; inference keeps every pod, none evicted"),
]
Echo = Callable[[str], None]  # where a lesson or the capstone writes its lines (click.echo, a list)


# ============================================================================ the course file
class Team(Strict):
    guarantee: int = Field(ge=0, description="GPUs the team is promised")
    borrows: bool = Field(False, description="may run on idle GPUs beyond its guarantee")
    inference: bool = Field(False, description="production serving: non-preemptible, never evicted")


class Capstone(Strict):
    name: str = "capstone"
    title: str
    fleet: str
    file: str
    brief: str
    teams: dict[str, Team] = Field(min_length=1)


class CourseSpec(Strict):
    title: str
    lessons: list[str] = Field(min_length=1)
    capstone: Capstone


def load_course(path: Path = COURSE_FILE) -> CourseSpec:
    course = validate(CourseSpec, read_yaml(path), path)
    seen: set[str] = set()
    for i, name in enumerate(course.lessons):
        if name in seen:
            raise InputError(path, f"lessons[{i}]", f"lesson {name!r} appears twice", "keep one")
        seen.add(name)
    if course.capstone.name in seen:
        raise InputError(path, "capstone.name", f"{course.capstone.name!r} is also a lesson", "rename it")
    return course


def lesson_source(name: str) -> Path:
    """A lesson IS an exercise: exercises/<name>.yaml (the file may be missing)."""
    return exercises_dir() / f"{name}.yaml"


# ============================================================================ the lessons
@dataclass
class StepLesson:
    number: int
    name: str
    explain: str
    predict: str | None
    actions: list[str]
    answer: list[str]     # what KAI must do for the step to pass, from expect/stays
    commands: list[str]   # kubectl commands that show this step by hand
    evidence: str         # the step's directory inside a run's evidence


@dataclass
class Lesson:
    number: int
    name: str
    exercise: Exercise
    source: Path
    fleet_gpus: int
    steps: list[StepLesson] = field(default_factory=list)
    prev_page: str | None = None  # set by lessons(): the course order
    next_page: str | None = None

    @property
    def title(self) -> str:
        return self.exercise.title

    @property
    def page(self) -> str:
        return f"{self.number:02d}-{self.name}.md"


def build_lesson(ex: Exercise, number: int, source: Path) -> Lesson:
    lesson = Lesson(number=number, name=ex.exercise, exercise=ex, source=Path(source),
                    fleet_gpus=load_fleet(ex.fleet).gpus_total)
    for i, step in enumerate(ex.steps, 1):
        lesson.steps.append(StepLesson(
            number=i, name=step.name, explain=step.explain.strip(), predict=step.predict,
            actions=action_lines(step), answer=answer_lines(step), commands=step_commands(step),
            evidence=evidence.step_dir(i, step.name)))
    return lesson


def lessons(course: CourseSpec | None = None) -> list[Lesson]:
    course = course or load_course()
    out = []
    for i, name in enumerate(course.lessons):
        path = lesson_source(name)
        if not path.is_file():
            raise InputError(COURSE_FILE, f"lessons[{i}]", f"no exercise {name!r} in {exercises_dir()}",
                             "add exercises/NAME.yaml or remove the lesson")
        out.append(build_lesson(load_exercise(path), i + 1, path))
    for before, after in zip(out, out[1:]):
        before.next_page, after.prev_page = after.page, before.page
    if out:
        out[-1].next_page = CAPSTONE_PAGE
    return out


def find_lesson(name: str, course: CourseSpec | None = None) -> Lesson:
    course = course or load_course()
    all_ = lessons(course)
    for lesson in all_:
        if name in (lesson.name, str(lesson.number), f"{lesson.number:02d}"):
            return lesson
    known = ", ".join([lesson.name for lesson in all_] + [course.capstone.name])
    raise KailabError(f"no lesson {name!r} in the course (lessons: {known})")
