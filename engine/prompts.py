"""Prompt templates for every task and debate stage, in one place.

Every protocol uses these same templates, so that protocols are compared on identical prompts.
Templates are ``string.Template`` strings (``$question``, ``$peers``, ``$text``): LaTeX braces
such as ``\\boxed{}`` need no escaping. A user overrides any of them from config::

    prompts:
      numeric:
        first: "Solve: $question ... \\boxed{answer}"

Stages:
  first       the round-0 question prompt                      ($question)
  debate      a later round, showing peers' previous replies   ($question, $peers)
  peer        how one peer reply is shown inside $peers         ($text, $agent)
  self_check  a later round in which the agent hears nobody     ($question)

The wording follows Du et al. (2023) ("Improving Factuality and Reasoning in Language Models
through Multiagent Debate"): the first prompt asks for reasoning and a final answer in a fixed
format, the debate prompt shows the other agents' solutions and asks for an updated answer, and
an agent that reads no peer is asked to double-check its answer (the sparse-topology paper's
agents with no neighbours in a round do the same).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from string import Template
from typing import Mapping

from engine.records import Message

STAGES = ("first", "debate", "peer", "self_check")

_FORMAT = {
    "numeric": "Your final answer should be a single number, in the form \\boxed{answer}, at the end of your response.",
    "math": "Your final answer should be a simplified expression, in the form \\boxed{answer}, at the end of your response.",
    "choice": "Your final answer should be a single letter, in the form (X), at the end of your response.",
    "pair": "Your final answer should be A or B, in the form (X), at the end of your response.",
}

_INTRO = {
    "numeric": "Can you solve the following math problem?",
    "math": "Can you solve the following math problem?",
    "choice": "Can you answer the following question?",
    "pair": "Can you judge which of the two dialogues below is better?",
}


def _defaults(task: str) -> dict[str, str]:
    fmt = _FORMAT[task]
    return {
        "first": f"{_INTRO[task]} $question\nExplain your reasoning. {fmt}",
        "debate": (
            "These are the solutions to the problem from other agents:\n$peers\n"
            "Using the reasoning from other agents as additional information, can you provide an updated answer? "
            f"The original problem is: $question\nExplain your reasoning. {fmt}"
        ),
        "peer": "\nOne agent solution: ```$text```\n",
        "self_check": (
            "Can you double check that your answer is correct? "
            f"The original problem is: $question\nPlease restate your reasoning. {fmt}"
        ),
    }


DEFAULT_TEMPLATES: dict[str, dict[str, str]] = {t: _defaults(t) for t in _FORMAT}


class PromptError(ValueError):
    pass


@dataclass
class PromptSet:
    """The templates of one task, with user overrides applied."""

    task: str
    templates: dict[str, str] = field(default_factory=dict)

    @classmethod
    def for_task(cls, task: str, overrides: Mapping[str, Mapping[str, str]] | None = None) -> "PromptSet":
        if task not in DEFAULT_TEMPLATES:
            raise PromptError(f"--task {task!r} has no prompts; tasks: {', '.join(DEFAULT_TEMPLATES)}")
        templates = dict(DEFAULT_TEMPLATES[task])
        for key, value in ((overrides or {}).get(task) or {}).items():
            if key not in STAGES:
                raise PromptError(f"prompts.{task}.{key}: unknown stage; stages: {', '.join(STAGES)}")
            templates[key] = str(value)
        # Fail on a bad placeholder now, not in the middle of a run.
        probe = {"question": "q", "peers": "p", "text": "t", "agent": "0"}
        for key, value in templates.items():
            try:
                Template(value).substitute(probe)
            except (KeyError, ValueError) as exc:
                raise PromptError(f"prompts.{task}.{key}: bad placeholder {exc}; use $question, $peers, $text, $agent") from exc
        return cls(task=task, templates=templates)

    def render(self, stage: str, **values: str) -> str:
        return Template(self.templates[stage]).substitute(values)

    def first(self, question: str) -> str:
        return self.render("first", question=question)

    def debate(self, question: str, peer_texts: list[tuple[int, str]]) -> str:
        peers = "".join(self.render("peer", text=text, agent=str(agent)) for agent, text in peer_texts)
        return self.render("debate", question=question, peers=peers)

    def self_check(self, question: str) -> str:
        return self.render("self_check", question=question)


def build_messages(
    prompts: PromptSet,
    question: str,
    kind: str,
    history: list[Message],
    peer_texts: list[tuple[int, str]],
    system_prompt: str | None = None,
    forgetting: bool = False,
) -> tuple[list[Message], Message]:
    """Messages to send for one turn, and the new user message to append to the memory.

    ``history`` is the agent's own transcript for this question (alternating user/assistant).
    With ``forgetting`` the agent keeps only its first prompt and its previous reply (the memory
    of the last round) instead of the whole transcript; the choice of keeping the first prompt is
    ours: the question must stay in context and the debate prompt restates it anyway.
    """
    if kind == "first":
        user = {"role": "user", "content": prompts.first(question)}
    elif kind == "debate":
        user = {"role": "user", "content": prompts.debate(question, peer_texts)}
    elif kind == "self_check":
        user = {"role": "user", "content": prompts.self_check(question)}
    else:
        raise PromptError(f"unknown turn kind {kind!r}")
    context = list(history)
    if forgetting and len(context) > 2:
        context = context[:1] + context[-1:]
    msgs: list[Message] = []
    if system_prompt:
        msgs.append({"role": "system", "content": system_prompt})
    msgs.extend(context)
    msgs.append(user)
    return msgs, user
