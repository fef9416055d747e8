"""GroupDebate and S2-MAD: groups, schedule, decision mechanism, token equations, protocol runs (no Ray)."""

import numpy as np
import pytest

from engine.config import RunConfig
from engine.prompts import PromptSet
from engine.protocols import AgentCall, Context, Reply, Similarity, Step, SummaryCall, get_protocol
from engine.protocols.group_debate import (
    gd_first_round_tokens,
    gd_inter_round_tokens,
    gd_intra_round_tokens,
    gd_summary_tokens,
    gd_total_tokens,
    group_debate,
)
from engine.protocols.s2mad import (
    s2_differing_count,
    s2_inter_round_tokens,
    s2_intra_round_tokens,
    s2_participation,
    s2_summary_tokens,
    s2mad,
)
from engine.tasks import Question
from tests.support.protocol_driver import drive
from topologies import (
    TopologyError,
    all_similar,
    dedup,
    differing,
    make_groups,
    n_stages,
    parse_group_sizes,
    participates,
    redundancy_filter,
    similar_by_answer,
    similar_by_cosine,
    stage_plan,
)

Q = Question(qid="q1", task="numeric", text="What is 1+1?", gold="2")


# ----------------------------------------------------------------------------- groups


def test_group_sizes_from_spec():
    assert parse_group_sizes("2+2+4", 8) == [2, 2, 4]
    assert parse_group_sizes(" 2 + 6 ", 8) == [2, 6]
    assert parse_group_sizes("3", 6) == [2, 2, 2]
    assert parse_group_sizes(3, 7) == [3, 2, 2]  # not a multiple: sizes differ by one, larger first
    assert parse_group_sizes([4, 2], 6) == [4, 2]
    assert parse_group_sizes(None, 4) == [2, 2] and parse_group_sizes(None, 5) == [3, 2]
    assert parse_group_sizes(None, 3) == [3]  # fewer than 4 agents: one group


def test_make_groups_partitions_with_a_seeded_shuffle():
    g = make_groups("2+2+4", 8, seed=0)
    assert g.sizes == [2, 2, 4]
    assert sorted(a for grp in g.members for a in grp) == list(range(8))
    assert all(list(grp) == sorted(grp) for grp in g.members)
    assert make_groups("2+2+4", 8, seed=0) == g  # same seed, same groups
    assert len({make_groups("2+2+4", 8, seed=s) for s in range(6)}) > 1  # the seed matters
    six = make_groups("3", 6, seed=3)
    assert six.sizes == [2, 2, 2] and sorted(a for grp in six.members for a in grp) == list(range(6))
    plain = make_groups("2+2", 4, shuffle=False)
    assert plain.members == ((0, 1), (2, 3)) and plain.mates(3) == [2] and plain.group_of(2) == 1
    assert plain.intra_peers() == {0: [1], 1: [0], 2: [3], 3: [2]}


@pytest.mark.parametrize(
    "spec, n, message",
    [
        ("2+2", 5, r"--groups '2\+2' with --agents 5: the group sizes add up to 4, not to the 5 agents"),
        ("7", 6, r"--groups '7' with --agents 6: 7 groups need at least 7 agents"),
        ("2+0+4", 6, r"--groups '2\+0\+4' with --agents 6: group size 0 is not positive"),
        ("3+-1+4", 6, r"--groups .* with --agents 6: group size -1 is not positive"),
        ("2.5+3.5", 6, r"--groups '2.5\+3.5' with --agents 6: '2.5' is not a whole number"),
        ("two", 6, r"--groups 'two' with --agents 6: 'two' is not a whole number"),
        ("0", 6, r"--groups '0' with --agents 6: the number of groups must be at least 1"),
        ([2, 2.5], 4, r"--groups \[2, 2.5\] with --agents 4: group size 2.5 is not an integer"),
    ],
)
def test_bad_group_specs_name_the_flags(spec, n, message):
    with pytest.raises(TopologyError, match=message):
        make_groups(spec, n)
    assert issubclass(TopologyError, ValueError)


