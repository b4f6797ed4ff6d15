"""Talking to a compiled Ginkgo suite: its command line, and its verbose output read line by line
into one event per finished spec (for the terminal; the counts come from its JUnit report)."""

from __future__ import annotations

from pathlib import Path

from .suites import Suite, registry

SUITE_TIMEOUT = "1h"  # Ginkgo's own default per suite, said out loud
RULE = "------"
FAILURES = ("[FAILED]", "[PANICKED]", "[TIMEDOUT]", "[INTERRUPTED]", "[ABORTED]")


def args(suite: Suite, report: Path, focus: list[str], runtime: str = "binary") -> list[str]:
    """The suite binary's arguments on a lab of `runtime`: the label filter and the skips are that
    runtime's (a kind lab runs KAI's `operated` specs, a binary lab leaves them out), the filter less the
    labels the suite keeps (numa's)."""
    reg = registry()
    out = ["-ginkgo.v", "-ginkgo.no-color", f"-ginkgo.timeout={SUITE_TIMEOUT}",
           f"-ginkgo.label-filter={reg.label_filter(runtime, suite)}", f"-ginkgo.junit-report={report}"]
    out += [f"-ginkgo.skip={text}" for text in suite.skips(runtime)]
    out += [f"-ginkgo.focus={text}" for text in focus]
    return out


def _outcome(line: str) -> str | None:
    if line.startswith("S [SKIPPED]"):
        return "skipped"
    if line.startswith("• "):
        return "FAILED" if any(f in line for f in FAILURES) else "passed"
    return None


class Progress:
    """Feed it output lines; it returns (outcome, spec text) when a spec has finished.
    Ginkgo -v prints a passed spec as `rule, text, location, • [secs]` and a skipped or failed one's
    summary as `rule, S [SKIPPED]|• [FAILED] [secs], text [It] …`."""

    def __init__(self) -> None:
        self.name = ""
        self._after_rule = False
        self._waiting: str | None = None  # an outcome whose spec text is on the next line

    def feed(self, line: str) -> tuple[str, str] | None:
        text = line.rstrip("\n")
        if text.startswith(RULE):
            self._after_rule, self._waiting = True, None
            return None
        outcome = _outcome(text)
        if self._after_rule:
            self._after_rule = False
            if outcome:
                self._waiting = outcome
                return None
            self.name = text.strip()
            return None
        if self._waiting:
            outcome, self._waiting = self._waiting, None
            self.name = text.replace(" [It] ", " ").strip()
            return outcome, self.name
        return (outcome, self.name) if outcome else None
