"""Kafka's security model for Skiff: TLS listeners and connections, SASL, principals.

Pure cores (settings, principal mapping, the SASL state machine, SCRAM) with thin IO
shells in the server and in KafkaConnection. See docs/security.md.
"""
