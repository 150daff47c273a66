"""The container image (issue 19), run by hand: its size, and cold start to ready.

  size   the image's size (podman image inspect) against the 250 MB goal, and the base
         image's share of it (python:3.11-slim-bookworm, or the local look-alike that
         deploy/docker/base_image.sh makes where no registry is reachable).
  produce  --rounds times, alternating the images of --images (default: the compiled image
         and a plain-Python one, `SKIFF_COMPILE=0 deploy/docker/build.sh localhost/skiff:plain`):
         a container on a new volume, a topic of 6 partitions, then bench/replay.py's
         replayed produce for --seconds through the published port (16 KB batches of 1 KB
         records, 5 requests in flight, 3 connections), the page cache emptied first where
         this runs as root. Prints each image's median MB/s and broker CPU-s per GB, and the
         ratio to the first image.
  start  --rounds times: `podman run -d` of the image on a new, empty volume (so the first
         start formats its storage), until (a) the gRPC health service answers SERVING
         (what the HEALTHCHECK and the Kubernetes probes ask) and (b) a librdkafka producer
         on the host has a record acknowledged (acks=all) through the published port. The
         peer in the same run: the same node as a process on the host (`skiff server start`
         with the image's properties file, a fresh data dir), to (a) and (b). Prints the
         medians and the ratios container/host and container/goal (5 s).

Needs podman (tests/run.sh installs it) and the image: `podman build -t localhost/skiff:test
.`, or run tests/deploy once (it builds that tag). Uses the deploy tests' containers.conf.

    python bench/container_bench.py size
    python bench/container_bench.py start --rounds 5
    python bench/container_bench.py produce --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from confluent_kafka import Producer  # noqa: E402

from bench import perf, replay, vs_kafka  # noqa: E402
from broker.cli.health import check  # noqa: E402
from broker.testing import engine  # noqa: E402

GOAL_MB = 250
GOAL_START_S = 5.0


def until_serving(admin: str, started: float, timeout: float = 60) -> float:
    while time.monotonic() - started < timeout:
        if check(admin, timeout=1.0)[0]:
            return time.monotonic() - started
        time.sleep(0.02)
    raise TimeoutError(f"{admin} not SERVING within {timeout}s")


def until_acked(bootstrap: str, started: float, timeout: float = 60) -> float:
    acked: list[bool] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "message.timeout.ms": int(timeout * 1000),
                         "topic.metadata.refresh.interval.ms": 100,
                         "reconnect.backoff.ms": 10, "reconnect.backoff.max.ms": 50})
    producer.produce("bench-start", b"x", on_delivery=lambda err, _m: acked.append(err is None))
    producer.flush(timeout)
    if acked != [True]:
        raise RuntimeError(f"record not acknowledged: {acked}")
    return time.monotonic() - started


def container_round(image: str) -> tuple[float, float]:
    name, volume = f"bench-{uuid.uuid4().hex[:8]}", f"bench-vol-{uuid.uuid4().hex[:8]}"
    port, admin_port = engine.free_ports(2)
    try:
        engine.podman("volume", "create", volume)
        started = time.monotonic()
        engine.run_detached(name, [
            "-p", f"127.0.0.1:{port}:9092", "-p", f"127.0.0.1:{admin_port}:9094",
            "-v", f"{volume}:/var/lib/skiff",
            "-e", f"SKIFF_ADVERTISED_LISTENERS=PLAINTEXT://127.0.0.1:{port}"], image)
        ready = until_serving(f"127.0.0.1:{admin_port}", started)
        acked = until_acked(f"127.0.0.1:{port}", started)
        return ready, acked
    finally:
        engine.remove(name)
        engine.podman("volume", "rm", "-f", volume, check=False)


def host_round() -> tuple[float, float]:
    port, cport, admin_port = engine.free_ports(3)
    with tempfile.TemporaryDirectory() as data:
        env = {**os.environ, "SKIFF_LOG_DIRS": data,
               "SKIFF_LISTENERS": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}",
               "SKIFF_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
               "SKIFF_CONTROLLER_QUORUM_VOTERS": f"1@127.0.0.1:{cport}",
               "SKIFF_ADMIN_LISTENERS": f"127.0.0.1:{admin_port}"}
        started = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "broker.cli.main", "server", "start",
             str(REPO / "deploy/docker/server.properties"), "--auto-format"],
            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            ready = until_serving(f"127.0.0.1:{admin_port}", started)
            acked = until_acked(f"127.0.0.1:{port}", started)
            return ready, acked
        finally:
            proc.terminate()
            proc.wait(60)


def cmd_size(args: argparse.Namespace) -> None:
    image = engine.image_inspect(args.image)["Size"] / 1e6
    base = engine.image_inspect(engine.BASE_IMAGE)["Size"] / 1e6
    print(f"image {args.image}: {image:.0f} MB (goal {GOAL_MB} MB: ratio {image / GOAL_MB:.2f});"
          f" base {engine.BASE_IMAGE}: {base:.0f} MB, Skiff's layers {image - base:.0f} MB")


def cmd_start(args: argparse.Namespace) -> None:
    rows: dict[str, list[tuple[float, float]]] = {"container": [], "host": []}
    for i in range(args.rounds):
        rows["container"].append(container_round(args.image))
        rows["host"].append(host_round())
        print(f"round {i + 1}: container ready {rows['container'][-1][0]:.2f}s acked "
              f"{rows['container'][-1][1]:.2f}s; host process ready {rows['host'][-1][0]:.2f}s"
              f" acked {rows['host'][-1][1]:.2f}s", flush=True)
    med = {k: (statistics.median(r for r, _ in v), statistics.median(a for _, a in v))
           for k, v in rows.items()}
    c, h = med["container"], med["host"]
    print(f"median of {args.rounds}: container to SERVING {c[0]:.2f}s, to first acked record "
          f"{c[1]:.2f}s; host process {h[0]:.2f}s, {h[1]:.2f}s")
    print(f"ratios: container/host {c[0] / h[0]:.2f} (SERVING), {c[1] / h[1]:.2f} (acked); "
          f"container/goal({GOAL_START_S:.0f}s) {c[0] / GOAL_START_S:.2f}, "
          f"{c[1] / GOAL_START_S:.2f}")


def produce_round(image: str, seconds: float) -> tuple[float, float]:
    """Replayed produce into a container of `image`: (MB/s, broker CPU-s per GB)."""
    name, volume = f"bench-{uuid.uuid4().hex[:8]}", f"bench-vol-{uuid.uuid4().hex[:8]}"
    port, admin_port = engine.free_ports(2)
    bootstrap = f"127.0.0.1:{port}"
    try:
        engine.podman("volume", "create", volume)
        engine.run_detached(name, [
            "-p", f"{bootstrap}:9092", "-p", f"127.0.0.1:{admin_port}:9094",
            "-v", f"{volume}:/var/lib/skiff",
            "-e", f"SKIFF_ADVERTISED_LISTENERS=PLAINTEXT://{bootstrap}"], image)
        until_serving(f"127.0.0.1:{admin_port}", time.monotonic())
        pid = int(engine.podman("inspect", "-f", "{{.State.Pid}}", name).stdout.strip())
        vs_kafka.create_topic(bootstrap, "replayed", 6)
        replay.wait_writable(bootstrap, "replayed", range(6))
        if os.geteuid() == 0:
            vs_kafka.empty_page_cache()
        cpu0 = sum(perf.tree_user_system_s(pid))
        r = replay.replay_produce(bootstrap, "replayed", range(6), seconds=seconds)
        cpu = sum(perf.tree_user_system_s(pid)) - cpu0
        if r.errors:
            raise RuntimeError(f"replayed produce failed: {r.errors[:3]}")
        return r.mb_s, cpu / (r.bytes / 1e9)
    finally:
        engine.remove(name)
        engine.podman("volume", "rm", "-f", volume, check=False)


def cmd_produce(args: argparse.Namespace) -> None:
    images = args.images.split(",")
    rows: dict[str, list[tuple[float, float]]] = {image: [] for image in images}
    for i in range(args.rounds):
        for image in images:
            rows[image].append(produce_round(image, args.seconds))
            rate, cpu = rows[image][-1]
            print(f"round {i + 1}: {image} {rate:.1f} MB/s at {cpu:.2f} CPU-s/GB", flush=True)
    medians = {image: (statistics.median(r for r, _ in v), statistics.median(c for _, c in v))
               for image, v in rows.items()}
    first = medians[images[0]]
    for image, (rate, cpu) in medians.items():
        print(f"median of {args.rounds}: {image} {rate:.1f} MB/s at {cpu:.2f} CPU-s/GB; "
              f"against {images[0]}: {rate / first[0]:.2f}x the rate, {cpu / first[1]:.2f}x "
              f"the CPU per GB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--image", default=engine.IMAGE)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("size")
    start = sub.add_parser("start")
    start.add_argument("--rounds", type=int, default=5)
    produce = sub.add_parser("produce")
    produce.add_argument("--images", default=f"{engine.IMAGE},localhost/skiff:plain")
    produce.add_argument("--rounds", type=int, default=3)
    produce.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    conf = Path(tempfile.mkdtemp()) / "containers.conf"
    os.environ["CONTAINERS_CONF"] = str(engine.write_containers_conf(conf))
    {"size": cmd_size, "start": cmd_start, "produce": cmd_produce}[args.cmd](args)


if __name__ == "__main__":
    main()
