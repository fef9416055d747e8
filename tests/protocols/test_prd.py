"""Peer Review Debate (engine/protocols/prd.py): the prompts (CortexDebate's Figure 9), the protocol
driven with fake replies (who reviews whom, what each call shows, the vote), and a run through the
real agent code on the simulated model (records, transcripts, memory of each call)."""

import pytest

from engine.config import ConfigError, RunConfig
from engine.prompts import PromptSet
from engine.protocols import Context, Reply, get_protocol
from engine.protocols.base import judge_every_other
from engine.protocols.prd import feedback_block
from engine.tasks import Question
from tests.support.protocol_driver import drive_steps

Q = Question(qid="q1", task="numeric", text="What is 2+3?", gold="5")


def test_figure9_prompts():
    p = PromptSet.for_task("numeric")
    review = p.render("prd_review", solution="I think it is 6")
    assert review.startswith("Here is a solution from another agent:\nI think it is 6\n")
    assert "examine this agent's reasoning process step by step and offer feedback" in review
    assert "confidence in your feedback on a scale from 1-10" in review
    revise = p.render(
        "prd_revise",
        question="What is 2+3?",
        peers=p.peers_block([(1, "sol one")]),
        feedbacks=feedback_block(["fb a", "fb b"]),
    )
    assert "One agent solution: ```sol one```" in revise
    assert (
        "Here are the feedbacks for your solution from other agents:\n\nOne agent feedback: ```fb a```\n\n"
        "One agent feedback: ```fb b```\n" in revise
    )
    assert "Using other agents' solutions and feedbacks as additional information" in revise
    assert "The original problem is: What is 2+3?" in revise and revise.endswith("at the end of your response.")
    assert revise.index("sol one") < revise.index("fb a")  # solutions, then the feedback on one's own
    assert "(X)" in PromptSet.for_task("choice").render("prd_revise", question="Q", peers="", feedbacks="")


def play(cfg, answers, review_text=lambda i, j, r: f"review {i}->{j} r{r} Confidence: {i + j}/10", fail=()):
    """Drive prd: the turn of agent i in round r answers answers[r][i] with text "a{i}r{r}"; the
    review by i of j says review_text(i, j, r); reviews listed in ``fail`` ((i, j, r)) fail."""

    def reply(step, c):
        if c.side:
            i, j = c.agent, c.peers[0]
            return (
                Reply("", None, error="boom")
                if (i, j, step.round) in fail
                else Reply(review_text(i, j, step.round), None)
            )
        return Reply(f"a{c.agent}r{step.round}", answers[step.round][c.agent])

    return drive_steps(get_protocol("prd")(Context(Q, cfg, 1)), reply)


def test_create_review_revise_rounds_and_vote():
    cfg = RunConfig.flat(protocol="prd", agents=3, rounds=3)
    answers = [["5", "4", "6"], ["5", "4", "4"], ["5", "5", "4"]]
    steps, out = play(cfg, answers)
    # round 0: create; each later round: a review step of n(n-1) side calls, then a revise step of n calls
    assert [(s.round, len(s.calls)) for s in steps] == [(0, 3), (1, 6), (1, 3), (2, 6), (2, 3)]
    assert [c.stage for c in steps[0].calls] == ["first"] * 3 and not any(c.side for c in steps[0].calls)
    reviews = steps[1].calls
    assert [(c.agent, c.peers) for c in reviews] == [(0, [1]), (0, [2]), (1, [0]), (1, [2]), (2, [0]), (2, [1])]
    assert all(c.side and c.stage == "prd_review" and c.memory == "full" for c in reviews)
    assert reviews[1].values == {"solution": "a2r0"} and reviews[1].peer_answers == ["6"]  # the reviewed solution
    assert reviews[1].peer_texts == []  # only the one solution, as $solution
    revise = steps[2].calls
    assert all(not c.side and c.stage == "prd_revise" and c.memory == "full" for c in revise)
    assert [c.peers for c in revise] == [[1, 2], [0, 2], [0, 1]]
    assert revise[1].peer_texts == [(0, "a0r0"), (2, "a2r0")] and revise[1].peer_answers == ["5", "6"]
    # agent 1 reads the reviews OF agent 1, by reviewers 0 and 2 in that order
    assert revise[1].values == {
        "feedbacks": feedback_block(["review 0->1 r1 Confidence: 1/10", "review 2->1 r1 Confidence: 3/10"])
    }
    # round 2 reviews the revised solutions
    assert steps[3].calls[0].values == {"solution": "a1r1"} and steps[3].calls[0].peer_answers == ["4"]
    assert steps[4].calls[2].peer_texts == [(0, "a0r1"), (1, "a1r1")]
    assert out.answers_by_round == answers and out.final_answer == "5" and not out.stopped_early  # last round's vote
    conf = out.info["review_confidence"]
    assert conf[0] == [[None, 1.0, 2.0], [1.0, None, 3.0], [2.0, 3.0, None]] and len(conf) == 2  # [reviewer][reviewed]
    assert out.info["unparsed_review_confidence"] == []


