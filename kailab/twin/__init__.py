"""Your cluster's twin: a lab made from KAI's own scheduler snapshot (`/get-snapshot`), its nodes as the
fleet, its queues, PodGroups and pods put in as they were (bound pods on their nodes, pending ones for KAI
to decide), and KAI started on the snapshot's configuration. snapshot.py reads and checks the file,
keep.py keeps only what scheduling needs, plan.py orders what goes in, run.py brings the twin up."""
