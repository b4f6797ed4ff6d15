"""The kind runtime's pinned versions and names (kailab/data/kind.yaml)."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

import yaml


@lru_cache(maxsize=1)
def pins() -> dict:
    """The pinned versions and names in kailab/data/kind.yaml."""
    return yaml.safe_load(resources.files("kailab").joinpath("data/kind.yaml").read_text())
