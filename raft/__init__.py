"""A KRaft-style Raft library: a pure core, a driver and stores. Knows nothing of Kafka clients."""
