"""The metrics endpoint: listener parsing, collection on the event loop, formats, ports."""

from __future__ import annotations

import asyncio
import socket
import threading
import urllib.request

import pytest
from prometheus_client.core import GaugeMetricFamily, Metric

from broker.metrics.exporter import (
    DEFAULT_METRICS_LISTENER,
    MetricsServer,
    parse_metrics_listeners,
)

pytestmark = pytest.mark.timeout(60)


def test_parse_metrics_listeners() -> None:
    assert DEFAULT_METRICS_LISTENER == "127.0.0.1:9095"
    assert parse_metrics_listeners(None) == [("127.0.0.1", 9095)]
    assert parse_metrics_listeners("") == []
    assert parse_metrics_listeners([]) == []
    assert parse_metrics_listeners("METRICS://10.0.0.1:7000, :7001") == [
        ("10.0.0.1", 7000), ("0.0.0.0", 7001)]
    assert parse_metrics_listeners(["[::1]:7002"]) == [("::1", 7002)]
    for bad in ("nohost", "h:port", "h:70000"):
        with pytest.raises(ValueError, match=r"metrics\.listeners"):
            parse_metrics_listeners(bad)


def _get(url: str, accept: str | None = None) -> tuple[str, str]:
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.headers["Content-Type"], resp.read().decode()


def test_scrape_collects_on_the_loop_thread_in_both_formats() -> None:
    async def main() -> None:
        loop_thread = threading.get_ident()
        seen: list[int] = []
        state = {"n": 7}

        def collect() -> list[Metric]:
            seen.append(threading.get_ident())
            return [GaugeMetricFamily("skiff_test_value", "A value owned by the loop",
                                      value=state["n"])]

        server = MetricsServer([("127.0.0.1", 0)], collect)
        server.start()
        try:
            (host, port), = server.addresses
            url = f"http://{host}:{port}/metrics"
            ctype, text = await asyncio.to_thread(_get, url)
            assert ctype.startswith("text/plain")
            assert "skiff_test_value 7.0" in text
            assert "process_resident_memory_bytes" in text  # prometheus_client's defaults
            assert "python_gc_collections_total" in text
            state["n"] = 8
            ctype, text = await asyncio.to_thread(
                _get, url, "application/openmetrics-text; version=1.0.0")
            assert ctype.startswith("application/openmetrics-text")
            assert "skiff_test_value 8.0" in text and text.endswith("# EOF\n")
            assert seen == [loop_thread, loop_thread]
        finally:
            await server.stop()

    asyncio.run(main())


def test_an_awaitable_collection_is_awaited_on_the_loop() -> None:
    """A broker of several workers asks them during the scrape (broker/node)."""

    async def main() -> None:
        async def gather() -> list[Metric]:
            await asyncio.sleep(0.05)  # the workers' answers
            return [GaugeMetricFamily("skiff_test_gathered", "Gathered", value=3)]

        server = MetricsServer([("127.0.0.1", 0)], gather, process=False)
        server.start()
        try:
            (host, port), = server.addresses
            _, text = await asyncio.to_thread(_get, f"http://{host}:{port}/metrics")
            assert "skiff_test_gathered 3.0" in text
            # the collection brings the process families itself
            assert "process_resident_memory_bytes" not in text
        finally:
            await server.stop()

    asyncio.run(main())


def test_a_taken_port_fails_with_the_key_named() -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]

    async def main() -> None:
        server = MetricsServer([("127.0.0.1", port)], list)
        with pytest.raises(OSError, match=r"metrics listener 127\.0\.0\.1:\d+ "
                                          r"\(metrics\.listeners\)"):
            server.start()
        assert server.addresses == []

    try:
        asyncio.run(main())
    finally:
        taken.close()


def test_empty_listeners_start_nothing() -> None:
    async def main() -> None:
        server = MetricsServer([], list)
        server.start()
        assert server.addresses == []
        await server.stop()

    asyncio.run(main())
