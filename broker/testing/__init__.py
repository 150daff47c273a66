"""Helpers for tests and benchmarks, with no test framework: for projects that use Skiff,
testcontainers' SkiffContainer (container.py); for Skiff's own tests and bench/, nodes and
clusters of real processes on loopback (node.py, cluster.py), in-process nodes
(inprocess_cluster.py, quorum.py), Apache Kafka 4.4 nodes and clusters as the reference
(kafka_ref.py), certificates (tls.py), a raw Kafka wire client (wire.py),
the container engine (engine.py) and load under a quota (quota_load.py). Nothing else in the
broker imports this package."""
