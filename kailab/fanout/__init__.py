"""Fan-out: independent units of a run (an exercise, later a fill's design x seed, a trial's version)
as Kubernetes Jobs on a cluster the user has, each pod bringing a binary lab up inside itself from the
lab image (`kailab tools lab-image`), the evidence copied back as if run here.

unit.py is what one unit is and the objects that run it (pure); run.py runs them on a cluster and
brings their evidence back. Design and cost model: docs/dev/fan-out-design.md.
"""
