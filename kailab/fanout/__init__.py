"""Fan-out: independent units of a run (an exercise, a fill's design x seed, a replay's variant, a
trial's KAI version) as Kubernetes Jobs on a cluster the user has, each pod bringing a binary lab up
inside itself from its KAI version's lab image (`kailab tools lab-image`), the evidence copied back
and brought together as if run here.

unit.py is what one unit is, how its evidence is read and the objects that run it (pure); run.py runs
units on a cluster and brings their evidence back; fill.py and replay.py make a fill's and a replay's
units and merge what they bring back (a trial's are kailab/trial.py's, above this package). Design and
cost model: docs/dev/fan-out-design.md.
"""
