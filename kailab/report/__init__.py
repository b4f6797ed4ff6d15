"""Evidence report: one self-contained HTML page for one or more run directories (or a trial).

Everything is read from the evidence files (verdict.json, run.json, exercise.yaml, timeline.jsonl,
steps/*/ and final/ snapshots); nothing comes from memory or from a cluster. The page has inline
CSS and inline SVG drawn here - no JavaScript and no external resource of any kind, so it opens
offline and can be archived with the evidence. Links to the raw files are relative.

Values from the verdict (expected, observed, figures, times) are printed as written there:
strings verbatim, numbers as JSON writes them. Text is HTML-escaped; in addition "://" in text
is written as ":&#47;&#47;" - it reads the same in a browser, but the page's source then holds
no URL at all, so a plain grep proves it fetches nothing.

The parts, each importing only those before it:
  text    printing values (escaping, verbatim numbers)
  read    runs and trials from evidence directories (file names from kailab.evidence)
  series  what the charts show, from the timeline and snapshots
  svg     the charts
  page    the HTML page, and where it is written
"""

from .page import REPORT_NAME, default_output, render_report, write_report
from .read import Run, Snapshot, expand, load_run, newest_run
from .text import esc, fmt

__all__ = ["REPORT_NAME", "Run", "Snapshot", "default_output", "esc", "expand", "fmt", "load_run",
           "newest_run", "render_report", "write_report"]