def test_stage_plan():
    assert [p.kind for p in stage_plan(4, 2)] == ["first", "intra", "inter", "intra"]
    assert [p.summarize_after for p in stage_plan(4, 2)] == [False, True, False, False]
    five = stage_plan(5, 2)  # S = ceil(5/2) = 3, the last stage has one round
    assert [p.kind for p in five] == ["first", "intra", "inter", "intra", "inter"]
    assert [p.stage for p in five] == [0, 0, 1, 1, 2] and n_stages(5, 2) == 3
    assert [p.round for p in five if p.summarize_after] == [1, 3]
    assert [p.kind for p in stage_plan(3, 1)] == ["first", "inter", "inter"]
    assert [p.kind for p in stage_plan(3, 5)] == ["first", "intra", "intra"] and not any(
        p.summarize_after for p in stage_plan(3, 5)
    )
    with pytest.raises(TopologyError, match="--stage-rounds 0"):
        stage_plan(3, 0)


# ----------------------------------------------------------------------------- decision mechanism


def test_similarity_filter_participation():
    sim = similar_by_answer(["1", "1", "2", "2", None, None])
    assert sim[0][1] and not sim[0][2] and sim[2][3]
    assert not sim[4][5] and sim[4][4]  # unparseable answers agree with nothing but themselves
    assert differing(0, [1, 2, 3, 4], sim) == [2, 3, 4]
    assert redundancy_filter(0, [1, 2, 3, 4, 5], sim) == [2, 4, 5]  # 3 repeats 2; Nones kept
    assert dedup([0, 1, 2, 3], sim) == [0, 2]
    assert participates(1) and not participates(0)
    assert all_similar([0, 1], sim) and not all_similar([0, 2], sim) and not all_similar([], sim)
    cos = [[1.0, 0.9, 0.2], [0.9, 1.0, 0.5], [0.2, 0.5, 1.0]]
    assert similar_by_cosine(cos, 0.5).tolist() == [[True, True, False], [True, True, True], [False, True, True]]
    assert similar_by_cosine(np.array(cos), 0.95).tolist()[0][1] is False  # tau decides; an array reads the same
    with pytest.raises(TopologyError, match="square"):
        similar_by_cosine([[1.0, 0.2]], 0.5)


# ----------------------------------------------------------------------------- equations (hand-computed)


def test_gd_equations_on_hand_computed_numbers():
    assert gd_first_round_tokens(10, [3, 4]) == 27  # 2*10 + 3 + 4
    # eq. 3, groups {0,1} and {2}: (10+1+4+5) + (10+2+4+5) + (10+3+6) = 20 + 21 + 19
    assert gd_intra_round_tokens([[0, 1], [2]], 10, [1, 2, 3], [4, 5, 6]) == 60
    # eq. 4, two agents, summaries 5 and 6: (10+3+11+1) + (10+4+11+2)
    assert gd_inter_round_tokens(10, [1, 2], [3, 4], [5, 6]) == 52
    # Alg. 3 line 6: (1+2+10) + (3+20)
    assert gd_summary_tokens([[0, 1], [2]], [1, 2, 3], [10, 20]) == 36
    # eq. 7, T=3, R=2, one group {0,1}, Q=10: first 2*10+1+1=22; intra (10+2+2)*2=28;
    # summary 2+2+5=9; inter (10+2+5+3)*2=40 -> 99
    assert gd_total_tokens([[0, 1]], 10, [[1, 1], [2, 2], [3, 3]], [[5]], 2) == 99


def test_s2_equations_on_hand_computed_numbers():
    sim = similar_by_answer(["1", "1", "2", None])
    assert s2_differing_count(0, [1, 2, 3], sim) == 2  # eq. 1: agents 2 and 3 differ from agent 0
    assert (s2_participation(0), s2_participation(2)) == (0, 1)  # eq. 2
    # eq. 3, one group {0,1,2}, Q=10, mean previous output (3+6+9)/3 = 6:
    # agent 0: 10+5+3+2*6 = 30; agent 1 silent; agent 2: 10+7+9+1*6 = 32
    assert s2_intra_round_tokens([[0, 1, 2]], 10, [5, 6, 7], [3, 6, 9], [2, 0, 1]) == 62
    # eq. 4: agent 0 reads 1 of 2 summaries: 10+1+5+(1/2)*(4+8) = 22; agent 1 silent
    assert s2_inter_round_tokens(10, [5, 6], [1, 2], [4, 8], [1, 0]) == 22
    # Alg. 2 line 7 over the unique replies read: (1+10) + (2+3+20)
    assert s2_summary_tokens([[0], [1, 2]], [1, 2, 3], [10, 20]) == 36


