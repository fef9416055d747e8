"""CortexDebate: MDM math (eqs. 1-12, hand-computed values), confidence parsing, prompts (eq. 13),
and the protocol driven with fake replies and fake similarity matrices (graph, weights, early stop, eq. 14)."""

import math

import numpy as np
import pytest

from engine.confidence import parse_confidence
from engine.config import ConfigError, RunConfig
from engine.prompts import PromptSet
from engine.protocols import Context, Reply, Similarity, Step, get_protocol
from engine.protocols.cortex import CORTEX_MEMORY, CORTEX_S_OFFSET, model_size
from engine.tasks import Question
from tests.support.protocol_driver import drive
from topologies.cortex import (
    MDMState,
    credibility,
    debate_peers,
    edge_graph,
    intimacy,
    mean_incoming,
    mean_similarity,
    pretraining_loss,
    prune,
    recalibrate,
    reliability,
    self_orientation,
    trust,
    weight_matrix,
)

NAN = float("nan")
C_SMOL = 1 / 2.53691343676808  # eq. 4 for SmolLM2-135M (0.135e9 params, 2e12 tokens)


# --------------------------------------------------------------------------- eqs. 1-12


def test_eq1_trust_formula_and_zero_self_orientation():
    assert trust(0.5, 0.6, 0.4, 2.0) == pytest.approx(0.06)  # C R I / S, not C R I S (0.24)
    assert trust(0.5, 0.6, 0.4, 0.0) == math.inf  # literal S = 0
    assert trust(0.5, 0.6, 0.0, 0.0) == 0.0  # no intimacy: nothing to gain


def test_eq2_recalibration_bands():
    raw = [0.95, 0.8, 0.79, 0.6, 0.59, 0.45, 0.3, 0.29, 0.0, None]
    assert [recalibrate(h) for h in raw] == [0.8, 0.8, 0.6, 0.6, 0.59, 0.45, 0.3, 0.3, 0.3, 0.3]


def test_eq3_chinchilla_loss_in_raw_counts():
    # 406.4 / 10^(10*0.34) + 410.7 / 10^(12*0.28) + 1.69 = 0.161791 + 0.179277 + 1.69
    assert pretraining_loss(1e10, 1e12) == pytest.approx(2.031068, rel=1e-6)
    # Chinchilla itself (70B params, 1.4T tokens) ~ 1.94
    assert pretraining_loss(70e9, 1.4e12) == pytest.approx(1.936645, rel=1e-6)
    with pytest.raises(ValueError):
        pretraining_loss(0, 1e12)


def test_eq4_credibility_takes_billions_and_trillions():
    assert credibility(10, 1) == pytest.approx(1 / 2.031068, rel=1e-6)
    assert credibility(0.135, 2.0) == pytest.approx(0.394180, rel=1e-5)
    assert credibility(70, 1.4) > credibility(0.135, 2.0)  # bigger model, lower loss, more credible


def test_eq5_reliability_is_running_mean():
    assert reliability(0.5, 3, 0.8) == pytest.approx(0.6)  # (0.5*2 + 0.8) / 3, not a sum (1.8)
    assert reliability(99.0, 1, 0.7) == pytest.approx(0.7)  # d = 1: R_1 = H^0
    np.testing.assert_allclose(reliability(np.array([0.4, 0.8]), 2, np.array([0.6, 0.3])), [0.5, 0.55])


def test_eq6_eq7_similarity_mean_and_intimacy():
    assert mean_similarity(0.2, 2, 0.6) == pytest.approx(0.4)
    assert mean_similarity(0.5, 4, 0.9) == pytest.approx((0.5 * 3 + 0.9) / 4)
    assert intimacy(0.4) == pytest.approx(0.6)
    np.testing.assert_allclose(intimacy(np.array([[1.0, -0.5]])), [[0.0, 1.5]])


def test_eq8_self_orientation():
    assert self_orientation(3, 4, 4, offset=0) == 2  # (3-1)(4-1) - 4
    assert self_orientation(3, 4, 4) == 3  # default smoothing offset 1
    assert self_orientation(1, 5, 0, offset=0) == 0  # the paper's S_1 = 0


