"""structlog configuration: JSON lines for machines, console for people, one switch."""

from __future__ import annotations

import logging
import sys

import structlog


def configure_logging(fmt: str = "console", level: str = "INFO") -> None:
    """`fmt` is "json" or "console"; `level` a standard logging level name."""
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"log level {level!r} is not one of DEBUG, INFO, WARNING, ERROR")
    renderer: structlog.typing.Processor
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer()
    elif fmt == "console":
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    else:
        raise ValueError(f"log format {fmt!r} is not one of json, console")
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        # one write per event, its newline included: print() writes the newline apart, and
        # with unbuffered stderr (PYTHONUNBUFFERED, as in the image) another process or
        # thread on the same stderr, or a log reader, could see two events on one line
        logger_factory=structlog.WriteLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )
