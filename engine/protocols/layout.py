"""``--prompt-layout``: how a later round's prompt is laid out, ``paper`` or ``shared``.

``paper`` (the default) is each protocol's own prompts: after the question comes the agent's own
answer (an assistant turn), then the other agents' answers, so agents' prompts part right after
the question. ``shared`` lays a later round out so that the agents who read the same answers send
prompts that begin with the same text, which a prefix cache (vLLM's) computes once:

    [system message]  then ONE user message:
    the "first" prompt (round 0's text, exactly)
    one board per earlier round the memory keeps: that round's replies in agent id order, each
    labelled "Agent <id>", the reader's own included (or the round's summaries, "Group <j>" /
    "Summary") -- byte-identical for every reader
    the reader's own part ("shared_turn": what to do, then "You are Agent 3 on the boards above.",
    so that readers part only at their agent number)

Blocks are joined by a blank line (:data:`engine.prompts.SEPARATOR`); the texts are prompt stages
(``shared_board``, ``shared_summaries``, ``shared_entry``, ``shared_turn``: :mod:`engine.prompts`),
overridable like the others. Memory ``full`` keeps every earlier board, so round t's shared part
extends round t-1's (the KV of a question is O(N R L), not O(N^2 R L)); ``last`` keeps the last
board only. It is a change of prompt: whether it changes accuracy is an empirical question
(docs/howto/prompt-layout.md gives the sweep that measures it).

What each protocol does with it (:func:`check_layout`; the docs page says the same):

* MAD (simultaneous talk): one board of all N replies per round; ``--memory summary`` /
  ``summary-last``: ONE summary of the whole board per round instead of one per reader without
  its own reply -- one per distinct model among the agents (each agent reads its own model's,
  so a prefix is shared inside each model's cache), served by the lowest-id agent of that
  model. ``--talk one-by-one`` is refused: each agent reads a different mix of rounds.
* GroupDebate and S2-MAD: an intra-group round shows one board per group (S2-MAD: the group's
  unique replies, of similar ones the first in id order; ``--no-filter``: every member); an
  inter-group round shows one board of the group summaries (S2-MAD: those left by its filter);
  summaries are made from the group's board. Who speaks is unchanged (S2-MAD's eqs. 1-2).
  S2-MAD's ``--group-density`` below 1 is refused (each member reads different mates).
* CoT, CoT-SC and RECONCILE do not read the option: their prompts are the same in both layouts
  (one round; RECONCILE sends every agent one discussion prompt already), so it changes nothing,
  not even the run id, and ``debate run`` says so in one line.
* Sparse MAD, ProbMAD, CortexDebate, ChatEval and PRD refuse ``shared`` (their agents read
  different texts, so their prompts share the question only, as they already do).

An agent whose board holds only its own reply (alone in its group, a one-agent MAD) is shown that
board like the others, its call keeping the kind ``self_check``.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from engine.cost_model import SharedSizes, Sizes, Stage, first_call, tail
from engine.options import ConfigError, Option
from engine.protocols.base import Board

PAPER, SHARED = "paper", "shared"
LAYOUTS = (PAPER, SHARED)
_Kept = TypeVar("_Kept")  # what keep() keeps: boards, or their BoardKey

PROMPT_LAYOUT = Option(
    "prompt_layout",
    str,
    PAPER,
    "later rounds' prompts: paper (each protocol's own: the agent's answer, then its peers') or shared "
    "(one user message: the first prompt, one board per kept round listing every answer in agent order, "
    "then the agent's own part, so agents reading the same answers share a prefix: docs/howto/prompt-layout.md)",
    choices=LAYOUTS,
    hash_default=False,  # runs made before the option existed are paper runs: they keep their ids
)

SAME_PROMPTS = {  # protocols whose prompts --prompt-layout shared would not change (they do not read it)
    "cot": "CoT runs one round, whose prompt is the same in both layouts",
    "sc": "CoT-SC runs one round, whose prompts are the same in both layouts",
    "reconcile": "RECONCILE already sends every agent one discussion prompt (all answers grouped, its own included)",
}


def is_shared(cfg: Any) -> bool:
    """Whether the run lays its prompts out ``shared``: it says so and its protocol reads the
    option (CoT-SC given ``shared`` runs its one round as ever)."""
    return cfg.option(PROMPT_LAYOUT) == SHARED and PROMPT_LAYOUT.name in cfg.options_read()


def check_layout(cfg: Any, readers: frozenset[str]) -> None:
    """``--prompt-layout shared`` with a protocol that has no shared layout (``readers``: the
    options the run reads): a ConfigError naming the flag and the protocol. A protocol in
    :data:`SAME_PROMPTS` takes it (its prompts stay what they are)."""
    if cfg.option(PROMPT_LAYOUT) != SHARED or PROMPT_LAYOUT.name in readers or cfg.experiment.protocol in SAME_PROMPTS:
        return
    raise ConfigError(
        f"--prompt-layout shared is not available with --protocol {cfg.experiment.protocol}: its agents read different "
        "texts, so their prompts share the question only, as in the paper layout; use --prompt-layout paper"
    )


def unread_note(protocol: str) -> str | None:
    """The line ``debate run`` logs for ``--prompt-layout`` given to a protocol in :data:`SAME_PROMPTS`."""
    why = SAME_PROMPTS.get(protocol)
    return None if why is None else f"--prompt-layout changes nothing here: {why}"


def layout_label(cfg: Mapping[str, Any]) -> list[str]:
    """The report label's part for a shared-layout run (nothing for the paper layout)."""
    return ["layout=shared"] if cfg.get("prompt_layout") == SHARED else []


