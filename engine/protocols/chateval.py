"""ChatEval (Chan et al., "ChatEval: Towards Better LLM-based Evaluators through Multi-Agent
Debate", ICLR 2024, arXiv 2308.07201), as CortexDebate uses it for question answering (its
appendix F and Figure 8).

ChatEval is a referee team: N agents, each with its own role (a name and a persona description:
General Public, Critic, News Author, Psychologist, Scientist, ...), discuss the question for T
rounds and every message is posted to a shared chat that every agent reads. The paper compares
three communication strategies (``--chateval-talk``):

* ``one-by-one`` (the paper's and its code's default): in every round the agents speak in a set
  order (agent id order here), and each one reads everything said since its last turn — so in
  round 0 agent i already reads agents 0..i-1, and in round t >= 1 it reads agents i+1..N-1 of
  round t-1 and agents 0..i-1 of round t, in the order they spoke;
* ``simultaneous``: all agents of a round speak at once (one :class:`Step`), each reading the
  previous round's messages of the others (nothing in round 0), so the speaking order cannot
  matter;
* ``summarizer`` (simultaneous-talk-with-summarizer): simultaneous talk plus an extra LLM, the
  summarizer: after every round but the last, one :class:`SummaryCall` (served by agent 0's
  model, stage ``chateval_summary``) summarises the chat so far, and its summary is posted to the
  chat after that round's messages, so every agent reads it in the next round (CortexDebate
  appendix F: the round's summary is input "as supplementary information in the next round").

The answer is the majority vote of the last round's answers (:func:`~engine.protocols.base.vote`).
ChatEval has no early stop: all T rounds always run.

What enters the chat history follows ChatEval's code (github.com/thunlp/ChatEval, agentverse):
every non-empty message is broadcast to every agent's memory (``BasicUpdater``; ``visibility:
all``), in order. With the summarizer (``llm_eval_multi_con`` with the ``summary`` memory
manipulator), the summary is *added* to that memory as a message from ``Summarizer`` — the
round's messages stay — and the summarizer reads the whole memory (every message so far, earlier
summaries included). An empty message (here: a failed call, :attr:`Reply.shown_text` empty) is
not posted at all, as the code's updater skips empty contents.

How the memory is shown differs. In the code an agent's request (``OpenAIChat._construct_messages``)
is the role prompt (user), then every memory message as an *assistant* message ``<sender>:
<content>``, its own and the others' alike, then the final prompt (user); the prompt's
``${chat_history}`` is not filled. The ``[<sender>] : <content>`` lines are the summarizer's
format (``memory_manipulator/summary.py``). Here an agent's prompt lists the others' messages
as ``[<name>]: <text>`` lines in a user message (:func:`render_history`, ``$history``), its own
messages being its own assistant replies (see **Memory** below); the summarizer's prompt uses
the same lines.

Prompts (stages ``chateval_first``, ``chateval_turn``, ``chateval_summary``). The first one is
ChatEval's referee prompt as CortexDebate's Figure 8 prints it, adapted to a question instead of
assistants' answers: ``[Question]``, ``[System]``, "There are a few other referees assigned the
same task, it's your responsibility to discuss with them and think critically before you make
your final judgment. Here is your discussion history:", the agent's role, "Now it's your time to
talk, please make your talk short and clear, <name> !", then the task's ``$format``. The role
reaches the agent through this first prompt (``$name``, ``$role``: :attr:`AgentCall.values`),
never through the system prompt, which stays the user's (``AgentSpec.system_prompt``). Every later
turn (``chateval_turn``) shows the chat lines since the agent's last turn and the same cue with
its name. The summary prompt is the same Figure 8 frame with the summarizer's role.

Choices where the paper is vague:

* **Memory.** ChatEval's code re-renders one prompt every turn with the whole chat history in it
  (the agent's own messages included). Agents here keep their transcript (memory ``full``) and a
  turn sends only what is new since the agent's last turn: the agent sees the same messages in
  the same order, its own ones as its own replies, and the question and role are not sent again.
* **Roles.** Our own short persona descriptions (:data:`DEFAULT_ROLES`, after the paper's list of
  personas), assigned cyclically by agent id; a repeated persona gets a number ("General Public
  2") so that the chat's labels stay unambiguous. ``chateval_roles`` (YAML only) replaces the
  list: ``[{name: Critic, description: ...}, ...]``.
* **One summary for all.** The paper speaks of one extra summarizer LLM; ChatEval's code gives
  every agent its own summarizer over its own memory, but with simultaneous talk all memories are
  equal, so one call (agent 0's model, no system prompt, no memory) serves everyone. Its prompt
  shows the chat so far (earlier summaries included, once; the code's summarizer also gets its
  previous summary as a "current summary", which the chat already holds). No summary is made
  after the last round: nobody would read it (the code summarises at the start of a turn).
* **Answer format every round.** ChatEval's code asks for the final format only in the last
  round; the engine reads every round's answers (``answers_by_round``), so every prompt ends with
  the task's ``$format``.
* **Who reads whom** (records' ``peers``, graph edges): the agents whose messages a call shows,
  in the order shown; a summary records as ``sources`` every agent whose messages it read. In the
  graphs table the summary is the node -1 (summary call ``dst``; a turn that shows it reads it
  from -1, after the agents whose messages it shows).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.cost_model import ChatStage, Cost, Sizes, sys_tokens
from engine.options import ConfigError, Option
from engine.protocols.base import (
    SUMMARIZER,
    AgentCall,
    Context,
    Outcome,
    ProtocolGen,
    Reply,
    Step,
    SummaryCall,
    summary_node,
    vote,
)
from engine.protocols.spec import ProtocolSpec

log = logging.getLogger(__name__)

TALKS = ("one-by-one", "simultaneous", "summarizer")
SUMMARIZER_NAME = "Summarizer"


@dataclass(frozen=True)
class Role:
    """A referee's persona: the name it is called by (in its cue and in the chat's labels) and its
    description (in its first prompt)."""

    name: str
    description: str


# After the personas of the paper and its code (general public, critic, news author, psychologist,
# scientist); the descriptions are ours, written for answering questions.
DEFAULT_ROLES = (
    Role(
        "General Public",
        "You read the question as an interested layperson would: you want reasoning that anyone "
        "can follow, and you say so when a step is unclear.",
    ),
    Role(
        "Critic",
        "You question the other referees' reasoning, look for gaps and mistakes, and propose a better "
        "answer when theirs falls short.",
    ),
    Role(
        "News Author",
        "You care about facts: you check every claim against what the question actually says and "
        "flag anything that goes beyond it.",
    ),
    Role(
        "Psychologist",
        "You watch the discussion for biases, such as holding on to the first answer heard or "
        "simply following the majority, and judge each argument on its merits.",
    ),
    Role(
        "Scientist",
        "You work step by step, test each claim against the evidence, and accept an answer only once "
        "it has been checked.",
    ),
)

_FRAME = (
    "There are a few other referees assigned the same task, it's your responsibility to discuss with them "
    "and think critically before you make your final judgment.\n"
)
_CUE = "Now it's your time to talk, please make your talk short and clear, $name !"

STAGES = {
    # CortexDebate Figure 8 (ChatEval's referee prompt), for a question instead of assistants' answers
    "chateval_first": (
        "[Question]\n$question\n[System]\n"
        "We would like to request your answer to the question displayed above. Explain your reasoning.\n"
        + _FRAME
        + "Here is your discussion history:\n${history}"
        "You are now $name, one of the referees in this task. $role\n" + _CUE + " $format"
    ),
    "chateval_turn": ("Here is what the other referees said since your last turn:\n${history}" + _CUE + " $format"),
    "chateval_summary": (
        "[Question]\n$question\n[System]\n"
        "A few referees were asked to answer the question displayed above and to discuss it with each other. "
        "Here is their discussion history:\n${history}"
        f"You are now {SUMMARIZER_NAME}. You take no side: summarize the discussion so far, the answers the referees "
        "gave, their main arguments and where they still disagree.\n" + _CUE.replace("$name", SUMMARIZER_NAME)
    ),
}
# placeholders a user's override may use besides the default's: the role again in later turns
STAGE_FIELDS = {
    "chateval_first": {"history", "name", "role"},
    "chateval_turn": {"history", "name", "role"},
    "chateval_summary": {"history"},
}


@dataclass(frozen=True)
class ChatLine:
    """One message posted to the chat: who said it (an agent id, or SUMMARIZER), under which name,
    its text and its extracted answer."""

    speaker: int
    name: str
    text: str
    answer: str | None


def render_history(lines: Sequence[ChatLine]) -> str:
    """The chat lines as our prompts show them: ``[name]: text``, one per line (the bracketed
    sender of ChatEval's summarizer; its agents get ``name: text`` assistant messages)."""
    return "".join(f"[{line.name}]: {line.text}\n" for line in lines)


# --------------------------------------------------------------------------- roles


def parse_roles(value: Any) -> tuple[Role, ...]:
    """The persona list of ``chateval_roles`` (None: :data:`DEFAULT_ROLES`); a ConfigError naming the
    key for anything but a non-empty list of ``{name, description}`` mappings with distinct names."""
    if value is None:
        return DEFAULT_ROLES
    if not isinstance(value, list) or not value:
        raise ConfigError(f"chateval_roles must be a non-empty list of {{name, description}} mappings (got {value!r})")
    roles = []
    for k, item in enumerate(value):
        if not isinstance(item, Mapping) or set(item) != {"name", "description"}:
            raise ConfigError(
                f"chateval_roles[{k}] must be a mapping with the keys name and description (got {item!r})"
            )
        name, description = item["name"], item["description"]
        if not isinstance(name, str) or not name.strip() or not isinstance(description, str):
            raise ConfigError(f"chateval_roles[{k}]: name must be a non-empty string and description a string")
        roles.append(Role(name.strip(), description.strip()))
    names = [r.name for r in roles]
    if len(set(names)) < len(names):
        raise ConfigError(f"chateval_roles: the names must differ (got {', '.join(names)})")
    return tuple(roles)


def agent_roles(n_agents: int, value: Any = None) -> list[Role]:
    """Agent i's role: persona ``i mod R`` of the list, numbered from its second use on
    ("General Public 2") so that every agent's name is its own."""
    base = parse_roles(value)
    out = []
    for i in range(n_agents):
        role, cycle = base[i % len(base)], i // len(base)
        out.append(role if cycle == 0 else Role(f"{role.name} {cycle + 1}", role.description))
    names = [r.name for r in out]
    if len(set(names)) < len(names) or SUMMARIZER_NAME in names:
        raise ConfigError(
            f"chateval_roles: the agents' names must differ from each other and from "
            f"{SUMMARIZER_NAME!r} (got {', '.join(names)})"
        )
    return out


# --------------------------------------------------------------------------- the protocol


def speaking_order(n_agents: int, talk: str) -> list[list[int]]:
    """The steps of one round: one agent per step in id order (one-by-one), or all at once."""
    if talk == "one-by-one":
        return [[i] for i in range(n_agents)]
    return [list(range(n_agents))]


def _turn(agent: int, round_: int, role: Role, new: list[ChatLine]) -> AgentCall:
    """Agent ``agent``'s call, showing the chat lines ``new`` (everything since its last turn).
    Its graph edges run from each speaker shown, in order; a summary shown is the summary node
    (-1, :func:`~engine.protocols.base.summary_node` of group 0), not the agents behind it."""
    speakers = list(dict.fromkeys(line.speaker for line in new))
    return AgentCall(
        agent=agent,
        stage="chateval_first" if round_ == 0 else "chateval_turn",
        peers=list(dict.fromkeys(line.speaker for line in new if line.speaker != SUMMARIZER)),
        values={"name": role.name, "role": role.description, "history": render_history(new)},
        peer_answers=[line.answer for line in new],
        memory="full",
        reads=[summary_node(0) if sp == SUMMARIZER else sp for sp in speakers] if SUMMARIZER in speakers else None,
    )


def _post(chat: list[ChatLine], speaker: int, name: str, reply: Reply) -> None:
    """Post a reply to the chat; an empty one (a failed call) is not posted (ChatEval's updater)."""
    if reply.shown_text:
        chat.append(ChatLine(speaker, name, reply.shown_text, reply.answer))
    else:
        log.debug("chateval: %s said nothing (%s): not posted", name, reply.error or "empty reply")


def _summary(chat: list[ChatLine]) -> SummaryCall:
    """The summarizer's call: the whole chat so far, earlier summaries included."""
    return SummaryCall(
        group=0,
        texts=[line.text for line in chat],
        agent=0,
        answers=[line.answer for line in chat],
        sources=list(dict.fromkeys(line.speaker for line in chat if line.speaker != SUMMARIZER)),
        stage="chateval_summary",
        values={"history": render_history(chat)},
    )


def chateval_debate(ctx: Context) -> ProtocolGen:
    n, n_rounds, talk = ctx.n_agents, ctx.n_rounds, ctx.cfg.option(CHATEVAL_TALK)
    roles = agent_roles(n, ctx.cfg.option(CHATEVAL_ROLES))
    chat: list[ChatLine] = []
    seen = [0] * n  # agent i has read chat[:seen[i]] (everything posted before its last turn)
    answers: list[str | None] = [None] * n
    history: list[list[str | None]] = []
    summaries = 0
    for t in range(n_rounds):
        for speakers in speaking_order(n, talk):
            calls = [_turn(i, t, roles[i], [line for line in chat[seen[i] :] if line.speaker != i]) for i in speakers]
            for i in speakers:
                seen[i] = len(chat)
            replies = yield Step(t, calls)
            for i, reply in zip(speakers, replies):
                answers[i] = reply.answer
                _post(chat, i, roles[i].name, reply)
        history.append(list(answers))
        if talk == "summarizer" and t < n_rounds - 1:
            (reply,) = yield Step(t, [_summary(chat)])
            summaries += 1
            _post(chat, SUMMARIZER, SUMMARIZER_NAME, reply)
    log.debug("chateval: %d rounds (%s), %d summaries, last answers %s", n_rounds, talk, summaries, answers)
    return Outcome(
        final_answer=vote(ctx, answers),
        answers_by_round=history,
        info={"talk": talk, "roles": [r.name for r in roles], "summaries": summaries},
    )


# --------------------------------------------------------------------------- spec


def _check(cfg) -> None:
    agent_roles(cfg.n_agents, cfg.option(CHATEVAL_ROLES))


# --------------------------------------------------------------------------- cost model
# closed forms described in engine.cost_model's docstring


def chateval_cost(
    s: Sizes, rounds: int, question_tokens: float, reply_tokens: float, talk: str, roles: Sequence[Role]
) -> Cost:
    """ChatEval, exact (see the module docstring): ``roles`` are the agents' roles, one per agent
    (:func:`engine.protocols.chateval.agent_roles`), ``talk`` the communication strategy."""
    first, turn, summ = s.need("chateval_first", "chateval_turn", "chateval_summary", kind=ChatStage)
    if s.content_tokens is None:
        raise ValueError("Sizes has no content counter: measure() it to predict ChatEval's role-dependent prompts")
    if talk not in ("one-by-one", "simultaneous", "summarizer"):
        raise ValueError(f"talk {talk!r} is not one of one-by-one, simultaneous, summarizer")
    t, q, c = rounds, question_tokens, reply_tokens
    name = [s.content_tokens(r.name) for r in roles]
    role = [s.content_tokens(r.description) for r in roles]
    lines = [s.line + a + c for a in name]  # L_i
    everyone = sum(lines)  # A
    said = s.line + s.content_tokens(SUMMARIZER_NAME) + c if talk == "summarizer" else 0.0  # L_S, read each turn
    prompt = 0.0
    for i, (a, r, li) in enumerate(zip(name, role, lines)):
        before = sum(lines[:i]) if talk == "one-by-one" else 0.0  # H0_i
        p0 = s.g + sys_tokens(s) + s.f + first.tokens(q, a, r, before)
        prompt += t * p0 + t * (t - 1) / 2 * (2 * s.f + c + turn.tokens(q, a, r, everyone - li + said))
    calls = len(roles) * t
    if talk == "summarizer" and t > 1:
        prompt += (t - 1) * (s.g + s.f + summ.tokens(q, 0, 0, 0))
        prompt += summ.history * (everyone * t * (t - 1) / 2 + said * (t - 1) * (t - 2) / 2)
        calls += t - 1
    return Cost(prompt_tokens=prompt, completion_tokens=calls * c, calls=calls)


def _cost(
    s,
    n: int,
    rounds: int,
    q: float,
    c: float,
    *,
    chateval_talk: str = "one-by-one",
    chateval_roles: Any = None,
    **_: object,
):
    """Exact (:func:`chateval_cost`): every call is fixed by N, T, the talk and the roles."""

    return chateval_cost(s, rounds, q, c, chateval_talk, agent_roles(n, chateval_roles))


def _label(cfg: Mapping[str, Any]) -> list[str]:
    parts = []
    if cfg.get("chateval_talk", "one-by-one") != "one-by-one":
        parts.append(cfg["chateval_talk"])
    if cfg.get("chateval_roles"):
        parts.append("own roles")
    return parts


CHATEVAL_TALK = Option(
    "chateval_talk",
    str,
    "one-by-one",
    "communication strategy: one-by-one (in id order, each reads everything said since its last "
    "turn), simultaneous (everyone reads the previous round) or summarizer (simultaneous, plus a "
    "summary of the chat after every round that everyone reads next round)",
    choices=TALKS,
)
CHATEVAL_ROLES = Option(
    "chateval_roles",
    list,
    None,
    "the referees' personas, [{name, description}, ...], assigned cyclically by agent id "
    "(default: General Public, Critic, News Author, Psychologist, Scientist; YAML only)",
    cli=False,
)

SPEC = ProtocolSpec(
    "chateval",
    chateval_debate,
    "ChatEval: referees with personas discuss one-by-one, simultaneously or with a summarizer (Chan et al. 2024)",
    "ChatEval",
    settings=(CHATEVAL_TALK, CHATEVAL_ROLES),
    check=_check,
    stages=STAGES,
    stage_fields=STAGE_FIELDS,
    cost=_cost,
    label_parts=_label,
    example="--agents 3 --rounds 2",
)