# ----------------------------------------------------------------------------- protocol drivers


def run(protocol, cfg, agent_answer, summary_answer=lambda stage, group: "7", similarity=None, key=1):
    """Drive a protocol; returns (requests, outcome). Reply texts are unique per call."""
    requests = []
    n_summary_steps = [0]

    def answer(req):
        requests.append(req)
        if isinstance(req, Similarity):
            return similarity(req.texts)
        assert isinstance(req, Step)
        if all(isinstance(c, SummaryCall) for c in req.calls):
            stage = n_summary_steps[0]
            n_summary_steps[0] += 1
            return [Reply(f"summary s{stage} g{c.group}", summary_answer(stage, c.group)) for c in req.calls]
        assert all(isinstance(c, AgentCall) for c in req.calls)
        return [Reply(f"agent {c.agent} round {req.round}", agent_answer(req.round, c.agent)) for c in req.calls]

    out = drive(protocol(Context(Q, cfg, key)), answer)
    return requests, out


def test_gd_four_agents_two_groups_four_rounds():
    cfg = RunConfig.flat(protocol="group", agents=4, rounds=4, groups="2+2", stage_rounds=2, seed=5, tie_break="first")
    groups = make_groups("2+2", 4, seed=5)
    table = [["1", "2", "2", "3"], ["2", "2", "2", "3"], ["2", "3", "3", "3"], ["3", "3", "2", "2"]]
    reqs, out = run(get_protocol("group"), cfg, lambda r, a: table[r][a])
    assert all(isinstance(r, Step) for r in reqs)
    assert [(r.round, len(r.calls)) for r in reqs] == [(0, 4), (1, 4), (1, 2), (2, 4), (3, 4)]
    first, intra1, summ, inter, intra3 = reqs
    assert [c.stage for c in first.calls] == ["first"] * 4 and all(c.peers == [] for c in first.calls)
    for step in (intra1, intra3):
        for c in step.calls:  # each reads its one group mate's previous reply
            assert c.stage == "gd_intra" and c.peers == groups.mates(c.agent) and len(c.peers) == 1
            assert c.peer_texts == [(c.peers[0], f"agent {c.peers[0]} round {step.round - 1}")]
    assert [c.stage for c in summ.calls] == ["gd_summary"] * 2
    assert [c.sources for c in summ.calls] == [list(g) for g in groups.members]
    assert summ.calls[0].texts == [f"agent {a} round 1" for a in groups.members[0]]
    assert summ.calls[1].answers == [table[1][a] for a in groups.members[1]]
    for c in inter.calls:  # reads both summaries: its own group's and the other one
        own = groups.group_of(c.agent)
        assert c.stage == "gd_inter" and c.values["own_summary"] == f"summary s0 g{own}"
        assert f"summary s0 g{1 - own}" in c.values["other_summaries"]
        assert f"g{own}" not in c.values["other_summaries"]
        assert c.peers == [a for a in range(4) if a != c.agent]
    assert all(c.memory == "last" for r in reqs for c in r.calls if isinstance(c, AgentCall))
    assert out.answers_by_round == table and out.rounds_run == 4
    assert out.final_answer == "3"  # tie 3/2 in the last round: first seen wins
    assert out.skipped_turns == 0 and not out.stopped_early
    assert out.info["groups"] == [list(g) for g in groups.members]


def test_gd_single_member_group_self_checks_and_groups_do_not_depend_on_question():
    cfg = RunConfig.flat(protocol="group", agents=4, rounds=2, groups="1+3", seed=2)
    reqs, out = run(group_debate, cfg, lambda r, a: "2")
    alone = make_groups("1+3", 4, seed=2).members[0][0]
    stages = {c.agent: c.stage for c in reqs[1].calls}
    assert stages[alone] == "self_check" and [s for a, s in stages.items() if a != alone] == ["gd_intra"] * 3
    _, other = run(group_debate, cfg, lambda r, a: "2", key=99)
    assert other.info["groups"] == out.info["groups"]  # same groups for every question of a run