def test_eq9_weights_use_head_quantities():
    c, r, s = [1.0, 2.0, 1.0], [0.5, 0.5, 1.0], [1.0, 2.0, 4.0]
    i_mat = np.array([[0, 0.2, 0.8], [0.4, 0, 0.6], [1.0, 0.3, 0]])
    w = weight_matrix(c, r, i_mat, s)
    assert w[0, 1] == pytest.approx(1 * 0.5 * 0.2 / 1)  # edge 0 -> 1 uses agent 0's C, R, S
    assert w[1, 0] == pytest.approx(2 * 0.5 * 0.4 / 2)  # edge 1 -> 0 uses agent 1's C, R, S
    assert w[2, 1] == pytest.approx(1 * 1.0 * 0.3 / 4)
    assert w[1, 2] == pytest.approx(2 * 0.5 * 0.6 / 2)
    assert all(math.isnan(w[k, k]) for k in range(3))


W3 = np.array([[NAN, 1.0, 4.0], [2.0, NAN, 6.0], [7.0, 5.0, NAN]])  # W[i, j]: edge i -> j


def test_eq10_mean_of_incoming_column():
    # column j (edges into j), mean over n-1: (2+7)/2, (1+5)/2, (4+6)/2 — not rows (2.5, 4, 6), not sums
    np.testing.assert_allclose(mean_incoming(W3), [4.5, 3.0, 5.0])


def test_eq11_eq12_prune_below_mean_and_peers():
    keep = prune(W3)
    assert keep.tolist() == [[False, False, False], [False, False, True], [True, True, False]]
    assert debate_peers(keep) == [[2], [2], [1]]  # Deb_j: agent j reads these
    g = edge_graph(W3, keep)
    assert sorted(g.edges(data="weight")) == [(1, 2, 6.0), (2, 0, 7.0), (2, 1, 5.0)]
    # a weight equal to the mean stays (>=)
    w = np.array([[NAN, 1.0, 0, 0], [2.0, NAN, 0, 0], [4.0, 0, NAN, 0], [0, 0, 0, NAN]])
    assert debate_peers(prune(w))[0] == [1, 2]  # mean (2+4+0)/3 = 2: agent 1's 2 equals it and stays
    # equal weights whose float mean exceeds them by an ulp are all kept
    eq = np.full((4, 4), 0.1)
    np.fill_diagonal(eq, NAN)
    assert debate_peers(prune(eq)) == [[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]]
    # infinite weights (literal S = 0): exactly the infinite edges stay
    inf = np.array([[NAN, 1.0, 1.0], [math.inf, NAN, 1.0], [2.0, math.inf, NAN]])
    assert debate_peers(prune(inf)) == [[1], [2], [0, 1]]


COS0 = [[1, 0.9, 0.8], [0.9, 1, 0.5], [0.8, 0.5, 1]]
COS1 = [[1, 0.5, 0.4], [0.5, 1, 0.7], [0.4, 0.7, 1]]
H0 = [0.8, 0.6, 0.3]
H1 = [0.6, 0.8, 0.45]


def test_mdm_state_two_rounds_hand_computed():
    mdm = MDMState(credibility=[1.0, 1.0, 1.0])
    r1 = mdm.step(H0, COS0)
    # d=1: R = H0, I = 1 - cos0, S = 0 + offset 1 -> W[i,j] = H_i (1 - cos_ij)
    assert r1.weights[1, 0] == pytest.approx(0.06) and r1.weights[2, 0] == pytest.approx(0.06)
    assert r1.weights[0, 1] == pytest.approx(0.08) and r1.weights[2, 1] == pytest.approx(0.15)
    assert r1.weights[0, 2] == pytest.approx(0.16) and r1.weights[1, 2] == pytest.approx(0.30)
    assert r1.peers == [[1, 2], [2], [1]]  # tie kept for agent 0
    assert r1.self_orientation == [1.0, 1.0, 1.0]
    r2 = mdm.step(H1, COS1)
    # d=2: R = [.7, .7, .375]; I01 = .3, I02 = .4, I12 = .4; P = peers read in round 1 = [2, 1, 1]
    # S = (2-1)(3-1) - P + 1 = [1, 2, 2]
    assert r2.reliability == pytest.approx([0.7, 0.7, 0.375])
    assert r2.intimacy[0][1] == pytest.approx(0.3) and r2.intimacy[0][2] == pytest.approx(0.4)
    assert r2.self_orientation == [1.0, 2.0, 2.0]
    expect = {(0, 1): 0.21, (0, 2): 0.28, (1, 0): 0.105, (1, 2): 0.14, (2, 0): 0.075, (2, 1): 0.075}
    for (i, j), v in expect.items():
        assert r2.weights[i, j] == pytest.approx(v), (i, j)
    np.testing.assert_allclose(r2.mean, [0.09, 0.1425, 0.21])
    assert r2.peers == [[1], [0], [0]]
    assert r2.peer_weights(0) == pytest.approx([0.105])


