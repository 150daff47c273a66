"""Consumer groups and committed offsets: pure coordinators per __consumer_offsets partition."""
