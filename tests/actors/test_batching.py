"""actors/batching.py without Ray: coalescing per destination, streaming order, failures."""

import asyncio

from actors.batching import MicroBatcher, serve_stream


def run(coro):
    return asyncio.run(coro)


def test_same_turn_submissions_share_one_call_per_destination_and_results_stream_back():
    shipped = []

    async def opener(dest, items):
        shipped.append((dest, list(items)))
        async for chunk in serve_stream(items, lambda x: asyncio.sleep(x / 100, result=(dest, x))):
            yield chunk

    async def main():
        b = MicroBatcher(opener)
        out = await asyncio.gather(*(b.submit(d, x) for d, x in [("a", 3), ("b", 1), ("a", 1), ("a", 2)]))
        later = await b.submit("a", 5)  # a new event-loop turn: a new call
        return b, out, later

    b, out, later = run(main())
    assert out == [("a", 3), ("b", 1), ("a", 1), ("a", 2)] and later == ("a", 5)
    assert shipped == [("a", [3, 1, 2]), ("b", [1]), ("a", [5])]
    assert (b.calls, b.items) == (3, 5)


def test_a_fast_item_is_not_held_back_by_a_slow_one():
    async def opener(dest, items):
        async for chunk in serve_stream(items, lambda x: asyncio.sleep(x, result=x)):
            yield chunk

    async def main():
        b = MicroBatcher(opener)
        t0 = asyncio.get_running_loop().time()
        done = {}

        async def one(x):
            await b.submit("d", x)
            done[x] = asyncio.get_running_loop().time() - t0

        await asyncio.gather(one(0.01), one(0.3))
        return done

    done = run(main())
    assert done[0.01] < 0.15 < done[0.3]


def test_item_exception_goes_to_its_caller_only():
    async def handle(x):
        if x == 2:
            raise ValueError("bad item 2")
        return x * 10

    async def opener(dest, items):
        async for chunk in serve_stream(items, handle):
            yield chunk

    async def main():
        b = MicroBatcher(opener)
        return await asyncio.gather(*(b.submit("d", x) for x in (1, 2, 3)), return_exceptions=True)

    r = run(main())
    assert r[0] == 10 and r[2] == 30 and isinstance(r[1], ValueError) and "bad item 2" in str(r[1])


def test_broken_stream_fails_only_the_unanswered_items():
    class Died(RuntimeError):
        pass

    async def opener(dest, items):
        yield [(0, "first")]
        raise Died("actor died")

    async def main():
        b = MicroBatcher(opener)
        return await asyncio.gather(*(b.submit("d", x) for x in range(3)), return_exceptions=True)

    r = run(main())
    assert r[0] == "first" and all(isinstance(x, Died) for x in r[1:])


def test_stream_that_ends_early_does_not_hang_callers():
    async def opener(dest, items):
        yield [(1, "only one")]

    async def main():
        b = MicroBatcher(opener)
        return await asyncio.wait_for(asyncio.gather(*(b.submit("d", x) for x in range(2)), return_exceptions=True), 5)

    r = run(main())
    assert r[1] == "only one" and isinstance(r[0], RuntimeError)


def test_max_items_splits_a_large_batch():
    sizes = []

    async def opener(dest, items):
        sizes.append(len(items))
        for k, x in enumerate(items):
            yield [(k, x)]

    async def main():
        b = MicroBatcher(opener, max_items=4)
        return await asyncio.gather(*(b.submit("d", x) for x in range(10)))

    assert run(main()) == list(range(10)) and sizes == [4, 4, 2]


def test_answers_finishing_together_come_back_in_one_chunk():
    async def main():
        gate = asyncio.Event()

        async def handle(x):
            if x < 3:
                await gate.wait()  # 0, 1, 2 end together
            else:
                await asyncio.sleep(0.05)
            return x

        chunks = []

        async def release():
            await asyncio.sleep(0.01)
            gate.set()

        asyncio.ensure_future(release())
        async for chunk in serve_stream([0, 1, 2, 3], handle):
            chunks.append(sorted(k for k, _ in chunk))
        return chunks

    assert run(main()) == [[0, 1, 2], [3]]