def _gd_cost(reqs, q, sizes):
    """Tokens the protocol's calls would cost when every reply text has the size sizes[text] and
    the question prompt costs q: an agent call reads q, its own previous reply (memory "last"),
    what it is shown, and writes its reply; a summary reads its texts and writes the summary."""
    total, last, n_summary_steps = 0, {}, 0
    for step in reqs:
        if isinstance(step.calls[0], SummaryCall):
            for c in step.calls:
                total += sum(sizes[t] for t in c.texts) + sizes[f"summary s{n_summary_steps} g{c.group}"]
            n_summary_steps += 1
            continue
        for c in step.calls:
            assert c.memory == "last"
            shown = sum(sizes[t] for _, t in c.peer_texts)
            shown += sum(
                v for k, v in sizes.items() if k.startswith("summary") and any(k in s for s in c.values.values())
            )
            own = sizes[f"agent {c.agent} round {step.round}"]
            total += q + last.get(c.agent, 0) + shown + own
            last[c.agent] = own
    return total


def test_gd_calls_cost_what_eqs_3_4_7_say():
    m, t, r, q = 5, 5, 2, 50
    cfg = RunConfig.flat(protocol="group", agents=m, rounds=t, groups="2+3", stage_rounds=r, seed=1)
    groups = make_groups("2+3", m, seed=1)
    out_size = [[10 + 3 * a + rnd for a in range(m)] for rnd in range(t)]
    sum_size = [[7 + j + 100 * s for j in range(2)] for s in range(2)]
    sizes = {f"agent {a} round {rnd}": out_size[rnd][a] for rnd in range(t) for a in range(m)}
    reqs, out = run(group_debate, cfg, lambda rnd, a: str(a % 2))
    assert [s.round for s in reqs if isinstance(s.calls[0], SummaryCall)] == [1, 3]
    for s in range(2):
        for j in range(2):  # the fake replies name summaries "summary s<stage> g<group>"
            sizes[f"summary s{s} g{j}"] = sum_size[s][j]
    assert len(reqs) == 7 and out.rounds_run == 5
    expected = gd_total_tokens(groups.members, q, out_size, sum_size, r)
    assert _gd_cost(reqs, q, sizes) == expected
    # and the equation is not trivially satisfied: one more summary read per agent would break it
    assert expected != gd_total_tokens(groups.members, q, out_size, [[x + 1 for x in s] for s in sum_size], r)


# ----------------------------------------------------------------------------- S2-MAD


def s2cfg(**kw):
    base = dict(protocol="s2mad", agents=4, rounds=4, groups="2+2", stage_rounds=2, seed=0)
    base.update(kw)
    return RunConfig.flat(**base)


def test_s2_all_identical_answers_skip_and_stop_early():
    reqs, out = run(s2mad, s2cfg(), lambda r, a: "7", summary_answer=lambda s, j: "7")
    assert [(r.round, type(r.calls[0]).__name__, len(r.calls)) for r in reqs] == [
        (0, "AgentCall", 4),
        (1, "SummaryCall", 2),
    ]  # round 1: nobody has anything new to read
    assert out.stopped_early and out.rounds_run == 2 and out.skipped_turns == 4
    assert out.answers_by_round == [["7"] * 4, ["7"] * 4] and out.final_answer == "7"
    assert out.info["skipped_by_round"] == [[], [0, 1, 2, 3]]
    # the same run without early stop goes through all 4 rounds, everybody silent
    reqs, out = run(s2mad, s2cfg(early_stop=False), lambda r, a: "7", summary_answer=lambda s, j: "7")
    assert len(reqs) == 2 and not out.stopped_early and out.rounds_run == 4 and out.skipped_turns == 12
    assert out.answers_by_round == [["7"] * 4] * 4


