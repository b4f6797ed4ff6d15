"""Printing evidence values: the lowest layer, shared by the reader, the charts and the page."""

from __future__ import annotations

import html
import json


def esc(value) -> str:
    """HTML-escaped text; '://' is written as an entity so the source never holds a URL."""
    return html.escape(str(value), quote=True).replace("://", ":&#47;&#47;")


def fmt(value) -> str:
    """A value exactly as the evidence file has it: strings verbatim, the rest as JSON writes it."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
