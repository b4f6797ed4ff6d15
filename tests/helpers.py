"""Assertions shared by the test modules."""

from __future__ import annotations

import pytest

from kailab.errors import InputError


def assert_one_line_input_error(load, path, *fragments: str) -> str:
    """`load(path)` must raise an InputError of one line naming the file and every fragment."""
    with pytest.raises(InputError) as info:
        load(path)
    msg = str(info.value)
    assert len(msg.splitlines()) == 1 and "\n" not in msg, msg
    assert str(path) in msg, msg
    for fragment in fragments:
        assert fragment in msg, f"{fragment!r} not in {msg!r}"
    return msg
