"""The Kafka wire (floor 1 of docs/architecture.md): frames, request and response headers,
varints and tagged fields, the record-batch codec, compression, legacy message sets, the
narrow Produce/Fetch encoders, zero-copy response chunks and the client connection. Imports
nothing of the project but broker.errors and broker.util; raft's IO shell and every broker
package build on it."""