def test_s2_different_answers_make_calls_and_only_dissenters_speak():
    groups = make_groups("2+2", 4, seed=0)
    (a, b), (c, d) = groups.members
    first = {a: "1", b: "1", c: "1", d: "2"}  # group A agrees, group B does not
    reqs, out = run(s2mad, s2cfg(rounds=2), lambda r, x: first[x] if r == 0 else "2")
    assert len(reqs) == 2 and isinstance(reqs[1], Step) and reqs[1].round == 1
    calls = {call.agent: call for call in reqs[1].calls}
    assert sorted(calls) == sorted([c, d]) and calls[c].peers == [d] and calls[d].peers == [c]
    assert calls[c].stage == "s2_intra" and calls[c].peer_answers == ["2"]
    assert out.skipped_turns == 2 and out.info["skipped_by_round"] == [[], sorted([a, b])]
    last = out.answers_by_round[1]  # silent agents keep their answers
    assert last[a] == "1" and last[b] == "1" and last[c] == "2" and last[d] == "2"
    assert out.final_answer in ("1", "2")  # 2-2 tie: a seeded draw ...
    _, du = run(s2mad, s2cfg(rounds=2, tie_break="first"), lambda r, x: first[x] if r == 0 else "2")
    assert du.final_answer == last[0]  # ... or, with --tie-break first, agent 0's answer (seen first)


def test_s2_filter_dedups_identical_peer_views():
    cfg = s2cfg(rounds=2, groups="1")  # one group of 4
    ans0 = ["1", "2", "2", "3"]
    reqs, _ = run(s2mad, cfg, lambda r, a: ans0[a] if r == 0 else "2")
    peers = {c.agent: c.peers for c in reqs[1].calls}
    assert peers == {0: [1, 3], 1: [0, 3], 2: [0, 3], 3: [0, 1]}  # one of the two "2"s only
    reqs, out = run(s2mad, s2cfg(rounds=2, groups="1", filter=False), lambda r, a: ans0[a] if r == 0 else "2")
    assert {c.agent: c.peers for c in reqs[1].calls} == {0: [1, 2, 3], 1: [0, 2, 3], 2: [0, 1, 3], 3: [0, 1, 2]}
    assert {c.stage for c in reqs[1].calls} == {"gd_intra"}
    # without the filter participation is still conditional: agreeing mates -> silence
    reqs, out = run(s2mad, s2cfg(rounds=2, groups="1", filter=False), lambda r, a: "4")
    assert len(reqs) == 1 and out.skipped_turns == 4


def test_s2_inter_round_reads_only_summaries_that_differ():
    groups = make_groups("2+2", 4, seed=0)
    (a, b), (c, d) = groups.members
    ans = {a: "1", b: "1", c: "2", d: "2"}
    reqs, out = run(s2mad, s2cfg(rounds=3), lambda r, x: ans[x], summary_answer=lambda s, j: ["1", "2"][j])
    assert [type(q.calls[0]).__name__ for q in reqs] == ["AgentCall", "SummaryCall", "AgentCall"]
    summ, inter = reqs[1], reqs[2]
    assert [call.texts for call in summ.calls] == [[f"agent {a} round 0"], [f"agent {c} round 0"]]  # unique only
    assert [call.sources for call in summ.calls] == [[a], [c]]
    calls = {call.agent: call for call in inter.calls}
    assert sorted(calls) == [0, 1, 2, 3] and not out.stopped_early
    assert calls[a].stage == "s2_inter" and "summary s0 g1" in calls[a].values["summaries"]
    assert "summary s0 g0" not in calls[a].values["summaries"] and calls[a].peers == [c]
    assert calls[c].peers == [a] and calls[c].peer_answers == ["1"]
    assert out.skipped_turns == 4  # round 1 (intra): everyone agrees with its mate


def test_s2_single_group_never_stops_early():
    reqs, out = run(s2mad, s2cfg(agents=3, groups=None, rounds=4), lambda r, a: "5", summary_answer=lambda s, j: "5")
    assert not out.stopped_early and out.rounds_run == 4


