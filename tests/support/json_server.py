"""A loopback HTTP server answering every GET with a JSON body (a JWKS endpoint in the
OAUTHBEARER tests), until the `with` block ends."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Callable, Iterator
from typing import Any


@contextlib.contextmanager
def serve_json(body: Callable[[], bytes], path: str = "/jwks") -> Iterator[str]:
    """Serves `body()` (called per request) on 127.0.0.1; yields the URL with `path`."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = body()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{path}"
    finally:
        server.shutdown()
        server.server_close()
