"""The training course: guided lessons built from the exercise files.

One source of truth: a lesson IS an exercise (exercises/<name>.yaml). Its concept, each step's
`explain` and `predict`, and the answers (derived from the step's `expect`/`stays`) come from the
file; kailab/data/course.yaml only orders the lessons and holds the capstone brief.

Modules, lower first (a module imports only those above it in this list):
- `words`: expectations, actions, shares and check results in plain English.
- `model`: course.yaml, the lessons and their steps.
- `render`: docs/course/ (deterministic: a test compares it byte for byte).
- `progress`: which lessons the learner has done.
- `lesson`: the exercise run with the ordinary runner one step at a time: before each step it
  asks the learner's prediction, after it reveals (their answer vs KAI's, right or not), shows
  what was checked, explains why, and waits while the lab keeps the step's state.
- `capstone`: a learner's queue tree is checked statically (one line per problem), then run
  against the lab inside an exercise built from it whose expectations the learner does not see
  in advance.
"""

from .capstone import capstone_brief, capstone_exercise, capstone_report, check_tree, load_tree, run_capstone
from .lesson import interactive, intro, judge, reveal, run_lesson, whole_run
from .model import (
    CAPSTONE_PAGE,
    CAPSTONE_STEPS,
    COURSE_FILE,
    Capstone,
    CourseSpec,
    Echo,
    Lesson,
    StepLesson,
    Team,
    build_lesson,
    find_lesson,
    lessons,
    load_course,
)
from .progress import course_rows, load_status, mark_done, status_path
from .render import (
    DOCS_DIR,
    LAB_BLOCK,
    WATCH_COMMANDS,
    lab_commands,
    render_all,
    render_capstone,
    render_index,
    render_markdown,
)
from .words import INVARIANT_TEXT, METRICS, action_lines, answer_lines, describe_expect, result_text, share_words

__all__ = [
    "CAPSTONE_PAGE", "CAPSTONE_STEPS", "COURSE_FILE", "DOCS_DIR", "INVARIANT_TEXT", "LAB_BLOCK", "METRICS",
    "WATCH_COMMANDS", "Capstone", "CourseSpec", "Echo", "Lesson", "StepLesson", "Team",
    "action_lines", "answer_lines", "build_lesson", "capstone_brief", "capstone_exercise", "capstone_report",
    "check_tree", "course_rows", "describe_expect", "find_lesson", "interactive", "intro", "judge",
    "lab_commands", "lessons", "load_course", "load_status", "load_tree", "mark_done", "render_all",
    "render_capstone", "render_index", "render_markdown", "result_text", "reveal", "run_capstone",
    "run_lesson", "share_words", "status_path", "whole_run",
]
