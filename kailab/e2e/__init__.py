"""KAI's own e2e suites (Ginkgo, test/e2e/suites in KAI's repository) run against kailab labs, in one
place: which suites a lab can run, on which runtime, and why the others cannot (suites.py, from
data/kai-e2e.yaml); their compilation from the registered KAI repository (build.py, ginkgo.py); the
cluster made to look the way KAI's e2e expects (cluster.py); their JUnit read (junit.py); and the
session that runs them on one lab or several side by side and writes the evidence (session.py)."""
