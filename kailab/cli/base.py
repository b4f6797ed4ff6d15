"""The `kailab` command group, its consoles and shared options (each verb group in its own module)."""

from __future__ import annotations

import os

import click
from rich.console import Console

console = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)


def name_option(f):
    return click.option("--name", default=lambda: os.environ.get("KAILAB_LAB", "default"),
                        show_default="default", help="Lab name (several labs can run side by side).")(f)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kailab")
def cli() -> None:
    """A validation lab for the KAI Scheduler on fake-GPU Kubernetes fleets."""