def test_mdm_literal_offset_zero_never_sparsifies():
    mdm = MDMState(credibility=[1.0, 1.0, 1.0], s_offset=0.0)
    r1 = mdm.step(H0, COS0)
    assert np.isinf(r1.weights[~np.eye(3, dtype=bool)]).all()
    assert r1.peers == [[1, 2], [0, 2], [0, 1]]
    assert mdm.step(H1, COS1).peers == [[1, 2], [0, 2], [0, 1]]  # S_2 = 2 - 2 = 0 again


# --------------------------------------------------------------------------- confidence parsing


@pytest.mark.parametrize(
    "text, value",
    [
        ("Answer: 5\nExplanation: 2+3.\nConfidence Score: 0.85", 0.85),
        ("**Confidence Score:** (0.7)", 0.7),
        ("Confidence: 80%", 0.8),
        ("my confidence level of 8/10", 0.8),
        ("Confidence: 4 out of 5", 0.8),
        ("Confidence (0-1): 0.6", 0.6),
        ("Confidence Score:\n0.55", 0.55),
        ("Confidence = .75.", 0.75),
        ("confidence score is 1", 1.0),
        ("I am 90% confident in this.", 0.9),
        ("Confidence: 9", 0.9),  # bare 1..10: a 1-10 scale
        ("Confidence: 85", 0.85),  # bare 10..100: a percentage
        ("Confidence Score: 0.3\n...on reflection...\nConfidence Score: 0.9", 0.9),  # the last one
    ],
)
def test_parse_confidence(text, value):
    assert parse_confidence(text) == pytest.approx(value)


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "Answer: 5",
        "Confidence Score: ()",
        "Confidence: high",
        "Your confidence score should be between 0 and 1.",  # echoed instruction
        "Confidence: 150",
        "Confidence: 12/10",
        "Confidence: 120%",
        "2 confident agents",
    ],
)
def test_parse_confidence_unreadable(text):
    assert parse_confidence(text) is None


def test_model_size_sources():
    assert model_size("smollm2-135m-instruct", {}) == (0.135, 2.0, "known:smollm2-135m")
    assert model_size("mystery", {}) == (0.135, 2.0, "default:smollm2-135m")
    assert model_size("big", {"big": {"params_b": 7, "tokens_t": 18}}) == (7.0, 18.0, "model_info")
    assert model_size("big", {"big": {"params_b": 7}}) == (7.0, 2.0, "model_info+default:smollm2-135m")
    with pytest.raises(ValueError, match="model_info"):
        model_size("big", {"big": {"params_b": -1, "tokens_t": 1}})


def test_config_flags_validated():
    cfg = RunConfig.flat(protocol="cortex")
    assert cfg.option(CORTEX_MEMORY) == "none" and cfg.option(CORTEX_S_OFFSET) == 1.0
    with pytest.raises(ConfigError, match="--cortex-memory"):
        RunConfig.flat(protocol="cortex", cortex_memory="all").validate()
    with pytest.raises(ConfigError, match="--cortex-s-offset"):
        RunConfig.flat(protocol="cortex", cortex_s_offset=-1).validate()


# --------------------------------------------------------------------------- prompts (eq. 13, Table 7)


def test_eq13_prompts_show_instruction_question_and_only_the_kept_peers():
    import engine.protocols.cortex  # noqa: F401  registers the cortex_* stages

    p = PromptSet.for_task("numeric")
    first = p.render("cortex_first", question="What is 2+3?")
    assert first.startswith("Question: What is 2+3?") and "step by step" in first
    assert "Confidence Score:" in first and "\\boxed{answer}" in first
    deb = p.render("cortex_debate", question="Q?", peers=p.peers_block([(2, "agent two says 5")]))
    assert "Q?" in deb and "agent two says 5" in deb and "other LLM agents" in deb and "Confidence Score:" in deb
    sc = p.render("cortex_self_check", question="Q?", previous="I said 4")
    assert "I said 4" in sc and "Confidence Score:" in sc


