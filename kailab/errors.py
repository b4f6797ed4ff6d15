"""One error type for everything a user can get wrong: it prints as one line naming the fix."""


class KailabError(Exception):
    """A problem the user can act on. `str(err)` is the one line the CLI prints."""

    exit_code = 2


class InputError(KailabError):
    """Bad input in a file: names the file, the field and the fix."""

    def __init__(self, path, field: str, problem: str, fix: str = ""):
        self.path, self.field, self.problem, self.fix = str(path), field, problem, fix
        where = f"{self.path}: {field}" if field else self.path
        super().__init__(f"{where}: {problem}" + (f" ({fix})" if fix else ""))


class InputErrors(InputError):
    """Several problems found at once (every one in a file, say): each prints as its own line.
    As an InputError it reads as its first problem."""

    def __init__(self, errors: list[InputError]):
        self.errors = [e for err in errors for e in getattr(err, "errors", [err])]
        KailabError.__init__(self, "\n".join(str(e) for e in self.errors))
        first = self.errors[0]
        self.path, self.field, self.problem, self.fix = first.path, first.field, first.problem, first.fix


def raise_all(errors: list[InputError]) -> None:
    """Nothing when `errors` is empty; the one error, or all of them as one InputErrors."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise InputErrors(errors)


class BuildError(KailabError):
    """A Go build failed or its inputs cannot be had."""


class LabError(KailabError):
    """The lab cannot be brought up, or is broken."""

    exit_code = 3


class LabBusy(LabError):
    """Another process holds the lab's lock (an `up` or `down` of it is under way there)."""
