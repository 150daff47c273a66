"""Generated: kio-style classes for the Kafka 4.4 API versions kio 0.6.5 lacks.

Written by broker/protocol/kio_next_gen.py; do not edit. Layout is kio's own,
``<api>/v<N>/{request,response}.py``; broker.protocol.api falls back to these classes.
"""
