"""Helpers shared by the integration and compat tests."""
