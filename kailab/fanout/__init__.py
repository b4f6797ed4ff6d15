"""Fan-out: independent units of a run (an exercise, a fill's design x seed, a replay's variant, a
trial's KAI version) as Kubernetes Jobs on a cluster the user has, each pod bringing a binary lab up
inside itself from its KAI version's lab image (`kailab tools lab-image`), the evidence copied back
and brought together as if run here.

unit.py is what one unit is, how its evidence is read and the objects that run it (pure); run.py runs
units on a cluster and brings their evidence back; costs.py what a unit asks of a node. Only how a
unit runs as a Job lives here: each driver makes its own units and merges what they bring back
(compare.py, trial.py, twin/units.py, replay/units.py, replay/fill_units.py), and kailab/variants runs
them side by side. Design and cost model: docs/dev/fan-out-design.md.
"""
