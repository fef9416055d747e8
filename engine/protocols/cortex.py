"""CortexDebate ("CortexDebate: Debating Sparsely and Equally for Multi-Agent Debate", Alg. 1).

Phase 1 (round 0): every agent answers with an explanation and a self-confidence score
(Table 7, stage ``cortex_first``); the score is read from the reply (:func:`parse_confidence`)
and recalibrated (eq. 2). Credibility ``C`` of each agent comes from its model's parameter and
training-token counts through the Chinchilla scaling law (eqs. 3-4).

Phase 2, debate round ``d = 1..D`` (``D = --rounds - 1``):
  (peer)  with ``--cortex-weights peer`` only: every agent scores every other agent's round
          ``d-1`` output (n(n-1) scoring calls, appendix D; see below);
  step 1  MDM weights every edge ``i -> j`` with the McKinsey Trust Formula (eqs. 1, 5-9): the
          reliability ``R`` is the running mean of ``i``'s recalibrated confidences, the intimacy
          ``I = 1 - mean cosine`` of ``i``'s and ``j``'s outputs (the protocol yields
          :class:`Similarity` on the round ``d-1`` texts), the self-orientation ``S`` counts
          ``i``'s missed participation;
  step 2  agent ``j`` keeps the incoming edges with weight >= their mean (eqs. 10-12);
  step 3  agent ``j`` reads the round ``d-1`` outputs of the agents it kept (eq. 13, stage
          ``cortex_debate``) and answers again with a new confidence (recalibrated, eq. 2);
  step 4  if all agents' extracted answers agree, the debate stops (Alg. 1 lines 33-43;
          ``--no-early-stop`` turns this off).
Phase 3: majority vote over the last round's extracted answers (eq. 14).

The math lives in :mod:`topologies.cortex`; this module does the prompts, reads confidences
from text and keeps the record. Every call carries ``peers`` (who it reads: the edges
``i -> j`` left after pruning), ``weights`` (their eq. 9 weights *before* pruning to 0/1) and
``pruned`` (the edges pruned, with their eq. 9 weights), so the graphs table holds each round's
whole weighted graph, the pruned edges flagged (``graphs.pruned``). ``Outcome.info`` has, per round, the
full weight matrix, the means, R, I, S, the raw and recalibrated confidences and which replies had
no readable confidence. Above :data:`MATRIX_INFO_MAX_AGENTS` agents the two N x N matrices (W and
I: 10^6 numbers per round at N = 1,000, tens of MB of JSON per question row) are left out of
``info`` (``info["matrices"]`` says so); the kept edges' weights stay in the graphs table.

Choices where the paper is vague (see also :mod:`topologies.cortex` for eqs. 3, 8, 9, 11):

* **Memory (eq. 13).** ``Prompt_j^d = [Ins, Q, {O_k^{d-1}}]``: the instruction, the question and
  the peers' answers — nothing else. By default (``cortex_memory = "none"``) an agent is sent
  only this message; ``"full"`` keeps the whole transcript (Du et al. style) and ``"last"`` the
  first prompt plus the agent's previous reply. ``--forgetting`` turns ``"full"`` into ``"last"``.
* **Answer format.** Table 7 asks for "Answer: / Explanation: / Confidence Score:"; we keep that
  and add the task's ``$format`` sentence so the engine's answer extraction works on every task.
  Peers' outputs are rendered with the shared ``peer`` stage ("One agent solution: ..."), which
  plays the role of Table 7's "One LLM agent answer: {answer}".
* **Unreadable confidence.** A reply with no readable confidence (or an error) counts as the
  lowest band of eq. 2 (0.3) and is listed in ``info["unparsed_confidence"]`` as ``[round, agent]``.
* **No incoming edge.** With ``n >= 2`` eq. 11 always keeps the largest incoming weight (it is
  never below the mean), so with MDM weights this only happens with a single agent (with
  ``--cortex-weights self`` or ``peer`` also to the one agent above the whole graph's mean): that agent gets the
  ``cortex_self_check`` prompt, which shows its own previous output (needed because the default
  memory is empty) and asks for an answer and a confidence again.
* **Consensus (step 4).** "All agents agree" means every extracted answer is the same *valid*
  answer; unreadable answers never agree. Following Alg. 1, it is checked after debate rounds
  only (not after round 0), so at least one debate round runs when ``--rounds >= 2``.
* **Ties in eq. 14** are broken as every protocol's vote is (:func:`~engine.protocols.base.vote`:
  a draw seeded by the run seed and question, or agent order with ``--tie-break first``);
  unreadable answers do not vote.
* **Ablations (Table 2, appendix D).** ``--cortex-graph full`` keeps every edge ("fully
  connected graph"): the weights then only order the peers an agent reads (descending weight,
  then id) — our choice, since the paper does not say how MDM acts on a full graph, and order
  is the only thing it could change without changing the cost; ``--cortex-weights none`` (full
  graph only) lists them by id, the plain fully connected row. ``--cortex-weights``
  ``mdm-individual`` is "MDM w/o I_d and S_d" (``W = C_i R_i``), ``self`` is the
  self-evaluation row (each agent keeps the heads whose recalibrated confidence is at least the
  mean over the whole graph, appendix D; we read "above" as ">=", as eq. 11 does), ``peer`` is
  the peer-evaluation row (below). None of them reads the outputs' similarity, so they make no
  embedding call.
* **Peer evaluation** (``--cortex-weights peer``, appendix D: "its answer is scored by other LLM
  agents, and the final score of the answer is the average of the received scores. Each LLM agent
  will only debate with the LLM agents whose scores are above the average of the entire graph").
  Each debate round d, before the graph is built, every agent scores every other agent's round
  d-1 output: n(n-1) side calls (:attr:`~engine.protocols.base.AgentCall.side`: recorded as
  ``kind = "cortex_score"``, ``agent_id`` = the scorer, ``peers`` = [the scored agent]; they do not
  join transcripts or change answers). The paper gives no prompt: ours (stage ``cortex_score``, in
  Table 7's style) shows the question and the one answer, asks how likely it is to be correct on a
  1-10 scale and for a "Score:" line, read with :func:`parse_score`; the scorer gets no memory
  (only that message, like eq. 13's default). An agent's peer score is the mean of its readable
  received scores (an agent none of whose scores could be read gets the lowest score, 1, as an
  unreadable confidence gets eq. 2's lowest band); every reader keeps the heads whose peer score is
  >= the mean over the whole graph (the ``self`` rule). ``info["rounds"][d-1]["peer_scores"]``
  has the scores given (``[scorer][scored]``, None unreadable), the peer scores and their mean.
* **Unknown models.** ``cfg.option(MODEL_INFO)[model] = {"params_b", "tokens_t"}`` gives N and M. A model
  without an entry uses :data:`KNOWN_MODELS` (matched on the lower-cased name). When the agents'
  models differ, a model of unknown size is an error before the run (:func:`validate`); with one
  model for all, the SmolLM2-135M values stand in (credibility is then equal for every agent);
  ``info["credibility"]["source"]`` says which, per agent.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Generator, Sequence
from typing import Any

import numpy as np

from engine.confidence import parse_confidence, parse_score
from engine.cost_model import Cost, Sizes, sys_tokens
from engine.options import ConfigError, Option
from engine.protocols.base import (
    AgentCall,
    Context,
    Outcome,
    ProtocolGen,
    Similarity,
    Step,
    judge_every_other,
    read_judgements,
    unanimous,
    vote,
)
from engine.protocols.shared import EARLY_STOP, EMBEDDING_MODEL, FORGETTING
from engine.protocols.spec import ProtocolSpec
from topologies.cortex import GRAPHS, WEIGHTS, MDMState, credibility, pretraining_loss, recalibrate

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------- prompts (Table 7)

_CONFIDENCE_ASK = (
    "Also, evaluate how confident you are that your answer is correct.\n"
    "Your confidence score should be between 0 and 1.\n"
    "The format of your answer must be:\n"
    "Answer: (...)\n"
    "Explanation: (...)\n"
    "Confidence Score: (...)"
)

STAGES = {
    # Table 7, "Initial Answer Generation" (Kojima et al.'s step-by-step cue)
    "cortex_first": (
        "Question: $question\n"
        "Please think it step by step and generate an answer and an explanation for your answer. $format\n"
        + _CONFIDENCE_ASK
    ),
    # Table 7, "Answer Regeneration" = eq. 13: [Ins, Q, {O_k^{d-1}}]
    "cortex_debate": (
        "Question: $question\n"
        "There are some answers generated by other LLM agents:\n$peers\n"
        "Using these answers as additional information, please generate a new answer and an explanation "
        "for your answer. $format\n" + _CONFIDENCE_ASK
    ),
    # --cortex-weights peer (appendix D gives no prompt; ours, in Table 7's style)
    "cortex_score": (
        "Question: $question\n"
        "Here is an answer generated by another LLM agent:\n$solution\n"
        "Please evaluate how likely this answer is to be correct. Give a score from 1 to 10, where 10 means "
        "certainly correct and 1 certainly wrong.\n"
        "The format of your evaluation must be:\n"
        "Explanation: (...)\n"
        "Score: (...)"
    ),
    # our addition: an agent that reads nobody (only possible with one agent)
    "cortex_self_check": (
        "Question: $question\n"
        "This is your previous answer:\n$previous\n"
        "Can you double check that your answer is correct? Please generate a new answer and an explanation "
        "for your answer. $format\n" + _CONFIDENCE_ASK
    ),
}

# --------------------------------------------------------------------------- model metadata

# Defaults for eqs. 3-4 when cfg.option(MODEL_INFO) has no entry: name fragment -> (params_b, tokens_t).
# SmolLM2-135M: 135M parameters, "trained on 2 trillion tokens" (model card,
# https://huggingface.co/HuggingFaceTB/SmolLM2-135M). The instruct model is the same base.
KNOWN_MODELS: dict[str, tuple[float, float]] = {
    "smollm2-135m": (0.135, 2.0),
}
FALLBACK_MODEL = "smollm2-135m"
# model_info's bounds: 100,000 billion parameters, 10,000 trillion training tokens (100x past any model)
MODEL_INFO_MAX = {"params_b": 100_000, "tokens_t": 10_000}


def model_size(name: str, model_info: dict[str, dict[str, float]]) -> tuple[float, float, str]:
    """``(params_b, tokens_t, source)`` of a model for eq. 3.

    source: ``"model_info"`` (from the config), ``"known:<fragment>"`` (:data:`KNOWN_MODELS`) or
    ``"default:smollm2-135m"`` (nothing known: the SmolLM2-135M values). A key missing from a
    ``model_info`` entry is filled the same way and the source says ``"model_info+default"``.
    """
    fallback, source = KNOWN_MODELS[FALLBACK_MODEL], f"default:{FALLBACK_MODEL}"
    lname = str(name).lower()
    for frag, sizes in KNOWN_MODELS.items():
        if frag in lname:
            fallback, source = sizes, f"known:{frag}"
            break
    entry = model_info.get(name)
    if entry is None:
        return fallback[0], fallback[1], source
    try:
        params = float(entry["params_b"]) if "params_b" in entry else None
        tokens = float(entry["tokens_t"]) if "tokens_t" in entry else None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"model_info[{name!r}]: params_b / tokens_t must be numbers ({exc})") from None
    for key, val in (("params_b", params), ("tokens_t", tokens)):
        if val is not None and not (0 < val <= MODEL_INFO_MAX[key]):  # NaN and inf fail too
            raise ConfigError(
                f"model_info[{name!r}].{key} must be a positive number up to {MODEL_INFO_MAX[key]:,} (got {val})"
            )
    full = params is not None and tokens is not None
    return (
        params if params is not None else fallback[0],
        tokens if tokens is not None else fallback[1],
        "model_info" if full else f"model_info+{source}",
    )


def validate(cfg) -> None:
    """Before a run: agents on *different* models get credibility (eqs. 3-4) from each model's size,
    so every one of those models needs a known size (``model_info`` or :data:`KNOWN_MODELS`);
    falling back to SmolLM2's size would weight them silently wrong. One model for every agent
    needs none (equal credibility whatever the size)."""
    models = list(dict.fromkeys(spec.model for spec in cfg.agent_specs()))
    if len(models) < 2:
        return
    unknown = [m for m in models if "default" in model_size(m, cfg.option(MODEL_INFO) or {})[2]]
    if unknown:
        raise ConfigError(
            f"--protocol cortex: agents use different models ({', '.join(models)}), weighted by model size "
            f"(credibility, eqs. 3-4), but the size of {', '.join(unknown)} is unknown: add "
            f"model_info: {{{unknown[0]}: {{params_b: <billions of parameters>, tokens_t: <trillions of training "
            f"tokens>}}}} to the run's YAML"
        )


def _needs_similarity(cfg) -> bool:
    """Only eq. 9's intimacy term reads the outputs' cosine similarity."""
    return cfg.option(CORTEX_WEIGHTS) == "mdm"


def _check(cfg) -> None:
    if cfg.option(CORTEX_WEIGHTS) == "none" and cfg.option(CORTEX_GRAPH) != "full":
        raise ConfigError("--cortex-weights none needs --cortex-graph full (the sparse graph is made from the weights)")


def _label(cfg) -> list[str]:
    parts = []
    if cfg.get("cortex_graph", "sparse") != "sparse":
        parts.append(f"graph={cfg['cortex_graph']}")
    if cfg.get("cortex_weights", "mdm") != "mdm":
        parts.append(f"W={cfg['cortex_weights']}")
    return parts


# --------------------------------------------------------------------------- the protocol


def _clean_cos(matrix: Any, n: int) -> tuple[np.ndarray, int]:
    """The n x n similarity matrix as floats clipped to [-1, 1]; non-finite entries become 0."""
    m = np.array(matrix, dtype=float)[:n, :n] if n else np.zeros((0, 0))
    bad = ~np.isfinite(m)
    return np.clip(np.where(bad, 0.0, m), -1.0, 1.0), int(bad.sum())


def _jsonable(x: float) -> float | None:
    x = float(x)
    return None if math.isnan(x) else x


def _jsonable_matrix(m: np.ndarray) -> list[list[float | None]]:
    """A float matrix as lists, nan (the diagonal) as None."""
    out = np.asarray(m, dtype=float).astype(object)
    out[np.isnan(np.asarray(m, dtype=float))] = None
    return out.tolist()


LOWEST_SCORE = 1.0  # a peer score when none of an agent's received scores can be read


def peer_scores(d: int, texts: list[str], answers: list[str | None]) -> Generator[Step, Any, dict[str, Any]]:
    """Appendix D's peer evaluation for debate round ``d``: every agent scores every other agent's
    round ``d-1`` output (one step of side calls); returns ``{"given": [scorer][scored] score or
    None, "score": each agent's mean received score, "mean": their mean over the graph,
    "unparsed": [[scorer, scored], ...]}``."""
    n = len(texts)
    calls = judge_every_other("cortex_score", texts, answers, memory="none")
    scored = read_judgements(calls, (yield Step(d, calls)), parse_score)
    given = scored.given  # [scorer][scored]
    score = []
    for i in range(n):
        received = [given[j][i] for j in range(n) if j != i]
        got = [x for x in received if x is not None]
        score.append(math.fsum(got) / len(got) if got else LOWEST_SCORE)
    if scored.unread:
        log.debug("cortex peer scores, round %d: %d of %d unreadable", d, len(scored.unread), len(calls))
    return {"given": given, "score": score, "mean": math.fsum(score) / n, "unparsed": scored.unread}


MATRIX_INFO_MAX_AGENTS = 64  # above this many agents, info keeps no N x N matrices (W, I)


def cortex_debate(ctx: Context) -> ProtocolGen:
    cfg = ctx.cfg
    n, n_rounds = ctx.n_agents, ctx.n_rounds
    memory = cfg.option(CORTEX_MEMORY)
    if cfg.option(FORGETTING) and memory == "full":
        memory = "last"
    s_offset = float(cfg.option(CORTEX_S_OFFSET))

    # eqs. 3-4: credibility per agent from its model's size
    models = [spec.model for spec in cfg.agent_specs()]
    sizes = [model_size(m, cfg.option(MODEL_INFO) or {}) for m in models]
    cred = [credibility(p, t) for p, t, _ in sizes]
    info: dict[str, Any] = {
        "credibility": {
            "models": models,
            "params_b": [p for p, _, _ in sizes],
            "tokens_t": [t for _, t, _ in sizes],
            "source": [s for _, _, s in sizes],
            "loss": [pretraining_loss(p * 1e9, t * 1e12) for p, t, _ in sizes],
            "C": cred,
        },
        "defaults_used": sorted({m for m, (_, _, s) in zip(models, sizes) if s != "model_info"}),
        "memory": memory,
        **(
            {
                "matrices": f"W and I omitted: {n} agents > {MATRIX_INFO_MAX_AGENTS}; the graphs table has the "
                f"kept edges' weights"
            }
            if n > MATRIX_INFO_MAX_AGENTS
            else {}
        ),
        "s_offset": s_offset,
        "graph": cfg.option(CORTEX_GRAPH),
        "weights": cfg.option(CORTEX_WEIGHTS),
        "confidence_raw": [],  # per round, per agent: parsed value or None
        "confidence": [],  # per round, per agent: recalibrated (eq. 2)
        "unparsed_confidence": [],  # [round, agent]
        "self_checks": [],  # [round, agent]
        "nonfinite_similarity": 0,
        "rounds": [],  # per debate round: the MDM quantities
    }

    def confidences(round_: int, replies) -> list[float]:
        raw = [None if r.error else parse_confidence(r.text) for r in replies]
        for i, value in enumerate(raw):
            if value is None:
                info["unparsed_confidence"].append([round_, i])
        info["confidence_raw"].append(raw)
        h = [recalibrate(x) for x in raw]  # eq. 2 (None -> lowest band)
        info["confidence"].append(h)
        return h

    # Phase 1: initial answers (Alg. 1 lines 1-6)
    replies = yield Step(0, [AgentCall(agent=i, stage="cortex_first", memory=memory) for i in range(n)])
    texts = [r.text for r in replies]
    answers = [r.answer for r in replies]
    h = confidences(0, replies)
    history = [answers]
    mdm = MDMState(
        credibility=cred, s_offset=s_offset, weights_mode=cfg.option(CORTEX_WEIGHTS), graph=cfg.option(CORTEX_GRAPH)
    )
    stopped = False

    # Phase 2: debate rounds d = 1..D
    for d in range(1, n_rounds):
        if _needs_similarity(cfg):
            cos, bad = _clean_cos((yield Similarity(list(texts))), n)  # eq. 6 input: cos(O_i^{d-1}, O_j^{d-1})
            info["nonfinite_similarity"] += bad
        else:  # the ablation's weights read no intimacy (eq. 7): no embedding call
            cos = np.zeros((n, n))
        scored = (yield from peer_scores(d, texts, answers)) if cfg.option(CORTEX_WEIGHTS) == "peer" else None
        rnd = mdm.step(h, cos, None if scored is None else scored["score"])  # steps 1-2: eqs. 5-12
        info["rounds"].append(
            {
                "round": d,
                "R": rnd.reliability,
                **({"I": rnd.intimacy, "W": _jsonable_matrix(rnd.weights)} if n <= MATRIX_INFO_MAX_AGENTS else {}),
                "S": rnd.self_orientation,
                "mean": [_jsonable(x) for x in rnd.mean],
                "peers": rnd.peers,
                **({} if scored is None else {"peer_scores": scored}),
            }
        )
        calls = []
        for j in range(n):
            peers = rnd.peers[j]
            kept = set(peers)
            # the edges eq. 11 pruned from j, with their eq. 9 weights (graphs.pruned)
            pruned = [(i, float(rnd.weights[i, j])) for i in range(n) if i != j and i not in kept]
            if peers:
                calls.append(
                    AgentCall(
                        agent=j,
                        stage="cortex_debate",
                        peers=list(peers),
                        peer_texts=list(zip(peers, map(texts.__getitem__, peers))),
                        peer_answers=list(map(answers.__getitem__, peers)),
                        memory=memory,
                        weights=rnd.peer_weights(j),
                        pruned=pruned,
                    )
                )
            else:
                info["self_checks"].append([d, j])
                calls.append(
                    AgentCall(
                        agent=j,
                        stage="cortex_self_check",
                        values={"previous": texts[j]},
                        peer_answers=[answers[j]],
                        memory=memory,
                        pruned=pruned,
                    )
                )
        replies = yield Step(d, calls)  # step 3 (eq. 13)
        texts = [r.text for r in replies]
        answers = [r.answer for r in replies]
        h = confidences(d, replies)
        history.append(answers)
        if cfg.option(EARLY_STOP) and unanimous(answers):  # step 4: every answer equals agent 0's, a valid one
            stopped = d < n_rounds - 1
            break

    # Phase 3: eq. 14
    return Outcome(
        final_answer=vote(ctx, answers), answers_by_round=history, stopped_early=stopped, skipped_turns=0, info=info
    )


# --------------------------------------------------------------------------- spec

# --------------------------------------------------------------------------- cost model
# closed forms described in engine.cost_model's docstring


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
    head = s.g + sys_tokens(s)
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


def cortex_memory_used(cortex_memory: str = "none", forgetting: bool = False) -> str:
    """The memory mode CortexDebate actually uses (``--forgetting`` turns "full" into "last")."""
    return "last" if forgetting and cortex_memory == "full" else cortex_memory


def _cost(
    s,
    n: int,
    rounds: int,
    q: float,
    c: float,
    *,
    kept_fraction: float = 0.5,
    rounds_run: int | None = None,
    cortex_memory: str = "none",
    forgetting: bool = False,
    cortex_graph: str = "sparse",
    cortex_weights: str = "mdm",
    **_: object,
):
    """Estimate: every debate round each agent keeps ``kept_fraction`` of its N-1 peers (exact for
    ``cortex_graph="full"``, where every agent reads all N-1, when no question stops early); with
    ``cortex_weights="peer"`` each debate round run adds its N(N-1) scoring calls (exact)."""

    run = rounds if rounds_run is None else rounds_run
    if cortex_graph == "full":
        kept_fraction = 1.0
    if not 1 <= run <= rounds:
        raise ValueError(f"rounds_run {run} must be in 1..{rounds}")
    return cortex_cost(
        s,
        n,
        q,
        c,
        [kept_fraction * (n - 1)] * (run - 1),
        cortex_memory_used(cortex_memory, forgetting),
        peer_scores=cortex_weights == "peer",
    )


CORTEX_MEMORY = Option(
    "cortex_memory",
    str,
    "none",
    "the prompt is [Ins, Q, peers' answers] only (eq. 13: none) or "
    "keeps the agent's own transcript (full, or last with --forgetting)",
    choices=("none", "last", "full"),
)
CORTEX_S_OFFSET = Option(
    "cortex_s_offset",
    float,
    1.0,
    "added to S_d (eq. 8); our choice: the paper's literal S_1 = 0 divides by zero (0 = literal, W = inf)",
    low=0.0,
    high=1000.0,
)
CORTEX_GRAPH = Option(
    "cortex_graph",
    str,
    "sparse",
    "sparse (eq. 11 prunes each reader's edges below its mean "
    "weight) or full (Table 2 ablation: every agent reads all others, listed by descending "
    "weight)",
    choices=GRAPHS,
)
CORTEX_WEIGHTS = Option(
    "cortex_weights",
    str,
    "mdm",
    "edge weights (Table 2, appendix D): mdm (eq. 9, McKinsey "
    "trust), mdm-individual (credibility x reliability only), self (each head's own recalibrated "
    "confidence, kept above the whole graph's mean: RECONCILE-style self-evaluation), peer (the "
    "mean 1-10 score the other agents give each head's answer, kept above the whole graph's mean: "
    "PRD-style peer evaluation, n(n-1) scoring calls a round), none (with --cortex-graph full "
    "only)",
    choices=WEIGHTS,
)
MODEL_INFO = Option(
    "model_info",
    dict,
    None,
    "model -> {params_b, tokens_t}: N and M of eqs. 3-4 for models CortexDebate does not know (YAML only)",
    cli=False,
)

SPEC = ProtocolSpec(
    "cortex",
    cortex_debate,
    "CortexDebate: a sparse graph re-weighted each round by McKinsey trust (CortexDebate paper)",
    "CortexDebate",
    settings=(
        FORGETTING,
        EARLY_STOP,
        EMBEDDING_MODEL,
        CORTEX_MEMORY,
        CORTEX_S_OFFSET,
        CORTEX_GRAPH,
        CORTEX_WEIGHTS,
        MODEL_INFO,
    ),
    unused=lambda cfg: (
        (set() if cfg.option(CORTEX_MEMORY) == "full" else {"forgetting"})
        | (set() if _needs_similarity(cfg) else {"embedding_model"})
    ),
    check=_check,
    validate=validate,
    stages=STAGES,
    needs_embeddings=_needs_similarity,
    cost=_cost,
    cost_kind="estimate",
    label_parts=_label,
    example="--agents 6 --rounds 3",
)
