"""Prompt templates for every task and debate stage, in one place.

Every protocol uses these templates, so protocols are compared on identical prompts. Templates
are ``string.Template`` strings: LaTeX braces such as ``\\boxed{}`` need no escaping. Two
placeholders are filled for every stage from the task: ``$intro`` (e.g. "Can you solve the
following math problem?") and ``$format`` (the answer-format instruction, e.g. "... in the form
\\boxed{answer} ..."). Base stages:

  first       the round-0 question prompt                      ($question)
  debate      a later round, showing peers' previous replies   ($question, $peers)
  peer        how one shown reply is rendered inside $peers     ($text, $agent)
  self_check  a later round in which the agent hears nobody     ($question)
  system      the system message of every agent turn; empty by default (no system message).
              ``--system-prompt`` (or an agent's ``system_prompt``) takes its place; the stage lets
              a config give one per task (a paper's system prompt for math, another for pairs)

``--prompt-layout shared`` (:mod:`engine.protocols.layout`) adds four, from which a later
round's one user message is built: the "first" prompt, then one board per round the memory
keeps, then the reader's own part, joined by blank lines (:func:`shared_content`):

  shared_board      a board of one round's replies, every agent's ($round, $entries)
  shared_summaries  a board of one round's summaries ($round, $entries)
  shared_entry      one entry of a board ($label: "Agent 3", "Group 1", "Summary"; $text)
  shared_turn       the reader's own part, after the boards ($who: "Agent 3", "Agent 3 of Group 1")

Protocols add their own stages in their specs (``ProtocolSpec.stages``: GroupDebate's summary and
inter-group prompts, S2-MAD's and CortexDebate's prompts, quoting their papers).

A user overrides any stage from config, for one task or for all::

    prompts:
      all:     {peer: "\\nAgent $agent said: $text\\n"}
      numeric: {first: "Solve: $question ... \\boxed{answer}"}

A question with an image (:attr:`engine.tasks.Question.image`) is asked with the same texts: the
image is added to each request's first user message as an OpenAI content part
(:func:`engine.messages.with_image`), and the agents' transcripts keep the texts alone.

The base wording follows Du et al. (2023): the first prompt asks for reasoning and a final answer
in a fixed format, the debate prompt shows the other agents' solutions and asks for an updated
answer, and an agent that reads no peer is asked to double-check its answer.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from string import Template
from typing import Any

from engine.errors import UserError
from engine.messages import with_image
from engine.protocols import prompt_stage_fields, prompt_stages
from engine.protocols.base import Board, SummaryCall
from engine.records import Message

FORMATS = {
    "numeric": "Your final answer should be a single number, in the form \\boxed{answer}, at the end of your response.",
    "math": (
        "Your final answer should be a simplified expression, in the form \\boxed{answer}, at the end of your response."
    ),
    "choice": "Your final answer should be a single letter, in the form (X), at the end of your response.",
    "pair": "Your final answer should be A or B, in the form (X), at the end of your response.",
}

INTROS = {
    "numeric": "Can you solve the following math problem?",
    "math": "Can you solve the following math problem?",
    "choice": "Can you answer the following question?",
    "pair": "Can you judge which of the two dialogues below is better?",
}

BASE_STAGES = {
    "first": "$intro $question\nExplain your reasoning. $format",
    "debate": (
        "These are the solutions to the problem from other agents:\n$peers\n"
        "Using the reasoning from other agents as additional information, can you provide an updated answer? "
        "The original problem is: $question\nExplain your reasoning. $format"
    ),
    "peer": "\nOne agent solution: ```$text```\n",
    "self_check": (
        "Can you double check that your answer is correct? "
        "The original problem is: $question\nPlease restate your reasoning. $format"
    ),
    "system": "",
    "shared_board": "These are the solutions of every agent after round $round:$entries",
    "shared_summaries": "These are the summaries of the agents' solutions after round $round:$entries",
    "shared_entry": "\n$label: ```$text```",
    "shared_turn": (
        "Using the solutions on the boards above as additional information, can you provide an "
        "updated answer? Explain your reasoning. $format\nYou are $who on the boards above."
    ),
}

_ALWAYS = {"intro", "format", "question"}
_BASE_FIELDS: dict[str, set[str]] = {"peer": {"agent", "text"}}  # usable even if the default omits them


class PromptError(UserError, ValueError):
    pass


def stages() -> dict[str, str]:
    """Every stage: the base ones and those the protocols' specs add (``ProtocolSpec.stages``)."""
    out = dict(BASE_STAGES)
    for name, text in prompt_stages().items():
        if name in out and out[name] != text:
            raise PromptError(f"prompt stage {name!r} is defined twice with different texts")
        out[name] = text
    return out