def test_unreadable_or_failed_reviews():
    cfg = RunConfig.flat(protocol="prd", agents=3, rounds=2)
    steps, out = play(
        cfg,
        [["5", "4", "6"], ["5", "5", "5"]],
        review_text=lambda i, j, r: "looks fine" if i == 2 else "Confidence: 9",
        fail={(0, 1, 1)},
    )
    # the failed review of agent 1 by agent 0 is left out of what agent 1 reads
    assert steps[2].calls[1].values == {"feedbacks": feedback_block(["looks fine"])}
    assert steps[2].calls[0].values == {"feedbacks": feedback_block(["Confidence: 9", "looks fine"])}
    assert out.info["review_confidence"][0] == [[None, None, 9.0], [9.0, None, 9.0], [None, None, None]]
    assert out.info["unparsed_review_confidence"] == [[1, 0, 1], [1, 2, 0], [1, 2, 1]]
    assert out.final_answer == "5"


def test_one_round_is_create_only_and_one_agent_is_refused():
    steps, out = play(RunConfig.flat(protocol="prd", agents=4, rounds=1), [["5", "4", "4", None]])
    assert len(steps) == 1 and out.final_answer == "4" and out.info["review_confidence"] == []
    assert [(c.agent, c.peers, c.values) for c in judge_every_other("s", ["t0", "t1"], ["0", "1"])] == [
        (0, [1], {"solution": "t1"}),
        (1, [0], {"solution": "t0"}),
    ]
    with pytest.raises(ConfigError, match="--protocol prd needs --agents >= 2"):
        RunConfig.flat(protocol="prd", agents=1).validate()


def test_a_run_records_who_reviewed_whom_and_keeps_reviews_out_of_transcripts():
    """Through the real agent code and the simulated model: the calls table says who reviewed
    whom; a reviewer's prompt is its own transcript (question, its solution, its revisions) plus
    the review request; a reviser's prompt is its transcript plus the revise request; reviews
    never enter a transcript; reviews are not invalid answers."""
    from actors.local_run import run_local
    from backends.simulated_backend import SimulatedBackend
    from engine.tasks import arithmetic_questions

    n, rounds = 3, 3
    cfg = RunConfig.flat(protocol="prd", agents=n, rounds=rounds, backend="simulated").validate()
    [(row, log)] = run_local(cfg, arithmetic_questions(1, seed=2), SimulatedBackend(reply_tokens=15))
    assert row["n_calls"] == n + (rounds - 1) * n * n and row["n_invalid"] == 0 and row["rounds_run"] == rounds
    side = [r for r in log.records if r.side]
    assert [(r.round, r.agent_id, r.peers) for r in side] == [
        (t, i, [j]) for t in (1, 2) for i in range(n) for j in range(n) if i != j
    ]
    assert all(r.kind == "prd_review" and r.answer is None for r in side)
    assert {r.kind for r in log.records if not r.side} == {"first", "prd_revise"}
    assert all(len(h) == 2 * rounds for h in log.histories.values())  # first + 2 revisions, no review
    assert all("Here is a solution from another agent" not in m["content"] for h in log.histories.values() for m in h)
    # feedback reaches the reviewed agent: agent 0's round-2 revise prompt quotes the round-2 reviews of agent 0
    revise = log.histories[0][4]["content"]
    for r in side:
        if r.round == 2 and r.peers == [0]:
            assert r.text in revise
    seeds = [r.seed for r in log.records]
    assert len(set(seeds)) == len(seeds)  # every call, reviews included, has its own seed


def test_the_reviewer_sees_its_own_solution():
    """Its prompt is its transcript (the question and its own solution), then the review request."""
    from actors.agent_actor import AgentCore
    from engine.debate import DebateLog
    from engine.protocols import AgentCall
    from engine.records import CallRecord, TurnResult

    cfg = RunConfig.flat(protocol="prd", agents=2, rounds=2)
    log = DebateLog(Q)
    core = AgentCore(0, cfg.agent_specs()[0], PromptSet.for_task("numeric"), False)

    turn = log.turn(0, AgentCall(agent=0, stage="first"), 1)
    _, user = core.request(turn)
    log.add(
        0,
        AgentCall(agent=0, stage="first"),
        TurnResult(
            CallRecord("q1", 0, 0, "first", "m", [], "my answer is \\boxed{5}", "5", 1, 1, 0.0, "stop", None, 0, 0.7),
            user,
        ),
    )
    steps, _ = play(cfg, [["5", "4"], ["5", "5"]])
    review = steps[1].calls[0]
    req, _ = core.request(log.turn(1, review, 1))
    assert [m["role"] for m in req.messages] == ["user", "assistant", "user"]
    assert req.messages[1]["content"] == "my answer is \\boxed{5}" and "What is 2+3?" in req.messages[0]["content"]
    assert req.messages[2]["content"].startswith("Here is a solution from another agent:\na1r0")
