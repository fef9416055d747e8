"""Closed-form token cost model: predicted prompt and completion tokens of a protocol.

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
token counter (:func:`measure`), so the same formulas serve the simulated whitespace tokenizer
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

**GroupDebate** (:func:`group_cost`, exact). G groups of sizes n_j (N = sum n_j), T rounds,
R rounds per stage, S = ceil(T/R) stages; X = S - 1 inter-group rounds (one after each group
summary step) and I = T - 1 - X intra-group rounds; N1 agents alone in their group (they get the
self-check prompt in an intra round)::

    P = N B + (T-1) N H
      + I [ (N-N1) (f + gd_intra(Q)) + N1 (f + a4 + Q) + (sum_j n_j^2 - N) (a3 + C) ]
      + X N [ f + gd_inter(Q) + C + (G-1) (b + C) ]          (G = 1: no_other instead of (G-1)(b+C))
      + X [ G (g + f + gd_summary(Q)) + N (a3 + C) ]         (summaries: no system prompt, no memory)
    completion = C (N T + G X),  calls = N T + G X

(each intra round an agent of group j reads its n_j - 1 mates: sum_j n_j (n_j - 1) replies.)

**S2-MAD** (:func:`s2mad_bound`, :func:`predict_s2mad`). Given what the run decided — in each
round which agents spoke and how many views v each read, which summaries were made and how many
texts m each read — the cost is exact::

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

**CortexDebate** (:func:`cortex_cost`). D = rounds_run - 1 debate rounds; in round d agent j
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
(:func:`predict` with ``protocol="cortex"``) assumes k_d = phi (N - 1) with ``kept_fraction``
phi = 1/2 — a reader keeps the incoming edges whose weight is at least the mean of its N-1
weights, which for a roughly symmetric spread of weights is about half of them — and all T rounds
(no early stop; pass ``rounds_run`` for a run that stopped early). With ``--cortex-weights peer``
every debate round run first has N(N-1) scoring calls, each showing one answer with no memory:
``+ N(N-1) (g + s' + f + cortex_score(Q) + C)`` prompt tokens and ``N(N-1)`` calls per debate
round (deterministic given the rounds run).

**Peer Review Debate** (:func:`prd_cost`, exact: the calls do not depend on the answers). Every
call keeps the agent's whole transcript; reviews (side calls) never join it. With
``B1 = f + a1 + Q`` the first message, ``V = f + prd_review(Q) + C`` a review request (one
solution), ``W = f + prd_revise(Q) + (N-1)(a3 + C) + (N-1)(fb + C)`` a revise request (the other
solutions and the feedbacks; ``fb`` = :func:`engine.protocols.prd.feedback_block`'s framing) and
``H_r = B1 + (f + C) + (r-1)(W + f + C)`` an agent's transcript before round r::

    P = N (g + s' + B1) + sum_{r=1..T-1} [ N(N-1) (g + s' + H_r + V) + N (g + s' + H_r + W) ]
    completion = C calls,  calls = N + (T-1) N^2

**RECONCILE** (:func:`reconcile_cost`). Every call is a fresh prompt (no memory): round 0 the
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
the closed-form *estimate* (:func:`predict` with ``protocol="reconcile"``) assumes all rounds
run, every reply readable (U = 0, m = N) and ``answer_groups`` G = min(2, N) every round (Figure
7's majority and minority; a question that never reaches consensus). completion = C N rounds_run.

ChatEval
--------

(:func:`chateval_cost`, exact: who speaks when and what each call shows are fixed by N, T, the
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
:func:`measure` was given (``Sizes.content_tokens``), so the same formula serves any roles.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from string import Template
from typing import Any

from engine.prompts import PromptSet
from engine.protocols.chateval import SUMMARIZER_NAME, ChatLine, Role, render_history
from engine.protocols.group_debate import NO_OTHER_GROUPS, group_block
from engine.protocols.prd import feedback_block
from engine.protocols.reconcile import group_header, member_line, unread_header
from engine.protocols.s2mad import mates_read
from engine.protocols.shared import resolve_memory
from topologies.groups import Matrix, differing, parse_group_sizes, participates, stage_plan

ContentCounter = Callable[[str], int]


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

    def need(self, *names: str) -> list[Stage]:
        missing = [n for n in names if getattr(self, n) is None]
        if missing:
            raise ValueError(
                f"Sizes lacks stage(s) {', '.join(missing)}: measure() them from a PromptSet built "
                "after importing engine.cost_model (which registers the protocols' stages)"
            )
        return [getattr(self, n) for n in names]


@dataclass(frozen=True)
class Cost:
    prompt_tokens: float
    completion_tokens: float
    calls: float

    @property
    def total(self) -> float:
        return self.prompt_tokens + self.completion_tokens


def _occurrences(template: str, name: str) -> int:
    """How often ``$name`` / ``${name}`` occurs in a string.Template text."""
    return sum(1 for m in Template.pattern.finditer(template) if (m.group("named") or m.group("braced")) == name)


def _measure_stage(
    prompts: PromptSet,
    stage: str,
    content_tokens: ContentCounter,
    view: str | None,
    view_value: str,
    extra: str | None = None,
    extra_value: str = "x",
) -> Stage | None:
    """Render ``stage`` with "x" for the question, ``view_value`` for the list placeholder ``view``
    and ``extra_value`` ("x": one reply; or a second list's block) for ``extra``, then take off what
    was inserted (each counted as often as it occurs)."""
    if stage not in prompts.templates:
        return None
    tpl = prompts.templates[stage]
    x = "x"
    values: dict[str, str] = {"question": x, "peers": ""}
    if view is not None:
        values[view] = view_value
    if extra is not None:
        values[extra] = extra_value
    nq = _occurrences(tpl, "question")
    nv = _occurrences(tpl, view) if view is not None else 0
    ne = _occurrences(tpl, extra) if extra is not None else 0
    inserted = nq * content_tokens(x) + nv * content_tokens(view_value) + ne * content_tokens(extra_value)
    const = content_tokens(prompts.render(stage, **values)) - inserted
    return Stage(const=const, q=nq, views=nv, extra=ne)


def _measure_chat_stage(prompts: PromptSet, stage: str, content_tokens: ContentCounter) -> ChatStage | None:
    """Render a ChatEval stage with "x" for every placeholder it takes (a history is whole lines:
    "x" and a newline), then take them off."""
    if stage not in prompts.templates:
        return None
    tpl = prompts.templates[stage]
    counts = {name: _occurrences(tpl, name) for name in ("question", "name", "role", "history")}
    text = prompts.render(stage, question="x", name="x", role="x", history="x\n", peers="")
    const = (
        content_tokens(text)
        - (counts["question"] + counts["name"] + counts["role"]) * content_tokens("x")
        - counts["history"] * content_tokens("x\n")
    )
    return ChatStage(
        const=const, q=counts["question"], name=counts["name"], role=counts["role"], history=counts["history"]
    )


def measure(
    prompts: PromptSet,
    content_tokens: ContentCounter,
    chat_tokens: Callable[[list[dict]], int],
    system_prompt: str | None = None,
) -> Sizes:
    """Measure the constants from the templates: contents with an empty question and reply.

    ``content_tokens(text)`` counts a message body; ``chat_tokens(messages)`` counts a whole
    prompt (chat template applied), from which the per-prompt and per-message framing follow.
    Stages of GroupDebate, S2-MAD and CortexDebate are measured when ``prompts`` has them (this
    module imports their protocol modules, so any PromptSet built afterwards does); their inserted
    blocks are built with the protocols' own helpers (the "peer" stage, ``group_block``).
    """
    one = [{"role": "user", "content": "x"}]
    two = one + [{"role": "assistant", "content": "x"}]
    g_plus_f = chat_tokens(one) - content_tokens("x")
    f = chat_tokens(two) - chat_tokens(one) - content_tokens("x")
    q = "x"
    qx = content_tokens(q)
    a1 = content_tokens(prompts.render("first", question=q)) - qx
    a2 = content_tokens(prompts.render("debate", question=q, peers="")) - qx
    a3 = content_tokens(prompts.peers_block([(0, q)])) - qx
    a4 = content_tokens(prompts.render("self_check", question=q)) - qx

    peers_x = prompts.peers_block([(0, q)])  # one shown reply, as AgentCall / SummaryCall render it
    block_x = group_block([q])  # one summary, as the inter-group rounds list them

    def ms(stage: str, view: str | None, value: str, extra: str | None = None, extra_value: str = q) -> Stage | None:
        return _measure_stage(prompts, stage, content_tokens, view, value, extra, extra_value)

    return Sizes(
        g=g_plus_f - f,
        f=f,
        a1=a1,
        a2=a2,
        a3=a3,
        a4=a4,
        system=content_tokens(system_prompt) if system_prompt else 0,
        gd_intra=ms("gd_intra", "peers", peers_x),
        gd_summary=ms("gd_summary", "peers", peers_x),
        gd_inter=ms("gd_inter", "other_summaries", block_x, "own_summary"),
        s2_intra=ms("s2_intra", "peers", peers_x),
        s2_summary=ms("s2_summary", "peers", peers_x),
        s2_inter=ms("s2_inter", "summaries", block_x),
        cortex_first=ms("cortex_first", None, ""),
        cortex_debate=ms("cortex_debate", "peers", peers_x),
        cortex_self_check=ms("cortex_self_check", None, "", "previous"),
        cortex_score=ms("cortex_score", None, "", "solution"),
        prd_review=ms("prd_review", None, "", "solution"),
        prd_revise=ms("prd_revise", "peers", peers_x, "feedbacks", feedback_block([q])),
        mad_summary=ms("mad_summary", "peers", peers_x),
        mad_summary_debate=ms("mad_summary_debate", None, "", "summary"),
        reconcile_first=ms("reconcile_first", None, ""),
        reconcile_debate=ms("reconcile_debate", "groups", ""),
        reconcile_block=ReconcileBlock(
            header=content_tokens(group_header(1, q)),
            unread_header=content_tokens(unread_header(1)),
            member=content_tokens(member_line(q, q, 0.5)) - qx,
        ),
        block=content_tokens(block_x) - qx,
        no_other=content_tokens(NO_OTHER_GROUPS),
        chateval_first=_measure_chat_stage(prompts, "chateval_first", content_tokens),
        chateval_turn=_measure_chat_stage(prompts, "chateval_turn", content_tokens),
        chateval_summary=_measure_chat_stage(prompts, "chateval_summary", content_tokens),
        line=content_tokens(render_history([ChatLine(0, q, q, None)])) - 2 * qx,
        content_tokens=content_tokens,
        feedback=content_tokens(feedback_block([q])) - qx,
    )


def _agent_prompts(
    s: Sizes, q: float, c: float, rounds: int, debate_msg: Callable[[int], float], forgetting: bool
) -> float:
    """Sum of one agent's prompt tokens over all rounds. ``debate_msg(t)`` = f + content of round t's message."""
    base = s.g + s.f + s.a1 + q + ((s.f + s.system) if s.system else 0)
    total = base  # round 0
    history = 0.0
    for t in range(1, rounds):
        msg = debate_msg(t)
        if forgetting:
            total += base + (s.f + c) + msg
        else:
            total += base + t * (s.f + c) + history + msg
            history += msg
    return total


def topology_cost(
    s: Sizes,
    n_agents: int,
    rounds: int,
    question_tokens: float,
    reply_tokens: float,
    peers_per_round: float,
    self_check_prob: float = 0.0,
    forgetting: bool = False,
    memory: str | None = None,
) -> Cost:
    """MAD / sparse / ProbMAD / CoT / CoT-SC: each debate round every agent reads ``peers_per_round``
    replies on average (0 -> self-check); a fraction ``self_check_prob`` of debate turns self-check.

    ``memory`` (``--memory``; default "last" with ``forgetting``, else "full"): with "summary" /
    "summary-last" every debate turn that reads peers is preceded by one summary call of what it
    reads (``g + f + mad_summary(Q) + k (a3 + C)``, C completion tokens, no system prompt, no
    memory) and its message shows the summary (``f + mad_summary_debate(Q) + C``) instead of
    ``f + a2 + Q + k (a3 + C)``."""
    q, c = question_tokens, reply_tokens
    mode = resolve_memory(memory, forgetting, "full")
    debate = s.f + s.a2 + q
    shown = peers_per_round * (s.a3 + c)  # the replies a debate message shows, per turn on average
    summary_calls = 0.0
    summary_prompt = 0.0
    if mode.startswith("summary") and rounds > 1:
        summ, sdebate = s.need("mad_summary", "mad_summary_debate")
        debate = s.f + sdebate.tokens(q) + sdebate.extra * c
        reading = n_agents * (rounds - 1) * (1 - self_check_prob)  # debate turns that read someone
        summary_calls = reading
        summary_prompt = reading * (s.g + s.f + summ.tokens(q)) + n_agents * (rounds - 1) * summ.views * shown
        shown = 0.0  # the summary calls read the replies; the message shows the summary instead
    check = s.f + s.a4 + q

    def msg(_t: int) -> float:
        return (1 - self_check_prob) * debate + self_check_prob * check + shown

    prompt = n_agents * _agent_prompts(s, q, c, rounds, msg, mode in ("last", "summary-last")) + summary_prompt
    calls = n_agents * rounds + summary_calls
    return Cost(prompt_tokens=prompt, completion_tokens=calls * c, calls=calls)


# ---------------------------------------------------------------------------
# GroupDebate and S2-MAD
# ---------------------------------------------------------------------------


def _sys(s: Sizes) -> int:
    """``s'``: a system message (framing + content) if one is set."""
    return (s.f + s.system) if s.system else 0


def _first_call(s: Sizes, q: float) -> float:
    """``B``: round 0's prompt, the "first" stage alone."""
    return s.g + _sys(s) + s.f + s.a1 + q


def _last_memory_call(s: Sizes, q: float, c: float) -> float:
    """``H``: the context of a later GD / S2-MAD call (memory "last"): first prompt + previous reply."""
    return _first_call(s, q) + s.f + c


def _group_sizes(groups: Any, n_agents: int) -> list[int]:
    """Group sizes from a ``--groups`` spec ("2+3", "2", [2, 3], None = the default)."""
    return parse_group_sizes(groups, n_agents)


def group_cost(
    s: Sizes,
    n_agents: int,
    rounds: int,
    question_tokens: float,
    reply_tokens: float,
    groups: Any = None,
    stage_rounds: int = 2,
    memory: str = "last",
) -> Cost:
    """GroupDebate, exact (see the module docstring): the schedule is :func:`topologies.groups.stage_plan`.

    ``memory="full"`` (the "MAD+Group" ablation): a round-t call's context is the first prompt,
    the t replies and every earlier message of the agent instead of ``H``; the messages summed
    over agents are the same per round kind, so the context of round t over all agents is
    ``N (B + t (f + C)) + (sum of the earlier rounds' messages)``."""
    intra, summ, inter = s.need("gd_intra", "gd_summary", "gd_inter")
    sizes = _group_sizes(groups, n_agents)
    n, n_groups, q, c = n_agents, len(sizes), question_tokens, reply_tokens
    alone = sum(1 for m in sizes if m == 1)
    peer = s.a3 + c
    pairs = sum(m * m for m in sizes) - n  # replies read per intra round, sum_j n_j (n_j - 1)
    intra_msgs = (n - alone) * (s.f + intra.tokens(q)) + alone * (s.f + s.a4 + q) + intra.views * pairs * peer
    others = (n_groups - 1) * (s.block + c) if n_groups > 1 else s.no_other
    inter_msgs = n * (s.f + inter.tokens(q) + inter.extra * c + inter.views * others)
    summary_step = n_groups * (s.g + s.f + summ.tokens(q)) + summ.views * n * peer
    prompt, calls, earlier = n * _first_call(s, q), n, 0.0
    for rp in stage_plan(rounds, stage_rounds):
        if rp.kind != "first":
            msgs = intra_msgs if rp.kind == "intra" else inter_msgs
            if memory == "full":
                prompt += n * (_first_call(s, q) + rp.round * (s.f + c)) + earlier + msgs
            else:
                prompt += n * _last_memory_call(s, q, c) + msgs
            earlier += msgs
        calls += n if rp.kind != "first" else 0
        if rp.summarize_after:
            prompt += summary_step
            calls += n_groups
    return Cost(prompt_tokens=prompt, completion_tokens=calls * c, calls=calls)


@dataclass(frozen=True)
class S2Decisions:
    """What an S2-MAD run decided for one question (eqs. 1-2, the filter and the early stop).

    views:      per round run (0-based, ``rounds_run`` of them), the number of views each
                *speaking* agent read (group mates' replies in an intra round, summaries in an
                inter round); round 0 lists the N first answers (their counts are ignored). An
                agent that sat the round out is simply absent.
    summaries:  per summary step, the number of replies each group's summary read.
    """

    views: tuple[tuple[int, ...], ...]
    summaries: tuple[tuple[int, ...], ...]

    @property
    def rounds_run(self) -> int:
        return len(self.views)

    @property
    def skipped(self) -> int:
        n = len(self.views[0]) if self.views else 0
        return sum(n - len(v) for v in self.views)


def predict_s2mad(
    s: Sizes,
    n_agents: int,
    rounds: int,
    question_tokens: float,
    reply_tokens: float,
    decisions: S2Decisions,
    stage_rounds: int = 2,
    filter: bool = True,
) -> Cost:
    """S2-MAD's exact cost given the run's decisions (see the module docstring).

    A speaking call that reads no view (``--no-jump``, nothing new) is a self-check:
    ``H + f + a4 + Q``. ``filter=False`` (the "w/o Filter" ablation) uses GroupDebate's prompts; its inter-group calls
    show all G summaries (own + others), so they take ``len(decisions.summaries[-1])`` as G.
    """
    q, c = question_tokens, reply_tokens
    names = ("s2_intra", "s2_summary", "s2_inter") if filter else ("gd_intra", "gd_summary", "gd_inter")
    check = s.f + s.a4 + question_tokens
    intra, summ, inter = s.need(*names)
    h = _last_memory_call(s, q, c)
    plan = stage_plan(rounds, stage_rounds)
    if decisions.rounds_run > rounds:
        raise ValueError(f"decisions cover {decisions.rounds_run} rounds, the run has {rounds}")
    prompt, calls, made = 0.0, 0, 0
    for rp, views in zip(plan, decisions.views):
        calls += len(views)
        if rp.kind == "first":
            prompt += len(views) * _first_call(s, q)
        elif rp.kind == "intra":  # v = 0: a --no-jump agent with nothing to read self-checks
            prompt += sum(h + s.f + intra.tokens(q) + intra.views * v * (s.a3 + c) if v else h + check for v in views)
        elif filter:
            prompt += sum(
                h + s.f + inter.tokens(q) + inter.views * v * (s.block + c) if v else h + check for v in views
            )
        else:  # GD's inter prompt: own summary + the G-1 others
            n_groups = len(decisions.summaries[made - 1])
            others = (n_groups - 1) * (s.block + c) if n_groups > 1 else s.no_other
            prompt += len(views) * (h + s.f + inter.tokens(q) + inter.extra * c + inter.views * others)
        if rp.summarize_after and made == len(decisions.summaries) and rp.round < decisions.rounds_run - 1:
            raise ValueError(f"round {rp.round} ends a stage and the run went on, but no summary step is given for it")
        if rp.summarize_after and made < len(decisions.summaries):
            texts = decisions.summaries[made]
            prompt += sum(s.g + s.f + summ.tokens(q) + summ.views * m * (s.a3 + c) for m in texts)
            calls += len(texts)
            made += 1
    if made != len(decisions.summaries):
        raise ValueError(
            f"{len(decisions.summaries)} summary steps given, the schedule of {decisions.rounds_run} rounds has {made}"
        )
    return Cost(prompt_tokens=prompt, completion_tokens=calls * c, calls=calls)


def s2mad_bound(
    s: Sizes,
    n_agents: int,
    rounds: int,
    question_tokens: float,
    reply_tokens: float,
    groups: Any = None,
    stage_rounds: int = 2,
    filter: bool = True,
    jump: bool = True,
    group_density: float = 1.0,
) -> Cost:
    """S2-MAD's upper bound: nobody skips (except agents alone in a group, whose D_i is always 0;
    with ``jump=False`` they self-check), nothing is deduplicated, no early stop — every group's
    summary reads the whole group and every inter-group call reads all G summaries; an intra call
    reads k_j mates (``group_density``, :func:`engine.protocols.s2mad.intra_mates`)."""
    sizes = _group_sizes(groups, n_agents)
    member_views = [
        mates_read(m, group_density) for m in sizes for _ in range(m) if m > 1 or not jump
    ]  # intra speakers
    views, summaries = [], []
    for rp in stage_plan(rounds, stage_rounds):
        if rp.kind == "first":
            views.append(tuple([0] * n_agents))
        elif rp.kind == "intra":
            views.append(tuple(member_views))
        else:
            views.append(tuple([len(sizes)] * n_agents))
        if rp.summarize_after:
            summaries.append(tuple(sizes))
    return predict_s2mad(
        s,
        n_agents,
        rounds,
        question_tokens,
        reply_tokens,
        S2Decisions(tuple(views), tuple(summaries)),
        stage_rounds,
        filter,
    )


_S2_INTER = ("s2_inter", "gd_inter")
_S2_INTRA = ("s2_intra", "gd_intra")


def s2_decisions_from_records(records: Sequence[Any], n_agents: int, rounds_run: int) -> S2Decisions:
    """The decisions of one S2-MAD question from its call records (``DebateLog.records``).

    Intra-group calls: views = ``len(peers)``. Summary calls (``agent_id == -1``): texts =
    ``len(peers)`` (the recorded sources). Inter-group calls record as ``peers`` the union of the
    sources of the summaries read, minus the reader, and sources of different groups are disjoint,
    so a summary was read iff its sources (minus the reader) meet ``peers``. This misses a summary
    whose only source is the reader itself; with answer similarity that summary carries the
    reader's own answer and is never read unless that answer is unparseable (None), so callers
    must make sure no answer is None (the test runs with ``invalid=0``).
    """
    views: list[list[int]] = [[] for _ in range(rounds_run)]
    steps: list[tuple[int, list[Any]]] = []  # (round, summary records) in order
    for rec in records:
        if rec.agent_id == -1:
            if not steps or steps[-1][0] != rec.round:
                steps.append((rec.round, []))
            steps[-1][1].append(rec)
            continue
        if rec.kind in _S2_INTRA:
            views[rec.round].append(len(rec.peers))
        elif rec.kind in _S2_INTER:
            pool = [set(r.peers) - {rec.agent_id} for r in steps[-1][1]]  # the latest summary step
            views[rec.round].append(sum(1 for src in pool if src & set(rec.peers)))
        else:  # "first"
            views[rec.round].append(0)
    return S2Decisions(tuple(tuple(v) for v in views), tuple(tuple(len(r.peers) for r in rs) for _, rs in steps))


# ---------------------------------------------------------------------------
# CortexDebate
# ---------------------------------------------------------------------------


def cortex_cost(
    s: Sizes,
    n_agents: int,
    question_tokens: float,
    reply_tokens: float,
    mean_in_degree: Sequence[float],
    memory: str = "none",
    peer_scores: bool = False,
    self_checks: Sequence[int] | None = None,
) -> Cost:
    """CortexDebate given the mean in-degree ``k_d`` of each debate round run (one value per
    debate round: ``rounds_run - 1`` of them). Exact when the k_d are the run's (see the module
    docstring); ``memory`` is the effective ``cortex_memory`` ("none", "last", "full").
    ``peer_scores`` (``--cortex-weights peer``): each debate round first has N(N-1) scoring calls
    (``g + s' + f + cortex_score(Q) + C``: one answer, no memory). ``self_checks``: per debate
    round, the agents that kept no edge and got the self-check prompt (with N >= 2 only under
    ``self`` / ``peer`` weights, for the agent above the graph's mean; default none; with N = 1
    the one agent always)."""
    if memory not in ("none", "last", "full"):
        raise ValueError(f"memory {memory!r} is not one of none, last, full")
    first, debate, check = s.need("cortex_first", "cortex_debate", "cortex_self_check")
    n, q, c = n_agents, question_tokens, reply_tokens
    head = s.g + _sys(s)
    first_msg = s.f + first.tokens(q)
    scorers = n * (n - 1) if peer_scores else 0  # scoring calls per debate round
    score_call = 0.0
    if scorers:
        (score,) = s.need("cortex_score")
        score_call = head + s.f + score.tokens(q) + score.extra * c
    prompt = n * (head + first_msg)
    history = 0.0  # memory "full": sum over agents of the earlier debate messages
    for d, k in enumerate(mean_in_degree, start=1):
        # an agent with no edge gets the self-check prompt, which shows its own last reply
        alone = n if n == 1 else (self_checks[d - 1] if self_checks else 0)
        msg = (
            (n - alone) * (s.f + debate.tokens(q))
            + alone * (s.f + check.tokens(q) + check.extra * c)
            + debate.views * n * k * (s.a3 + c)
        )
        if memory == "none":
            ctx = 0.0
        elif memory == "last":
            ctx = n * (first_msg + s.f + c)
        else:
            ctx = n * (first_msg + d * (s.f + c)) + history
        prompt += n * head + msg + ctx + scorers * score_call
        history += msg
    calls = n * (len(mean_in_degree) + 1) + scorers * len(mean_in_degree)
    return Cost(prompt_tokens=prompt, completion_tokens=calls * c, calls=calls)


def cortex_memory(cortex_memory: str = "none", forgetting: bool = False) -> str:
    """The memory mode CortexDebate actually uses (``--forgetting`` turns "full" into "last")."""
    return "last" if forgetting and cortex_memory == "full" else cortex_memory


# ---------------------------------------------------------------------------
# RECONCILE
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ReconcileShown:
    """What every agent was shown in one RECONCILE discussion round (all agents see the same
    grouped solutions, their own reply included): ``groups`` answer groups, whether a group of
    unreadable answers followed (``unread``), and how many ``replies`` were listed in all."""

    groups: int
    unread: bool
    replies: int


def reconcile_cost(
    s: Sizes, n_agents: int, question_tokens: float, reply_tokens: float, shown: Sequence[ReconcileShown]
) -> Cost:
    """RECONCILE given what each discussion round run showed (one :class:`ReconcileShown` per
    round after round 0: ``rounds_run - 1`` of them); exact when the answers and confidences
    shown are one token each, as on the simulated backend (see the module docstring)."""
    first, debate = s.need("reconcile_first", "reconcile_debate")
    (blk,) = s.need("reconcile_block")
    n, q, c = n_agents, question_tokens, reply_tokens
    head = s.g + _sys(s)
    prompt = n * (head + s.f + first.tokens(q))
    for sh in shown:
        block = sh.groups * blk.header + (blk.unread_header if sh.unread else 0) + sh.replies * (blk.member + c)
        prompt += n * (head + s.f + debate.tokens(q) + debate.views * block)
    calls = n * (len(shown) + 1)
    return Cost(prompt_tokens=prompt, completion_tokens=calls * c, calls=calls)


def reconcile_estimate(
    s: Sizes,
    n_agents: int,
    rounds: int,
    question_tokens: float,
    reply_tokens: float,
    answer_groups: int | None = None,
    rounds_run: int | None = None,
) -> Cost:
    """RECONCILE's closed-form estimate: ``rounds_run`` rounds (default all), every reply readable
    and shown, ``answer_groups`` groups in every discussion round (default min(2, N): Figure 7's
    majority and minority). With the early stop a run that keeps two groups never stops, so the
    default is the cost of a question the agents never settle."""
    run = rounds if rounds_run is None else rounds_run
    groups = min(2, n_agents) if answer_groups is None else answer_groups
    if not 1 <= run <= rounds:
        raise ValueError(f"rounds_run {run} must be in 1..{rounds}")
    if not 1 <= groups <= n_agents:
        raise ValueError(f"answer_groups {groups} must be in 1..{n_agents}")
    shown = [ReconcileShown(groups, False, n_agents)] * (run - 1)
    return reconcile_cost(s, n_agents, question_tokens, reply_tokens, shown)


def reconcile_shown_from_records(records: Sequence[Any], rounds_run: int) -> list[ReconcileShown]:
    """What each discussion round of one RECONCILE question showed, from its call records
    (``DebateLog.records``): round t lists round t-1's replies that did not fail, grouped by
    their extracted answer (None: the unreadable group)."""
    out = []
    for t in range(1, rounds_run):
        prev = [r for r in records if r.round == t - 1 and r.agent_id >= 0 and r.error is None]
        answers = [r.answer for r in prev]
        out.append(ReconcileShown(len({a for a in answers if a is not None}), None in answers, len(prev)))
    return out


# ---------------------------------------------------------------------------
# ChatEval
# ---------------------------------------------------------------------------


def chateval_cost(
    s: Sizes, rounds: int, question_tokens: float, reply_tokens: float, talk: str, roles: Sequence[Role]
) -> Cost:
    """ChatEval, exact (see the module docstring): ``roles`` are the agents' roles, one per agent
    (:func:`engine.protocols.chateval.agent_roles`), ``talk`` the communication strategy."""
    first, turn, summ = s.need("chateval_first", "chateval_turn", "chateval_summary")
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
        p0 = s.g + _sys(s) + s.f + first.tokens(q, a, r, before)
        prompt += t * p0 + t * (t - 1) / 2 * (2 * s.f + c + turn.tokens(q, a, r, everyone - li + said))
    calls = len(roles) * t
    if talk == "summarizer" and t > 1:
        prompt += (t - 1) * (s.g + s.f + summ.tokens(q, 0, 0, 0))
        prompt += summ.history * (everyone * t * (t - 1) / 2 + said * (t - 1) * (t - 2) / 2)
        calls += t - 1
    return Cost(prompt_tokens=prompt, completion_tokens=calls * c, calls=calls)


# ---------------------------------------------------------------------------
# Peer Review Debate
# ---------------------------------------------------------------------------


def prd_cost(s: Sizes, n_agents: int, rounds: int, question_tokens: float, reply_tokens: float) -> Cost:
    """Peer Review Debate, exact (see the module docstring): round 0, then per round N(N-1)
    reviews and N revisions, every call on the agent's whole transcript."""
    review, revise = s.need("prd_review", "prd_revise")
    n, q, c = n_agents, question_tokens, reply_tokens
    head = s.g + _sys(s)
    first_msg = s.f + s.a1 + q
    review_msg = s.f + review.tokens(q) + review.extra * c
    revise_msg = (
        s.f + revise.tokens(q) + revise.views * (n - 1) * (s.a3 + c) + revise.extra * (n - 1) * (s.feedback + c)
    )
    prompt = n * (head + first_msg)
    transcript = first_msg + s.f + c  # one agent's, after round 0
    for _ in range(1, rounds):
        prompt += n * (n - 1) * (head + transcript + review_msg) + n * (head + transcript + revise_msg)
        transcript += revise_msg + s.f + c
    calls = n + (rounds - 1) * n * n
    return Cost(prompt_tokens=prompt, completion_tokens=calls * c, calls=calls)


# ---------------------------------------------------------------------------
# the front door
# ---------------------------------------------------------------------------


def predict(
    protocol: str,
    s: Sizes,
    n_agents: int,
    rounds: int,
    question_tokens: float,
    reply_tokens: float,
    density: float | None = None,
    forgetting: bool = False,
    **options: Any,
) -> Cost:
    """Predicted tokens of one question: the protocol spec's ``cost`` with the protocol's options
    as keywords (each cost function takes the ones it uses and ignores the rest).

    MAD family (``cot``, ``sc``, ``mad``, ``sparse``, ``probmad``): ``density``, ``forgetting``.
    ``group`` (exact) and ``s2mad`` (upper bound: no skips, no dedup, no early stop): ``groups``
    (a ``--groups`` spec: "2+3", "2", [2, 3] or None for the default) and ``stage_rounds`` R;
    S2-MAD also ``filter``. ``cortex`` (estimate): every debate round each agent keeps
    ``kept_fraction`` of its N-1 peers, for ``rounds_run`` rounds (default all ``rounds``);
    ``cortex_memory`` (``forgetting`` turns "full" into "last", as the protocol does);
    ``cortex_weights="peer"`` adds the scoring calls. ``prd`` (exact): no options. ``memory``
    (``--memory``) for the MAD family and GroupDebate. ``chateval`` (exact): ``chateval_talk`` and
    ``chateval_roles`` (None for the default personas).
    """
    from engine.protocols import protocol_spec

    cost = protocol_spec(protocol).cost
    if cost is None:
        raise ValueError(f"no cost model for protocol {protocol!r}")
    return cost(s, n_agents, rounds, question_tokens, reply_tokens, density=density, forgetting=forgetting, **options)


# --------------------------------------------------------------------------- the papers' own equations
# GroupDebate's eqs. 3, 4, 7 / Alg. 3 and S2-MAD's eqs. 1-4 / Alg. 2, as printed (with the
# corrections their docstrings name), in the papers' own token units: what the tests check the
# closed forms above against.


def gd_first_round_tokens(q: float, outputs: Sequence[float]) -> float:
    """Initial thinking, Alg. 3 line 1: ``Token_1^1 = M x Q + sum_i Output_i^1``."""
    return len(outputs) * q + sum(outputs)


def gd_intra_round_tokens(
    groups: Sequence[Sequence[int]], q: float, outputs: Sequence[float], prev_outputs: Sequence[float]
) -> float:
    """Eq. 3, one intra-group round:
    ``sum_j sum_{i in G_j} (Q + Output_i^t + sum_{i' in G_j} Output_{i'}^{t-1})``.

    The inner sum includes i itself: the agent's own previous reply stays in its context next to
    its group mates' replies."""
    return sum(q + outputs[i] + sum(prev_outputs[k] for k in g) for g in groups for i in g)


def gd_inter_round_tokens(
    q: float, outputs: Sequence[float], prev_outputs: Sequence[float], summaries: Sequence[float]
) -> float:
    """Eq. 4, one inter-group round:
    ``sum_i (Q + Output_i^{t-1} + sum_j Summary_j^{s-1} + Output_i^t)`` — every agent reads all
    N group summaries."""
    return sum(q + prev_outputs[i] + sum(summaries) + outputs[i] for i in range(len(outputs)))


def gd_summary_tokens(
    groups: Sequence[Sequence[int]], prev_outputs: Sequence[float], summaries: Sequence[float]
) -> float:
    """Summary generation at the end of a stage, Alg. 3 line 6:
    ``sum_j (sum_{i in G_j} Output_i^{(s-1)R} + Summary_j^{s-1})`` (no question prompt)."""
    return sum(sum(prev_outputs[i] for i in g) + summaries[j] for j, g in enumerate(groups))


def gd_total_tokens(
    groups: Sequence[Sequence[int]],
    q: float,
    outputs_by_round: Sequence[Sequence[float]],
    summaries_by_stage: Sequence[Sequence[float]],
    stage_rounds: int,
) -> float:
    """Eq. 7 / Alg. 3 line 12: initial thinking + every stage's summary and inter-group round +
    every intra-group round. ``outputs_by_round`` has one list per round (T of them);
    ``summaries_by_stage[s]`` the summary sizes made at the end of 0-based stage ``s`` (S-1 lists)."""
    t_total = len(outputs_by_round)
    plan = stage_plan(t_total, stage_rounds)
    need = sum(p.summarize_after for p in plan)
    if len(summaries_by_stage) < need:
        raise ValueError(
            f"{t_total} rounds with R={stage_rounds} need {need} summary lists, got {len(summaries_by_stage)}"
        )
    total = 0.0
    for p in plan:
        out, prev = outputs_by_round[p.round], outputs_by_round[p.round - 1] if p.round else None
        if p.kind == "first":
            total += gd_first_round_tokens(q, out)
        elif p.kind == "intra":
            total += gd_intra_round_tokens(groups, q, out, prev)
        else:
            sums = summaries_by_stage[p.stage - 1]
            total += gd_summary_tokens(groups, prev, sums) + gd_inter_round_tokens(q, out, prev, sums)
    return total


def s2_differing_count(own: int, candidates: Sequence[int], similar: Matrix) -> int:
    """Eq. 1: ``D_i^t``, the number of views among ``candidates`` (group mates' round t-1
    replies in an intra-group round, the stage's group summaries in an inter-group round) whose
    similarity to agent ``own``'s view is below the threshold, i.e. that are not similar."""
    return len(differing(own, candidates, similar))


def s2_participation(d: int) -> int:
    """Eq. 2: ``P_i^t = 1`` if ``D_i^t > 0`` else ``0``."""
    return int(participates(d))


def s2_intra_round_tokens(
    groups: Sequence[Sequence[int]], q: float, outputs: Sequence[float], prev_outputs: Sequence[float], d: Sequence[int]
) -> float:
    """Eq. 3, one intra-group round:
    ``sum_j sum_{i in G_j} P_i^t (Q + O_i^t + O_i^{t-1} + (D_i^t / |G_j|) sum_{i' in G_j} O_{i'}^{t-1})``.

    Two corrections to the equation as printed, which reads
    ``P_i^t (Q + O_i^t + (M D_i^t / N) sum_{i' in G_j} O_{i'}^{t-1})``:

    * the factor ``M D_i / N`` is taken as ``D_i / K`` (``K = M / N`` the group size; we use the
      actual ``|G_j|``): "``D_i`` views of the group's mean size", the same form as eq. 4's
      ``(D_i / N) sum_j Sum_j``. As printed, 4 agents in 2 groups with one differing mate would
      read ``2 x`` the whole group's output, more than the group wrote.
    * ``O_i^{t-1}``, the agent's own previous reply, is added: Alg. 1 keeps it in the agent's
      context (``H_i[-2]``), and eq. 4 and GroupDebate's eq. 3 count it.

    ``d[i]`` is the number of views agent i reads — with the redundancy filter the *unique*
    differing views (appendix B: "the unique responses from other agents within the same group
    that differ from its own"), which equals eq. 1's ``D_i`` when no two differing views are
    similar to each other. An agent with ``d[i] = 0`` costs nothing (``P_i^t = 0``)."""
    total = 0.0
    for g in groups:
        mean_prev = sum(prev_outputs[k] for k in g) / len(g)
        for i in g:
            total += s2_participation(d[i]) * (q + outputs[i] + prev_outputs[i] + d[i] * mean_prev)
    return total


def s2_inter_round_tokens(
    q: float, outputs: Sequence[float], prev_outputs: Sequence[float], summaries: Sequence[float], d: Sequence[int]
) -> float:
    """Eq. 4, one inter-group round:
    ``sum_i P_i^t (Q + O_i^{t-1} + O_i^t + (D_i^t / N) sum_{j=1..N} Sum_j^{s-1})`` — an agent
    that speaks reads ``D_i`` summaries of the mean summary size."""
    n_groups = len(summaries)
    total_sum = sum(summaries)
    return sum(
        s2_participation(d[i]) * (q + prev_outputs[i] + outputs[i] + d[i] / n_groups * total_sum)
        for i in range(len(outputs))
    )


def s2_summary_tokens(
    read_by_group: Sequence[Sequence[int]], prev_outputs: Sequence[float], summaries: Sequence[float]
) -> float:
    """Summary generation at the end of a stage, Alg. 2 line 7:
    ``sum_j (sum_{i in G_j} O_i^{(s-1)R} + Sum_j^{s-1})``, where — with the redundancy filter —
    ``G_j`` is replaced by the group's unique replies the summary reads (appendix B: "the summary
    generation cost, which comprises the unique responses")."""
    return sum(sum(prev_outputs[i] for i in g) + summaries[j] for j, g in enumerate(read_by_group))