def _extra_fields(stage: str) -> set[str]:
    return _BASE_FIELDS.get(stage, set()) | prompt_stage_fields().get(stage, set())


def _identifiers(text: str) -> set[str]:
    return set(Template(text).get_identifiers())


@dataclass
class PromptSet:
    """The templates of one task, with user overrides applied."""

    task: str
    templates: dict[str, str] = field(default_factory=dict)

    @classmethod
    def for_task(cls, task: str, overrides: Mapping[str, Mapping[str, str]] | None = None) -> PromptSet:
        if task not in FORMATS:
            raise PromptError(f"--task {task!r} has no prompts; tasks: {', '.join(FORMATS)}")
        templates = stages()
        defaults = dict(templates)
        overrides = overrides or {}
        for scope in overrides:
            if scope != "all" and scope not in FORMATS:
                raise PromptError(f"prompts.{scope}: not a task; use one of {', '.join(FORMATS)} or 'all'")
        for scope in ("all", task):
            for key, value in (overrides.get(scope) or {}).items():
                if key not in defaults:
                    raise PromptError(f"prompts.{scope}.{key}: unknown stage; stages: {', '.join(sorted(defaults))}")
                value = str(value)
                try:
                    idents = _identifiers(value)
                except ValueError as exc:
                    raise PromptError(f"prompts.{scope}.{key}: bad template: {exc}") from exc
                allowed = _identifiers(defaults[key]) | _ALWAYS | _extra_fields(key)
                if not idents <= allowed:
                    raise PromptError(
                        f"prompts.{scope}.{key}: bad placeholder(s) {sorted(idents - allowed)}; "
                        f"this stage takes ${', $'.join(sorted(allowed))}"
                    )
                templates[key] = value
        return cls(task=task, templates=templates)

    def render(self, stage: str, **values: Any) -> str:
        if stage not in self.templates:
            raise PromptError(f"unknown prompt stage {stage!r}")
        full = {"intro": INTROS[self.task], "format": FORMATS[self.task]}
        full.update({k: str(v) for k, v in values.items()})
        try:
            return Template(self.templates[stage]).substitute(full)
        except KeyError as exc:
            raise PromptError(f"prompt stage {stage!r} needs ${exc.args[0]}") from exc

    def first(self, question: str) -> str:
        return self.render("first", question=question)

    def peers_block(self, peer_texts: Sequence[tuple[Any, str]]) -> str:
        """``$peers``: each (label, text) rendered with the "peer" stage (label as ``$agent``),
        concatenated."""
        return self._listing("peer", "agent", peer_texts)

    def entries_block(self, entries: Sequence[tuple[Any, str]]) -> str:
        """A board's ``$entries`` (:class:`~engine.protocols.base.Board`): each (label, text)
        rendered with the "shared_entry" stage, concatenated."""
        return self._listing("shared_entry", "label", entries)

    def _listing(self, stage: str, label: str, pairs: Sequence[tuple[Any, str]]) -> str:
        """Each (label, text) of ``pairs`` rendered with ``stage`` (the label as ``$<label>``),
        concatenated. The same text as rendering each with :meth:`render`, made in one pass (a
        fully connected round of 1,000 agents renders 10^6 of them): a template of literals and
        ``$text`` is one join."""
        if not pairs:
            return ""
        compiled = _compiled(self.templates.get(stage, ""))
        if compiled is None or not compiled[1] <= {"text", label, "intro", "format"}:
            return "".join(self.render(stage, text=text, **{label: str(lab)}) for lab, text in pairs)
        fmt, names = compiled
        fixed = {"intro": INTROS[self.task], "format": FORMATS[self.task]}
        if names <= {"text", "intro", "format"}:
            head, sep, tail = fmt.format(text="\0", **fixed).partition("\0")
            if sep and "\0" not in head + tail:
                try:
                    return head + (tail + head).join(map(itemgetter(1), pairs)) + tail
                except TypeError:  # a text that is no str: str() it, as render() does
                    return head + (tail + head).join(str(text) for _, text in pairs) + tail
        return "".join(fmt.format(text=str(text), **{label: str(lab)}, **fixed) for lab, text in pairs)

    def debate(self, question: str, peer_texts: list[tuple[Any, str]]) -> str:
        return self.render("debate", question=question, peers=self.peers_block(peer_texts))

    def self_check(self, question: str) -> str:
        return self.render("self_check", question=question)

    def system(self, question: str) -> str | None:
        """The "system" stage rendered, or None when it is empty (the default: no system message)."""
        return self.render("system", question=question) if self.templates.get("system") else None


