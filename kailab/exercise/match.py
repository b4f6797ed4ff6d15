"""Partial matching of API objects (chainsaw/kuttl-style asserts) and the run's names in files.

Pure functions, shared by the format's validation (spec.py) and the checks (checks.py).

A partial object matches when every key it writes matches: mappings recursively, lists when
every element written matches some element of the object's list, scalars by equality (0.5 and
"0.5" are equal: KAI writes some numbers as strings). A mapping made only of operator keys is an
expression for the value: `{regex: ...}` (strings, searched), `{min: , max: }` (numbers),
`{exists: true|false}` (the key is there or not).
"""

from __future__ import annotations

import re

OPERATORS = ("regex", "min", "max", "exists")
PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")


def is_expression(value: object) -> bool:
    return isinstance(value, dict) and bool(value) and all(k in OPERATORS for k in value)


def check_pattern(expected: object, where: str = "match") -> None:
    """Raise ValueError naming the place of a malformed expression (a bad regex, min > max, ...)."""
    if isinstance(expected, dict):
        if is_expression(expected):
            if "regex" in expected:
                if not isinstance(expected["regex"], str):
                    raise ValueError(f"{where}.regex: a regular expression is a string")
                try:
                    re.compile(expected["regex"])
                except re.error as err:
                    raise ValueError(f"{where}.regex: not a regular expression ({err})") from None
            for bound in ("min", "max"):
                if bound in expected and (isinstance(expected[bound], bool)
                                          or not isinstance(expected[bound], (int, float))):
                    raise ValueError(f"{where}.{bound}: a number")
            if "exists" in expected and not isinstance(expected["exists"], bool):
                raise ValueError(f"{where}.exists: true or false")
            if isinstance(expected.get("min"), (int, float)) and isinstance(expected.get("max"), (int, float)) \
                    and expected["min"] > expected["max"]:
                raise ValueError(f"{where}: min {expected['min']} is greater than max {expected['max']}")
            return
        for key, value in expected.items():
            if not isinstance(key, str):
                raise ValueError(f"{where}: keys are strings ({key!r})")
            check_pattern(value, f"{where}.{key}")
    elif isinstance(expected, list):
        for i, value in enumerate(expected):
            check_pattern(value, f"{where}[{i}]")


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _short(value: object) -> str:
    text = _text(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _number(value: object) -> float | None:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


MISSING = object()


def _expression(expected: dict, actual: object, where: str) -> str | None:
    if "exists" in expected and expected["exists"] != (actual is not MISSING):
        return f"{where}: {'missing' if actual is MISSING else 'present (' + _short(actual) + ')'}"
    if actual is MISSING:
        return f"{where}: missing" if set(expected) - {"exists"} else None
    if "regex" in expected and not re.search(expected["regex"], _text(actual)):
        return f"{where}: {_short(actual)!r} does not match /{expected['regex']}/"
    if "min" in expected or "max" in expected:
        n = _number(actual)
        if n is None:
            return f"{where}: {_short(actual)!r} is not a number"
        if "min" in expected and n < expected["min"]:
            return f"{where}: {_short(actual)} is below {expected['min']}"
        if "max" in expected and n > expected["max"]:
            return f"{where}: {_short(actual)} is above {expected['max']}"
    return None


def mismatch(expected: object, actual: object, where: str = "") -> str | None:
    """Why `actual` does not match the partial object `expected` (None: it matches)."""
    if is_expression(expected):
        return _expression(expected, actual, where or ".")  # type: ignore[arg-type]
    if actual is MISSING:
        return f"{where}: missing"
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{where or '.'}: {_short(actual)!r} is not a mapping"
        for key, value in expected.items():
            found = mismatch(value, actual.get(key, MISSING), f"{where}.{key}")
            if found:
                return found
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return f"{where}: {_short(actual)!r} is not a list"
        for i, item in enumerate(expected):
            misses = [mismatch(item, a, f"{where}[{j}]") for j, a in enumerate(actual)]
            if all(misses):
                nearest = f" (e.g. {misses[0]})" if misses else " (the list is empty)"
                return f"{where}[{i}]: no element matches{nearest}"
        return None
    if expected == actual or _text(expected) == _text(actual):
        return None
    return f"{where}: {_short(actual)!r}, not {_short(expected)!r}"


# ------------------------------------------------------------------------------ the run's names
def placeholders(value: object) -> list[str]:
    """Every ${...} written in the strings of `value`, in order."""
    if isinstance(value, str):
        return PLACEHOLDER.findall(value)
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in placeholders(k) + placeholders(v)]
    if isinstance(value, list):
        return [p for v in value for p in placeholders(v)]
    return []


def fill(value: object, names: dict[str, str]) -> object:
    """`value` with each ${name} replaced by the run's name for it (validated before the run)."""
    if isinstance(value, str):
        return PLACEHOLDER.sub(lambda m: names[m.group(1)], value)
    if isinstance(value, dict):
        return {fill(k, names): fill(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, names) for v in value]
    return value
