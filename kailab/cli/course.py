"""`kailab course`, `lesson`: the training course."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import click
from rich.table import Table

from ..errors import KailabError
from .base import cli, name_option, out


@cli.command()
@click.option("--render", is_flag=True, help="Regenerate docs/course/ from the exercise files.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="With --render: where to write (default: docs/course/).")
def course(render, out_dir) -> None:
    """List the training course's lessons in order, with your progress."""
    from .. import course as course_mod

    if render:
        for path in course_mod.render_all(Path(out_dir) if out_dir else None):
            out.print(f"written: {path}", markup=False, highlight=False)
        return
    table = Table(title="kailab course (kailab lesson NAME)")
    for col in ("#", "lesson", "title", "status"):
        table.add_column(col)
    for number, name_, title, state in course_mod.course_rows():
        table.add_row(number, name_, title, f"[green]{state}[/]" if state == "done" else state)
    out.print(table)
    out.print(f"progress: {course_mod.status_path()}", markup=False, highlight=False)


@cli.command()
@click.argument("lesson_name", metavar="LESSON")
@click.option("--no-pause", is_flag=True, help="Do not wait for predictions (also when stdin is not a terminal).")
@click.option("--check", "check_file", type=click.Path(dir_okay=False), default=None,
              help="capstone only: your queue tree file to check.")
@click.option("--evidence", "evidence_root", type=click.Path(file_okay=False), default=None,
              help="Where the run's evidence goes (default: evidence/).")
@click.option("--watch", is_flag=True,
              help="After each step, `kailab top`'s picture of the lab: KAI's queues, waits, GPUs, evictions.")
@name_option
def lesson(lesson_name, no_pause, check_file, evidence_root, watch, name) -> None:
    """A guided lesson: predict each step, run the exercise on the lab, compare (or: capstone --check FILE)."""
    from .. import course as course_mod

    spec = course_mod.load_course()
    root = Path(evidence_root) if evidence_root else None
    if lesson_name == spec.capstone.name:
        if check_file is None:
            for line in course_mod.capstone_brief(spec):
                click.echo(line)
            return
        sys.exit(course_mod.run_capstone(check_file, name, click.echo, root, spec))
    if check_file is not None:
        raise KailabError(f"--check is for `kailab lesson {spec.capstone.name}` only")
    chosen = course_mod.find_lesson(lesson_name, spec)
    pause = not no_pause and course_mod.interactive()
    with contextlib.ExitStack() as stack:
        picture = None
        if watch:
            def picture(lab):  # the watch starts once the lesson has its lab (no lab: its own error first)
                from ..top import Top
                from ..top.screen import as_text
                from .top import lab_prometheus

                view = stack.enter_context(Top(lab.kubeconfig, lab_prometheus(lab)))
                return lambda: as_text(view.snapshot(), f"lab {lab.name!r}", width=out.width)
        code = course_mod.run_lesson(chosen, name, pause, click.echo, evidence_root=root, picture=picture)
    sys.exit(code)
