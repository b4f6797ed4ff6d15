"""docs/troubleshooting.md quotes the refusals kailab really prints: each entry's heading quotes a
message (`…` where it varies, or an example value), and every stretch of words it quotes between
those is in a string of kailab's code. A message reworded in the code, and not in the doc, fails
here. Every entry says its fix."""

from __future__ import annotations

import ast
import re
from functools import lru_cache

from kailab.paths import PROJECT_ROOT

DOC = PROJECT_ROOT / "docs" / "troubleshooting.md"
# values the doc's headings show where the code fills something in
EXAMPLES = ["v0.17.0", "'NAME'", "'default'", "NAME", "DIR", "128", "small", "/usr/bin/go", "go1.19",
            "Operation not permitted", "KAILAB_KIND", "kind", "PyTorchJob", "lessons", "alibaba-gpu-2023",
            "fleets/NAME.yaml"]
SPLIT = re.compile("|".join(["…", r"\(", r"\)", *(rf"(?<![\w/.-]){re.escape(e)}(?![\w/.-])"
                                                   for e in sorted(EXAMPLES, key=len, reverse=True))]))
GENERIC = {"FILE: FIELD: problem (fix)"}  # the shape of every file error, not one message
NOT_MESSAGES = {"Tests"}  # sections about outcomes, not refusals


@lru_cache(maxsize=1)
def _code_strings() -> list[str]:
    """Every string in kailab's code, an f-string cut where it fills something in, backticks dropped."""
    pieces = []
    for path in (PROJECT_ROOT / "kailab").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.JoinedStr):
                pieces += [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                pieces.append(node.value)
    return [p.replace("`", "") for p in pieces]


def _entries() -> list[tuple[str, str, str]]:
    """(section, heading, body) of every `###` entry."""
    out, section = [], ""
    parts = re.split(r"^(#{2,3} .+)$", DOC.read_text(), flags=re.M)
    for heading, body in zip(parts[1::2], parts[2::2]):
        if heading.startswith("## "):
            section = heading[3:].strip()
        else:
            out.append((section, heading[4:].strip(), body))
    return out


def _fragments(quoted: str) -> list[str]:
    """The stretches of a quoted message worth finding in the code: two words or more."""
    parts = (f.strip(" .,:;'") for f in SPLIT.split(quoted))
    return [f for f in parts if len(f.split()) >= 2 or len(f) >= 10]


def test_the_page_has_entries_each_with_a_fix():
    entries = _entries()
    assert len(entries) >= 20
    no_fix = [h for _, h, body in entries if "**Fix:**" not in body]
    assert not no_fix, f"entries with no **Fix:**: {no_fix}"


def test_every_quoted_message_is_one_the_code_prints():
    code = _code_strings()
    wrong = []
    for section, heading, _ in _entries():
        if section in NOT_MESSAGES:
            continue
        for quoted in re.findall(r"`([^`]+)`", heading):
            if quoted in GENERIC:
                continue
            fragments = _fragments(quoted)
            if not fragments:
                wrong.append(f"{quoted!r}: quotes nothing to check (write more of the message)")
            wrong += [f"{quoted!r}: {f!r} is in no string of kailab's code"
                      for f in fragments if not any(f in piece for piece in code)]
    assert not wrong, "docs/troubleshooting.md quotes messages kailab does not print:\n" + "\n".join(wrong)


def test_the_check_tells_a_real_message_from_a_made_up_one():
    code = _code_strings()
    real = "lab 'NAME' is busy: another kailab up/down holds its lock"
    made_up = "lab 'NAME' is busy: someone else holds it"
    assert all(any(f in p for p in code) for f in _fragments(real))
    assert not all(any(f in p for p in code) for f in _fragments(made_up))
