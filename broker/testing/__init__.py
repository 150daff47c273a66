"""Helpers for the tests of projects that use Skiff (testcontainers' SkiffContainer)."""
