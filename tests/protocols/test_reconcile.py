"""RECONCILE (engine/protocols/reconcile.py): the recalibration f(p), the confidence-weighted vote
(hand-computed, where it and the majority differ), the discussion prompts (grouping, order,
confidences, who reads whom), the consensus stop, failed calls and unreadable confidences, the
rescore of its vote, and its token cost against the simulated backend."""

from __future__ import annotations

import json

import pytest

from actors.local_run import run_local
from backends.simulated_backend import SimulatedBackend, count_tokens
from engine import cost_predict
from engine.config import ConfigError, RunConfig
from engine.extract import majority_vote, weighted_counts, weighted_tied_answers, weighted_vote
from engine.prompts import PromptSet
from engine.protocols import Context, Reply, get_protocol
from engine.protocols.reconcile import (
    RECONCILE_VOTE,
    ReconcileShown,
    Sample,
    group_replies,
    load_samples,
    recalibrate,
    reconcile_cost,
    reconcile_shown_from_records,
    samples_block,
    solutions_block,
)
from engine.records import GenResult
from engine.tasks import Question, arithmetic_questions
from tests.support.protocol_driver import drive_steps

Q = Question(qid="q1", task="numeric", text="What is 2+3?", gold="5")


# --------------------------------------------------------------------------- f(p) and the vote


def test_recalibration_bands_are_reconciles_not_cortexdebates():
    raw = [1.0, 0.99, 0.9, 0.89, 0.8, 0.79, 0.61, 0.6, 0.45, 0.0, None]
    assert [recalibrate(p) for p in raw] == [1.0, 0.8, 0.8, 0.5, 0.5, 0.3, 0.3, 0.1, 0.1, 0.1, 0.1]
    from topologies.cortex import recalibrate as cortex_eq2

    assert (recalibrate(0.7), cortex_eq2(0.7)) == (0.3, 0.6)  # CortexDebate's eq. 2 is another function
    assert (recalibrate(0.45), cortex_eq2(0.45)) == (0.1, 0.45)


def test_weighted_vote_hand_computed_differs_from_majority():
    # two agents say 4 with confidence 0.7 and 0.65 (f = 0.3 each), one says 5 with confidence 1 (f = 1.0)
    answers = ["4", "5", "4"]
    weights = [recalibrate(p) for p in (0.7, 1.0, 0.65)]
    assert weights == [0.3, 1.0, 0.3]
    assert weighted_counts(answers, weights) == {"4": pytest.approx(0.6), "5": 1.0}
    assert weighted_vote(answers, weights) == "5" and majority_vote(answers) == "4"
    # invalid answers do not vote, whatever their weight
    assert weighted_vote([None, "4", ""], [1.0, 0.1, 1.0]) == "4"
    assert weighted_vote([None, None], [1.0, 1.0]) is None
    with pytest.raises(ValueError):
        weighted_counts(["4"], [1.0, 2.0])


def test_weighted_vote_ties_follow_the_majority_rule():
    # 0.1 + 0.1 + 0.1 and 0.3 are a tie (the float sums differ by an ulp)
    answers, weights = ["7", "3", "3", "3"], [0.3, 0.1, 0.1, 0.1]
    assert weighted_tied_answers(answers, weights) == ["7", "3"]  # first-seen order
    assert weighted_vote(answers, weights) == "7"  # no key: the first seen (--tie-break first)
    for key in range(20):  # with a key: the same seeded draw as majority_vote over the same tied answers
        assert weighted_vote(answers, weights, key) == majority_vote(["7", "3"], key)
    assert {weighted_vote(answers, weights, k) for k in range(20)} == {"3", "7"}
    # equal weights: the weighted vote is the majority vote
    import random

    rng = random.Random(0)
    for _ in range(200):
        ans = [rng.choice(["1", "2", "3", None]) for _ in range(rng.randint(1, 6))]
        assert weighted_vote(ans, [0.5] * len(ans), 9) == majority_vote(ans, 9)


# --------------------------------------------------------------------------- the protocol, step by step


