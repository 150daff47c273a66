"""Skiff broker: protocol, log, replication, controller, groups, admin."""

from broker import native as _native

_native.activate()  # before any compiled module is imported: a stale copy is never used
