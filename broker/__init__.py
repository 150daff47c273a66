"""Skiff broker: protocol, log, replication, controller, groups, admin."""
