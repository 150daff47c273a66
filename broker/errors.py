"""One exception type that carries a Kafka error code to the handler that answers the client."""

from __future__ import annotations

from kio.schema.errors import ErrorCode


class KafkaError(Exception):
    """An error a client sees as `error_code`; the message goes to logs and error_message."""

    def __init__(self, error_code: ErrorCode, message: str = "") -> None:
        super().__init__(f"{error_code.name}: {message}" if message else error_code.name)
        self.error_code = error_code
        self.message = message
