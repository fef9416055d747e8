"""The OpenAI-compatible backend against a stub chat-completions server on 127.0.0.1.

The stub runs in its own thread with its own event loop (so a Ray actor in another process can
call it too), records every request it sees, and follows a per-request script: "ok" (default),
"500", "429", "400", "nousage", "slow", "leak" (a 400 whose body echoes the Authorization header),
"echo-key" (a 200 whose reply text contains the Authorization header) and "details:<JSON>" (a 200
whose ``usage.prompt_tokens_details`` is that JSON value).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import pytest
from aiohttp import web

from actors.replica_actor import ReplicaCore, make_backend
from backends.openai_backend import OpenAIBackend, chat_completions_url
from engine.config import ConfigError, RunConfig
from engine.records import GenRequest

KEY_ENV = "DEBATE_TEST_OPENAI_KEY"
SECRET = "sk-test-0123456789-SECRET-abcdef"
LONG_BODY = "E" * 100 + "F" * 900  # a 1000-char error body: only the first 300 chars are kept


def text_of(content) -> str:
    """A message content's text: the string, or a content-part list's text parts (images have none)."""
    return content if isinstance(content, str) else "".join(p["text"] for p in content if p["type"] == "text")


def usage_for(body: dict) -> tuple[int, int]:
    """The stub's token counts: deterministic per request, different from any guess."""
    prompt = sum(len(text_of(m["content"])) for m in body["messages"]) + 11
    completion = 5 + int(body.get("seed") or 0) % 7
    return prompt, completion


class StubServer:
    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        with getattr(self, "lock", threading.Lock()):
            self.seen: list[dict] = []  # {"path", "headers", "body"}
            self.usages: list[tuple[int, int]] = []  # what the stub reported, per 200 answer
            self.script: list[str] = []
            self.delay = 0.0
            self.in_flight = 0
            self.max_in_flight = 0

    # -------------------------------------------------------------- lifecycle
    def start(self) -> StubServer:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(10)
        return self

    async def _start(self):
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handle)
        self.runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await self.runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        await web.SockSite(self.runner, sock).start()

    def stop(self):
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/v1/chat/completions"

    # -------------------------------------------------------------- handler
    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        with self.lock:
            self.seen.append({"path": request.path, "headers": dict(request.headers), "body": body})
            action = self.script.pop(0) if self.script else "ok"
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            if action == "500":
                return web.Response(status=500, text="internal error, try again")
            if action == "429":
                return web.Response(status=429, text="rate limited", headers={"Retry-After": "0"})
            if action == "400":
                return web.Response(status=400, text=LONG_BODY)
            if action == "leak":
                return web.Response(status=400, text=f"bad request; you sent {request.headers.get('Authorization')}")
            if action == "slow":
                await asyncio.sleep(SLOW_S)
            prompt, completion = usage_for(body)
            content = f"Let me compute. The answer is \\boxed{{{17 + len(body['messages'])}}}"
            if action == "echo-key":
                content += f" (your header was {request.headers.get('Authorization')})"
            answer = {
                "id": "chatcmpl-stub",
                "object": "chat.completion",
                "model": body.get("model"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "length" if body.get("max_tokens") == 3 else "stop",
                    }
                ],
            }
            if action != "nousage":
                answer["usage"] = {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                }
                if action.startswith("details:"):
                    answer["usage"]["prompt_tokens_details"] = json.loads(action.removeprefix("details:"))
                with self.lock:
                    self.usages.append((prompt, completion))
            return web.json_response(answer)
        finally:
            with self.lock:
                self.in_flight -= 1


@pytest.fixture(scope="module")
def server():
    s = StubServer().start()
    yield s
    s.stop()


@pytest.fixture
def stub(server):
    server.reset()
    return server


def req(i: int = 0, **kw) -> GenRequest:
    base = dict(
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"question {i}"}],
        temperature=0.25,
        top_p=0.9,
        max_tokens=77,
        seed=1000 + i,
        meta={"gold": "secret-gold"},
    )
    base.update(kw)
    return GenRequest(**base)


def backend(stub, **kw) -> OpenAIBackend:
    opts = dict(concurrency=4, timeout_s=5, max_retries=2, api_key_env=KEY_ENV, backoff_s=0.01)
    opts.update(kw)
    return OpenAIBackend("stub-model", stub.base, **opts)


# ------------------------------------------------------------------ URL and config
def test_api_base_with_or_without_v1_gives_the_same_endpoint():
    want = "http://127.0.0.1:8000/v1/chat/completions"
    for base in (
        "http://127.0.0.1:8000",
        "http://127.0.0.1:8000/",
        "http://127.0.0.1:8000/v1",
        "http://127.0.0.1:8000/v1/",
    ):
        assert chat_completions_url(base) == want
    assert (
        chat_completions_url("https://api.example.com/openai/v1")
        == "https://api.example.com/openai/v1/chat/completions"
    )
    with pytest.raises(ValueError, match="--api-base"):
        chat_completions_url("127.0.0.1:8000")
    with pytest.raises(ValueError, match="concurrency"):
        OpenAIBackend("m", "http://127.0.0.1:1", concurrency=0)


def test_config_requires_api_base_and_positive_concurrency():
    with pytest.raises(ConfigError, match="--api-base"):
        RunConfig.flat(backend="openai").validate()
    with pytest.raises(ConfigError, match="--api-concurrency"):
        RunConfig.flat(backend="openai", api_base="http://127.0.0.1:1", api_concurrency=0).validate()
    cfg = RunConfig.flat(backend="openai", api_base="http://127.0.0.1:1/v1", api_concurrency=5).validate()
    from actors.layout import replica_options

    opts = {"api_base": "http://127.0.0.1:1/v1", "concurrency": 5, "timeout_s": 120.0}
    assert replica_options(cfg) == ({"num_cpus": 0}, opts)
    b = make_backend("openai", "m", opts)
    assert isinstance(b, OpenAIBackend) and b.concurrency == 5 and b.url == "http://127.0.0.1:1/v1/chat/completions"
    assert b.simulated is False and b.timeout_s == 120


def test_api_timeout_reaches_the_backend_is_checked_and_keeps_the_run_id():
    """``--api-timeout`` is each attempt's limit in the replica's backend; it changes how long a
    hung request is waited for, not results, so the run id leaves it out."""
    from actors.layout import replica_options

    cfg = RunConfig.flat(backend="openai", api_base="http://127.0.0.1:1", api_timeout=7.5).validate()
    assert replica_options(cfg)[1]["timeout_s"] == 7.5
    assert cfg.run_id() == RunConfig.flat(backend="openai", api_base="http://127.0.0.1:1").validate().run_id()
    for bad in (0, -1, float("inf"), float("nan"), 3601):
        with pytest.raises(ConfigError, match="--api-timeout must be"):
            RunConfig.flat(backend="openai", api_base="http://127.0.0.1:1", api_timeout=bad).validate()


# ------------------------------------------------------------------ the happy path
def test_body_fields_auth_header_and_server_token_counts(stub, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    b = backend(stub)
    [res] = b.generate([req(3)])
    [seen] = stub.seen
    assert seen["path"] == "/v1/chat/completions"
    assert seen["headers"]["Authorization"] == f"Bearer {SECRET}"
    assert seen["body"] == {
        "model": "stub-model",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "question 3"}],
        "temperature": 0.25,
        "top_p": 0.9,
        "max_tokens": 77,
        "seed": 1003,
    }  # exactly these fields: meta (the simulated model's oracle) is never sent
    assert res.error is None and res.finish_reason == "stop"
    assert res.text == "Let me compute. The answer is \\boxed{19}"
    assert (
        (res.prompt_tokens, res.completion_tokens)
        == stub.usages[0]
        == (len("Be brief.") + len("question 3") + 11, 5 + 1003 % 7)
    )
    assert 0 < res.latency_s < 5
    assert b.stats["retries"] == 0 and b.stats["attempts"] == 1


def test_no_key_means_no_authorization_header_and_finish_reason_is_the_servers(stub, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    b = OpenAIBackend("stub-model", stub.base + "/v1/", api_key_env=KEY_ENV)
    [res] = b.generate([req(1, max_tokens=3)])
    assert "Authorization" not in stub.seen[0]["headers"]
    assert res.error is None and res.finish_reason == "length"


@pytest.mark.parametrize(
    ("details", "cached"),
    [
        ('{"cached_tokens": 8}', 8),
        ('{"cached_tokens": 0}', 0),  # the server says none was cached: a known 0
        (None, None),  # no prompt_tokens_details: the server does not say
        ("null", None),
        ("{}", None),
        ('{"cached_tokens": "8"}', None),  # not a count
        ('{"cached_tokens": true}', None),
        ('{"cached_tokens": 100000}', None),  # more than the prompt: not believed
    ],
)
def test_cached_prompt_tokens_are_the_servers_prompt_tokens_details_or_unknown(stub, details, cached):
    stub.script = [] if details is None else [f"details:{details}"]
    [res] = backend(stub).generate([req(2)])
    assert res.error is None and res.prompt_tokens == stub.usages[0][0] > 8
    assert res.cached_prompt_tokens == cached  # None (unknown) is never 0, nor 0 None


def test_an_error_result_knows_no_cached_tokens(stub):
    stub.script = ["400"]
    [res] = backend(stub).generate([req(0)])
    assert res.error is not None and res.cached_prompt_tokens is None


# ------------------------------------------------------------------ images
SLOW_S = 6.0  # the "slow" reply's delay

PIXEL = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYPj/HwADAgH/eL9GtQAAAABJRU5ErkJggg=="  # noqa: E501


def test_an_image_question_reaches_the_server_as_openai_content_parts(stub):
    """The JSON the server received: the question's image once, in the first user message, as
    [text part, image_url part]; the rest of the transcript (and the new message) plain strings."""
    from actors.agent_actor import AgentCore
    from engine.prompts import PromptSet
    from engine.protocols.base import AgentCall
    from engine.records import Turn
    from engine.tasks import Question

    cfg = RunConfig.flat(backend="openai", api_base=stub.base, system_prompt="Be brief.", agents=1)
    prompts = PromptSet.for_task("numeric")
    agent = AgentCore(0, cfg.agent_specs()[0], prompts, simulated=False)
    q = Question("q1", "numeric", "How many apples are in the picture?", "3", image=PIXEL)
    first = prompts.first(q.text)
    history = [{"role": "user", "content": first}, {"role": "assistant", "content": "I count \\boxed{2}."}]
    turn = Turn(q, AgentCall(agent=0, stage="self_check"), round=1, key=7, history=history)
    req, user = agent.request(turn)
    [res] = backend(stub).generate([req])
    [seen] = stub.seen
    assert seen["body"]["messages"] == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [{"type": "text", "text": first}, {"type": "image_url", "image_url": {"url": PIXEL}}],
        },
        {"role": "assistant", "content": "I count \\boxed{2}."},
        {"role": "user", "content": prompts.self_check(q.text)},
    ]
    assert user == {"role": "user", "content": prompts.self_check(q.text)}  # the transcript keeps text
    assert history[0] == {"role": "user", "content": first}  # and the history passed in is untouched
    assert res.error is None and (res.prompt_tokens, res.completion_tokens) == stub.usages[0]
    # a text-only question: the same turn, every content a string, nothing else in the body changed
    stub.reset()
    plain = Question("q1", "numeric", q.text, "3")
    backend(stub).generate([agent.request(Turn(plain, turn.call, round=1, key=7, history=history))[0]])
    body = stub.seen[0]["body"]
    assert [m["content"] for m in body["messages"]] == [
        "Be brief.",
        first,
        "I count \\boxed{2}.",
        prompts.self_check(q.text),
    ]
    assert {k: v for k, v in body.items() if k != "messages"} == {
        k: v for k, v in seen["body"].items() if k != "messages"
    }


# ------------------------------------------------------------------ failures
def test_500_then_200_is_retried_and_counted(stub):
    stub.script = ["500"]
    b = backend(stub)
    [res] = b.generate([req(2)])
    assert len(stub.seen) == 2 and stub.seen[0]["body"] == stub.seen[1]["body"]
    assert res.error is None and res.text.endswith("\\boxed{19}")
    assert (res.prompt_tokens, res.completion_tokens) == stub.usages[0]
    assert b.stats["retries"] == 1 and b.stats["attempts"] == 2 and b.stats["errors"] == 0