# --------------------------------------------------------------------------- the protocol

Q = Question(qid="q1", task="numeric", text="What is 2+3?", gold="5")


def play(cfg, answers, conf_texts, sims, key=1):
    """Drive cortex_debate: round r agent i answers answers[r][i] with text conf_texts[r][i];
    the k-th Similarity request gets sims[k]. Returns (steps, similarity requests, outcome)."""
    steps, sim_reqs = [], []

    def answer(req):
        if isinstance(req, Similarity):
            sim_reqs.append(req)
            return sims[len(sim_reqs) - 1]
        assert isinstance(req, Step)
        steps.append(req)
        return [
            Reply(f"r{req.round}a{c.agent} {conf_texts[req.round][c.agent]}", answers[req.round][c.agent])
            for c in req.calls
        ]

    out = drive(get_protocol("cortex")(Context(Q, cfg, key)), answer)
    return steps, sim_reqs, out


CONF = [
    ["Confidence Score: 0.9", "confidence 65%", "no idea how sure"],  # -> 0.8, 0.6, unreadable (0.3)
    ["Confidence: 7/10", "Confidence: 0.8", "Confidence Score: 0.45"],  # -> 0.6, 0.8, 0.45
    ["Confidence: 0.5"] * 3,
]


def test_protocol_graph_weights_and_vote():
    cfg = RunConfig.flat(protocol="cortex", agents=3, rounds=3)
    answers = [["5", "4", "6"], ["5", "4", "4"], ["4", "5", "4"]]
    steps, sim_reqs, out = play(cfg, answers, CONF, [COS0, COS1])
    assert [s.round for s in steps] == [0, 1, 2]
    assert [c.stage for c in steps[0].calls] == ["cortex_first"] * 3 and all(c.peers == [] for c in steps[0].calls)
    # the similarity of round d is taken on round d-1's texts
    assert sim_reqs[0].texts[1].startswith("r0a1") and sim_reqs[1].texts[2].startswith("r1a2")
    # round 1: who reads whom (edges below the mean pruned) and the pre-pruning weights (C cancels in pruning)
    r1 = steps[1].calls
    assert [c.peers for c in r1] == [[1, 2], [2], [1]]
    assert [c.stage for c in r1] == ["cortex_debate"] * 3
    assert r1[0].weights == pytest.approx([0.06 * C_SMOL, 0.06 * C_SMOL], rel=1e-6)
    assert r1[1].weights == pytest.approx([0.15 * C_SMOL], rel=1e-6)
    assert r1[2].weights == pytest.approx([0.30 * C_SMOL], rel=1e-6)
    assert r1[0].peer_texts == [(1, "r0a1 confidence 65%"), (2, "r0a2 no idea how sure")]
    assert r1[2].peer_answers == ["4"]
    # round 2 (the confidence parsed from round-1 texts feeds R; participation feeds S)
    r2 = steps[2].calls
    assert [c.peers for c in r2] == [[1], [0], [0]]
    assert r2[0].weights == pytest.approx([0.105 * C_SMOL], rel=1e-6)
    assert r2[2].weights == pytest.approx([0.28 * C_SMOL], rel=1e-6)
    assert all(c.memory == "none" for s in steps for c in s.calls)  # eq. 13: no transcript
    # outcome: all rounds, all agents; eq. 14 on the last round
    assert out.answers_by_round == answers and out.final_answer == "4" and not out.stopped_early
    info = out.info
    assert info["unparsed_confidence"] == [[0, 2]]
    assert info["confidence"][0] == [0.8, 0.6, 0.3] and info["confidence_raw"][0][2] is None
    assert info["credibility"]["source"] == ["known:smollm2-135m"] * 3
    assert info["credibility"]["C"][0] == pytest.approx(C_SMOL, rel=1e-9)
    assert info["rounds"][1]["peers"] == [[1], [0], [0]] and info["rounds"][1]["S"] == [1.0, 2.0, 2.0]
    assert info["rounds"][0]["W"][0][0] is None  # no self-edge


