"""KAI's own e2e suites (Ginkgo, test/e2e/suites in KAI's repository) run against a kailab lab.

For people who patch KAI: the suites of the lab's KAI version are compiled from the registered KAI
repository (suites.py says which can run on a lab, and why the others cannot), the lab is made to
look the way KAI's e2e expects a cluster to look (cluster.py), and every suite's result is read from
its JUnit report (junit.py). kailab.e2e.session runs them on one lab or several side by side and writes
the evidence: per suite output and JUnit, KAI's logs, one merged JUnit, summary and report.html.
"""