# --------------------------------------------------------------------------- boards


def agent_label(agent: int) -> str:
    return f"Agent {agent}"


def group_label(group: int) -> str:
    return f"Group {group}"


SUMMARY_LABEL = "Summary"


def who(agent: int, group: int | None = None) -> dict[str, str]:
    """The "shared_turn" values of ``agent`` (``$who``: "Agent 3", or "Agent 3 of Group 1")."""
    text = agent_label(agent) if group is None else f"{agent_label(agent)} of {group_label(group)}"
    return {"who": text}


def answer_board(round_: int, agents: Sequence[int], texts: Sequence[str]) -> Board:
    """The board of round ``round_``'s replies of ``agents``, in id order, each labelled."""
    return Board(round_, tuple((agent_label(j), texts[j]) for j in sorted(agents)))


def summary_board(round_: int, summaries: Sequence[tuple[str, str]]) -> Board:
    """A board of (label, summary) made after round ``round_``."""
    return Board(round_, tuple(summaries), summaries=True)


def keep(boards: tuple[_Kept, ...], board: _Kept, memory: str) -> tuple[_Kept, ...]:
    """The boards a reader keeps once ``board`` is added: all (memory ``full``/``summary``) or the
    newest only (``last``/``summary-last``). Boards or their :class:`BoardKey`."""
    return (*boards, board) if memory in ("full", "summary") else (board,)


# --------------------------------------------------------------------------- cost model


def shared_sizes(s: Sizes) -> SharedSizes:
    (out,) = s.need("shared", kind=SharedSizes)
    return out


def board_tokens(s: Sizes, q: float, c: float, entries: float, kind: str = "agent") -> float:
    """A board of ``entries`` texts of ``c`` tokens and its separator: kind "agent" (replies),
    "group" (group summaries) or "summary" (one summary of everyone)."""
    L = shared_sizes(s)
    stage = L.board if kind == "agent" else L.summaries
    entry = {"agent": L.agent_entry, "group": L.group_entry, "summary": L.summary_entry}[kind]
    return L.sep + stage.tokens(q) + entries * (entry + c)


def shared_prompt(s: Sizes, q: float, boards: float, group: bool = False) -> float:
    """A shared-layout prompt: the first call's prompt (the message begins with the first prompt),
    the boards' tokens and the reader's part."""
    L = shared_sizes(s)
    return first_call(s, q) + boards + L.sep + (L.group_turn if group else L.turn).tokens(q)


def board_summary_call(s: Sizes, stage: Stage, q: float, c: float, entries: float) -> float:
    """A summary call of a board of ``entries`` replies (no system prompt, no memory)."""
    return s.g + s.f + stage.tokens(q) + stage.views * entries * (shared_sizes(s).agent_entry + c)


# --------------------------------------------------------------------------- prefix cache


@dataclass(frozen=True)
class BoardKey:
    """A board as the prefix cache sees it (:func:`shared_computed`): two boards are the same
    text iff their keys are equal. ``kind`` is its entries' label kind ("agent": the
    "shared_board" stage; "group" or "summary": "shared_summaries"), ``first`` its first entry's
    label, ``content`` whose texts it shows (to tell apart boards of one round and first label),
    ``tokens`` its :func:`board_tokens`."""

    kind: str
    round: int
    first: Hashable
    content: Hashable
    tokens: float


@dataclass(frozen=True)
class Readers:
    """``count`` readers of one model shown ``boards`` in a round (0: shown, but nobody speaks);
    ``group``: their part names their group ("Agent 3 of Group 1")."""

    model: Hashable
    boards: tuple[BoardKey, ...]
    count: int
    group: bool = False


