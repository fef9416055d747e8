"""Whitespace tokens: the simulated backend's token counter, and the sweep planner's.

A text's tokens are its whitespace-separated words (``len(text.split())``); a chat prompt's are
the words of its messages plus a fixed framing (:data:`FRAMING_PER_MESSAGE` per message,
:data:`GENERATION_PROMPT` once). :class:`backends.simulated_backend.SimulatedBackend` counts its
prompts this way, so the closed-form cost model (:mod:`engine.cost_predict`) measured with
:func:`count_words` and :func:`count_tokens` is exact against a simulated run; the ``debate sweep
--list`` plan (:mod:`engine.plan`) uses the same counters, which need no model.
"""

from __future__ import annotations

import numpy as np

from engine.messages import message_text
from engine.records import Message

FRAMING_PER_MESSAGE = 4
GENERATION_PROMPT = 3

# about where numpy's fixed cost per call is paid back (docs/backends.md)
_NUMPY_FROM = 1000
_SPACE = np.array([chr(i).isspace() for i in range(128)])  # str.split()'s whitespace among ASCII


def count_words(text: str) -> int:
    """``len(text.split())``, without making the words.

    A long ASCII text (every simulated prompt) is counted with numpy, faster than ``str.split`` on
    the long prompt of an agent reading 999 peers (measured timings: docs/backends.md); below
    :data:`_NUMPY_FROM` characters ``str.split`` is the faster."""
    if len(text) < _NUMPY_FROM or not text.isascii():
        return len(text.split())
    space = _SPACE[np.frombuffer(text.encode("ascii"), dtype=np.uint8)]
    if not len(space):
        return 0
    return int(np.count_nonzero(space[:-1] & ~space[1:])) + (not space[0])  # word starts


def count_tokens(messages: list[Message]) -> int:
    """Whitespace tokens of the messages' text plus the fixed framing. Image parts count 0 tokens:
    only the text parts of a content list are counted (a real server counts an image's tokens)."""
    return sum(count_words(message_text(m)) + FRAMING_PER_MESSAGE for m in messages) + GENERATION_PROMPT


class WordTokenizer:
    """The token ids of a chat prompt in the simulated backend's layout, as many as
    :func:`count_tokens` counts: each message is a header of three tokens (start, role, newline),
    its words and an end token; the generation prompt is an assistant message's header, so a
    prompt followed by its reply and a new message starts with the whole earlier prompt, as with
    real chat templates (ChatML, Llama 3). Ids are assigned as words are first seen (one
    vocabulary per tokenizer). For :func:`engine.prefix_runs.run_prefill` on a simulated run."""

    _START, _END, _NEWLINE = " <start>", " <end>", " <newline>"  # never a word: words have no spaces

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}

    def _id(self, token: str) -> int:
        return self.vocab.setdefault(token, len(self.vocab))

    def _header(self, role: str) -> list[int]:
        return [self._id(self._START), self._id(" role:" + role), self._id(self._NEWLINE)]

    def __call__(self, messages: list[Message]) -> list[int]:
        ids: list[int] = []
        vocab = self.vocab  # _id inlined below: it runs once per word of every prompt
        for m in messages:
            ids += self._header(m["role"])
            ids += [vocab.setdefault(w, len(vocab)) for w in message_text(m).split()]
            ids.append(self._id(self._END))
        return ids + self._header("assistant")
