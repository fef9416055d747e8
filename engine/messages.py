"""Chat messages as the engine sends and stores them: texts, images, keys, and fitting a context.

The message-level helpers every floor may use without reaching the prompt templates or the
protocols (:mod:`engine.prompts` builds a request's messages; the backends count, render and
truncate them): a message's text (:func:`message_text`, :func:`text_only`), a question's image
attached as OpenAI content parts (:func:`with_image`, :func:`has_images`), the prompts table's
keys (:func:`message_hash`, :func:`stored_messages`, :class:`MessageLedger`) and the
``--context-overflow truncate`` policy (:func:`truncate_oldest_turns`, :class:`ContextOverflow`).
"""

from __future__ import annotations

import hashlib
from typing import Any

from engine.records import Message


def image_parts(text: str, url: str) -> list[dict[str, Any]]:
    """OpenAI chat content parts: the text, then the image."""
    return [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": url}}]


def with_image(messages: list[Message], image: str | None) -> list[Message]:
    """``messages`` with ``image`` (a data or http(s) URL) attached once, to the first user message
    (its content becomes :func:`image_parts`); that message is a new dict, the others and the list
    passed in are unchanged. Without an image the same list is returned, so text-only requests are
    exactly what they were."""
    if not image:
        return messages
    out = list(messages)
    for i, m in enumerate(out):
        if m["role"] == "user":
            out[i] = {**m, "content": image_parts(message_text(m), image)}
            break
    return out


def message_text(message: Message) -> str:
    """A message's text: its content, or the text parts of a content list joined by newlines
    (image parts have no text)."""
    content = message["content"]
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content if p.get("type") == "text")


def message_hash(role: str, text: str) -> str:
    """A prompt message's key in the prompts table (:data:`engine.results.PROMPTS_SCHEMA`): 16 hex
    digits of sha256 over its role, a NUL and its text."""
    return hashlib.sha256(f"{role}\x00{text}".encode()).hexdigest()[:16]


def stored_messages(messages: list[Message]) -> tuple[list[str], dict[str, tuple[str, str]]]:
    """A request's messages as the run stores them: their keys in order (:func:`message_hash`)
    and each key's (role, text). Image parts are left out (the question's image is
    ``questions.image``)."""
    keys, texts = [], {}
    for m in messages:
        text = message_text(m)
        key = message_hash(m["role"], text)
        keys.append(key)
        texts[key] = (m["role"], text)
    return keys, texts


class MessageLedger:
    """The prompt messages a sender has already passed on in this run, so that each text travels
    (and is stored) once however many calls share it: a system prompt, a question, an earlier
    reply in every later turn's transcript. Holds only the keys (16 characters each)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def new(self, texts: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
        """The entries of ``texts`` not passed on before; they count as passed on from now."""
        fresh = {k: v for k, v in texts.items() if k not in self.seen}
        self.seen.update(fresh)
        return fresh


def has_images(messages: list[Message]) -> bool:
    """Whether any message carries an image part."""
    return any(
        not isinstance(m["content"], str) and any(p.get("type") == "image_url" for p in m["content"]) for m in messages
    )


def text_only(messages: list[Message]) -> list[Message]:
    """``messages`` with every content list reduced to its text (:func:`message_text`); the same list
    when all contents are strings already. For counting text tokens with a chat template that takes
    strings only."""
    if all(isinstance(m["content"], str) for m in messages):
        return messages
    return [{**m, "content": message_text(m)} for m in messages]


def truncate_oldest_turns(messages: list[Message], count_tokens, limit: int) -> tuple[list[Message], int]:
    """``--context-overflow truncate``: make a prompt fit ``limit`` tokens by dropping whole turns.

    Policy (our choice; the papers do not meet this case): a turn is a user message and the
    agent's reply to it. The oldest turns go first, *except* the first turn (the question and the
    agent's first answer), which goes last; the system prompt and the current message are never
    dropped. It fits when ``count_tokens(messages) + 1 <= limit`` (room for at least one new
    token), the same test the backends use for the error policy. Returns the shortened messages
    and how many messages were dropped (recorded in ``calls.truncated_messages``); raises
    :class:`ContextOverflow` if even the system prompt plus the current message do not fit.

    An image stays in the request: when the message that carries it (the first user message,
    :func:`with_image`) is dropped, its image parts move to the first user message left.
    """
    head = messages[:1] if messages and messages[0]["role"] == "system" else []
    body = messages[len(head) :]
    current, past = body[-1:], body[:-1]
    dropped = 0
    n = count_tokens(messages)
    while n + 1 > limit:
        if len(past) > 2:  # the oldest turn after the first one
            cut = 2 if len(past) >= 4 else len(past) - 2
            past = past[:2] + past[2 + cut :]
        elif past:  # only the first turn is left: drop it too
            cut = len(past)
            current = _keep_images(past, current)
            past = []
        else:
            raise ContextOverflow(
                f"prompt of {n} tokens exceeds the model context of {limit} even after dropping "
                f"every earlier turn (--context-overflow truncate)"
            )
        dropped += cut
        messages = head + past + current
        n = count_tokens(messages)
    return messages, dropped


def _keep_images(gone: list[Message], kept: list[Message]) -> list[Message]:
    """``kept`` with the image parts of the dropped messages ``gone`` added to its first user message."""
    images = [
        p for m in gone if not isinstance(m["content"], str) for p in m["content"] if p.get("type") == "image_url"
    ]
    if not images:
        return kept
    out = list(kept)
    for i, m in enumerate(out):
        if m["role"] == "user":
            parts = [{"type": "text", "text": m["content"]}] if isinstance(m["content"], str) else list(m["content"])
            out[i] = {**m, "content": parts + images}
            break
    return out


class ContextOverflow(ValueError):
    """A prompt that cannot be made to fit the model's context."""
