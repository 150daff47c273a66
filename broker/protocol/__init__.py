"""Kafka protocol glue: record batches, compression codecs, legacy message formats."""
