"""What the group, transaction and share coordinators share: the runtime that runs their
pure cores (runtime.py), the write path those cores are built on (core.py) and the hash that
places a key on a partition of their internal topic (partitioning.py)."""
