"""The long-lived tasks of one component, in one anyio task group the component owns (issue 32,
point 9): `close` cancels the group and returns once every task in it has ended, so no task
outlives the component that started it.

A component's start and stop are plain calls, often from different asyncio tasks (the CLI
starts a node in one task and stops it from another), while a task group is an `async with`
that one task enters and exits. So the group lives in a host task of its own, made on the
first `start_soon` and ended by `close`; tasks started before the host has entered its group
are queued until it has.

A task that fails is logged and ends alone, as an asyncio task left to itself would: one
failing background task must not cancel its siblings (a task group's default).

Cancellation is anyio's, level-triggered: once its group (or its own handle) is cancelled,
every later await of the task is cancelled too, cleanup included, unless shielded
(`anyio.CancelScope(shield=True)`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import structlog
from anyio.abc import TaskGroup

log = structlog.get_logger(__name__)


class TaskHandle:
    """One task of a group: cancelled alone through its own cancel scope."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._scope: anyio.CancelScope | None = None
        self._cancelled = False
        self._ended = asyncio.Event()
        self._callbacks: list[Callable[[TaskHandle], object]] = []

    def cancel(self) -> None:
        self._cancelled = True
        if self._scope is not None:
            self._scope.cancel()

    def done(self) -> bool:
        return self._ended.is_set()

    def add_done_callback(self, callback: Callable[[TaskHandle], object]) -> None:
        """`callback(handle)` once the task has ended (at once if it already has)."""
        if self.done():
            callback(self)
        else:
            self._callbacks.append(callback)

    async def wait(self) -> None:
        """Until the task has ended (returned, failed or been cancelled)."""
        await self._ended.wait()


class ServiceTasks:
    """The task group of one component (its `name` is in the log lines of failed tasks)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._host: asyncio.Task[None] | None = None
        self._group: TaskGroup | None = None
        self._queued: list[tuple[TaskHandle, Callable[..., Awaitable[Any]], tuple[Any, ...]]] = []
        self._handles: set[TaskHandle] = set()

    def start_soon(self, fn: Callable[..., Awaitable[Any]], *args: Any,
                   name: str) -> TaskHandle:
        """Run `fn(*args)` in the group (inside the running event loop)."""
        handle = TaskHandle(name)
        self._handles.add(handle)
        host = self._host
        if host is not None and (host.done() or host.get_loop() is not asyncio.get_running_loop()):
            # it ended with its event loop, or that loop was closed under it (tests run
            # one loop after another): this loop gets a host of its own
            self._host = self._group = None
        if self._group is not None:
            self._group.start_soon(self._run, handle, fn, args, name=name)
        else:
            self._queued.append((handle, fn, args))
            if self._host is None:
                # the one task not in a group: the group's own host, awaited by close
                self._host = asyncio.get_running_loop().create_task(
                    self._serve(), name=f"{self.name}_tasks")
        return handle

    @property
    def running(self) -> int:
        """How many tasks of the group have not yet ended."""
        return len(self._handles)

    async def close(self) -> None:
        """Cancel every task of the group and wait until all have ended. The group may be
        used again afterwards (a new host is made by the next start_soon)."""
        host, group = self._host, self._group
        if host is None:
            return
        if group is not None:
            group.cancel_scope.cancel()
        else:
            host.cancel()
        try:
            await asyncio.shield(host)
        except asyncio.CancelledError:
            caller = asyncio.current_task()
            if not host.done() or (caller is not None and caller.cancelling()):
                raise  # the caller was cancelled, not (only) the host
        finally:
            if host.done():
                self._host = None
                self._drop_queued()

    async def _serve(self) -> None:
        try:
            async with anyio.create_task_group() as group:
                self._group = group
                queued, self._queued = self._queued, []
                for handle, fn, args in queued:
                    group.start_soon(self._run, handle, fn, args, name=handle.name)
                await anyio.sleep_forever()
        finally:
            self._group = None
            self._drop_queued()

    def _drop_queued(self) -> None:
        """Tasks cancelled before the host entered its group never run."""
        for handle, _, _ in self._queued:
            self._ended(handle)
        self._queued = []

    async def _run(self, handle: TaskHandle, fn: Callable[..., Awaitable[Any]],
                   args: tuple[Any, ...]) -> None:
        try:
            with anyio.CancelScope() as scope:
                handle._scope = scope
                if handle._cancelled:
                    scope.cancel()
                try:
                    await fn(*args)
                except Exception:
                    log.exception("task_failed", group=self.name, task=handle.name)
        finally:
            self._ended(handle)

    def _ended(self, handle: TaskHandle) -> None:
        handle._ended.set()
        self._handles.discard(handle)
        callbacks, handle._callbacks = handle._callbacks, []
        for callback in callbacks:
            callback(handle)