def test_429_is_retried_too(stub):
    stub.script = ["429", "429"]
    b = backend(stub)
    [res] = b.generate([req(2)])
    assert res.error is None and len(stub.seen) == 3 and b.stats["retries"] == 2


def test_persistent_500_gives_up_after_max_retries(stub):
    stub.script = ["500"] * 5
    b = backend(stub, max_retries=2)
    [res] = b.generate([req(0)])
    assert len(stub.seen) == 3 and b.stats["retries"] == 2
    assert res.finish_reason == "error" and res.text == "" and res.prompt_tokens == 0 == res.completion_tokens
    assert res.error.startswith(f"HTTP 500 from {stub.url}: internal error, try again")
    assert "after 3 attempts" in res.error


def test_400_is_an_error_result_without_retry(stub):
    stub.script = ["400"]
    b = backend(stub)
    [res] = b.generate([req(0)])
    assert len(stub.seen) == 1 and b.stats["retries"] == 0
    assert res.finish_reason == "error" and res.text == ""
    assert res.error == f"HTTP 400 from {stub.url}: {LONG_BODY[:300]}"  # first 300 chars of the body, no more


def test_missing_usage_is_an_error_not_a_guess(stub):
    stub.script = ["nousage"]
    b = backend(stub)
    [res] = b.generate([req(0)])
    assert len(stub.seen) == 1
    assert res.finish_reason == "error" and res.prompt_tokens == 0 and res.completion_tokens == 0
    assert "no usage" in res.error and stub.url in res.error


def test_a_hung_request_is_retried_like_a_500(stub):
    """The first attempt hangs past --api-timeout, the retry answers: the call succeeds with the
    second answer's counts, one retry and one timeout counted."""
    stub.script = ["slow"]
    b = backend(stub, timeout_s=0.3)
    t0 = time.perf_counter()
    [res] = b.generate([req(2)])
    took = time.perf_counter() - t0
    assert took < SLOW_S / 2, f"took {took:.1f} s: the hung reply was waited for"
    assert res.error is None and res.text.endswith("\\boxed{19}")
    assert len(stub.seen) == 2 and stub.seen[0]["body"] == stub.seen[1]["body"]
    assert (res.prompt_tokens, res.completion_tokens) == stub.usages[-1]
    assert b.stats["timeouts"] == 1 and b.stats["retries"] == 1 and b.stats["errors"] == 0


def test_a_server_that_always_hangs_gives_an_error_row_after_the_retries(stub):
    stub.script = ["slow"] * 5
    b = backend(stub, timeout_s=0.15, max_retries=2)
    t0 = time.perf_counter()
    [res] = b.generate([req(0)])
    took = time.perf_counter() - t0
    # 3 attempts of 0.15 s and two short backoffs, not one hung reply of SLOW_S
    assert took < SLOW_S / 2, f"took {took:.1f} s"
    assert res.finish_reason == "error" and res.text == "" and res.prompt_tokens == 0 == res.completion_tokens
    assert res.error == (f"timed out after 0.15 s waiting for {stub.url} (--api-timeout) (gave up after 3 attempts)")
    assert b.stats["timeouts"] == 3 and b.stats["retries"] == 2 and len(stub.seen) == 3


def test_connection_refused_names_the_endpoint():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    b = OpenAIBackend("m", f"http://127.0.0.1:{port}/v1", max_retries=1, backoff_s=0.01, api_key_env=KEY_ENV)
    [res] = b.generate([req(0)])
    assert res.finish_reason == "error" and res.text == ""
    assert f"http://127.0.0.1:{port}/v1/chat/completions" in res.error
    assert "after 2 attempts" in res.error and b.stats["retries"] == 1


def test_semaphore_bounds_requests_in_flight(stub):
    stub.delay = 0.15
    b = backend(stub, concurrency=3)
    t0 = time.perf_counter()
    results = b.generate([req(i) for i in range(9)])
    wall = time.perf_counter() - t0
    assert all(r.error is None for r in results)
    assert stub.max_in_flight == 3 and b.stats["max_in_flight"] == 3
    assert wall >= 3 * 0.15  # 9 requests, 3 at a time: at least three waves
    # results come back in request order with each request's own counts
    assert [r.completion_tokens for r in results] == [5 + (1000 + i) % 7 for i in range(9)]