def play(cfg, script, key=1):
    """Drive the protocol: in round r agent i replies script[r][i] = (answer, confidence text) or
    "ERR" (a failed call). Returns (steps, outcome)."""

    def reply(step, c):
        item = script[step.round][c.agent]
        if item == "ERR":
            return Reply("", None, error="replica unavailable")
        ans, conf = item
        return Reply(f"r{step.round}a{c.agent} says {ans}. {conf}", ans)

    return drive_steps(get_protocol("reconcile")(Context(Q, cfg.validate(), key)), reply)


def cfg(**kw):
    return RunConfig.flat(protocol="reconcile", **{"agents": 4, "rounds": 3, "tie_break": "first", **kw})


def test_initial_round_then_grouped_solutions_for_everyone():
    script = [
        [("4", "Confidence: 0.7"), ("5", "Confidence: 0.95"), ("4", "no idea"), ("6", "Confidence: 80%")],
        [("5", "Confidence: 1.0")] * 3 + [("4", "Confidence: 0.9")],
        [("5", "Confidence: 1.0")] * 4,
    ]
    steps, out = play(cfg(), script)
    assert [s.round for s in steps] == [0, 1, 2]
    first = steps[0].calls
    assert [c.stage for c in first] == ["reconcile_first"] * 4
    assert all(c.memory == "none" and not c.peers for c in first)
    r1 = steps[1].calls
    assert [c.stage for c in r1] == ["reconcile_debate"] * 4 and all(c.memory == "none" for c in r1)
    # everyone reads the same grouped solutions, its own reply included (the authors' code)
    block = r1[0].values["groups"]
    assert all(c.values == {"groups": block, "samples": ""} for c in r1)  # no samples without the file
    assert all(c.values == {"samples": ""} for c in first) and "samples" not in out.info
    assert [c.peers for c in r1] == [[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]]  # edges: no self-loops
    assert r1[2].peer_answers == ["4", "5", "6"]
    # groups: largest first ("4": agents 0, 2), then the singletons in first-seen order (5, then 6)
    lines = block.strip().splitlines()
    assert lines == [
        "There are 2 agents think the answer is 4.",
        "One agent solution: ```r0a0 says 4. Confidence: 0.7```",
        "Its answer: 4. Its confidence: 0.7.",
        "One agent solution: ```r0a2 says 4. no idea```",
        "Its answer: 4. Its confidence: unknown.",
        "",
        "There are 1 agents think the answer is 5.",
        "One agent solution: ```r0a1 says 5. Confidence: 0.95```",
        "Its answer: 5. Its confidence: 0.95.",
        "",
        "There are 1 agents think the answer is 6.",
        "One agent solution: ```r0a3 says 6. Confidence: 80%```",
        "Its answer: 6. Its confidence: 0.8.",
    ]
    # round 2 is rebuilt from round 1 only: 3 agents think 5, then 1 thinks 4
    lines = steps[2].calls[0].values["groups"].strip().splitlines()
    assert lines[0] == "There are 3 agents think the answer is 5." and "r1a0" in lines[1]
    assert lines[8] == "There are 1 agents think the answer is 4." and "r1a3" in lines[9]
    assert not any("r0a" in line for line in lines)
    # the outcome: all rounds (consensus only after the last), per-round confidences and tallies
    assert out.rounds_run == 3 and not out.stopped_early and out.final_answer == "5"
    info = out.info
    assert info["confidence_raw"][0] == [0.7, 0.95, None, 0.8]
    assert info["confidence"][0] == [0.3, 0.8, 0.1, 0.5]
    assert info["unparsed_confidence"] == [[0, 2]]
    assert info["tally"][0] == {"4": pytest.approx(0.4), "5": 0.8, "6": 0.5}
    assert info["weighted_answer"][0] == "5" and info["majority_answer"][0] == "4"
    assert out.votes_by_round == ["5", "5", "5"]  # the weighted vote after every round
    assert info["groups"][0] == [
        {"answer": "4", "agents": [0, 2]},
        {"answer": "5", "agents": [1]},
        {"answer": "6", "agents": [3]},
    ]


