from actors.agent_actor import AgentCore
from backends.simulated_backend import SimulatedBackend, count_tokens, reply_tag
from engine.config import RunConfig
from engine.extract import extract_answer
from engine.prompts import PromptSet
from engine.protocols import AgentCall
from engine.records import GenRequest, Turn
from engine.tasks import Question


def req(seed, **meta):
    return GenRequest(
        messages=[{"role": "user", "content": "a b c"}], seed=seed, meta={"gold": "42", "task": "numeric", **meta}
    )


def test_seeded_exact_lengths_and_token_counts():
    b = SimulatedBackend(reply_tokens=20)
    r1 = b.generate([req(i) for i in range(50)])
    r2 = b.generate([req(i) for i in range(50)])
    assert [r.text for r in r1] == [r.text for r in r2]
    assert all(r.completion_tokens == 20 == len(r.text.split()) for r in r1)
    assert all(r.prompt_tokens == count_tokens([{"role": "user", "content": "a b c"}]) == 3 + 4 + 3 for r in r1)


def test_replies_start_with_the_calls_tag():
    """Each reply begins with a word drawn from its call's seed, so two calls' replies part at
    their first token as sampled ones do (a prefix cache shares no more of a prompt quoting
    them); a reply is still exactly reply_tokens words, its answer read as before, and judging
    and unreadable replies start so too."""
    b = SimulatedBackend(reply_tokens=12, invalid=0.5)
    out = b.generate([req(i) for i in range(40)] + [req(i, judging=True, peer_answers=["42"]) for i in range(40, 50)])
    assert [r.text.split()[0] for r in out] == [reply_tag(i) for i in range(50)]
    assert len({r.text.split()[0] for r in out}) == 50 and all(len(r.text.split()) == 12 for r in out)
    readable = [r.text for r in out[:40] if "cannot" not in r.text]
    assert readable and all(extract_answer(t, "numeric") is not None for t in readable)
    assert all(extract_answer(r.text, "numeric") is None for r in out[:40] if "cannot" in r.text)


def test_accuracy_and_invalid_rates():
    b = SimulatedBackend(accuracy=0.7, invalid=0.1, follow=0.0)
    answers = [extract_answer(r.text, "numeric") for r in b.generate([req(i) for i in range(2000)])]
    assert 0.07 < answers.count(None) / 2000 < 0.13
    assert 0.58 < answers.count("42") / 2000 < 0.68  # 0.9 * 0.7 = 0.63


def test_follow_adopts_peer_majority_and_max_tokens_cuts():
    b = SimulatedBackend(accuracy=0.0, follow=1.0)
    out = b.generate([req(i, peer_answers=["7", "7", "9"], own_answer="9") for i in range(20)])
    assert all(extract_answer(r.text, "numeric") in ("7", "9") for r in out)
    short = b.generate([GenRequest(messages=[{"role": "user", "content": "x"}], max_tokens=5, meta={"gold": "1"})])[0]
    assert short.completion_tokens == 5 and short.finish_reason == "length"


def test_only_simulated_agents_see_the_gold():
    q = Question(qid="q", task="numeric", text="What?", gold="42")
    spec = RunConfig().agent_specs()[0]
    prompts = PromptSet.for_task("numeric")
    real = AgentCore(0, spec, prompts, simulated=False)
    r, _ = real.request(Turn(q, AgentCall(0, "first"), 0, key=1))
    assert r.meta == {} and "42" not in str(r.messages)
    sim = AgentCore(0, spec, prompts, simulated=True)
    r, _ = sim.request(Turn(q, AgentCall(0, "first"), 0, key=1))
    assert r.meta["gold"] == "42"


def test_the_debate_log_keeps_each_agents_transcript_and_the_agent_none():
    """Agents are stateless: the transcript grows in the question's DebateLog, from the turns'
    results, and each turn carries it; the same turn gives the same request whatever happened
    to the agent in between."""
    from engine.debate import DebateLog

    q = Question(qid="q", task="numeric", text="What?", gold="42")
    core = AgentCore(0, RunConfig().agent_specs()[0], PromptSet.for_task("numeric"), True)
    log = DebateLog(q)
    b = SimulatedBackend()
    for rnd, kind, peers in [(0, "first", []), (1, "debate", [(1, "peer says \\boxed{41}", "41")])]:
        call = AgentCall(
            0,
            kind,
            peers=[p[0] for p in peers],
            peer_texts=[(p[0], p[1]) for p in peers],
            peer_answers=[p[2] for p in peers],
        )
        turn = log.turn(rnd, call, key=3)
        request, user = core.request(turn)
        again, _ = AgentCore(0, RunConfig().agent_specs()[0], PromptSet.for_task("numeric"), True).request(turn)
        assert again == request  # a fresh (restarted) agent builds the same request from the turn
        result = core.record(turn, request, b.generate([request])[0], user)
        log.add(rnd, call, result)
        rec = result.record
        assert rec.round == rnd and rec.answer == extract_answer(rec.text, "numeric")
    assert len(log.histories[0]) == 4 and "peer says" in log.histories[0][2]["content"]
    assert log.answers[0] == rec.answer and not hasattr(core, "memory")
    assert log.turn(2, AgentCall(0, "debate"), key=3).history == log.histories[0]


def test_a_reply_cut_at_the_token_limit_has_no_answer_unless_marked():
    from engine.records import GenResult

    q = Question(qid="q", task="numeric", text="What?", gold="42")
    core = AgentCore(0, RunConfig().agent_specs()[0], PromptSet.for_task("numeric"), False)
    turn = Turn(q, AgentCall(0, "first"), 0, key=3)
    request, user = core.request(turn)
    cut = GenResult("First 40 + 2 = 42, and then 42 * 3", 10, 16, 0.1, "length")
    done = GenResult("First 40 + 2 = 42, and then 42 * 3", 10, 16, 0.1, "stop")
    assert core.record(turn, request, cut, user).record.answer is None
    assert core.record(turn, request, done, user).record.answer == "42"  # "42 * 3" is left unevaluated
    marked = GenResult("The answer is 42. Let me check 42 * 3", 10, 16, 0.1, "length")
    assert core.record(turn, request, marked, user).record.answer == "42"


def test_a_judging_call_states_a_score_higher_when_the_judged_answer_is_right():
    """A side call (meta "judging") gets "Score: s/10 Confidence: s/10" at the exact length;
    s is 6..10 when the judged answer is the gold, 1..7 otherwise (mean 8 vs 4)."""
    from engine.confidence import CONFIDENCE_KEYWORD, parse_score

    b = SimulatedBackend(reply_tokens=12)
    right = b.generate([req(i, judging=True, peer_answers=["42"]) for i in range(400)])
    wrong = b.generate([req(i, judging=True, peer_answers=["41"]) for i in range(400)])
    rs, ws = [parse_score(r.text) for r in right], [parse_score(r.text) for r in wrong]
    assert set(rs) == {6, 7, 8, 9, 10} and set(ws) == {1, 2, 3, 4, 5, 6, 7}
    assert 7.7 < sum(rs) / 400 < 8.3 and 3.7 < sum(ws) / 400 < 4.3
    assert [parse_score(r.text, CONFIDENCE_KEYWORD) for r in right] == rs  # the stated confidence is the score
    assert all(r.completion_tokens == 12 == len(r.text.split()) for r in right + wrong)
    invalid = SimulatedBackend(invalid=1.0).generate([req(0, judging=True, peer_answers=["42"])])[0]
    assert parse_score(invalid.text) is None
