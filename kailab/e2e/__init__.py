"""Running KAI's own e2e suites on labs: the orchestration (session.py) above the lab, using what the KAI
stack knows about its suites (kailab.stacks.kai.e2e: which can run, how to build them, how a cluster must
look, how to read their JUnit)."""