def test_rendered_discussion_prompt_follows_figure_7():
    import engine.protocols.reconcile  # noqa: F401  registers the reconcile_* stages

    p = PromptSet.for_task("choice")
    first = p.render("reconcile_first", question="Which is red? (A) sky (B) blood", samples="")
    assert "Q: Which is red?" in first and "step-by-step reasoning" in first and "(X)" in first
    assert "confidence level (between 0.0 and 1.0)" in first
    groups = group_replies(["B", "A", "B"], [0, 1, 2])
    block = solutions_block(groups, ["t0", "t1", "t2"], ["B", "A", "B"], [0.9, 0.6, None])
    deb = p.render("reconcile_debate", question="Which is red? (A) sky (B) blood", groups=block, samples="")
    # {initial_prompt}, the review instruction, then the groups, then the answer format again
    assert deb.startswith(first)
    review = deb.index("Carefully review the following solutions from other agents")
    assert review < deb.index("Clearly state which point of view you agree or disagree with and why.")
    assert (
        review
        < deb.index("There are 2 agents think the answer is B.")
        < deb.index("There are 1 agents think the answer is A.")
        < deb.rindex("(X)")
    )
    assert deb.count("One agent solution:") == 3 and "Its confidence: 0.9." in deb


def test_grouping_order_unreadable_last_and_failed_calls_not_shown():
    answers = ["1", None, "9", "9", "3", None, "9", "3"]
    groups = group_replies(answers, [0, 1, 2, 3, 4, 5, 7])  # agent 6 failed: its "9" is not shown
    # largest first (not first seen: "1" comes first in agent order); equal sizes in first-seen order
    assert [(g.answer, g.agents) for g in groups] == [("9", (2, 3)), ("3", (4, 7)), ("1", (0,)), (None, (1, 5))]
    block = solutions_block(groups, [f"t{i}" for i in range(8)], answers, [None] * 8)
    assert (
        block.index("answer is 9.")
        < block.index("answer is 3.")
        < block.index("answer is 1.")
        < block.index("There are 2 agents whose answer could not be read.")
    )
    assert "There are 2 agents think the answer is 9." in block
    assert "t6" not in block and "Its answer: unknown." in block


def test_consensus_after_round_zero_ends_the_debate_unless_disabled():
    agree = [[("5", "Confidence: 0.9")] * 3] * 4
    steps, out = play(cfg(agents=3, rounds=4), agree)
    assert len(steps) == 1 and out.rounds_run == 1 and out.stopped_early and out.final_answer == "5"
    steps, out = play(cfg(agents=3, rounds=4, early_stop=False), agree)
    assert [s.round for s in steps] == [0, 1, 2, 3] and not out.stopped_early
    assert out.info["groups"][0] == [{"answer": "5", "agents": [0, 1, 2]}]
    # a consensus reached in round 1 stops before round 2
    later = [[("5", "c"), ("4", "c"), ("5", "c")], [("5", "c")] * 3, [("9", "c")] * 3]
    steps, out = play(cfg(agents=3, rounds=3), later)
    assert len(steps) == 2 and out.stopped_early and out.answers_by_round[-1] == ["5", "5", "5"]
    # one round only: nothing to stop
    steps, out = play(cfg(agents=3, rounds=1), agree)
    assert len(steps) == 1 and not out.stopped_early
    # unreadable answers never agree
    steps, out = play(cfg(agents=3, rounds=3), [[(None, "Confidence: 1")] * 3] * 3)
    assert len(steps) == 3 and out.final_answer is None


def test_failed_call_is_not_shown_does_not_vote_and_blocks_consensus():
    script = [
        [("5", "Confidence: 0.9"), "ERR", ("5", "Confidence: 0.9")],
        [("4", "Confidence: 0.65"), ("4", "Confidence: 0.7"), "ERR"],
        [("4", "c")] * 3,
    ]
    steps, out = play(cfg(agents=3, rounds=3), script)
    assert len(steps) == 3  # a failed call is no agreement: the debate went on after round 0
    r1 = steps[1].calls
    assert [c.peers for c in r1] == [[2], [0, 2], [0]]  # agent 1's failed reply is shown to nobody
    assert "There are 2 agents think the answer is 5." in r1[1].values["groups"]
    assert r1[1].values["groups"].count("One agent solution:") == 2
    info = out.info
    assert info["failed"] == [[0, 1], [1, 2]]
    assert info["confidence_raw"][1] == [0.65, 0.7, None] and info["confidence"][1] == [0.3, 0.3, None]
    assert info["tally"][1] == {"4": pytest.approx(0.6)}
    assert out.answers_by_round[1] == ["4", "4", None]