def test_s2_embedding_mode_asks_for_similarity_and_uses_tau():
    texts_seen = []
    cos = [[1.0, 0.9, 0.1, 0.1], [0.9, 1.0, 0.1, 0.1], [0.1, 0.1, 1.0, 0.95], [0.1, 0.1, 0.95, 1.0]]

    def similarity(texts):
        texts_seen.append(list(texts))
        return cos

    # answers all equal: in embedding mode only the cosine matters
    cfg = s2cfg(rounds=2, groups="1", similarity="embedding", tau=0.5)
    reqs, _ = run(s2mad, cfg, lambda r, a: "2", similarity=similarity)
    assert [type(q).__name__ for q in reqs] == ["Step", "Similarity", "Step"]
    assert texts_seen == [[f"agent {a} round 0" for a in range(4)]]
    # tau 0.5: 0~1 and 2~3 are similar -> agent 0 reads one of {2, 3}; agent 2 reads one of {0, 1}
    assert {c.agent: c.peers for c in reqs[2].calls} == {0: [2], 1: [2], 2: [0], 3: [0]}
    # tau 0.92: 0.9 is no longer similar, 0.95 still is
    reqs, _ = run(
        s2mad, s2cfg(rounds=2, groups="1", similarity="embedding", tau=0.92), lambda r, a: "2", similarity=similarity
    )
    assert {c.agent: c.peers for c in reqs[2].calls} == {0: [1, 2], 1: [0, 2], 2: [0, 1], 3: [0, 1]}


def test_s2_embedding_early_stop_uses_summary_similarity():
    calls = []

    def similarity(texts):
        calls.append(list(texts))
        k = len(texts)
        return [[1.0 if i == j or (i >= 4 and j >= 4) else 0.0 for j in range(k)] for i in range(k)]

    cfg = s2cfg(similarity="embedding", tau=0.5)
    reqs, out = run(s2mad, cfg, lambda r, a: "2", similarity=similarity)
    # intra round 1, before the summaries, after the summaries (agents + 2 summaries)
    assert [len(t) for t in calls] == [4, 4, 6] and calls[2][4:] == ["summary s0 g0", "summary s0 g1"]
    assert out.stopped_early and out.rounds_run == 2


def _s2_expected(groups, m, t, r, q, c, ell, ans, sum_ans):
    """eqs. 1-4 + Alg. 2 line 7 with every output of size c and every summary of size ell, the
    D_i computed here from the answers (unique differing views, the filter's reading)."""

    def uniq_diff(own, others):
        seen, n = set(), 0
        for o in others:
            if o is None or o != own:
                if o is None or o not in seen:
                    n += 1
                if o is not None:
                    seen.add(o)
        return n

    cur = list(ans[0])
    total = gd_first_round_tokens(q, [c] * m)
    stage, eff = 0, []
    for p in stage_plan(t, r)[1:]:
        if p.kind == "intra":
            d = [uniq_diff(cur[i], [cur[k] for k in groups.mates(i)]) for i in range(m)]
            total += s2_intra_round_tokens(groups.members, q, [c] * m, [c] * m, d)
        else:
            sums = eff[stage - 1]
            visible = list(dict.fromkeys(x for x in sums if x is not None)) + [None] * sums.count(None)  # F(Sum)
            d = [uniq_diff(cur[i], visible) for i in range(m)]
            total += s2_inter_round_tokens(q, [c] * m, [c] * m, [ell] * len(sums), d)
        cur = [ans[p.round][i] if s2_participation(d[i]) else cur[i] for i in range(m)]
        if p.summarize_after:
            read = [list(dict.fromkeys(cur[a] for a in g)) for g in groups.members]
            # a summary has an answer only when the replies it read agree (else None)
            eff.append([sum_ans[stage][j] if len(read[j]) == 1 else None for j in range(len(read))])
            total += s2_summary_tokens([list(range(len(x))) for x in read], [c] * m, [ell] * len(read))
            stage += 1
    return total


