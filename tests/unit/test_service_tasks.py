"""broker/util/tasks.py: a component's long-lived tasks in one anyio task group, cancelled
and awaited by close; one task cancelled alone; a failing task logged, its siblings left
running."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from broker.util.tasks import ServiceTasks


def test_close_cancels_every_task_and_waits_for_it() -> None:
    async def go() -> None:
        tasks = ServiceTasks("t")
        ended: list[str] = []

        async def forever(name: str) -> None:
            try:
                await asyncio.sleep(3600)
            finally:
                ended.append(name)

        a = tasks.start_soon(forever, "a", name="a")
        await asyncio.sleep(0)
        tasks.start_soon(forever, "b", name="b")  # after the host entered its group
        await asyncio.sleep(0.01)
        assert tasks.running == 2 and not a.done()
        await tasks.close()
        assert sorted(ended) == ["a", "b"] and a.done() and tasks.running == 0
        assert asyncio.all_tasks() == {asyncio.current_task()}
        tasks.start_soon(forever, "c", name="c")  # usable again
        await asyncio.sleep(0.01)
        await tasks.close()
        assert ended[-1] == "c" and asyncio.all_tasks() == {asyncio.current_task()}

    asyncio.run(go())


def test_close_before_the_host_ran() -> None:
    async def go() -> None:
        tasks = ServiceTasks("t")
        handle = tasks.start_soon(asyncio.sleep, 3600, name="never")
        await tasks.close()
        assert handle.done() and asyncio.all_tasks() == {asyncio.current_task()}

    asyncio.run(go())


def test_one_task_cancelled_alone() -> None:
    async def go() -> None:
        tasks = ServiceTasks("t")
        early = tasks.start_soon(asyncio.sleep, 3600, name="early")
        early.cancel()  # before it started
        other = tasks.start_soon(asyncio.sleep, 3600, name="other")
        await asyncio.sleep(0.01)
        assert early.done() and not other.done()
        other.cancel()
        await asyncio.wait_for(other.wait(), 1)
        await tasks.close()

    asyncio.run(go())


def test_a_failing_task_is_logged_and_its_siblings_go_on() -> None:
    async def go() -> None:
        tasks = ServiceTasks("t")

        async def fail() -> None:
            raise RuntimeError("boom")

        failed = tasks.start_soon(fail, name="fail")
        sibling = tasks.start_soon(asyncio.sleep, 3600, name="sibling")
        await asyncio.wait_for(failed.wait(), 1)
        await asyncio.sleep(0.01)
        assert not sibling.done()
        await tasks.close()
        assert sibling.done()

    asyncio.run(go())


def test_a_group_whose_event_loop_ended_starts_again_on_the_next() -> None:
    tasks = ServiceTasks("t")
    ran: list[int] = []

    async def once(n: int) -> None:
        tasks.start_soon(asyncio.sleep, 3600, name="left")  # cancelled as asyncio.run ends
        done = tasks.start_soon(_append, ran, n, name="append")
        await asyncio.wait_for(done.wait(), 1)

    asyncio.run(once(1))
    asyncio.run(once(2))
    assert ran == [1, 2]


async def _append(out: list[int], n: int) -> None:
    out.append(n)


def test_close_does_not_swallow_its_callers_cancellation() -> None:
    async def go() -> None:
        tasks = ServiceTasks("t")

        async def stubborn() -> None:
            try:
                await asyncio.sleep(3600)
            finally:
                with anyio.CancelScope(shield=True):
                    await asyncio.sleep(0.2)

        tasks.start_soon(stubborn, name="stubborn")
        await asyncio.sleep(0.01)
        closing = asyncio.ensure_future(tasks.close())
        await asyncio.sleep(0.01)
        closing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await closing
        await tasks.close()  # the host still ends
        assert asyncio.all_tasks() == {asyncio.current_task()}

    asyncio.run(go())