def test_vote_option_and_unreadable_confidence_weight():
    # last round: 7, 7 with unreadable confidences (f = 0.1 each) against 8 at 0.85 (f = 0.5)
    script = [[("7", "no number"), ("7", "sure"), ("8", "Confidence: 0.85")]]
    _, out = play(cfg(agents=3, rounds=1), script)
    assert out.final_answer == "8" and out.info["tally"][0] == {"7": pytest.approx(0.2), "8": 0.5}
    assert out.info["unparsed_confidence"] == [[0, 0], [0, 1]]
    _, out = play(cfg(agents=3, rounds=1, reconcile_vote="majority"), script)
    assert out.final_answer == "7" and out.votes_by_round == ["7"] and out.info["vote"] == "majority"


def test_option_checked_and_label():
    from app.report import RunData, base_label

    assert RunConfig.flat(protocol="reconcile").option(RECONCILE_VOTE) == "weighted"
    with pytest.raises(ConfigError, match="--reconcile-vote 'mean' is not one of weighted, majority"):
        RunConfig.flat(protocol="reconcile", reconcile_vote="mean").validate()

    def label(**extra):
        config = {"protocol": "reconcile", "agents": 3, "rounds": 3, **extra}
        return base_label(RunData(run_dir=None, run_id="r", run={}, config=config, questions=[], calls=None))

    assert label() == "reconcile 3x3" and label(reconcile_vote="majority") == "reconcile 3x3 vote=majority"
    from engine.protocols import SPECS

    assert SPECS["reconcile"].label == "RECONCILE"
    assert {"reconcile_vote", "early_stop"} <= RunConfig.flat(protocol="reconcile").validate().options_read()


# --------------------------------------------------------------------------- convincing samples

SAMPLES = {
    "A": [{"question": "qa1", "explanation": "ea1", "answer": "1"}],
    "B": [
        {"question": "qb1", "explanation": "eb1", "answer": 2},
        {"question": "qb2", "explanation": "eb2", "answer": "3"},
    ],
    "C": [{"question": "qc1", "explanation": "ec1", "answer": "4"}],
}