def test_s2_calls_cost_what_eqs_1_to_4_say():
    m, t, r, q, c, ell = 6, 5, 2, 50, 20, 8
    cfg = s2cfg(agents=m, rounds=t, groups="3+3", seed=4)
    groups = make_groups("3+3", m, seed=4)
    ans = [
        ["1", "2", "2", "3", "1", "1"],
        ["1", "1", "2", "3", "3", "1"],
        ["2", "2", "2", "2", "1", "1"],
        ["2", "1", "2", "2", "3", "3"],
        ["1", "1", "1", "1", "1", "2"],
    ]
    sum_ans = [["1", "2"], ["2", "3"]]
    reqs, out = run(s2mad, cfg, lambda rnd, a: ans[rnd][a], summary_answer=lambda s, j: sum_ans[s][j])
    assert not out.stopped_early and out.rounds_run == t
    cost, silent = 0, 0
    for step in reqs:
        for call in step.calls:
            if isinstance(call, SummaryCall):
                cost += c * len(call.texts) + ell
            elif call.stage == "first":
                cost += q + c
            else:
                shown = len(call.peer_texts) * c + call.values.get("summaries", "").count("One group response") * ell
                cost += q + c + shown + c
    expected = _s2_expected(groups, m, t, r, q, c, ell, ans, sum_ans)
    assert cost == expected
    steps = [s for s in reqs if isinstance(s.calls[0], AgentCall)]
    silent = sum(m - len(s.calls) for s in steps) + m * (t - len(steps))
    assert out.skipped_turns == silent > 0
    # the run did exercise skipping, de-duplication and both round kinds
    assert any(len(s.calls) < m for s in steps) and len([s for s in reqs if isinstance(s.calls[0], SummaryCall)]) == 2


def test_s2_memory_and_prompts_render():
    reqs, _ = run(s2mad, s2cfg(rounds=3), lambda r, a: str(a), summary_answer=lambda s, j: str(j))
    assert all(call.memory == "last" for s in reqs for call in s.calls if isinstance(call, AgentCall))
    p = PromptSet.for_task("numeric")
    inter = p.render("s2_inter", question="Q?", peers="", summaries="\nOne group response: ```S1```\n")
    assert inter.startswith("These are the recent unique opinions from all groups:") and "S1" in inter
    assert "\\boxed{answer}" in inter
    gd = p.render("gd_inter", question="Q?", peers="", own_summary="MINE", other_summaries="THEIRS")
    assert "Your group response: ```MINE```" in gd and "Other group responses: THEIRS" in gd
    summary = p.render("gd_summary", question="Q?", peers=p.peers_block([(0, "x")]))
    assert "no more than 80 words" in summary and "\\boxed" not in summary
    assert "differ with yours" in p.render("s2_intra", question="Q?", peers="x")


def test_s2_summary_pool_is_deduplicated_before_agents_read_it():
    cfg = s2cfg(agents=6, groups="2+2+2", rounds=3)
    groups = make_groups("2+2+2", 6, seed=0)
    reqs, out = run(s2mad, cfg, lambda r, a: "1", summary_answer=lambda s, j: ["1", "3", "3"][j])
    assert not out.stopped_early  # two different views remain in F(Sum)
    inter = reqs[-1]
    assert inter.round == 2 and len(inter.calls) == 6
    for call in inter.calls:  # "3" twice in the pool -> read once (group 1's); "1" is the agent's own
        assert call.values["summaries"].count("One group response") == 1
        assert "summary s0 g1" in call.values["summaries"]
        # group 1's summary read one of its two identical replies: its lowest-id member's
        assert call.peers == [a for a in groups.members[1][:1] if a != call.agent]
    reqs, _ = run(
        s2mad,
        s2cfg(agents=6, groups="2+2+2", rounds=3, filter=False),
        lambda r, a: "1",
        summary_answer=lambda s, j: ["1", "3", "3"][j],
    )
    assert all(
        call.stage == "gd_inter" and call.values["other_summaries"].count("One group response") == 2
        for call in reqs[-1].calls
    )


def test_validate_hook_rejects_bad_groups_before_a_run():
    from engine.protocols import validate_protocol

    for proto in ("group", "s2mad"):
        validate_protocol(RunConfig.flat(protocol=proto, agents=6, groups="3+3"))
        with pytest.raises(TopologyError, match=r"--groups '3\+4' with --agents 6"):
            validate_protocol(RunConfig.flat(protocol=proto, agents=6, groups="3+4"))


