"""broker/testing/ports.py: test ports from below the kernel's ephemeral range."""

from __future__ import annotations

import socket

import pytest

import broker.testing.ports as ports


def test_ports_are_below_the_ephemeral_range_distinct_and_bindable() -> None:
    got = ports.free_ports(50)
    assert len(set(got)) == 50
    floor = ports._ephemeral_floor()
    for port in got:
        assert ports._LOWEST <= port < floor
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_xdist_workers_get_disjoint_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    slices = []
    for worker in ("gw0", "gw1", "gw2", "gw7"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        got = ports._slice()
        assert got is not None
        slices.append(set(got))
    assert all(a.isdisjoint(b) for i, a in enumerate(slices) for b in slices[i + 1:])
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    outside = ports._slice()
    assert outside is not None and all(set(outside).isdisjoint(s) for s in slices)


def test_a_port_in_use_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    own = ports._slice()
    assert own is not None
    monkeypatch.setattr(ports, "_handed_out", set())
    with socket.socket() as busy:
        index = next(i for i, p in enumerate(own) if ports._binds(p))
        port = own[index]
        busy.bind(("127.0.0.1", port))
        monkeypatch.setattr(ports, "_cursor", index)
        got = ports.free_port()
        assert got != port and got in own[index + 1:]  # the busy port was passed over