def write(tmp_path, data, name="samples.yaml"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def test_each_agent_sees_the_other_models_samples_in_both_phases(tmp_path):
    config = cfg(agents=3, rounds=2, models="A*1,B*1,C*1", reconcile_samples=write(tmp_path, SAMPLES))
    script = [[("4", "Confidence: 0.7"), ("5", "Confidence: 0.9"), ("4", "Confidence: 0.8")]] * 2
    steps, out = play(config, script)
    a = "Q: qa1\nA: ea1 The answer is \\boxed{1}.\n"
    b = "Q: qb1\nA: eb1 The answer is \\boxed{2}.\nQ: qb2\nA: eb2 The answer is \\boxed{3}.\n"
    c = "Q: qc1\nA: ec1 The answer is \\boxed{4}.\n"
    want = [b + c, a + c, a + b]  # agent i runs the i-th model; the others' samples, in model order
    for step in steps:
        assert [call.values["samples"] for call in step.calls] == want
    assert out.info["samples"] == [3, 2, 3]
    import engine.protocols.reconcile  # noqa: F401  registers the reconcile_* stages

    p = PromptSet.for_task("numeric")
    first = p.render("reconcile_first", question="What is 2+3?", samples=want[0])
    assert first == want[0] + p.render("reconcile_first", question="What is 2+3?", samples="")
    assert first.startswith("Q: qb1\nA: eb1 The answer is \\boxed{2}.\nQ: qb2") and "\nCan you solve" in first
    assert p.render("reconcile_debate", question="x", groups="", samples=want[0]).startswith(want[0] + "Can you")
    # the run records the samples themselves, and the report label says they were used
    assert json.loads(config.to_json())["reconcile_samples"]["B"][0] == {
        "question": "qb1",
        "explanation": "eb1",
        "answer": "2",
    }


def test_choice_answers_one_model_and_the_star_entry(tmp_path):
    one = {"smollm2-135m-instruct": SAMPLES["A"], "*": SAMPLES["C"]}
    q = Question(qid="q2", task="choice", text="Red? (A) sky (B) blood", gold="B")
    steps = drive_steps(
        get_protocol("reconcile")(Context(q, cfg(agents=2, rounds=1, reconcile_samples=one).validate(), 1)),
        lambda step, c: Reply("B. Confidence: 1", "B"),
    )[0]
    # one model: no other model, so every agent is shown its own model's samples; choice answers as (X)
    assert [c.values["samples"] for c in steps[0].calls] == ["Q: qa1\nA: ea1 The answer is (1).\n"] * 2
    mixed = cfg(agents=3, rounds=1, models="A*1,Z*2", reconcile_samples={"A": SAMPLES["A"], "*": SAMPLES["C"]})
    steps = drive_steps(get_protocol("reconcile")(Context(Q, mixed.validate(), 1)), lambda s, c: Reply("5", "5"))[0]
    shown = [c.values["samples"] for c in steps[0].calls]
    assert shown == ["Q: qc1\nA: ec1 The answer is \\boxed{4}.\n"] + ["Q: qa1\nA: ea1 The answer is \\boxed{1}.\n"] * 2


@pytest.mark.parametrize(
    "data, message",
    [
        (None, r"samples\.yaml: no such file"),
        ("a: [1", r"samples\.yaml: not valid YAML or JSON"),
        ("[1, 2]", r"samples\.yaml: must map model names \(or '\*'\) to lists of samples"),
        ({"A": []}, r"samples\.yaml: 'A' must be a non-empty list of samples"),
        (
            {"A": [SAMPLES["A"][0], {"question": "q", "answer": "1"}]},
            r"samples\.yaml: 'A'\[1\]: needs exactly the keys question, explanation, answer "
            r"\(got \['answer', 'question'\]\)",
        ),
        ({"A": [{"question": "q", "explanation": " ", "answer": "1"}]}, r"'A'\[0\]\.explanation: must be a non-empty"),
        ({"A": [{"question": "q", "explanation": "e", "answer": None}]}, r"'A'\[0\]\.answer: must be a non-empty"),
        ({"B": SAMPLES["B"]}, r"samples\.yaml: no entry for model\(s\) 'A', 'C' of this run; add them or a '\*' entry"),
    ],
)
def test_bad_samples_file_is_one_line_naming_file_and_entry(tmp_path, data, message):
    from engine.errors import UserError

    path = str(tmp_path / "samples.yaml") if data is None else write(tmp_path, data)
    with pytest.raises(UserError, match=message) as err:
        cfg(agents=3, models="A*1,B*1,C*1", reconcile_samples=path).validate()
    assert "\n" not in str(err.value)


def test_run_id_hashes_the_samples_content_not_the_path(tmp_path):
    yaml_file = write(tmp_path, "A: [{question: qa1, explanation: ea1, answer: 1}]\n", "s.yaml")
    json_file = write(tmp_path, {"A": SAMPLES["A"]}, "s.json")
    other = write(tmp_path, {"A": SAMPLES["B"]}, "t.json")
    ids = {}
    for name, path in [("yaml", yaml_file), ("json", json_file), ("other", other)]:
        config = cfg(agents=2, model="A", backend="simulated", reconcile_samples=path)
        ids[name] = config.run_id()
        assert config.validate().run_id() == ids[name]  # the loaded samples hash as the file did
    assert ids["yaml"] == ids["json"] != ids["other"]
    assert cfg(agents=2, model="A", backend="simulated").run_id() not in ids.values()
    from app.report import RunData, base_label

    config = {"protocol": "reconcile", "agents": 3, "rounds": 3, "reconcile_samples": {"A": SAMPLES["A"]}}
    assert base_label(RunData(run_dir=None, run_id="r", run={}, config=config, questions=[], calls=None)) == (
        "reconcile 3x3 samples"
    )


def test_simulated_run_sends_the_samples(tmp_path):
    qs = arithmetic_questions(2, seed=1)
    runs = {}
    for samples in (None, {"*": SAMPLES["B"]}):
        config = cfg(agents=2, rounds=2, backend="simulated", early_stop=False, reconcile_samples=samples).validate()
        runs[samples is None] = [
            r for _, log in run_local(config, qs, SimulatedBackend(accuracy=1.0)) for r in log.records
        ]
    block = samples_block([Sample(**s) for s in load_samples({"*": SAMPLES["B"]})["*"]], "numeric")
    for plain, with_samples in zip(runs[True], runs[False]):
        assert with_samples.prompt_tokens - plain.prompt_tokens == count_tokens(
            [{"role": "user", "content": block}]
        ) - count_tokens([{"role": "user", "content": ""}])


def test_graded_columns_take_the_protocols_own_votes():
    from engine.debate import graded_columns

    by_round = [["4", "5", "4"], ["5", "5", "4"]]
    plain = graded_columns(by_round, "5", "5", "numeric", None, False)
    own = graded_columns(by_round, "5", "5", "numeric", None, False, votes_by_round=["5", "5"])
    assert plain["answer_by_round"] == ["4", "5"] and plain["correct_by_round"] == [False, True]
    assert own["answer_by_round"] == ["5", "5"] and own["correct_by_round"] == [True, True]
    with pytest.raises(ValueError, match="1 votes for 2 rounds"):
        graded_columns(by_round, "5", "5", "numeric", None, False, votes_by_round=["5"])


def test_the_tie_column_is_the_tie_of_the_vote_taken():
    """A 2-2 split that the confidences settle is no tie of the weighted vote; a majority winner that
    the weights tie with another answer is one. The question row's ``tie`` says which."""
    split = [[("4", "Confidence: 1.0"), ("4", "Confidence: 0.95"), ("5", "Confidence: 0.5"), ("5", "Confidence: 0.4")]]
    _, out = play(cfg(agents=4, rounds=1), split)
    assert out.final_answer == "4" and out.tie is False  # 1.0 + 0.8 against 0.1 + 0.1
    _, out = play(cfg(agents=4, rounds=1, reconcile_vote="majority"), split)
    assert out.tie is True  # two against two
    weighted_tie = [[("4", "Confidence: 0.85"), ("4", "Confidence: 0.8"), ("5", "Confidence: 1.0"), ("6", "nothing")]]
    _, out = play(cfg(agents=4, rounds=1), weighted_tie)  # 0.5 + 0.5 = 1.0 against 1.0 (and 0.1)
    assert out.tie is True and majority_vote(["4", "4", "5", "6"]) == "4"
    from engine.debate import DebateLog

    row = DebateLog(Q).question_row(out, 4)
    assert row["tie"] is True
    _, plain = play(cfg(agents=4, rounds=1, reconcile_vote="majority"), weighted_tie)
    assert DebateLog(Q).question_row(plain, 4)["tie"] is False


# --------------------------------------------------------------------------- whole runs on the simulated model


def test_simulated_run_grades_the_weighted_vote_by_round_and_rescore_rebuilds_it():
    from app.rescore import regrade_question

    config = cfg(agents=4, rounds=3, backend="simulated", tie_break="random").validate()
    rows = run_local(config, arithmetic_questions(12, seed=5), SimulatedBackend(accuracy=0.4, follow=0.3))
    differs = 0
    for row, log in rows:
        info = json.loads(row["protocol_info"])
        assert row["answer_by_round"] == info["weighted_answer"]
        differs += info["weighted_answer"][-1] != info["majority_answer"][-1]
        calls = [{**r.to_row(), "attempt": "a1"} for r in log.records]
        new, _ = regrade_question({**row, "attempt": "a1"}, calls, json.loads(config.to_json()))
        assert new["final_answer"] == row["final_answer"] and new["answer_by_round"] == row["answer_by_round"]
        assert new["tie"] == row["tie"]  # the weighted vote's tie, rebuilt from the texts
    assert differs > 0  # the weighted vote changed some question's answer


from tests.support.cost import REPLY, words  # noqa: E402  (the `sizes` fixture: tests/conftest.py)


@pytest.mark.parametrize(
    "n, rounds, early_stop, invalid", [(3, 3, True, 0.0), (4, 4, False, 0.25), (5, 3, True, 0.2), (1, 3, False, 0.0)]
)
def test_cost_exact_given_what_each_round_showed(sizes, n, rounds, early_stop, invalid):
    """Tolerance 0 tokens per question: given each discussion round's (answer groups, unreadable
    group, replies shown), read back from the call records, every prompt is a sum of measured
    pieces. The runs must show varying group counts, unreadable groups and early stops."""
    config = RunConfig.flat(protocol="reconcile", agents=n, rounds=rounds, early_stop=early_stop, backend="simulated")
    qs = arithmetic_questions(8, seed=3)
    rows = run_local(config, qs, SimulatedBackend(reply_tokens=REPLY, accuracy=0.7, follow=0.5, invalid=invalid))
    q_tokens = words(qs[0].text)
    assert all(words(q.text) == q_tokens for q in qs)
    seen = []
    for row, log in rows:
        shown = reconcile_shown_from_records(log.records, row["rounds_run"])
        seen += shown
        pred = reconcile_cost(sizes, n, q_tokens, REPLY, shown)
        assert (pred.prompt_tokens, pred.completion_tokens, pred.calls) == (
            row["prompt_tokens"],
            row["completion_tokens"],
            row["n_calls"],
        )
    if n > 1:
        assert len({s.groups for s in seen}) > 1
    if invalid:
        assert any(s.unread for s in seen)
    if early_stop:
        assert any(row["stopped_early"] for row, _ in rows)


def test_shown_from_records_skips_failed_calls_and_counts_unreadable_answers():
    from types import SimpleNamespace as R

    records = [
        R(round=0, agent_id=0, answer="4", error=None),
        R(round=0, agent_id=1, answer="5", error=None),
        R(round=0, agent_id=2, answer=None, error="boom"),
        R(round=0, agent_id=3, answer="4", error=None),
        R(round=1, agent_id=0, answer=None, error=None),
        R(round=1, agent_id=1, answer="5", error=None),
        R(round=1, agent_id=2, answer="5", error=None),
        R(round=1, agent_id=3, answer="5", error=None),
        R(round=1, agent_id=-1, answer="9", error=None),
    ]  # not an agent: ignored
    assert reconcile_shown_from_records(records, 3) == [
        ReconcileShown(groups=2, unread=False, replies=3),
        ReconcileShown(groups=1, unread=True, replies=4),
    ]


class TwoCampsBackend:
    """A fake model: even agents always answer 2, odd agents 3 (read from the seed-free prompt
    order: the k-th request answers k % 2 within each round of n), every reply REPLY tokens with a
    one-token confidence. Two answer groups every round, never a consensus."""

    simulated = False

    def __init__(self):
        self.k = 0

    def generate(self, requests):
        out = []
        for req in requests:
            ans = 2 + self.k % 2
            self.k += 1
            text = " ".join(["word"] * (REPLY - 3) + [f"\\boxed{{{ans}}}", "Confidence:", "0.9"])
            out.append(
                GenResult(text=text, prompt_tokens=count_tokens(req.messages), completion_tokens=REPLY, latency_s=0.0)
            )
        return out


def test_closed_form_estimate_exact_for_two_groups_and_a_bound_otherwise(sizes):  # noqa: F811
    """The estimate (all rounds, every reply readable, min(2, N) groups) is exact, 0 tokens off,
    for agents split into two camps that never agree; the simulated agents, who agree at times
    (one group, or an early stop), cost less."""
    n, rounds = 4, 4
    config = RunConfig.flat(protocol="reconcile", agents=n, rounds=rounds, backend="simulated")
    qs = arithmetic_questions(3, seed=3)
    q_tokens = words(qs[0].text)
    est = cost_predict.predict("reconcile", sizes, n, rounds, q_tokens, REPLY)
    for row, log in run_local(config, qs, TwoCampsBackend()):
        assert {s.groups for s in reconcile_shown_from_records(log.records, rounds)} == {2}
        assert (row["prompt_tokens"], row["completion_tokens"], row["n_calls"]) == (
            est.prompt_tokens,
            est.completion_tokens,
            est.calls,
        )
    three = cost_predict.predict("reconcile", sizes, n, rounds, q_tokens, REPLY, answer_groups=3)
    assert three.prompt_tokens - est.prompt_tokens == n * (rounds - 1) * sizes.reconcile_block.header
    short = cost_predict.predict("reconcile", sizes, n, rounds, q_tokens, REPLY, rounds_run=1)
    assert short.calls == n and short.prompt_tokens == n * (
        count_tokens([{"role": "user", "content": ""}]) + sizes.reconcile_first.tokens(q_tokens)
    )
    with pytest.raises(ValueError, match="answer_groups 5"):
        cost_predict.predict("reconcile", sizes, n, rounds, q_tokens, REPLY, answer_groups=5)
