"""Feeds the reference pipeline: JSON click events into a Skiff topic.

    python -m pipeline.examples.generate_clicks --bootstrap 127.0.0.1:9092 --topic clicks \
        --events 10000 --rate 500

Each event is {"user": "u17", "page": "/cart", "ts": <epoch ms>, "duration_ms": 840}, keyed
by user. With --start-ms the event times are synthetic (start + i * --spacing-ms), which makes
a run reproducible; without it they are the wall clock at send time.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Iterator

PAGES = ("/", "/search", "/product", "/cart", "/checkout", "/help")


def events(n: int, seed: int, start_ms: int | None, spacing_ms: int) -> Iterator[dict[str, object]]:
    rnd = random.Random(seed)
    for i in range(n):
        yield {
            "user": f"u{rnd.randrange(50)}",
            "page": rnd.choice(PAGES),
            "ts": (start_ms + i * spacing_ms) if start_ms is not None else int(time.time() * 1000),
            "duration_ms": rnd.randrange(10, 5000),
        }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--topic", default="clicks")
    ap.add_argument("--events", type=int, default=10_000)
    ap.add_argument("--rate", type=float, default=0.0, help="events/s (0: as fast as possible)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--start-ms", type=int, default=None)
    ap.add_argument("--spacing-ms", type=int, default=100)
    args = ap.parse_args(argv)

    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 5})
    began = time.monotonic()
    for i, ev in enumerate(events(args.events, args.seed, args.start_ms, args.spacing_ms)):
        if args.rate > 0:
            delay = began + i / args.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        while True:
            try:
                producer.produce(args.topic, json.dumps(ev).encode(), str(ev["user"]).encode())
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    left = producer.flush(60)
    print(f"produced {args.events - left} events to {args.topic}")
    return 1 if left else 0


if __name__ == "__main__":
    raise SystemExit(main())
