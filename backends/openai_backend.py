"""A backend for any OpenAI-compatible chat-completions server (vLLM, llama.cpp, OpenAI, ...).

``OpenAIBackend.agenerate(request)`` sends ``POST {api_base}/v1/chat/completions`` with
``model, messages, temperature, top_p, max_tokens, seed`` and returns a
:class:`~engine.records.GenResult` built from ``choices[0].message.content``,
``choices[0].finish_reason`` and the server's own token counts ``usage.prompt_tokens`` /
``usage.completion_tokens``. A response without usable ``usage`` is an error result: token counts
are never guessed (the engine's accounting is only as exact as its counts). The prompt tokens the
server took from its prefix cache are ``usage.prompt_tokens_details.cached_tokens`` when the server
sends that count (OpenAI does; vLLM's server with ``--enable-prompt-tokens-details``); without it,
or with a value that is not a count within ``prompt_tokens``, the result's
``cached_prompt_tokens`` is None (unknown), never 0.

The replica actor awaits ``agenerate`` directly in its event loop; an ``asyncio.Semaphore`` of
``concurrency`` bounds the requests in flight (per event loop: the actor has one loop; the sync
``generate(list)`` convenience runs its own loop with its own bound). Each attempt may take
``timeout_s`` seconds (``--api-timeout``), from connecting to the reply's last byte. Failures never
raise and never loop forever:

* a refused/dropped connection, an attempt past ``timeout_s`` (connect or read: a hung server),
  HTTP 429 and HTTP 5xx are retried up to ``max_retries`` times, with exponential backoff
  (``backoff_s * 2**k``, or the server's numeric ``Retry-After`` for 429/503, capped at
  ``max_backoff_s``); the semaphore slot is released while backing off, and every retry is counted
  in ``stats["retries"]`` (timed-out attempts in ``stats["timeouts"]`` too). A request therefore
  ends within about ``(max_retries + 1) * timeout_s`` plus the backoffs;
* any other 4xx, an invalid body and a missing ``usage`` give an error result at once;
* the error names the endpoint, e.g. ``HTTP 400 from http://host:port/v1/chat/completions: <body>``
  (the body cut to 300 characters) or ``timed out after 120 s waiting for http://host:port/v1/chat/
  completions (--api-timeout) (gave up after 3 attempts)``, and the result has
  ``finish_reason="error"`` and empty text.

The API key is read from the environment variable ``api_key_env`` (default ``OPENAI_API_KEY``) at
each request and sent as ``Authorization: Bearer ...``; without it no Authorization header is sent
(local servers need none). The key is never stored on the object, never logged, and is masked
in any result text or error message that would contain it (a key shorter than 8 characters, such
as the ``EMPTY`` placeholder of local servers, is not treated as a secret and not masked).

``GenRequest.meta`` (oracle facts for the simulated model) is never sent.

Images: a question's image travels in the request's first user message as OpenAI content parts,
``[{"type": "text", "text": ...}, {"type": "image_url", "image_url": {"url": ...}}]`` (a data URL or
an http(s) URL, :func:`engine.messages.with_image`), sent as they are; the server counts the image's
tokens into ``usage.prompt_tokens``. Whether the served model can see images is the server's
business: a text-only model's server answers with an error (an error row).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload
from urllib.parse import urlsplit

from backends.base import Backend
from engine.config.fields import ConfigPart, config_part, option
from engine.records import GenRequest, GenResult

if TYPE_CHECKING:
    pass

API_TIMEOUT_MAX = 3600.0  # --api-timeout's bound: an hour for one reply is past any real generation


@config_part("openai server", hashed=False)
@dataclass
class OpenAISettings(ConfigPart):
    """The OpenAI-compatible backend's own settings (``--api-*``); the server's URL changes
    results, so the run id hashes it for runs of every backend, as before it moved here."""

    api_base: str | None = option(
        None, "--backend openai: the server's URL, with or without /v1 (API key from $OPENAI_API_KEY)", hashed=True
    )
    api_concurrency: int = option(16, "--backend openai: requests in flight per replica (default 16)", low=1, high=4096)
    api_timeout: float = option(
        120.0,
        f"--backend openai: seconds one request may take, connecting to the reply's last byte; one that "
        f"takes longer is retried like an HTTP 5xx, then an error row (default 120, at most {API_TIMEOUT_MAX:g})",
        low=0,
        low_open=True,
        high=API_TIMEOUT_MAX,
        bound_error=f"must be positive seconds, at most {API_TIMEOUT_MAX:g}",
    )

    def backend_options(self) -> dict[str, Any]:
        """The :class:`OpenAIBackend` keyword arguments these settings give."""
        return {"api_base": self.api_base, "concurrency": self.api_concurrency, "timeout_s": self.api_timeout}


BODY_CHARS = 300  # how much of an error body goes into the error message
_MIN_SECRET_LEN = 8


def chat_completions_url(api_base: str) -> str:
    """``http://h:p``, ``http://h:p/`` and ``http://h:p/v1`` all give ``http://h:p/v1/chat/completions``."""
    base = (api_base or "").strip().rstrip("/")
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"--api-base {api_base!r} must be an http(s) URL such as http://127.0.0.1:8000/v1")
    if parts.query or parts.fragment:
        raise ValueError(f"--api-base {api_base!r} must not have a query or fragment")
    if base.endswith("/v1"):
        base = base[: -len("/v1")]
    return f"{base}/v1/chat/completions"


