"""KAI version trials in vClusters, run for real (`kailab trial --runtime kind|existing`).

  run.py       the sequence: host, one vCluster per version with KAI inside, the exercises of every
               version at once through the same runner, the blast radius, the timed clean-up
  host.py      what the trial needs of its host, read from it; the KWOK Stage it adds there
  snapshot.py  the host before and after, and their difference (the host-untouched promise)
  watch.py     the host watched while versions run (the no-interference promise)
  state.py     the trial's folder and owner (a dead trial is cleaned up by the next), the sentinel
               workload, KAI inside a vCluster (what ran, made to misbehave)
  tools.py     the commands and where they come from (the vcluster CLI built here)

The plan itself — every command of a version, as data — is plan.py's (pure: what each version's vCluster runs);
vCluster's CLI, images and chart are built by kailab/images/vcluster.py.
"""
