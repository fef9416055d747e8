"""Closed-form token cost model: predicted prompt and completion tokens of a protocol.

This module holds the shared pieces: the measured constants (:class:`Sizes`, :class:`Stage`,
:class:`ChatStage`, :class:`ReconcileBlock`), the result (:class:`Cost`) and the terms every
protocol's formula starts from (:func:`sys_tokens`, :func:`first_call`, :func:`last_memory_call`).
Each protocol's own cost function lives in its protocol module (``engine/protocols/*.py``, named by
its spec's ``cost``); :mod:`engine.cost_predict` measures the constants from the prompt templates
and dispatches to a protocol's cost function by name. The formulas are described here, together.

Every prompt the engine sends is a chat: a fixed framing per message plus the message contents,
and the contents are the prompt templates (fixed text), the question and earlier replies. So a
call's prompt length is a linear function of the question length ``Q``, the reply length ``C``
and the number of replies it shows. With

    g   tokens the chat template adds once per prompt (generation prompt, BOS, ...)
    f   tokens it adds per message (role markers, end-of-turn)
    a1  template tokens of the first prompt (without the question)
    a2  template tokens of the debate prompt (without the question and the peers block)
    a3  template tokens around ONE shown reply (the "peer" stage, without the reply)
    a4  template tokens of the self-check prompt (without the question)

an agent's prompt in round t >= 1 (full memory) that reads k_u replies in round u is

    P_t = g + (f + a1 + Q) + t (f + C) + sum_{u=1..t} (f + a2 + Q + k_u (a3 + C))

(a self-check round, k_u = 0, has a4 instead of a2); with forgetting the history is the first
prompt and the last reply only: P_t = g + (f + a1 + Q) + (f + C) + (f + a2 + Q + k_t (a3 + C)).
Round 0 is P_0 = g + f + a1 + Q. Completion tokens are C per call. A run is the sum over agents
and rounds: fully connected MAD has k = N-1, a regular graph of density D has k = D (N-1), and
ProbMAD has E[k] = D (N-1) with probability (1-D)^(N-1) of a self-check round.

The constants are *measured* from the engine's own prompt templates with the serving model's
token counter (:func:`engine.cost_predict.measure`), so the same formulas serve the simulated whitespace tokenizer
(where they are exact) and a real tokenizer (where merges at the seams between a template and
inserted text make them approximate, typically within a few percent).

GroupDebate, S2-MAD and CortexDebate
------------------------------------

Their stage templates are measured the same way into :class:`Stage` constants:
``x(Q) = x.const + x.q Q`` is a stage's message content without what the protocol inserts
(``x.q`` = how often ``$question`` occurs; none of the GD/S2 stages shows the question, so
their ``q`` is 0), ``b`` is the group-block framing around ONE summary
(:func:`engine.protocols.group_debate.group_block`) and ``no_other`` the text an inter-group
prompt shows when there is only one group. Let ``s' = f + system`` if a system prompt is set
(else 0), ``B = g + s' + f + a1 + Q`` the first call, and ``H = B + f + C`` the context of every
later GD / S2-MAD call: both protocols use ``memory="last"`` (the first prompt plus the agent's
previous reply, whatever rounds it sat out), so a call's history never grows.

**GroupDebate** (:func:`engine.protocols.group_debate.group_cost`, exact). G groups of sizes
n_j (N = sum n_j), T rounds, R rounds per stage, S = ceil(T/R) stages; X = S - 1 inter-group
rounds (one after each group summary step) and I = T - 1 - X intra-group rounds; N1 agents
alone in their group (they get the self-check prompt in an intra round)::

    P = N B + (T-1) N H
      + I [ (N-N1) (f + gd_intra(Q)) + N1 (f + a4 + Q) + (sum_j n_j^2 - N) (a3 + C) ]
      + X N [ f + gd_inter(Q) + C + (G-1) (b + C) ]          (G = 1: no_other instead of (G-1)(b+C))
      + X [ G (g + f + gd_summary(Q)) + N (a3 + C) ]         (summaries: no system prompt, no memory)
    completion = C (N T + G X),  calls = N T + G X

(each intra round an agent of group j reads its n_j - 1 mates: sum_j n_j (n_j - 1) replies.)

**S2-MAD** (:func:`engine.protocols.s2mad.s2mad_bound`, :func:`engine.protocols.s2mad.predict_s2mad`).
Given what the run decided — in each round which agents spoke and how many views v each read,
which summaries were made and how many texts m each read — the cost is exact::

    P = N B + sum_{speaking calls} (H + f + s2_stage(Q) + v w)
            + sum_{summaries} (g + f + s2_summary(Q) + m (a3 + C))

with ``w = a3 + C`` in an intra round (v = unique differing mates) and ``w = b + C`` in an
inter round (v = unique differing summaries). Only an *upper bound* is closed-form: no agent
skips, nothing is deduplicated, no early stop — GD's structure with S2's prompts, except that an
agent alone in its group never speaks in an intra round (its D_i of eq. 1 is 0 forever) and an
inter-group call lists all G summaries in one ``$summaries`` block. Why not more: eqs. 1-2
(who speaks), the redundancy filter (how many views) and the early stop (how many rounds) are
functions of whether the agents' *answers agree*, and the answers of round t depend on what each
agent read in round t-1. The expected cost is an expectation over that answer process (a Markov
chain over the N agents' answer vector, whose transitions are the model's accuracy and its
tendency to follow peers on this question); it is not a function of N, T, R, Q and C, and even
for a given answer model it is a sum over agreement patterns, not a closed form. The bound is
reached when every agent keeps a distinct answer (nothing agrees).

**CortexDebate** (:func:`engine.protocols.cortex.cortex_cost`). D = rounds_run - 1 debate rounds; in round d agent j
reads the k_j^d peers it kept after pruning (eq. 11), and only their sum matters, so the
formula takes the mean in-degree k_d = (1/N) sum_j k_j^d::

    P = N (g + s' + f + cortex_first(Q))
      + sum_{d=1..D} [ N (g + s' + f + cortex_debate(Q)) + N k_d (a3 + C) + M_d ]
    M_d = 0                                                 memory "none" (the default, eq. 13)
        = N (f + cortex_first(Q) + f + C)                   memory "last"
        = N (f + cortex_first(Q) + d (f + C))
          + sum_{u<d} [ N (f + cortex_debate(Q)) + N k_u (a3 + C) ]   memory "full"
    completion = C N (D + 1)

(an agent that keeps no edge — with N = 1 always; with ``self`` / ``peer`` weights the agent above
the graph's mean — gets the self-check prompt, which shows its own last reply:
``cortex_self_check(Q) + C`` instead of ``cortex_debate(Q)``; ``self_checks`` counts them per
round, and the estimate below assumes none for N >= 2). The in-degrees
are data (eqs. 9-11 depend on confidences and text similarity), so the closed-form *estimate*
(:func:`engine.cost_predict.predict` with ``protocol="cortex"``) assumes k_d = phi (N - 1) with ``kept_fraction``
phi = 1/2 — a reader keeps the incoming edges whose weight is at least the mean of its N-1
weights, which for a roughly symmetric spread of weights is about half of them — and all T rounds
(no early stop; pass ``rounds_run`` for a run that stopped early). With ``--cortex-weights peer``
every debate round run first has N(N-1) scoring calls, each showing one answer with no memory:
``+ N(N-1) (g + s' + f + cortex_score(Q) + C)`` prompt tokens and ``N(N-1)`` calls per debate
round (deterministic given the rounds run).

**Peer Review Debate** (:func:`engine.protocols.prd.prd_cost`, exact: the calls do not depend on the answers). Every
call keeps the agent's whole transcript; reviews (side calls) never join it. With
``B1 = f + a1 + Q`` the first message, ``V = f + prd_review(Q) + C`` a review request (one
solution), ``W = f + prd_revise(Q) + (N-1)(a3 + C) + (N-1)(fb + C)`` a revise request (the other
solutions and the feedbacks; ``fb`` = :func:`engine.protocols.prd.feedback_block`'s framing) and
``H_r = B1 + (f + C) + (r-1)(W + f + C)`` an agent's transcript before round r::

    P = N (g + s' + B1) + sum_{r=1..T-1} [ N(N-1) (g + s' + H_r + V) + N (g + s' + H_r + W) ]
    completion = C calls,  calls = N + (T-1) N^2

**RECONCILE** (:func:`engine.protocols.reconcile.reconcile_cost`). Every call is a fresh prompt (no memory): round 0 the
initial prompt, each discussion round the initial prompt plus the instruction and the grouped
solutions of the previous round, the same for every agent (its own reply included). A round
that shows G answer groups, U = 1 if a group of unreadable answers follows (else 0) and m
replies in all costs::

    N (g + s' + f + reconcile_debate(Q) + G h + U u + m (e + C))

with h, u, e the measured group line, unreadable-group line and member framing
(:class:`ReconcileBlock`: the header with a one-token answer, the member with a one-token answer
and confidence), so the total, ``N (g + s' + f + reconcile_first(Q))`` plus that per discussion
round run, is exact given (G, U, m) per round when every answer and confidence shown is one
token (the simulated backend's numbers). G, U, m and the rounds run (consensus stop) are data;
the closed-form *estimate* (:func:`engine.cost_predict.predict` with ``protocol="reconcile"``) assumes all rounds
run, every reply readable (U = 0, m = N) and ``answer_groups`` G = min(2, N) every round (Figure
7's majority and minority; a question that never reaches consensus). completion = C N rounds_run.

``--prompt-layout shared``
-------------------------

(:mod:`engine.protocols.layout`; MAD :func:`engine.protocols.mad.shared_cost`, GroupDebate
:func:`engine.protocols.group_debate.shared_group_cost`, S2-MAD
:func:`engine.protocols.s2mad.shared_s2mad_bound`.) A later call is one user message: the first
prompt, the kept boards and the reader's part, joined by a separator of ``sep`` tokens
(:class:`SharedSizes`). With ``b`` a board stage's own tokens, ``e`` an entry's framing with its
label and ``t`` the reader's part::

    P = B + sum_{kept boards} (sep + b + k (e + C)) + sep + t

(B = g + s' + f + a1 + Q, the first call; a board of k texts of C tokens). MAD shows the N
replies (k = N), or with ``--memory summary`` one summary (k = 1) made per model by a call of
``g + f + mad_summary(Q) + N (e + C)``; ``full`` memory keeps every earlier board, ``last`` one.
GroupDebate shows group j its n_j replies in an intra round and everyone the G summaries in an
inter round, each summary call showing its group's board; S2-MAD is its upper bound (nobody
skips, nothing deduplicated). Exact on the simulated backend for MAD (one summary per distinct
model: the planner passes ``n_models``) and GroupDebate.

Prefill after a perfect prefix cache
------------------------------------

``Cost.computed_prompt_tokens`` predicts the prompt tokens a serving engine with a prefix cache
(vLLM's) still has to compute. Definition: for each prompt of a run, in the order sent, its
prompt tokens minus the longest token prefix it shares with what the EARLIER calls of the same
model in the run left in the cache, each one's prompt followed by its reply -- a run-wide cache
that never evicts, whole tokens, no rounding to cache blocks.
:func:`engine.prefix.computed_prefill` computes it exactly from token ids (a run folder's stored
prompts: :func:`engine.prefix_runs.run_prefill`); vLLM's measured ``calls.cached_prompt_tokens`` is
the check (a real cache evicts and rounds to blocks, and is one per replica of a model).

The closed forms assume what holds for real templates and sampled replies: a message is a header
of ``f - 1`` tokens (its role marker, :func:`header`) and one end token, and the generation
prompt ``g`` is an assistant message's header, so a prompt followed by its reply and a new
message begins with the whole earlier prompt (:func:`tail`: end + generation prompt); two
replies differ from their first token on (the simulated model starts each with a word drawn from
its seed); two texts that differ share the whitespace-delimited words before the first
difference (the ``lead`` constants, measured from the templates). Per question, the prefixes
every question shares are cached: ``K`` = s' + header + the "first" text before the question
(:func:`run_head`) and each summary stage's lead (:func:`summary_head`, ``Cost.computed_per_run``);
the sweep planner adds them once per model, and replaces the round-0 term by the questions' own
first prompts run through the exact function (questions that begin alike share more).

**Paper layout** (MAD family, GroupDebate, S2-MAD). Round 0: every agent of a model sends the
same prompt, B - K once per model. A later turn of an agent extends its own previous prompt
(full memory) or its first prompt plus its last reply (memory "last"), and differs from every
other agent's at its own reply, so it computes that reply and its new message::

    f + C + message                                          (turn_computed)

less the reply (``C``) where the cache holds it right after the prompt that precedes it here: a
serving engine keeps a reply's keys and values after its prompt, so with full memory every later
turn finds its agent's previous reply cached, with memory "last" only each agent's first later
turn (:func:`replies_cached`).

A summary call computes all but its stage's lead (``header + lead``: the template before the
first reply's text). Fully connected MAD with ``--memory summary``: reader i lists the replies
of every agent but itself in id order, so its list begins with reader i-1's first i-1 replies:
each round saves ``(N-1)(N-2)/2 (a3 + C)`` (sparse and ProbMAD lists: no sharing assumed, an
upper bound). GroupDebate's groups are disjoint, so its summaries share only the lead. Exact on
the simulated backend; S2-MAD's bound is one (fewer speakers and views only compute less).

**Shared layout** (:func:`engine.protocols.layout.shared_computed`). A later prompt is the first
prompt's text (shared with round 0 up to its end token: ``B - tail``), the kept boards and the
reader's part. Per model and round, the first reader of a set of boards computes them after the
longest run of boards some earlier prompt had, less where the next ones part (a board of the same
stage and round with another first label shares the stage and the label's first word, another
round shares the stage up to ``$round``), then its part; every other reader of the same boards
computes only its part after where two readers' parts part, at the agent number (``turn -
turn_lead + tail``). So with full memory round t costs about one board plus N short tails, where
the paper layout costs N (f + message).
Summary calls show boards; GroupDebate's groups each have their board. Exact on the simulated
backend for MAD (each model its own cache: ``n_models``) and GroupDebate (one model; with
several, each model's first reader of a group's board computes it, so an estimate); S2-MAD is
its upper bound.

Not covered (``None``): CortexDebate, PRD, ChatEval, RECONCILE.

ChatEval
--------

(:func:`engine.protocols.chateval.chateval_cost`, exact: who speaks when and what each call shows are fixed by N, T, the
talk and the roles.) Its stages take the agent's name, its role and the chat history, so a stage
is measured as a :class:`ChatStage`: ``x(Q, a, r, H) = x.const + x.q Q + x.name a + x.role r +
x.history H`` (each coefficient how often the placeholder occurs). Agent i's name has a_i
tokens and its role description r_i; a chat line ``[name]: reply`` is L_i = l + a_i + C (l the
line's own framing), the summarizer's L_S = l + a_S + C, and A = sum_i L_i. Agents keep their
whole transcript and each turn shows what was said since the agent's last turn, so agent i's
call in round k is::

    P_i^0 = g + s' + f + chateval_first(Q, a_i, r_i, H0_i)
    P_i^k = P_i^0 + k (f + C) + k (f + chateval_turn(Q, a_i, r_i, Hd_i))      (k >= 1)

(its first message, k replies and k turn messages, the last one new). H0_i = sum_{j<i} L_j for
one-by-one (round 0's earlier speakers), else 0; Hd_i = A - L_i (everyone else, once, since its
last turn: the rest of round k-1 and the start of round k, or all of round k-1), plus L_S with
the summarizer. Summed over the rounds::

    P = sum_i [ T P_i^0 + T (T-1)/2 (2 f + C + chateval_turn(Q, a_i, r_i, Hd_i)) ]
      + (T-1) (g + f + chateval_summary(Q, 0, 0, 0))
      + chateval_summary.history (A T (T-1)/2 + L_S (T-1)(T-2)/2)          (summarizer only)
    completion = C calls,  calls = N T (+ T - 1 summaries)

(the summary after round t shows the whole chat: t+1 rounds of messages and the t earlier
summaries; none follows the last round). The name and role tokens are counted with the counter
:func:`engine.cost_predict.measure` was given (``Sizes.content_tokens``), so the same formula serves any roles.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

ContentCounter = Callable[[str], int]


class NotCovered(ValueError):
    """The closed form does not cover this setting (no cost model for the protocol, sparse MAD
    on a ring, star or edge list without a density). Any other error of a cost function is a bug."""


@dataclass(frozen=True)
class Stage:
    """A protocol stage's message content: ``const + q * Q`` template tokens, plus ``views`` times
    the list block the protocol inserts (peers or summaries) and ``extra`` times a single inserted
    reply (GD's ``$own_summary``, Cortex's ``$previous``). ``q``, ``views`` and ``extra`` are how
    often those placeholders occur in the template (1 or 0 for the built-in templates)."""

    const: int
    q: int = 0
    views: int = 1
    extra: int = 0
    # measured for the summary stages, whose calls begin with the stage (no system prompt, no
    # memory): the content tokens two such calls share (before the first text they insert), with
    # the paper's "peer" entries (lead) and with a board's labelled entries (board_lead)
    lead: int = 0
    board_lead: int = 0

    def tokens(self, question_tokens: float) -> float:
        return self.const + self.q * question_tokens


@dataclass(frozen=True)
class ReconcileBlock:
    """RECONCILE's grouped solutions (:func:`engine.protocols.reconcile.solutions_block`): the
    tokens of one group line (with a one-token count and answer), of the line in front of the
    unreadable answers, and of one member without its reply text (with a one-token answer and
    confidence)."""

    header: int
    unread_header: int
    member: int


@dataclass(frozen=True)
class SharedSizes:
    """``--prompt-layout shared``'s measured pieces (:mod:`engine.protocols.layout`): the board
    stages (a one-token round, no entries), the reader's part with an agent's and an
    agent-of-group ``$who``, one entry without its text under each label kind (an agent, a
    group, the one summary), and the tokens the separator between blocks adds."""

    board: Stage
    summaries: Stage
    turn: Stage
    group_turn: Stage
    agent_entry: int
    group_entry: int
    summary_entry: int
    sep: int
    # where two blocks part (tokens they share at their start, :func:`engine.protocols.layout.shared_computed`):
    # a board stage of one round and the same stage of another (before $round), the two stages,
    # two entries under different labels of a kind (before the label's number) and under the same
    # label (before the text), and two readers' parts (before $who's number)
    board_round_lead: int = 0
    summaries_round_lead: int = 0
    stages_lead: int = 0
    agent_label_lead: int = 0
    group_label_lead: int = 0
    agent_text_lead: int = 0
    group_text_lead: int = 0
    summary_text_lead: int = 0
    turn_lead: int = 0
    group_turn_lead: int = 0


@dataclass(frozen=True)
class ChatStage:
    """A ChatEval stage's message content: ``const + q Q + name a + role r + history H``, the
    coefficients being how often ``$question``, ``$name``, ``$role`` and ``$history`` occur."""

    const: int
    q: int = 0
    name: int = 0
    role: int = 0
    history: int = 0

    def tokens(self, question: float, name: float, role: float, history: float) -> float:
        return self.const + self.q * question + self.name * name + self.role * role + self.history * history


_Measured = TypeVar("_Measured", Stage, ChatStage, ReconcileBlock, SharedSizes)


@dataclass(frozen=True)
class Sizes:
    g: int
    f: int
    a1: int
    a2: int
    a3: int
    a4: int
    system: int = 0  # content tokens of the system prompt (0: none)
    # GroupDebate / S2-MAD / CortexDebate stages (None: not measured, e.g. a hand-made Sizes)
    gd_intra: Stage | None = None
    gd_summary: Stage | None = None
    gd_inter: Stage | None = None
    s2_intra: Stage | None = None
    s2_summary: Stage | None = None
    s2_inter: Stage | None = None
    cortex_first: Stage | None = None
    cortex_debate: Stage | None = None
    cortex_self_check: Stage | None = None
    cortex_score: Stage | None = None  # --cortex-weights peer: extra = $solution
    prd_review: Stage | None = None  # extra = $solution
    prd_revise: Stage | None = None  # views = $peers, extra = $feedbacks (a block: ``feedback`` + C per feedback)
    mad_summary: Stage | None = None
    mad_summary_debate: Stage | None = None
    reconcile_first: Stage | None = None
    reconcile_debate: Stage | None = None
    reconcile_block: ReconcileBlock | None = None
    block: int = 0  # group_block framing around one summary
    no_other: int = 0  # NO_OTHER_GROUPS text (one group only)
    chateval_first: ChatStage | None = None
    chateval_turn: ChatStage | None = None
    chateval_summary: ChatStage | None = None
    line: int = 0  # ChatEval's framing of one chat line (without the name and the reply)
    # the content counter measure() was given: for run-specific texts (ChatEval's roles)
    content_tokens: ContentCounter | None = field(default=None, compare=False, repr=False)
    feedback: int = 0  # PRD's feedback_block framing around one feedback
    shared: SharedSizes | None = None  # --prompt-layout shared
    first_lead: int = 0  # content tokens of the "first" prompt before the question (every question's)

    @overload
    def need(self, *names: str) -> list[Stage]: ...
    @overload
    def need(self, *names: str, kind: type[_Measured]) -> list[_Measured]: ...
    def need(self, *names: str, kind: type[Any] = Stage) -> list[Any]:
        """The measured stages ``names``, each of class ``kind`` (:class:`Stage`, or
        :class:`ChatStage` / :class:`ReconcileBlock` for those fields). Raises ValueError naming
        the stages not measured (None), TypeError for a stage of another class."""
        missing = [n for n in names if getattr(self, n) is None]
        if missing:
            raise ValueError(
                f"Sizes lacks stage(s) {', '.join(missing)}: measure() them (engine.cost_predict) from a "
                "PromptSet, which has every registered protocol's stages"
            )
        got = [getattr(self, n) for n in names]
        wrong = [n for n, x in zip(names, got) if not isinstance(x, kind)]
        if wrong:
            raise TypeError(f"Sizes stage(s) {', '.join(wrong)} are not {kind.__name__}")
        return got


@dataclass(frozen=True)
class Cost:
    """Predicted tokens and calls of one question. ``computed_prompt_tokens``: its prompt tokens
    left to compute after a perfect prefix cache (the module docstring), with the prefixes every
    question shares already cached; None where the protocol's closed form does not cover it.
    ``computed_per_run``: what a run computes once per model on top (the start every summary
    call shares, :func:`summary_head`; the first prompt's, :func:`run_head`, is counted apart).
    ``computed_kind``: how good the computed prefill is on its own, ``exact``, ``bound`` or
    ``estimate`` (the weaker of it and the protocol's ``cost_kind`` applies)."""

    prompt_tokens: float
    completion_tokens: float
    calls: float
    computed_prompt_tokens: float | None = None
    computed_kind: str = "exact"
    computed_per_run: float = 0.0

    @property
    def total(self) -> float:
        return self.prompt_tokens + self.completion_tokens


# --------------------------------------------------------------------------- shared terms


def sys_tokens(s: Sizes) -> int:
    """``s'``: a system message (framing + content) if one is set."""
    return (s.f + s.system) if s.system else 0


def first_call(s: Sizes, q: float) -> float:
    """``B``: round 0's prompt, the "first" stage alone."""
    return s.g + sys_tokens(s) + s.f + s.a1 + q


def last_memory_call(s: Sizes, q: float, c: float) -> float:
    """``H``: the context of a later GD / S2-MAD call (memory "last"): first prompt + previous reply."""
    return first_call(s, q) + s.f + c


# --------------------------------------------------------------------------- prefix cache


def header(s: Sizes) -> int:
    """Tokens of a message's header (its role marker): the framing ``f`` but one end token."""
    return s.f - 1


def tail(s: Sizes) -> int:
    """Tokens after a prompt's last message text: its end token and the generation prompt ``g``."""
    return 1 + s.g


def run_head(s: Sizes) -> float:
    """``K``: what every question's first prompt begins with (the system message, the user
    header, the "first" text before the question); a run computes it once per model."""
    return sys_tokens(s) + header(s) + s.first_lead


def first_computed(s: Sizes, q: float) -> float:
    """A question's round-0 prompt less :func:`run_head`: computed once per model (the agents
    of a model send the same first prompt)."""
    return first_call(s, q) - run_head(s)


def turn_computed(s: Sizes, c: float, message: float) -> float:
    """A later paper-layout turn's computed tokens when its agent's previous reply is not in the
    cache after the prompt that precedes it here: that reply and the new ``message`` (framing
    included); the rest is the prompt the agent sent last (full memory) or its first prompt
    (memory "last"), both in the cache. Less ``c`` for a turn of :func:`replies_cached`."""
    return s.f + c + message


def replies_cached(n_agents: int, later_rounds: int, full_memory: bool) -> int:
    """The later paper-layout turns that find their agent's previous reply cached right after the
    prompt that precedes it (each computes ``c`` less than :func:`turn_computed`): with full
    memory every later turn (its prompt is the previous prompt + reply + message); with memory
    "last" only each agent's first later turn (first prompt + the round-0 reply; later the reply
    follows the first prompt, not the prompt it answered)."""
    return n_agents * (later_rounds if full_memory else min(later_rounds, 1))


def summary_computed(s: Sizes, call: float, stage: Stage, board: bool = False) -> float:
    """A summary call of ``call`` prompt tokens less what every call of its stage shares (the
    user header and the stage's lead, :attr:`Stage.lead` or with a board's entries
    :attr:`Stage.board_lead`)."""
    return call - header(s) - (stage.board_lead if board else stage.lead)


def summary_head(s: Sizes, stage: Stage, board: bool = False) -> float:
    """What a run's first summary call of ``stage`` computes on top of :func:`summary_computed`
    (once per model): the stage's lead and, after a system prompt (the agents' prompts begin
    with it, summary calls with a user message), the user header but its first token."""
    return (stage.board_lead if board else stage.lead) + (header(s) - 1 if s.system else 0)