@functools.lru_cache(maxsize=64)
def _compiled(template: str) -> tuple[str, frozenset[str]] | None:
    """``template`` as a :meth:`str.format` string and the placeholders it uses, or None when
    it is not a valid template (:meth:`PromptSet.render` then raises the error)."""
    out, names, at = [], set(), 0
    for m in Template.pattern.finditer(template):
        out.append(template[at : m.start()].replace("{", "{{").replace("}", "}}"))
        at = m.end()
        if m.group("escaped") is not None:
            out.append("$")
        elif m.group("invalid") is not None:
            return None
        else:
            name = m.group("named") or m.group("braced")
            names.add(name)
            out.append("{" + name + "}")
    out.append(template[at:].replace("{", "{{").replace("}", "}}"))
    return "".join(out), frozenset(names)


def build_messages(
    prompts: PromptSet,
    question: str,
    stage: str,
    history: list[Message],
    peer_texts: list[tuple[Any, str]],
    system_prompt: str | None = None,
    memory: str = "full",
    values: Mapping[str, Any] | None = None,
    image: str | None = None,
    boards: Sequence[Board] | None = None,
) -> tuple[list[Message], Message]:
    """Messages to send for one turn, and the new user message to append to the memory.

    ``history`` is the agent's own transcript for this question (alternating user/assistant).
    ``memory``: "full" sends it all; "last" (forgetting) keeps only the first prompt and the
    agent's previous reply — our choice of keeping the first prompt: the question must stay in
    context; "none" sends only the new message.

    ``system_prompt``: the system message; None takes the task's "system" stage (none when
    that is empty, the default).

    ``image``: the question's image URL, attached to the first user message of what is sent
    (:func:`with_image`: the round-0 prompt when the history is sent, else the new message). The
    returned user message stays text, so transcripts hold text only and the image is sent once per
    request, never once per remembered turn.

    ``boards`` (``--prompt-layout shared``, :attr:`AgentCall.boards`): the request is instead the
    system message (if any) and ONE user message, :func:`shared_content`; ``stage``,
    ``history``, ``peer_texts`` and ``memory`` are not read (the boards are the memory).
    """
    if memory not in ("full", "last", "none"):
        raise PromptError(f"unknown memory mode {memory!r}")
    if boards is not None:
        content = shared_content(prompts, question, boards, values or {})
        history, memory = [], "none"
    else:
        content = prompts.render(stage, question=question, peers=prompts.peers_block(peer_texts), **dict(values or {}))
    user = {"role": "user", "content": content}
    context = list(history)
    if memory == "last" and len(context) > 2:
        context = context[:1] + context[-1:]
    elif memory == "none":
        context = []
    msgs: list[Message] = []
    if system_prompt is None:
        system_prompt = prompts.system(question)
    if system_prompt:
        msgs.append({"role": "system", "content": system_prompt})
    msgs.extend(context)
    msgs.append(user)
    return with_image(msgs, image), user


SEPARATOR = "\n\n"  # between the blocks of a shared-layout message: a boundary every tokenizer keeps


def shared_content(prompts: PromptSet, question: str, boards: Sequence[Board], values: Mapping[str, Any]) -> str:
    """The one user message of a ``--prompt-layout shared`` turn: the "first" prompt (exactly
    round 0's text), each board rendered with "shared_board" or "shared_summaries" (its entries
    with "shared_entry"), then the "shared_turn" stage filled with ``values`` (``$who``), joined
    by :data:`SEPARATOR`. Everything before the "shared_turn" part depends only on the question
    and the boards, so readers of the same boards send the same text up to there, and a later
    round's text (full memory: one more board) starts with an earlier round's shared part."""
    parts = [prompts.first(question)]
    for board in boards:
        stage = "shared_summaries" if board.summaries else "shared_board"
        parts.append(
            prompts.render(stage, question=question, round=board.round, entries=prompts.entries_block(board.entries))
        )
    parts.append(prompts.render("shared_turn", question=question, **dict(values)))
    return SEPARATOR.join(parts)


def summary_content(prompts: PromptSet, question: str, call: SummaryCall) -> str:
    """The one user message of a summary call: its stage, ``$peers`` showing its texts (the
    "peer" stage), or its board's labelled entries under ``--prompt-layout shared``."""
    if call.board is None:
        peers = prompts.peers_block(list(enumerate(call.texts)))
    else:
        peers = prompts.entries_block(call.board.entries)
    return prompts.render(call.stage, question=question, peers=peers, **call.values)


# The message helpers lived here before engine.messages; their old import paths keep working.
from engine.messages import (  # noqa: E402, F401  (re-exported, not used here)
    ContextOverflow,
    MessageLedger,
    has_images,
    image_parts,
    message_hash,
    message_text,
    stored_messages,
    text_only,
    truncate_oldest_turns,
)