def test_protocol_credibility_from_model_info_changes_the_graph():
    # agent 2 is a far bigger model: its C lifts its outgoing edges above the others
    cfg = RunConfig.flat(
        protocol="cortex",
        agents=3,
        rounds=2,
        agent_settings=[{}, {}, {"model": "big"}],
        model_info={"big": {"params_b": 70, "tokens_t": 15}},
    )
    steps, _, out = play(cfg, [["5", "4", "6"], ["5", "4", "4"]], CONF, [COS0])
    c_big = credibility(70, 15)
    # agent 0: W[1,0] = .06 C_smol vs W[2,0] = .06 C_big -> only agent 2 stays now
    assert steps[1].calls[0].peers == [2]
    assert steps[1].calls[0].weights == pytest.approx([0.06 * c_big], rel=1e-6)
    assert out.info["credibility"]["source"] == ["known:smollm2-135m", "known:smollm2-135m", "model_info"]
    assert out.info["defaults_used"] == ["smollm2-135m-instruct"]


def test_consensus_stops_early_unless_disabled():
    answers = [["5", "5", "5"], ["5", "5", "5"], ["5", "5", "5"], ["5", "5", "5"]]
    conf = [["Confidence: 0.5"] * 3] * 4
    sims = [COS0, COS1, COS1]
    cfg = RunConfig.flat(protocol="cortex", agents=3, rounds=4)
    steps, sim_reqs, out = play(cfg, answers, conf, sims)
    # Alg. 1 checks consensus after debate rounds only: round 0 agreement does not stop it
    assert [s.round for s in steps] == [0, 1] and len(sim_reqs) == 1
    assert out.stopped_early and out.rounds_run == 2 and out.final_answer == "5"
    cfg = RunConfig.flat(protocol="cortex", agents=3, rounds=4, early_stop=False)
    steps, sim_reqs, out = play(cfg, answers, conf, sims)
    assert [s.round for s in steps] == [0, 1, 2, 3] and len(sim_reqs) == 3
    assert not out.stopped_early and out.rounds_run == 4
    # unreadable answers never make a consensus
    none = [[None] * 3] * 3
    steps, _, out = play(RunConfig.flat(protocol="cortex", agents=3, rounds=3), none, conf, sims)
    assert len(steps) == 3 and out.final_answer is None


def test_single_agent_self_checks_and_error_reply_is_unparsed():
    cfg = RunConfig.flat(protocol="cortex", agents=1, rounds=2)
    steps = []

    def answer(req):
        if isinstance(req, Similarity):
            return [[1.0]]
        steps.append(req)
        if req.round == 0:
            return [Reply("Answer: 5 Confidence: 0.9", "5")]
        return [Reply("", None, error="boom")]

    out = drive(get_protocol("cortex")(Context(Q, cfg, 1)), answer)
    call = steps[1].calls[0]
    assert (
        call.stage == "cortex_self_check"
        and call.peers == []
        and call.values == {"previous": "Answer: 5 Confidence: 0.9"}
    )
    assert out.info["self_checks"] == [[1, 0]] and out.info["unparsed_confidence"] == [[1, 0]]
    assert out.info["confidence"] == [[0.8], [0.3]]


def test_forgetting_and_full_memory():
    cfg = RunConfig.flat(protocol="cortex", agents=2, rounds=2, cortex_memory="full", forgetting=True)
    steps, _, _ = play(cfg, [["5", "4"], ["5", "4"]], CONF, [[[1, 0.2], [0.2, 1]]])
    assert all(c.memory == "last" for s in steps for c in s.calls)
    # two agents: each has a single incoming edge, which is its own mean, so it always stays
    assert [c.peers for c in steps[1].calls] == [[1], [0]]


def test_mixed_models_without_sizes_are_refused_before_the_run():
    from engine.protocols import validate_protocol

    mixed = RunConfig.flat(protocol="cortex", agents=4, models="big-model*1,smollm2-135m-instruct*3")
    with pytest.raises(ValueError) as err:
        validate_protocol(mixed)
    msg = str(err.value)
    assert "\n" not in msg and "big-model" in msg and "model_info" in msg and "smollm2" not in msg.split("unknown:")[-1]
    validate_protocol(
        RunConfig.flat(
            protocol="cortex",
            agents=4,
            models="big-model*1,smollm2-135m-instruct*3",
            model_info={"big-model": {"params_b": 7, "tokens_t": 18}},
        )
    )  # sized: fine
    validate_protocol(RunConfig.flat(protocol="cortex", agents=3, model="some-unknown-model"))  # one model: fine


