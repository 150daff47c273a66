"""The sender's CPU per small Fetch answer on loopback: three sends, corked, or one copy.

A Fetch answer is the frame prefix and partition head (bytes), the records (a file slice,
os.sendfile) and a tail (bytes). Sent as three system calls on a TCP_NODELAY socket, each
is a segment the peer may wake up for; on loopback the sender's system call runs the
receiver's TCP processing and its wake-up. This measures the sender's CPU per answer, with
the receiver in another process blocked in recv and a 0.5 ms gap between answers (a
consumer at ~1,000 answers/s):

- `3 sends`: writev, sendfile, writev (Skiff before);
- `cork`: the same inside TCP_CORK on/off (Skiff now; still zero-copy);
- `copy`: pread of the slice and one writev (not zero-copy; for comparison).

    python bench/cork_bench.py --answers 6000 --slice 200 --rounds 3
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import socket
import tempfile
import time

MODES = ("3 sends", "cork", "copy")
HEAD, TAIL = b"h" * 40, b"t" * 10
GAP_S = 0.0005


def _receive(port: int, total: int) -> None:
    c = socket.create_connection(("127.0.0.1", port))
    got = 0
    while got < total:
        data = c.recv(65536)
        if not data:
            break
        got += len(data)
    c.close()


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run(mode: str, answers: int, slice_bytes: int, path: str) -> float:
    """The sender's CPU-us per answer beyond the busy gap."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    fd = os.open(path, os.O_RDONLY)
    p = mp.Process(target=_receive, args=(srv.getsockname()[1],
                                          answers * (len(HEAD) + slice_bytes + len(TAIL))))
    p.start()
    s, _ = srv.accept()
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    cpu0 = _cpu_s()
    for _ in range(answers):
        if mode == "copy":
            s.sendmsg([HEAD, os.pread(fd, slice_bytes, 0), TAIL])
        else:
            if mode == "cork":
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
            s.sendmsg([HEAD])
            os.sendfile(s.fileno(), fd, 0, slice_bytes)
            s.sendmsg([TAIL])
            if mode == "cork":
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
        until = time.perf_counter() + GAP_S
        while time.perf_counter() < until:
            pass
    cpu1 = _cpu_s()
    p.join()
    s.close()
    srv.close()
    os.close(fd)
    return ((cpu1 - cpu0) - GAP_S * answers) / answers * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--answers", type=int, default=6000)
    ap.add_argument("--slice", type=int, default=200, help="record bytes per answer")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.NamedTemporaryFile() as f:
        f.write(os.urandom(args.slice))
        f.flush()
        results: dict[str, list[float]] = {m: [] for m in MODES}
        for _ in range(args.rounds):
            for mode in MODES:
                results[mode].append(run(mode, args.answers, args.slice, f.name))
    base = sorted(results["3 sends"])[len(results["3 sends"]) // 2]
    for mode in MODES:
        med = sorted(results[mode])[len(results[mode]) // 2]
        rounds = ", ".join(f"{v:.1f}" for v in results[mode])
        print(f"{mode:8} sender CPU per answer: median {med:6.1f} us ({rounds}); "
              f"{med / base:.2f} of 3 sends")


if __name__ == "__main__":
    main()
