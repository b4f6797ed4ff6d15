"""The learner's progress: which lessons (and the capstone) have passed, in one small JSON file."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

from ..exercise.load import load_exercise
from ..paths import state_dir
from .model import CourseSpec, lesson_source, load_course


def status_path() -> Path:
    """The learner's progress (KAILAB_COURSE_STATUS overrides: a classroom machine, a test)."""
    return Path(os.environ.get("KAILAB_COURSE_STATUS") or state_dir().parent / "course.json")


def load_status() -> dict:
    """{"done": {name: {"at", "evidence"}}}; a missing or corrupt file counts as nothing done."""
    try:
        data = json.loads(status_path().read_text())
    except (OSError, ValueError):
        return {"done": {}}
    if not isinstance(data, dict) or not isinstance(data.get("done"), dict):
        return {"done": {}}
    return data


def mark_done(name: str, evidence: str) -> None:
    data = load_status()
    data["done"][name] = {"at": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                          "evidence": evidence}
    path = status_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")  # written whole, then renamed: never half a file
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    os.replace(tmp, path)


def course_rows(course: CourseSpec | None = None) -> list[tuple[str, str, str, str]]:
    """(number, name, title, status) in teaching order, the capstone last. Needs no cluster."""
    course = course or load_course()
    done = load_status()["done"]
    rows = []
    for i, name in enumerate(course.lessons, 1):
        path = lesson_source(name)
        title = load_exercise(path).title if path.is_file() else "(exercise file missing)"
        rows.append((str(i), name, title, "done" if name in done else "not started"))
    cap = course.capstone
    rows.append(("capstone", cap.name, cap.title, "done" if cap.name in done else "not started"))
    return rows


def mark_if_passed(name: str, outcome) -> bool:
    """Only a passing run (a runner Outcome) marks a lesson or the capstone done."""
    if outcome.verdict != "passed":
        return False
    mark_done(name, outcome.evidence)
    return True
