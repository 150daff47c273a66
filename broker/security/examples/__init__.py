"""Example plugins for `authorizer.class.name` and `principal.builder.class`
(broker/security/plugins.py, docs/security.md)."""
