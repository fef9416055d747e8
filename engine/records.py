"""Plain records that cross actor boundaries: a generation request, its result, one agent turn.

They are dataclasses of builtins only, so Ray pickles them cheaply and the pure parts of the
engine (state machine, accounting, results) can be tested without Ray or a model.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from engine.protocols.base import SummaryCall

# {"role": "system"|"user"|"assistant", "content": str}. A request's first user message may instead carry
# OpenAI content parts when its question has an image (engine.messages.with_image):
# [{"type": "text", "text": ...}, {"type": "image_url", "image_url": {"url": ...}}]. Transcripts keep text.
Message = dict[str, Any]


@dataclass
class GenRequest:
    """One chat completion for a replica.

    ``seed`` makes sampling reproducible per request (backends that cannot seed a single
    request say so in their docstring). ``meta`` carries facts that only the *simulated*
    backend may read (gold answer, peers' answers); real backends ignore it.
    """

    messages: list[Message]
    temperature: float = 0.7
    top_p: float = 1.0
    max_tokens: int = 256
    seed: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    context_overflow: str = "error"  # "error" | "truncate" (see engine.messages.truncate_oldest_turns)


class BackendDead(RuntimeError):
    """A backend whose engine died for good (e.g. vLLM's ``EngineDeadError``): every later call
    would fail at once. Not an error row: the replica process exits so that Ray restarts it with
    a fresh engine, and the agents resend the calls it did not answer."""


@dataclass
class GenResult:
    """What a replica returns for one request.

    Token counts come from the serving model's own tokenizer: ``prompt_tokens`` is the length of
    the chat-template-applied prompt, ``completion_tokens`` the generated tokens including the
    end-of-turn token when one was produced. ``cached_prompt_tokens``: how many of the prompt
    tokens the serving engine took from its prefix cache instead of computing them (vLLM's
    ``num_cached_tokens``, an OpenAI-compatible server's ``usage.prompt_tokens_details.cached_tokens``);
    None when the backend cannot say (never 0 for unknown). ``error`` is set (and ``text`` empty)
    when the backend failed on this request; it is then recorded, never retried silently.
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    finish_reason: str = "stop"  # "stop" | "length" | "error"
    error: str | None = None
    truncated_messages: int = 0  # messages dropped to fit the context (--context-overflow truncate)
    cached_prompt_tokens: int | None = None  # prompt tokens served from the prefix cache; None: unknown


@dataclass
class CallRecord:
    """The outcome of one agent turn: the generation plus the parsed answer."""

    question_id: str
    round: int
    agent_id: int
    kind: str
    model: str
    peers: list[int]
    text: str
    answer: str | None
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    finish_reason: str
    error: str | None
    seed: int
    temperature: float
    group: int | None = None
    reused: bool = False  # a first-round reply served from the cache (same text and token counts as the original)
    truncated_messages: int = 0  # messages dropped from the prompt to fit the model's context
    side: bool = False  # a side call (AgentCall.side: a review or score BY agent_id OF peers), not a turn
    # the request's messages in order, as prompts-table keys (engine.messages.message_hash); None
    # when the run stores no prompts (--no-store-prompts) or the call never reached an agent
    prompt: list[str] | None = None
    # prompt tokens the engine took from its prefix cache (GenResult.cached_prompt_tokens); None when
    # the backend cannot say, for an error row, and for a reused reply (it made no request)
    cached_prompt_tokens: int | None = None

    def to_row(self) -> dict[str, Any]:
        """The calls table's columns of this record (a shallow copy; ``peers`` a new list).
        Not ``dataclasses.asdict``: its deep copy costs a Python call per peer."""
        row = {name: getattr(self, name) for name in _RECORD_FIELDS}
        row["peers"] = list(self.peers)
        if self.prompt is not None:
            row["prompt"] = list(self.prompt)
        return row


_RECORD_FIELDS = tuple(f.name for f in fields(CallRecord))


@dataclass
class Turn:
    """One call a protocol asked for, as the agent actor receives it: everything the (stateless)
    agent needs, so a restarted agent needs only its configuration.

    ``call`` is an :class:`~engine.protocols.base.AgentCall` (an agent speaks; ``history`` is its
    own transcript of this question so far, kept by :class:`~engine.debate.DebateLog`, and
    ``own_answer`` its latest answer) or a :class:`~engine.protocols.base.SummaryCall` (served by
    the agent's model; no history).
    """

    question: Any  # engine.tasks.Question
    call: Any  # engine.protocols.base.AgentCall | SummaryCall
    round: int
    key: int  # the question's key (engine.debate.question_key): seeds every call of the question
    history: list[Message] = field(default_factory=list)
    own_answer: str | None = None
    replica: int | None = None  # the model's replica that serves it (actors.scheduling); None: the agent's own

    @property
    def is_summary(self) -> bool:
        return isinstance(self.call, SummaryCall)

    @property
    def is_side(self) -> bool:
        """A side call (:attr:`AgentCall.side`): the agent judges ``peers``; not one of its turns."""
        return bool(getattr(self.call, "side", False))


@dataclass
class TurnResult:
    """What an agent returns for a :class:`Turn`: the call's record and, for an agent turn, the
    user message it sent (the debate log appends it and the reply to the agent's history).

    ``messages``: the texts of the request's messages that its sender has not shipped before in
    this run, by key (``record.prompt``'s hashes -> (role, text)); the prompts table stores them
    (:data:`engine.results.PROMPTS_SCHEMA`)."""

    record: CallRecord
    user: Message | None = None
    messages: dict[str, tuple[str, str]] = field(default_factory=dict)


class ServiceLost(RuntimeError):
    """A service a debate needs is gone for good (the embedding actor with its restarts used up,
    or a run without one): the question ends as an *errored* row. A lost agent is not this: its
    turns become error records (data). Any other exception inside a debate is a bug and stops
    the run."""


@dataclass(frozen=True)
class Reads:
    """What one call read: the information edges ``src -> dst`` for every ``src`` in ``srcs``,
    in round ``round``. ``weights``: one per source (CortexDebate), or None when all are 1.0.
    Nodes are agents (0, 1, ...) and summaries (:func:`~engine.protocols.base.summary_node`:
    -1 - the summary's group). ``group``: for a summary, the group it summarises; for an agent,
    its group (:attr:`~engine.protocols.base.AgentCall.group`); None otherwise. ``pruned``: parallel to ``srcs``, True
    for an edge the protocol pruned (:attr:`~engine.protocols.base.AgentCall.pruned`: not read); None when none was."""

    round: int
    dst: int
    srcs: list[int]
    weights: list[float] | None = None
    group: int | None = None
    pruned: list[bool] | None = None
