"""Share groups (KIP-932): membership, share-partitions, share sessions."""