def cached_prompt_tokens(usage: dict[str, Any], prompt_tokens: int) -> int | None:
    """``usage.prompt_tokens_details.cached_tokens`` when it is a count of at most ``prompt_tokens``;
    None (unknown) when the server does not send it or sends something else."""
    details = usage.get("prompt_tokens_details")
    n = details.get("cached_tokens") if isinstance(details, dict) else None
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= prompt_tokens:
        return None
    return n


class _LoopState:
    """The HTTP session and the in-flight bound of one event loop (both are bound to their loop)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, concurrency: int, timeout_s: float):
        import aiohttp  # ~0.4 s to import: only where a request is made, not where settings are read

        self.loop = loop
        self.semaphore = asyncio.Semaphore(concurrency)
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0),  # no pool limit: the semaphore is the one bound
            timeout=aiohttp.ClientTimeout(total=timeout_s),
        )


class OpenAIBackend(Backend):
    """OpenAI-compatible chat-completions client (see module docstring)."""

    mode = "async"
    simulated = False
    accepts_images = True

    def __init__(
        self,
        model: str,
        api_base: str,
        concurrency: int = 16,
        timeout_s: float = 120,
        max_retries: int = 2,
        api_key_env: str = "OPENAI_API_KEY",
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
    ):
        if concurrency < 1:
            raise ValueError(f"--api-concurrency must be at least 1 (got {concurrency})")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive (got {timeout_s})")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0 (got {max_retries})")
        self.model = model
        self.url = chat_completions_url(api_base)
        self.concurrency = int(concurrency)
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.api_key_env = api_key_env  # the variable's NAME; the key itself is never stored
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.stats = {
            "requests": 0,
            "attempts": 0,
            "retries": 0,
            "errors": 0,
            "timeouts": 0,
            "in_flight": 0,
            "max_in_flight": 0,
        }
        self._states: dict[asyncio.AbstractEventLoop, _LoopState] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"OpenAIBackend(model={self.model!r}, url={self.url!r}, concurrency={self.concurrency}, "
            f"timeout_s={self.timeout_s}, max_retries={self.max_retries}, api_key_env={self.api_key_env!r})"
        )

    # ------------------------------------------------------------------ plumbing
    def _key(self) -> str | None:
        return os.environ.get(self.api_key_env) or None

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = self._key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    @overload
    def _mask(self, text: str) -> str: ...
    @overload
    def _mask(self, text: None) -> None: ...
    def _mask(self, text: str | None) -> str | None:
        key = self._key()
        if text and key and len(key) >= _MIN_SECRET_LEN and key in text:
            return text.replace(key, "[redacted]")
        return text

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        with self._lock:
            state = self._states.get(loop)
            if state is None:
                for old in [lp for lp in self._states if lp.is_closed()]:
                    del self._states[old]  # its session died with its loop
                state = self._states[loop] = _LoopState(loop, self.concurrency, self.timeout_s)
            return state

    async def aclose(self) -> None:
        """Close the HTTP session of the running event loop (idempotent)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            state = self._states.pop(loop, None)
        if state is not None:
            await state.session.close()

    def body(self, req: GenRequest) -> dict[str, Any]:
        return {
            "model": self.model,
            "messages": [{"role": m["role"], "content": m["content"]} for m in req.messages],
            "temperature": req.temperature,
            "top_p": req.top_p,
            "max_tokens": req.max_tokens,
            "seed": req.seed,
        }

    def _delay(self, retry: int, retry_after: str | None) -> float:
        if retry_after is not None:
            try:
                return min(max(float(retry_after), 0.0), self.max_backoff_s)
            except ValueError:
                pass  # an HTTP date: fall back to our own backoff
        return min(self.backoff_s * (2**retry), self.max_backoff_s)

    # ------------------------------------------------------------------ parsing
    def _parse(self, raw: str) -> tuple[str, int, int, str, int | None]:
        """(text, prompt_tokens, completion_tokens, finish_reason, cached prompt tokens or None) of a
        200 body, or ValueError."""
        try:
            data = json.loads(raw)
        except ValueError:
            raise ValueError(f"invalid JSON from {self.url}: {raw[:BODY_CHARS]!r}") from None
        if not isinstance(data, dict):
            raise ValueError(f"unexpected JSON from {self.url} (not an object): {raw[:BODY_CHARS]!r}")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ValueError(f"no choices in the response from {self.url}: {raw[:BODY_CHARS]!r}")
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise ValueError(f"no choices[0].message in the response from {self.url}: {raw[:BODY_CHARS]!r}")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise ValueError(f"choices[0].message.content is not a string in the response from {self.url}")
        usage = data.get("usage")
        if not isinstance(usage, dict):
            raise ValueError(f"no usage in the response from {self.url}: token counts are unknown (not guessed)")
        counts = []
        for name in ("prompt_tokens", "completion_tokens"):
            v = usage.get(name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(
                    f"usage.{name} missing or not a count ({v!r}) in the response from {self.url}: "
                    "token counts are unknown (not guessed)"
                )
            counts.append(v)
        finish = choices[0].get("finish_reason")
        finish = finish if isinstance(finish, str) and finish else "unknown"
        # content None (e.g. a reply cut before any visible text) is an empty reply, not an error:
        # the server spent and counted those tokens.
        return content or "", counts[0], counts[1], finish, cached_prompt_tokens(usage, counts[0])

    # ------------------------------------------------------------------ generation
    async def agenerate(self, req: GenRequest) -> GenResult:
        """One chat completion; never raises for server/network failures (see module docstring)."""
        start = time.perf_counter()
        self.stats["requests"] += 1
        try:
            text, ptok, ctok, finish, cached = await self._attempts(req)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure becomes an error result
            self.stats["errors"] += 1
            msg = (
                str(exc) if isinstance(exc, _Failure) else f"request to {self.url} failed: {type(exc).__name__}: {exc}"
            )
            return GenResult("", 0, 0, time.perf_counter() - start, "error", self._mask(msg)[:2000])
        return GenResult(
            self._mask(text) or "", ptok, ctok, time.perf_counter() - start, finish, None, cached_prompt_tokens=cached
        )

    async def _attempts(self, req: GenRequest) -> tuple[str, int, int, str, int | None]:
        state = self._state()
        payload = self.body(req)
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            retry_after = None
            async with state.semaphore:
                self.stats["attempts"] += 1
                self.stats["in_flight"] += 1
                self.stats["max_in_flight"] = max(self.stats["max_in_flight"], self.stats["in_flight"])
                try:
                    async with state.session.post(self.url, json=payload, headers=self._headers()) as resp:
                        status = resp.status
                        raw = (await resp.read()).decode("utf-8", errors="replace")
                        retry_after = resp.headers.get("Retry-After")
                except TimeoutError:  # aiohttp's connect and read timeouts are TimeoutErrors too
                    self.stats["timeouts"] += 1
                    failure = f"timed out after {self.timeout_s:g} s waiting for {self.url} (--api-timeout)"
                    status = None
                except _connection_errors() as exc:
                    failure = f"cannot reach {self.url}: {type(exc).__name__}: {exc}"
                    status = None
                finally:
                    self.stats["in_flight"] -= 1
            if status is not None:
                if status == 200:
                    try:
                        return self._parse(raw)
                    except ValueError as exc:
                        raise _Failure(str(exc)) from None
                failure = f"HTTP {status} from {self.url}: {raw[:BODY_CHARS]}"
                if not (status == 429 or status >= 500):
                    raise _Failure(failure)  # other 4xx (and odd codes): the request itself is wrong
            if attempt + 1 < attempts:
                self.stats["retries"] += 1
                await asyncio.sleep(self._delay(attempt, retry_after if status in (429, 503) else None))
        raise _Failure(f"{failure} (gave up after {attempts} attempts)")

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        """Sync convenience for tests and benchmarks: all requests concurrently (bounded by
        ``concurrency``) in a fresh event loop. Must not be called from a running event loop's thread."""

        async def go() -> list[GenResult]:
            try:
                return list(await asyncio.gather(*(self.agenerate(r) for r in requests)))
            finally:
                await self.aclose()

        return asyncio.run(go())


def _connection_errors() -> tuple[type[Exception], ...]:
    """aiohttp's errors of a refused or dropped connection (imported where a request is made)."""
    import aiohttp  # already imported by the session that raised

    return (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError)


class _Failure(Exception):
    """A failure whose message is already complete (names the endpoint)."""
