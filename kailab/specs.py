"""Loading YAML spec files safely and turning validation errors into one clear line."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from .errors import InputError

M = TypeVar("M", bound=BaseModel)

MAX_SPEC_BYTES = 1 << 20  # spec files are hand-written: a megabyte is already absurd


class _NoAliasLoader(yaml.SafeLoader):
    """Safe YAML without anchors/aliases: defeats 'billion laughs' bombs in user files."""

    def compose_node(self, parent, index):  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.constructor.ConstructorError(
                None, None, "YAML aliases (*name) are not allowed in kailab files", event.start_mark)
        return super().compose_node(parent, index)


def read_yaml(path: Path) -> object:
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "", "file not found", "check the path or the name")
    if path.stat().st_size > MAX_SPEC_BYTES:
        raise InputError(path, "", f"file is larger than {MAX_SPEC_BYTES} bytes", "split it")
    try:
        return yaml.load(path.read_text(), Loader=_NoAliasLoader)  # noqa: S506 - safe subclass
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "YAML"
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise InputError(path, where, f"not valid YAML: {problem}", "fix the syntax") from None


def field_path(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def validate(model: type[M], data: object, path: Path, fixes: dict[str, str] | None = None) -> M:
    """Validate `data` as `model`; the first error becomes an InputError naming file and field."""
    if not isinstance(data, dict):
        raise InputError(path, "", "expected a mapping at the top level", "see the documented format")
    try:
        return model.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        # drop union/discriminator tags pydantic puts in the location: users never wrote them
        noise = {"count", "condition", "event", "int", "Range", "constrained-int"}
        loc = field_path(tuple(p for p in first["loc"]
                               if not str(p).startswith("function-") and str(p) not in noise))
        kind = first["type"]
        if kind == "extra_forbidden":
            problem, fix = "unknown field", "remove it or check its spelling"
        elif kind == "missing":
            problem, fix = "required field is missing", "add it"
        else:
            problem = first["msg"].removeprefix("Value error, ")
            fix = ""
        for key, hint in (fixes or {}).items():
            if loc.endswith(key):
                fix = hint
        raise InputError(path, loc, problem, fix) from None
