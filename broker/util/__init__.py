"""Floor-1 helpers with no Kafka or Skiff knowledge (files, task groups); imported by raft's
stores and by broker's log, CLI and node alike."""
