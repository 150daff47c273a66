"""Generated: kio 0.5.0's classes for the Kafka API versions kio 0.6 lacks.

Written by broker/protocol/kio_legacy_gen.py; do not edit. Layout is kio's own,
``<api>/v<N>/{request,response}.py``; broker.protocol.api falls back to these classes.
"""