def test_api_key_never_appears_in_results_errors_or_repr(stub, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    stub.script = ["leak", "echo-key", "500", "500", "500"]
    b = backend(stub, concurrency=1, max_retries=2)
    results = b.generate([req(0), req(1), req(2)])
    assert all(f"Bearer {SECRET}" == s["headers"]["Authorization"] for s in stub.seen)  # it was sent...
    texts = [repr(b), str(vars(b))] + [repr(r) for r in results]
    assert all(SECRET not in t for t in texts)  # ...but never shows up anywhere we return
    assert results[0].error.startswith(f"HTTP 400 from {stub.url}") and "[redacted]" in results[0].error
    assert results[1].error is None and "[redacted]" in results[1].text
    assert results[2].error.startswith(f"HTTP 500 from {stub.url}")
    assert KEY_ENV in repr(b)  # the variable's name is shown, its value is not


# ------------------------------------------------------------------ the replica's async mode
def test_replica_core_awaits_agenerate_and_counts_server_tokens(stub):
    stub.delay = 0.05
    stub.script = ["500"]  # one retry, mirrored into the replica's stats
    b = backend(stub, concurrency=2)
    core = ReplicaCore(b, max_batch=16)
    assert core.asynchronous and not core.continuous

    async def go():
        try:
            return await asyncio.gather(*(core.generate(req(i)) for i in range(5)))
        finally:
            await b.aclose()

    results = asyncio.run(asyncio.wait_for(go(), 20))
    assert all(r.error is None for r in results)
    assert stub.max_in_flight == 2  # the backend's semaphore, not a batch, bounds the replica
    assert core.stats["requests"] == 5 and core.stats["errors"] == 0 and core.stats["hops"] == 0
    assert core.stats["prompt_tokens"] == sum(p for p, _ in stub.usages) == sum(r.prompt_tokens for r in results)
    assert core.stats["completion_tokens"] == sum(c for _, c in stub.usages)
    assert core.stats["retries"] == 1 and core.stats["busy_s"] > 0.05


def test_replica_core_async_mode_turns_errors_into_error_results(stub):
    stub.script = ["400"]
    b = backend(stub)
    core = ReplicaCore(b)

    async def go():
        try:
            return await core.generate(req(0))
        finally:
            await b.aclose()

    res = asyncio.run(go())
    assert res.finish_reason == "error" and core.stats["errors"] == 1 and core.stats["requests"] == 1


# ------------------------------------------------------------------ end to end on Ray
@pytest.mark.ray
def test_debate_run_on_ray_records_the_servers_token_counts(stub, ray_local, tmp_path):
    from actors.driver import run
    from engine.results import read_table

    cfg = RunConfig.flat(
        backend="openai",
        api_base=stub.base + "/v1",
        protocol="mad",
        agents=2,
        rounds=2,
        limit=2,
        progress=False,
        out=str(tmp_path / "openai"),
        model="stub-model",
        api_concurrency=4,
    )
    result = run(cfg)
    calls = read_table(result.out_dir, "calls").to_pandas()
    assert len(calls) == 2 * 2 * 2 == len(stub.seen)  # questions x agents x rounds, one request each
    assert (calls.error.isna()).all() and (calls.backend == "openai").all() and not calls.simulated.any()
    # every row's token counts are exactly what the server reported for one of its answers
    assert sorted(zip(calls.prompt_tokens, calls.completion_tokens)) == sorted(stub.usages)
    assert result.summary["prompt_tokens"] == sum(p for p, _ in stub.usages)
    # round 0 sees [user], round 1 [user, assistant, user] (full transcript): boxed 18 then 20
    assert sorted(calls[calls["round"] == 0].answer) == ["18"] * 4
    assert sorted(calls[calls["round"] == 1].answer) == ["20"] * 4
    assert all(s["body"]["model"] == "stub-model" for s in stub.seen)
