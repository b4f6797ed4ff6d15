"""Variants side by side: the one room every driver that compares runs its variants in.

A variant is one lab's share of a run that compares: a stack's column (`kailab compare`), a KAI
version (`kailab trial`, the vCluster trial), a twin's version or design (`kailab twin --against`), a
replay's design, version or stack, a fill's design, an e2e lane. The driver says what one variant
does on a lab of its own; this room runs them:

- `side_by_side(variants, run_one, at_once)`: here, each on a thread with its own lab; the first
  error or Ctrl-C sets the shared stop every variant may watch to end early and take its lab down.
- `on_cluster(units, ...)`: there, each unit (kailab/fanout/unit.py: a variant as one `kailab` command
  in a pod) a Job on a cluster the user has, its evidence brought back (kailab/fanout/run.py).

A driver's units (what its variants are as commands, how their evidence merges) live with the driver:
compare.py, trial.py, twin/units.py, replay/units.py, replay/fill_units.py.
"""

from .here import at_once_for, side_by_side
from .jobs import on_cluster

__all__ = ["at_once_for", "on_cluster", "side_by_side"]
