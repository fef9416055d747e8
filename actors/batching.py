"""Micro-batching of actor calls: the calls made to one actor in the same event-loop turn travel
as one Ray call, and their results come back one by one as each is done.

Without it every agent turn costs two Ray round trips (coordinator -> agent, agent -> replica). With
many questions in flight, their calls to the same actor are issued together (a round of every
question reaches an agent at about the same time), so :class:`MicroBatcher` queues the items
submitted to one destination and ships them, at the end of the current event-loop turn, as a
single call to a *streaming* actor method (an async generator: Ray returns its items as they are
yielded). The receiving side (:func:`serve_stream`) runs the items concurrently and yields, each
time some are done, the list of ``(index, result)`` pairs finished by then, so a fast item is
never held back by a slow one — no barrier is added across questions; only the per-call Ray
overhead is shared. Answers that finish together travel together, so the callers they wake run
in the same event-loop turn and their next calls are coalesced again.

Pure asyncio (no Ray import): the stream opener is a parameter, so it is tested without Ray.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Sequence
from typing import Any, Generic, TypeVar

Dest = TypeVar("Dest", bound=Hashable)  # what names a destination (an actor handle, a group index)
Item = TypeVar("Item")  # what is submitted to it

# open_stream(destination, items) -> async iterator of chunks: lists of (index into items, result or exception)
StreamOpener = Callable[[Dest, list[Item]], AsyncIterator[list[tuple[int, Any]]]]


class MicroBatcher(Generic[Dest, Item]):
    """Coalesce submissions per destination within one event-loop turn into one streamed call.

    ``submit(dest, item)`` returns the item's result, or raises its exception. If the stream
    itself fails (e.g. the destination actor died), every item of that call that has no result
    yet gets that exception, and the caller decides whether to retry. ``calls`` and ``items``
    count the shipped calls and items (``items / calls`` is the mean batch).
    """

    def __init__(self, open_stream: StreamOpener[Dest, Item], max_items: int = 256):
        self.open_stream = open_stream
        self.max_items = max_items
        self._outbox: dict[Dest, list[tuple[Item, asyncio.Future]]] = {}
        self._scheduled = False
        self.calls = 0
        self.items = 0

    async def submit(self, dest: Dest, item: Item) -> Any:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._outbox.setdefault(dest, []).append((item, fut))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return await fut

    def _flush(self) -> None:
        self._scheduled = False
        outbox, self._outbox = self._outbox, {}
        for dest, entries in outbox.items():
            for start in range(0, len(entries), self.max_items):
                asyncio.ensure_future(self._ship(dest, entries[start : start + self.max_items]))

    async def _ship(self, dest: Dest, entries: list[tuple[Item, asyncio.Future]]) -> None:
        self.calls += 1
        self.items += len(entries)
        try:
            async for chunk in self.open_stream(dest, [item for item, _ in entries]):
                for k, result in chunk:
                    fut = entries[k][1]
                    if fut.done():
                        continue
                    if isinstance(result, BaseException):
                        fut.set_exception(result)
                    else:
                        fut.set_result(result)
        except Exception as exc:  # the stream broke: whatever has no answer gets the error
            for _, fut in entries:
                if not fut.done():
                    fut.set_exception(exc)
            return
        for _, fut in entries:  # a stream that ended early must not leave a caller hanging
            if not fut.done():
                fut.set_exception(RuntimeError("stream ended without an answer for this item"))


async def serve_stream(
    items: Sequence[Any], handle: Callable[[Any], Awaitable[Any]]
) -> AsyncIterator[list[tuple[int, Any]]]:
    """Run ``handle(item)`` for every item concurrently; each time one or more end, yield the list
    of ``(index, result)`` of those finished since the last yield. An exception of one item is
    yielded as its result (the other items go on)."""

    async def one(k: int, item: Any) -> tuple[int, Any]:
        try:
            return k, await handle(item)
        except Exception as exc:
            return k, exc

    tasks = [asyncio.ensure_future(one(k, item)) for k, item in enumerate(items)]
    pending = set(tasks)
    try:
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            yield [t.result() for t in done]
    finally:
        for t in tasks:
            t.cancel()