def test_table2_ablation_weights():
    """mdm-individual = C_i R_i (no intimacy, no self-orientation); self = the head's confidence
    with the whole graph's mean as every reader's threshold; none = all ones."""
    import numpy as np

    from topologies.cortex import ablation_weights

    c, r, h = [1.0, 2.0, 3.0], [0.5, 0.5, 1.0], [0.2, 0.9, 0.4]
    i_mat = np.array([[0, 0.1, 0.9], [0.5, 0, 0.5], [0.3, 0.3, 0]])
    s = [2.0, 1.0, 4.0]
    w, mean = ablation_weights("mdm-individual", c, r, i_mat, s, h)
    assert w[0, 1] == w[0, 2] == pytest.approx(0.5) and w[2, 0] == pytest.approx(3.0) and np.isnan(w[1, 1])
    assert mean[0] == pytest.approx((1.0 + 3.0) / 2)  # eq. 10 over the incoming edges of reader 0
    w, mean = ablation_weights("self", c, r, i_mat, s, h)
    assert w[1, 0] == w[1, 2] == pytest.approx(0.9) and list(mean) == pytest.approx([0.5] * 3)
    w, mean = ablation_weights("mdm", c, r, i_mat, s, h)
    assert w[0, 2] == pytest.approx(1.0 * 0.5 * 0.9 / 2.0)  # eq. 9 unchanged
    w, _ = ablation_weights("none", c, r, i_mat, s, h)
    assert np.nansum(w) == 6
    with pytest.raises(ValueError, match="--cortex-weights 'x'"):
        ablation_weights("x", c, r, i_mat, s, h)


def test_full_graph_reads_everyone_by_descending_weight_and_self_weights_skip_embeddings():
    from engine.config import ConfigError, RunConfig
    from topologies.cortex import MDMState

    mdm = MDMState(credibility=[1.0, 1.0, 1.0], weights_mode="self", graph="full")
    rnd = mdm.step([0.2, 0.9, 0.4], [[1.0] * 3] * 3)
    assert rnd.peers == [[1, 2], [2, 0], [1, 0]]
    sparse = MDMState(credibility=[1.0, 1.0, 1.0], weights_mode="self").step([0.2, 0.9, 0.4], [[1.0] * 3] * 3)
    assert sparse.peers == [[1], [], [1]]  # above the graph's mean confidence 0.5: agent 1 only
    cfg = RunConfig.flat(protocol="cortex", agents=3, rounds=3, cortex_weights="self").validate()
    steps, sim_reqs, out = play(cfg, [["5", "4", "6"], ["5", "4", "4"], ["4", "5", "4"]], CONF, [])
    assert sim_reqs == [] and len(steps) == 3  # no embedding call: self weights read no intimacy
    assert out.info["rounds"][0]["peers"] == [[1], [0], [0, 1]]  # confidences 0.8, 0.6, 0.3: mean 0.57 keeps 0 and 1
    assert not RunConfig.flat(protocol="cortex", cortex_weights="self").validate().options_read() & {"embedding_model"}
    with pytest.raises(ConfigError, match="--cortex-weights none needs --cortex-graph full"):
        RunConfig.flat(protocol="cortex", cortex_weights="none").validate()


# --------------------------------------------------------------------------- peer evaluation (appendix D)


@pytest.mark.parametrize(
    "text, value",
    [
        ("Explanation: fine.\nScore: 7", 7.0),
        ("**Score:** 8/10", 8.0),
        ("a score of 3 out of 5", 6.0),
        ("Rating (1-10): 9", 9.0),
        ("Score: 70%", 7.0),
        ("Score: 1", 1.0),  # 1 is the lowest, not 100%
        ("Score: 4\n...\nScore: 9", 9.0),
        ("Score: 85", 8.5),
    ],
)
def test_parse_score_on_a_ten_point_scale(text, value):
    from engine.confidence import parse_score

    assert parse_score(text) == pytest.approx(value)


