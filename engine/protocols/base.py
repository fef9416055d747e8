"""The protocol interface: a debate protocol is a generator that yields requests.

A protocol is written as straight-line code that follows its paper's algorithm. Whenever it
needs something from the outside world it *yields* a request and receives the answer:

* :class:`Step` — a set of LLM calls to run concurrently (agents speaking, summaries, or side
  calls: an agent reviewing or scoring others, :attr:`AgentCall.side`);
  the protocol receives one :class:`Reply` per call, in order.
* :class:`Similarity` — texts whose pairwise cosine similarity is needed (embedding actor);
  the protocol receives an ``n x n`` matrix of floats: a numpy array from the embedding actor
  (one buffer over Ray), or a list of lists (tests, local hooks); protocols read both.

When it is done it *returns* an :class:`Outcome`. The engine's one driver,
:func:`engine.debate.debate`, runs the generator (the coordinator actor with Ray-backed hooks,
:func:`actors.local_run.run_local` in-process); protocol tests feed it fake replies
(``tests/support/protocol_driver.py``).
The protocol alone decides who reads whom (it gets that from ``topologies/``), what each agent
is shown, and when to stop; every call and every information edge is recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.extract import majority_vote
from engine.tasks import Question

if TYPE_CHECKING:  # a RunConfig, as protocols read it (engine.config builds it from their specs)
    from engine.config.view import RunView

SUMMARIZER = -1  # agent_id recorded for summary calls (they belong to no agent)


def summary_node(group: int) -> int:
    """The graphs table's node of the summary of ``group`` (:attr:`SummaryCall.group`): -1 for
    group 0, -2 for group 1, ... (agents are the nodes 0, 1, ...)."""
    return SUMMARIZER - group


@dataclass(frozen=True)
class Board:
    """One round's texts as ``--prompt-layout shared`` shows them (:mod:`engine.protocols.layout`):
    the same text for every reader, the reader's own reply included.

    round:     the round whose replies (or the summaries of whose replies) it lists.
    entries:   (label, text) in a fixed order: ("Agent 0", reply), ... in agent id order, or
               ("Group 1", summary), ... in group order; rendered with the "shared_entry" stage.
    summaries: it lists summaries (the "shared_summaries" stage) rather than replies ("shared_board").
    """

    round: int
    entries: tuple[tuple[str, str], ...]
    summaries: bool = False


@dataclass
class AgentCall:
    """One agent speaks.

    stage:        prompt template to render (``engine.prompts``), e.g. "first", "debate".
    peers:        agents whose outputs this call reads (recorded as graph edges src -> agent).
    peer_texts:   what is shown in ``$peers``, in order: (label, text) pairs rendered with the
                  "peer" template; label is an agent id or any string (e.g. a group name).
    values:       further template values (``$summaries``, ``$confidence`` ...).
    peer_answers: answers of what is shown (read only by the SIMULATED model).
    memory:       "full" transcript, "last" (first prompt + own last reply, the papers'
                  forgetting), or "none" (only this message).
    weights:      optional edge weight per peer (CortexDebate); default 1.0.
    side:         a *side call*: the agent judges ``peers`` (a review, a score) instead of taking
                  its turn. It is served by the agent's model and reads the agent's transcript
                  (per ``memory``) like a turn, but its reply does NOT join the transcript, does not
                  change the agent's latest answer (the reply's ``answer`` is None) and is never an
                  invalid answer; it has its own sampling seed, salted by stage and ``peers``, so
                  several side calls of one agent in one step differ (:mod:`actors.agent_actor`).
                  Recorded with ``agent_id`` = the agent, ``peers`` = who it judged, ``kind`` =
                  ``stage`` and ``side = True``; the SIMULATED model answers it with a stated
                  score of the judged answers (``peer_answers``).
    group:        the agent's group (GroupDebate, S2-MAD), recorded in ``calls.group``; None for a
                  protocol without groups.
    summaries:    the summaries this call reads, by :attr:`SummaryCall.group` (GroupDebate's and
                  S2-MAD's inter-group rounds, MAD's ``--memory summary``): its information edges
                  then run from those summaries (:func:`summary_node`) to the agent, not from
                  ``peers`` (which stay, in ``calls.peers``, the agents the summaries were made of).
    reads:        the graph nodes this call reads, in the order shown, where they mix agents and
                  summaries (ChatEval's summarizer talk: the agents' messages, then the summary,
                  node -1); None: the ``summaries``' nodes, else ``peers``.
    pruned:       (agent, weight) of every edge into this agent that the protocol pruned (CortexDebate
                  eq. 11): not read; recorded in the graphs table after the read edges, flagged
                  ``pruned``, with its weight before pruning.
    boards:       ``--prompt-layout shared``: the boards the agent is shown, oldest first. The
                  request is then one user message, the "first" prompt, these boards and the
                  "shared_turn" stage (:func:`engine.prompts.build_messages`), with no transcript:
                  ``stage`` names the kind of turn (calls.kind), ``values`` fill "shared_turn"
                  (``$who``). None: the paper layout (``stage`` rendered after the transcript).
    """

    agent: int
    stage: str
    peers: list[int] = field(default_factory=list)
    peer_texts: list[tuple[Any, str]] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)
    peer_answers: list[str | None] = field(default_factory=list)
    memory: str = "full"
    weights: list[float] | None = None
    side: bool = False
    group: int | None = None
    summaries: list[int] = field(default_factory=list)
    reads: list[int] | None = None
    pruned: list[tuple[int, float]] = field(default_factory=list)
    boards: tuple[Board, ...] | None = None


@dataclass
class SummaryCall:
    """An LLM call that summarises texts (GroupDebate / S2-MAD group summaries).

    It is served by ``agent``'s model and does not touch any agent's memory. Recorded in the
    calls table with ``agent_id = -1`` and ``kind = stage``; ``group`` says which group.
    ``texts`` are shown in ``$peers``; ``values`` fills further placeholders of the stage
    (ChatEval's ``$history``). ``board`` (``--prompt-layout shared``): ``$peers`` shows this
    board's labelled entries instead (:meth:`engine.prompts.PromptSet.entries_block`).
    """

    group: int
    texts: list[str]
    agent: int = 0
    answers: list[str | None] = field(default_factory=list)
    sources: list[int] = field(default_factory=list)
    stage: str = "summary"
    values: dict[str, str] = field(default_factory=dict)
    board: Board | None = None


Call = AgentCall | SummaryCall


@dataclass
class Step:
    """LLM calls of one round, run concurrently. ``round`` is 0-based; a round may have several
    steps (e.g. PRD's reviews, then its revisions), and one step may hold several side calls of
    one agent (each sees the agent's transcript as it was when the step began). ``calls`` is
    read only, so a protocol may pass its ``list[AgentCall]`` as is."""

    round: int
    calls: Sequence[Call]


@dataclass
class Similarity:
    """Pairwise cosine similarity of ``texts`` (one matrix per round per question): answered
    with an ``n x n`` numpy array or list of lists of floats."""

    texts: list[str]


@dataclass
class Reply:
    text: str
    answer: str | None
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def shown_text(self) -> str:
        """What other agents are shown of this reply: its text, or nothing for a failed call."""
        return self.text if self.error is None else ""


def judge_every_other(stage: str, texts: list[str], answers: list[str | None], memory: str = "full") -> list[AgentCall]:
    """Every agent judges every other agent's text (PRD's reviews, CortexDebate's peer scores):
    one side call per ordered pair, judge-major (agent 0 judges 1, 2, ..., then agent 1 ...);
    the judged text fills the stage's ``$solution``. ``peers`` = [the judged agent]."""
    n = len(texts)
    return [
        AgentCall(
            agent=i,
            stage=stage,
            peers=[j],
            values={"solution": texts[j]},
            peer_answers=[answers[j]],
            memory=memory,
            side=True,
        )
        for i in range(n)
        for j in range(n)
        if i != j
    ]


@dataclass
class Judgements:
    """The number each judge stated about each judged agent: ``given[judge][judged]`` (None on the
    diagonal, for a failed call and for a reply with no readable number); ``unread``: the
    ``[judge, judged]`` pairs whose number could not be read (failed calls included)."""

    given: list[list[float | None]]
    unread: list[list[int]]


def read_judgements(calls: list[AgentCall], replies: list[Reply], read: Callable[[str], float | None]) -> Judgements:
    """Read the replies to :func:`judge_every_other`'s calls with ``read`` (text -> number or None)."""
    n = max((c.agent for c in calls), default=0) + 1
    given: list[list[float | None]] = [[None] * n for _ in range(n)]
    unread = []
    for call, reply in zip(calls, replies):
        judge, judged = call.agent, call.peers[0]
        given[judge][judged] = None if reply.error else read(reply.text)
        if given[judge][judged] is None:
            unread.append([judge, judged])
    return Judgements(given, unread)


@dataclass
class Outcome:
    """What a protocol returns.

    answers_by_round: for each round run, every agent's answer *after* that round (an agent
    that made no call keeps its previous answer), used for the vote, consensus and effective
    rounds. ``final_answer`` is what the protocol decided (normally the last round's vote).
    votes_by_round: the protocol's own vote after each round (its last entry ``final_answer``),
    for a protocol whose vote is not the majority of the answers (RECONCILE's weighted vote);
    None: the run grades the majority vote of each round's answers.
    tie: whether that final vote had more than one answer on top (broken by ``--tie-break``);
    None: a tie of the majority vote over the last answers.
    """

    final_answer: str | None
    answers_by_round: list[list[str | None]]
    stopped_early: bool = False
    skipped_turns: int = 0
    info: dict[str, Any] = field(default_factory=dict)
    votes_by_round: list[str | None] | None = None
    tie: bool | None = None

    @property
    def rounds_run(self) -> int:
        return len(self.answers_by_round)


@dataclass
class Votes:
    """A protocol's own votes rebuilt by ``debate rescore`` (:attr:`ProtocolSpec.revote`): the vote
    after each round and whether the final one was a tie."""

    by_round: list[str | None]
    tie: bool


@dataclass
class Context:
    """Everything a protocol may read: the question, the run config and a per-question key."""

    question: Question
    cfg: RunView
    key: int

    @property
    def n_agents(self) -> int:
        return self.cfg.n_agents

    @property
    def n_rounds(self) -> int:
        return self.cfg.n_rounds


Request = Step | Similarity
ProtocolGen = Generator[Request, Any, Outcome]
ProtocolFn = Callable[[Context], ProtocolGen]


def tie_key(ctx_or_cfg, key: int) -> int | None:
    """The tie-break key of a question's votes: its key (seeded draw) or None (``--tie-break
    first``: the answer seen first, in agent order)."""
    cfg = getattr(ctx_or_cfg, "cfg", ctx_or_cfg)
    return None if cfg.experiment.tie_break == "first" else key


def vote(ctx: Context, answers: list[str | None]) -> str | None:
    """A protocol's vote over ``answers``, ties broken as the run says (:func:`tie_key`)."""
    return majority_vote(answers, tie_key(ctx, ctx.key))


def consensus(answers: list[str | None]) -> float:
    """Share of agents whose answer equals the majority answer (invalid answers dissent)."""
    maj = majority_vote(answers)
    if maj is None or not answers:
        return 0.0
    return sum(a == maj for a in answers) / len(answers)


def unanimous(answers: list[str | None]) -> bool:
    """All agents agree on one valid answer (an unreadable answer never agrees)."""
    return bool(answers) and answers[0] is not None and all(a == answers[0] for a in answers)


def effective_rounds(answers_by_round: list[list[str | None]]) -> int:
    """Rounds run until all agents first agree on one valid answer (all rounds if never)."""
    for r, answers in enumerate(answers_by_round):
        if unanimous(answers):
            return r + 1
    return len(answers_by_round)
