"""Loading YAML spec files safely and turning validation errors into one clear line."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from .errors import InputError

M = TypeVar("M", bound=BaseModel)

MAX_SPEC_BYTES = 1 << 20  # spec files are hand-written: a megabyte is already absurd


# anchors and aliases save repeating a manifest by hand; a file whose aliases expand beyond this
# many nodes (a "billion laughs" bomb) or into themselves is refused before anything is built
MAX_EXPANDED_NODES = 100_000


# libyaml's parser where PyYAML has it (the pure-Python one was most of a `validate`'s CPU); the
# constructor and the resolvers below are Python either way
_BASE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _BoundedAliasLoader(_BASE):  # type: ignore[misc,valid-type]
    """Safe YAML whose anchors/aliases (and `<<:` merges) may expand to MAX_EXPANDED_NODES at most."""

    # YAML 1.2's booleans: only true/false. YAML 1.1 also reads on/off/yes/no as booleans, which
    # would turn the key `on:` (placement by node) into True and `team: no` into false
    yaml_implicit_resolvers = {k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:bool"]
                               for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}

    def get_single_node(self):  # type: ignore[override]
        node = super().get_single_node()
        if node is not None:
            _expanded_size(node, {}, set())
        return node


_BoundedAliasLoader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                          list("tTfF"))


def _expanded_size(node, sizes: dict, open_: set) -> int:
    """How many nodes `node` becomes once every alias is expanded (shared nodes counted per use)."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_:
        raise yaml.constructor.ConstructorError(None, None, "a YAML alias refers to itself", node.start_mark)
    open_.add(key)
    total = 1
    if isinstance(node, yaml.SequenceNode):
        total += sum(_expanded_size(child, sizes, open_) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        total += sum(_expanded_size(k, sizes, open_) + _expanded_size(v, sizes, open_) for k, v in node.value)
    open_.discard(key)
    if total > MAX_EXPANDED_NODES:
        raise yaml.constructor.ConstructorError(
            None, None, f"YAML aliases expand to more than {MAX_EXPANDED_NODES} nodes", node.start_mark)
    sizes[key] = total
    return total


# union/discriminator tags pydantic puts in error locations: users never wrote them (models that
# use tagged unions add their tags here)
UNION_TAGS: set[str] = {"int", "Range", "constrained-int"}

def is_file(path: Path) -> bool:
    """Path.is_file, but False (not OSError) for names too long for the filesystem."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def read_yaml(path: Path) -> object:
    path = Path(path)
    if not is_file(path):
        raise InputError(path, "", "file not found", "check the path or the name")
    if path.stat().st_size > MAX_SPEC_BYTES:
        raise InputError(path, "", f"file is larger than {MAX_SPEC_BYTES} bytes", "split it")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(path, "", "not UTF-8 text", "save it as UTF-8") from None
    except OSError as err:
        raise InputError(path, "", f"cannot be read: {err.strerror or err}", "check its permissions") from None
    try:
        return yaml.load(text, Loader=_BoundedAliasLoader)  # noqa: S506 - safe subclass
    except yaml.YAMLError as err:
        if "nesting depth" in str(getattr(err, "problem", "")):  # libyaml's bound: 1,000 levels
            raise InputError(path, "YAML", "nested too deeply", "flatten it") from None
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "YAML"
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise InputError(path, where, f"not valid YAML: {one_line(problem)}", "fix the syntax") from None
    except RecursionError:
        raise InputError(path, "YAML", "nested too deeply", "flatten it") from None
    except ValueError as err:  # a scalar YAML resolves but Python cannot build: 2024-13-45, a 5000-digit int
        raise InputError(path, "YAML", f"bad value: {one_line(str(err))}", "fix the value") from None


def one_line(text: str) -> str:
    """`text` as it can sit inside a one-line message: line breaks and control characters escaped."""
    return text if text.isprintable() else repr(text)[1:-1]


def field_path(loc: tuple) -> str:
    out = ""
    for part in loc:
        part = part if isinstance(part, int) else one_line(str(part))
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def validate(model: type[M], data: object, path: Path, fixes: dict[str, str] | None = None) -> M:
    """Validate `data` as `model`; the first error becomes an InputError naming file and field."""
    valid, errors = validate_all(model, data, path, fixes)
    if errors:
        raise errors[0]
    return valid  # type: ignore[return-value]


# the tags of a union's branches where pydantic tries each (a discriminated union, whose tags
# UNION_TAGS also holds, tries one): the errors past one of these are one problem told several ways
BRANCH_TAGS = {"int", "Range", "constrained-int"}


def _tagless(loc: tuple) -> bool:
    return not any(str(p).startswith("function-") or str(p) in UNION_TAGS for p in loc)


def _branch(part: object) -> bool:
    return str(part).startswith("function-") or str(part) in BRANCH_TAGS


def validate_all(model: type[M], data: object, path: Path,
                 fixes: dict[str, str] | None = None) -> tuple[M | None, list[InputError]]:
    """Validate `data` as `model`: (the model, []) or (None, one InputError per problem, in the file's
    order). A problem is one place in the file: the errors pydantic gives for each branch of a union
    there (a count as number or range) are one problem, told as its most helpful branch."""
    if not isinstance(data, dict):
        return None, [InputError(path, "", "expected a mapping at the top level", "see the documented format")]
    try:
        return model.model_validate(data), []
    except ValidationError as err:
        groups: dict[tuple, list[dict]] = {}
        for e in err.errors():
            raw = tuple(e["loc"])
            cut = next((i for i, p in enumerate(raw) if _branch(p)), len(raw))
            groups.setdefault(raw[:cut], []).append(e)
        return None, [_input_error(group, path, fixes) for group in groups.values()]


# pydantic's error type prefix (int_parsing, float_type, ...) -> what to write instead
_SCALAR_FIXES = {"int": "write a whole number, like 2", "float": "write a number, like 0.5",
                 "bool": "write true or false", "string": "write text; quote it if it reads as a number"}


def _input_error(errors: list[dict], path: Path, fixes: dict[str, str] | None) -> InputError:
    """One problem's InputError from pydantic's errors at one place (several: a union's branches)."""
    first = errors[0]
    raw = tuple(first["loc"])
    if "constrained-int" in raw and isinstance(first.get("input"), dict):
        # a Count (number | range) given a mapping: the range's complaint is the one that helps
        prefix = raw[:raw.index("constrained-int")]
        first = next((e for e in errors[1:] if tuple(e["loc"])[:len(prefix)] == prefix), first)
    # drop union/discriminator tags pydantic puts in the location: users never wrote them
    loc = field_path(tuple(p for p in first["loc"] if _tagless((p,))))
    kind = first["type"]
    if kind == "extra_forbidden":
        problem, fix = "unknown field", "remove it or check its spelling"
    elif kind == "missing":
        problem, fix = "required field is missing", "add it"
    else:
        problem = one_line(first["msg"].removeprefix("Value error, "))
        fix = ""
        scalar = kind.split("_")[0]
        if scalar in _SCALAR_FIXES and kind.endswith(("_parsing", "_type")):  # what was written, and what to write
            given = first.get("input")
            if isinstance(given, (str, int, float, bool)) or given is None:
                problem += f", not {one_line(repr(given))[:40]}"
            fix = _SCALAR_FIXES[scalar]
    for key, hint in (fixes or {}).items():
        if loc.endswith(key):
            fix = hint
    return InputError(path, loc, problem, fix)