def test_parse_score_unreadable_and_the_confidence_keyword():
    from engine.confidence import CONFIDENCE_KEYWORD, parse_score

    for text in (None, "", "Score: high", "Give a score from 1 to 10", "Score: 150", "Score: 12/10", "Confidence: 7"):
        assert parse_score(text) is None, text
    assert parse_score("Confidence: 8/10", CONFIDENCE_KEYWORD) == 8.0
    assert parse_score("Confidence level: 3", CONFIDENCE_KEYWORD) == 3.0
    assert parse_confidence("Confidence (1-10): 8") == pytest.approx(0.8)  # the "(1-10)" hint is not the value


def test_peer_weights_keep_heads_scored_at_least_the_graph_mean():
    """Appendix D: W[i, j] = the head's mean received score; every reader's threshold is the mean
    over the whole graph (the self rule on other numbers); the confidences H play no part."""
    from topologies.cortex import ablation_weights

    scores = [7.0, 4.0, 5.5, 8.0]  # mean 6.125
    w, mean = ablation_weights("peer", [1.0] * 4, [0.5] * 4, np.ones((4, 4)), [2.0] * 4, scores)
    assert w[1, 0] == 4.0 and w[3, 2] == 8.0 and list(mean) == pytest.approx([6.125] * 4)
    mdm = MDMState(credibility=[1.0] * 4, weights_mode="peer")
    rnd = mdm.step([0.3, 0.8, 0.8, 0.3], [[1.0] * 4] * 4, scores)
    assert rnd.peers == [[3], [0, 3], [0, 3], [0]]
    with pytest.raises(ValueError, match="peer scores"):
        MDMState(credibility=[1.0] * 4, weights_mode="peer").step([0.5] * 4, [[1.0] * 4] * 4)
    with pytest.raises(ValueError, match="peer scores"):
        MDMState(credibility=[1.0] * 4).step([0.5] * 4, [[1.0] * 4] * 4, scores)


def play_peer(cfg, answers, scores, conf="Confidence: 0.5"):
    """Drive cortex with --cortex-weights peer: agent i's turn in round r answers answers[r][i];
    the score agent j gives agent i in round d is scores[d][j][i] (a number, or a text)."""
    steps = []

    def answer(req):
        assert isinstance(req, Step), "peer weights make no similarity request"
        steps.append(req)
        out = []
        for c in req.calls:
            if c.side:
                s = scores[req.round][c.agent][c.peers[0]]
                out.append(Reply(s if isinstance(s, str) else f"Explanation: ok.\nScore: {s}", None))
            else:
                out.append(Reply(f"r{req.round}a{c.agent} {conf}", answers[req.round][c.agent]))
        return out

    return steps, drive(get_protocol("cortex")(Context(Q, cfg, 1)), answer)


def test_protocol_peer_evaluation_scores_then_prunes():
    cfg = RunConfig.flat(protocol="cortex", agents=3, rounds=3, cortex_weights="peer", early_stop=False).validate()
    assert not cfg.options_read() & {"embedding_model"}
    answers = [["5", "4", "6"], ["5", "5", "4"], ["5", "5", "5"]]
    scores = {
        1: [[None, 2, 8], [9, None, 6], [7, 3, None]],  # [scorer][scored]: received 8, 2.5, 7 -> mean 5.83
        2: [[None, "no score", "Score: ten"], [4, None, 6], [2, 3, None]],
    }  # 3, 3, 6 (agent 2 only 6)
    steps, out = play_peer(cfg, answers, scores)
    assert [(s.round, len(s.calls)) for s in steps] == [(0, 3), (1, 6), (1, 3), (2, 6), (2, 3)]
    scoring = steps[1].calls
    assert [(c.agent, c.peers) for c in scoring] == [(0, [1]), (0, [2]), (1, [0]), (1, [2]), (2, [0]), (2, [1])]
    assert all(c.side and c.stage == "cortex_score" and c.memory == "none" for c in scoring)
    assert scoring[1].values == {"solution": "r0a2 Confidence: 0.5"} and scoring[1].peer_answers == ["6"]
    assert steps[3].calls[0].values == {"solution": "r1a1 Confidence: 0.5"}  # round 2 scores round-1 outputs
    # round 1: peer scores [8, 2.5, 7], graph mean 5.833: heads 0 and 2 are kept by every other reader
    assert [c.peers for c in steps[2].calls] == [[2], [0, 2], [0]]
    assert steps[2].calls[1].weights == [8.0, 7.0]
    ps = out.info["rounds"][0]["peer_scores"]
    assert ps["score"] == [8.0, 2.5, 7.0] and ps["mean"] == pytest.approx(35 / 6)
    assert ps["given"][1] == [9.0, None, 6.0] and ps["unparsed"] == []
    # round 2: agent 0's two scores unreadable -> agent 1 gets only 3, agent 2 only 6; agent 0 gets (4+2)/2
    ps2 = out.info["rounds"][1]["peer_scores"]
    assert ps2["score"] == [3.0, 3.0, 6.0] and ps2["unparsed"] == [[0, 1], [0, 2]]
    assert [c.peers for c in steps[4].calls] == [[2], [2], []] and steps[4].calls[2].stage == "cortex_self_check"
    assert out.final_answer == "5" and out.answers_by_round == answers