def test_s2_summary_listing_divergent_answers_does_not_stop_the_debate():
    """Group B's agents disagree (18 vs 20); its summary lists both, "(18) (20)", and an extractor
    reads its last number, 20 -- the same as group A's. That must not count as agreement."""
    groups = make_groups("2+2", 4, seed=0)
    (a, b), (c, d) = groups.members
    first = {a: "20", b: "20", c: "18", d: "20"}
    cfg = s2cfg(rounds=4, stage_rounds=1)
    _, out = run(
        s2mad, cfg, lambda r, x: first[x] if r == 0 else ("20" if x != c else "18"), summary_answer=lambda s, j: "20"
    )
    assert not out.stopped_early and out.rounds_run == 4
    assert out.info["summary_answers"][0] == [("20" if g == groups.group_of(a) else None) for g in range(2)]
    # when both groups' replies agree, their summaries do stop it (Alg. 1 lines 46-47)
    _, agreed = run(s2mad, cfg, lambda r, x: "20", summary_answer=lambda s, j: "20")
    assert agreed.stopped_early


def test_tau_left_at_the_papers_value_with_another_embedder_warns_once():
    """S2-MAD's tau was calibrated on bert-base-uncased vectors: one warning line when it is left
    at 0.4 with the default MiniLM embedder; none with BERT-base, another tau, or answer matching."""
    import logging

    from engine.config import RunConfig
    from engine.protocols import s2mad as s2

    s2._TAU_WARNED.clear()
    cfg = RunConfig.flat(protocol="s2mad", agents=4, similarity="embedding")
    assert "--tau 0.4" in s2.tau_warning(cfg) and "all-minilm-l6-v2" in s2.tau_warning(cfg)
    assert s2.tau_warning(RunConfig.flat(protocol="s2mad", similarity="embedding", tau=0.1)) is None
    assert (
        s2.tau_warning(RunConfig.flat(protocol="s2mad", similarity="embedding", embedding_model="bert-base-uncased"))
        is None
    )
    assert s2.tau_warning(RunConfig.flat(protocol="s2mad")) is None  # answer matching reads no tau
    seen: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    s2.log.addHandler(handler)  # the CLI may have stopped propagation to the root logger
    try:
        s2.validate(cfg)
        s2.validate(cfg)  # a sweep validates every cell: still one line
    finally:
        s2.log.removeHandler(handler)
    assert seen == [s2.tau_warning(cfg)]


def test_intra_group_sparse_communication_reads_the_next_mates():
    from engine.protocols.s2mad import intra_mates
    from topologies.groups import make_groups

    g = make_groups("1+5", 6, shuffle=False)  # [0], [1..5]
    assert intra_mates(g, 0, 0.5) == []
    assert intra_mates(g, 1, 1.0) == [2, 3, 4, 5]
    assert intra_mates(g, 1, 0.5) == [2, 3] and intra_mates(g, 5, 0.5) == [1, 2]  # cyclic, shown in id order
    assert intra_mates(g, 3, 0.1) == [4]  # at least one mate


def test_tau_left_at_the_math_value_on_gsm8k_names_the_papers_gsm8k_value():
    """With bert-base vectors the default 0.4 is the paper's MATH threshold; on GSM8K-like questions
    (--task numeric or a GSM8K file) the warning names the paper's ~0.1 instead of staying silent."""
    from engine.config import RunConfig
    from engine.protocols import s2mad as s2

    bert = dict(protocol="s2mad", similarity="embedding", embedding_model="bert-base-uncased")
    for gsm8k in (dict(task="numeric"), dict(dataset="../shared/data/gsm8k_test.jsonl")):
        warning = s2.tau_warning(RunConfig.flat(**bert, **gsm8k))
        assert warning is not None and "on GSM8K it used ~0.1" in warning and "--tau 0.1" in warning
    assert s2.tau_warning(RunConfig.flat(**bert, task="math")) is None  # 0.4 is the paper's MATH value
    assert s2.tau_warning(RunConfig.flat(**bert, task="numeric", tau=0.1)) is None