def _stage(kind: str) -> str:
    """The stage of a board whose entries are labelled ``kind``."""
    return "shared_board" if kind == "agent" else "shared_summaries"


class _Node:
    """A node of the board trie: the boards sent after it, indexed by what a new board could
    share a start with (:func:`_parted`)."""

    __slots__ = ("children", "ends", "seen")

    def __init__(self) -> None:
        self.children: dict[BoardKey, _Node] = {}
        self.ends = False  # a prompt's boards ended here (its reader's part follows)
        self.seen: set[tuple[Hashable, ...]] = set()  # _views of the boards after it

    def add(self, key: BoardKey) -> _Node:
        self.seen.update(_views(key))
        return self.children.setdefault(key, _Node())


def _views(key: BoardKey) -> list[tuple[Hashable, ...]]:
    """What a board is, from the most to the least specific: kind, round and first label; kind
    and round; stage and round; stage."""
    stage = _stage(key.kind)
    return [(key.kind, key.round, key.first), (key.kind, key.round), (stage, key.round), (stage,)]


def shared_computed(s: Sizes, q: float, rounds: Sequence[Sequence[Readers]]) -> float:
    """Computed prefill of a question's later shared-layout turns (round 0 and summary calls
    apart), a perfect prefix cache per model: every prompt is the first prompt's text, its
    boards and the reader's part. The first reader of a set of boards computes what it does not
    share with an earlier prompt of its model (the boards after the longest run of boards in
    common, less where the next ones part: :func:`_parted`), the others of the set only their
    own part after its shared start (``turn_lead``)."""
    L = shared_sizes(s)
    tries: dict[Hashable, _Node] = {}
    total = 0.0
    for readers in (r for round_ in rounds for r in round_ if r.count):
        turn, lead = (L.group_turn, L.group_turn_lead) if readers.group else (L.turn, L.turn_lead)
        own = turn.tokens(q) - lead + tail(s)  # a reader's part after the start all parts share
        root = tries.setdefault(readers.model, _Node())
        shared = _shared_boards(s, q, root, readers.boards)
        if shared is None:  # these boards were sent before: the reader's part alone
            total += readers.count * own
            continue
        total += sum(k.tokens for k in readers.boards) - shared + L.sep + turn.tokens(q) + tail(s)
        total += (readers.count - 1) * own
        node = root
        for key in readers.boards:
            node = node.add(key)
        node.ends = True
    return total


def _shared_boards(s: Sizes, q: float, root: _Node, boards: tuple[BoardKey, ...]) -> float | None:
    """Tokens of ``boards`` (with their separators) an earlier prompt under ``root`` shares;
    None when some prompt had exactly these boards."""
    node, shared = root, 0.0
    for key in boards:
        if key not in node.children:
            return shared + _parted(s, q, node, key)
        node, shared = node.children[key], shared + key.tokens
    return None if node.ends else shared + shared_sizes(s).sep


def _parted(s: Sizes, q: float, node: _Node, key: BoardKey) -> float:
    """Tokens a new board ``key`` shares with the best of what followed ``node`` before: a board
    of its kind, round and first label (up to the text), of its kind and round (up to the
    label's number), of its stage and round (the stage), of its stage (up to the round), of the
    other stage (their common start); a reader's part (the separator); nothing after the first
    prompt alone (round 0)."""
    L = shared_sizes(s)
    agent = key.kind == "agent"
    stage = (L.board if agent else L.summaries).tokens(q)
    label = {"agent": L.agent_label_lead, "group": L.group_label_lead}.get(key.kind, 0)
    text = {"agent": L.agent_text_lead, "group": L.group_text_lead, "summary": L.summary_text_lead}[key.kind]
    leads = (stage + text, stage + label, stage, L.board_round_lead if agent else L.summaries_round_lead)
    for view, lead in zip(_views(key), leads):
        if view in node.seen:
            return L.sep + lead
    if node.seen:  # a board of the other stage
        return L.sep + L.stages_lead
    return L.sep if node.ends else 0.0


__all__ = [
    "LAYOUTS",
    "PAPER",
    "PROMPT_LAYOUT",
    "SHARED",
    "BoardKey",
    "Readers",
    "answer_board",
    "board_summary_call",
    "board_tokens",
    "check_layout",
    "is_shared",
    "keep",
    "layout_label",
    "shared_computed",
    "shared_prompt",
    "shared_sizes",
    "summary_board",
    "unread_note",
    "who",
]