def test_an_agent_with_no_readable_score_gets_the_lowest():
    cfg = RunConfig.flat(protocol="cortex", agents=3, rounds=2, cortex_weights="peer").validate()
    scores = {1: [[None, "?", 2], [2, None, 2], [2, "?", None]]}  # agent 1 unscored -> 1; agents 0, 2: 2
    steps, out = play_peer(cfg, [["5", "4", "6"], ["5", "4", "6"]], scores)
    assert out.info["rounds"][0]["peer_scores"]["score"] == [2.0, 1.0, 2.0]
    assert [c.peers for c in steps[2].calls] == [[2], [0, 2], [0]]  # mean 5/3: agent 1 (1.0) is dropped


def test_pruned_edges_are_in_the_graph_with_their_weights():
    """graphs holds each reader's kept edges, then the edges eq. 11 pruned (flagged), all with
    their eq. 9 weights (info's W[i][j] for edge i -> j); read_edges carries the flag."""
    import pyarrow as pa

    from engine.debate import call_reads
    from engine.results import graph_edges, rows_table

    cfg = RunConfig.flat(protocol="cortex", agents=3, rounds=3)
    answers = [["5", "4", "6"], ["5", "4", "4"], ["4", "5", "4"]]
    steps, _, out = play(cfg, answers, CONF, [COS0, COS1])
    for d in (1, 2):
        w = out.info["rounds"][d - 1]["W"]
        for c in steps[d].calls:
            reads = call_reads(d, c)
            kept = out.info["rounds"][d - 1]["peers"][c.agent]
            cut = [i for i in range(3) if i != c.agent and i not in kept]
            assert reads.srcs == kept + cut
            assert reads.pruned == ([False] * len(kept) + [True] * len(cut) if cut else None)
            assert reads.weights == pytest.approx([w[i][c.agent] for i in kept + cut], rel=1e-9)
    rows = [
        {"run_id": "r", "question_id": "q1", "round": d, "dst": r.dst, "srcs": r.srcs, "weights": r.weights}
        | {"pruned": r.pruned}
        for d in (1, 2)
        for r in [call_reads(d, c) for c in steps[d].calls]
    ]
    edges = graph_edges(rows_table("graphs", rows)).to_pylist()
    assert len(edges) == 2 * 3 * 2  # every ordered pair, each round, kept or pruned
    assert sum(e["pruned"] for e in edges) == 2 + 3  # round 1: 0 -> 1, 0 -> 2; round 2: 3 of 6
    assert [(e["src"], e["dst"]) for e in edges if e["round"] == 1 and not e["pruned"]] == [
        (1, 0),
        (2, 0),
        (2, 1),
        (1, 2),
    ]
    assert [(e["src"], e["dst"]) for e in edges if e["round"] == 1 and e["pruned"]] == [(0, 1), (0, 2)]
    assert pa.types.is_boolean(graph_edges(rows_table("graphs", rows)).schema.field("pruned").type)


def test_a_full_graph_prunes_nothing():
    from engine.debate import call_reads

    cfg = RunConfig.flat(protocol="cortex", agents=3, rounds=2, cortex_graph="full")
    steps, _, _ = play(cfg, [["5", "4", "6"], ["5", "4", "4"]], CONF, [COS0])
    assert all(call_reads(1, c).pruned is None and len(call_reads(1, c).srcs) == 2 for c in steps[1].calls)
