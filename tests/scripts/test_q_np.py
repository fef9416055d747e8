"""scripts/q_np.py: the Q(n, p) Monte Carlo estimator (sparse-topology paper, sec. 5.4, Fig. 3).

Only the SIMULATED backend is used here (fast, no model, no Ray).
"""

from __future__ import annotations

import importlib.util
import json
import math
import random
from fractions import Fraction
from pathlib import Path

import pytest

from engine.extract import extract_answer
from engine.prompts import PromptSet
from engine.tasks import arithmetic_questions

_SPEC = importlib.util.spec_from_file_location("q_np", Path(__file__).resolve().parents[2] / "scripts" / "q_np.py")
q_np = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(q_np)


def _run(tmp_path, *extra: str) -> dict:
    out = tmp_path / "q.json"
    rc = q_np.main(["--backend", "simulated", "--quiet", "--out", str(out), *extra])
    assert rc == 0
    return json.loads(out.read_text())


# ---------------------------------------------------------------- pure pieces
@pytest.mark.parametrize(
    "n,p,k",
    [
        (2, "0", 0),
        (2, "0.25", 1),
        (2, "0.5", 1),
        (2, "0.75", 2),
        (3, "0.5", 2),
        (3, "0.25", 1),
        (4, "0.75", 3),
        (5, "0.5", 3),
        (5, "0.25", 1),
        (5, "1", 5),
    ],
)
def test_n_correct_refs_rounds_half_up(n, p, k):
    assert q_np.n_correct_refs(n, Fraction(p)) == k
    assert q_np.n_correct_refs(n, float(p)) == k


def test_binomial_estimate_hand_values():
    q, se = q_np.binomial_estimate(3, 4)
    assert q == 0.75 and se == pytest.approx(math.sqrt(0.75 * 0.25 / 4)) and se == pytest.approx(0.2165063509)
    assert q_np.binomial_estimate(0, 10) == (0.0, 0.0)
    assert q_np.binomial_estimate(10, 10) == (1.0, 0.0)
    with pytest.raises(ValueError):
        q_np.binomial_estimate(0, 0)


def test_wrong_values_distinct_same_and_nonnegative():
    rng = random.Random(1)
    vals = q_np.wrong_values("3", 4, rng, "distinct")
    assert len(set(vals)) == 4 and "3" not in vals
    assert all(int(v) >= 0 and 1 <= abs(int(v) - 3) <= 10 for v in vals)
    same = q_np.wrong_values("-465", 3, random.Random(2), "same")
    assert len(set(same)) == 1 and same[0] != "-465" and abs(int(same[0]) + 465) <= 10
    # seeded: same rng seed, same values
    assert q_np.wrong_values("40", 3, random.Random(5)) == q_np.wrong_values("40", 3, random.Random(5))
    assert q_np.wrong_values("2.5", 1, random.Random(0))[0].endswith(".5")
    with pytest.raises(ValueError, match="not a number"):
        q_np.wrong_values("abc", 1, random.Random(0))


def test_build_references_counts_and_answers():
    refs = q_np.build_references("330", 5, 2, random.Random(7), "distinct")
    assert sum(ok for _, ok in refs) == 2
    answers = [extract_answer(text, "numeric") for text, _ in refs]
    assert [a == "330" for a in answers] == [ok for _, ok in refs]
    assert all(text.endswith(f"The answer is \\boxed{{{a}}}.") for (text, _), a in zip(refs, answers))
    assert len(set(answers)) == 4  # 2 x gold + 3 distinct wrong values


def test_make_request_uses_engine_debate_prompt_and_oracle_meta():
    q = arithmetic_questions(1, seed=0)[0]
    refs = q_np.build_references(q.gold, 3, 1, random.Random(0), "same")
    prompts = PromptSet.for_task("numeric")
    req = q_np.make_request(prompts, q, refs, seed=9, temperature=0.7, top_p=1.0, max_tokens=64, simulated=True)
    expected = prompts.debate(q.text, [(i, t) for i, (t, _) in enumerate(refs)])
    assert req.messages == [{"role": "user", "content": expected}]
    assert req.seed == 9 and req.max_tokens == 64
    assert req.meta["peer_answers"] == [extract_answer(t, "numeric") for t, _ in refs]
    assert req.meta["gold"] == q.gold and req.meta["own_answer"] is None and req.meta["kind"] == "debate"
    real = q_np.make_request(prompts, q, refs, seed=9, temperature=0.7, top_p=1.0, max_tokens=64, simulated=False)
    assert real.meta == {}  # a real model never sees the gold


# ---------------------------------------------------------------- simulated runs
@pytest.mark.parametrize("wrong", ["distinct", "same"])
def test_follow_one_gives_q_one_and_zero(tmp_path, wrong):
    res = _run(
        tmp_path,
        "--sim-follow",
        "1",
        "--samples",
        "12",
        "--limit",
        "2",
        "--n",
        "2,3,4,5",
        "--p",
        "0,1",
        "--wrong",
        wrong,
    )
    by = {(c["n"], c["p"]): c for c in res["cells"]}
    for n in (2, 3, 4, 5):
        assert by[(n, 1.0)]["estimate"] == 1.0 and by[(n, 1.0)]["stderr"] == 0.0
        assert by[(n, 0.0)]["estimate"] == 0.0 and by[(n, 0.0)]["correct"] == 0


def test_tie_cell_equals_share_of_samples_with_correct_reference_first(tmp_path):
    # n=2, p=0.5, one shared wrong value: the simulated model (follow=1) takes the majority of
    # [correct, wrong] — a tie, won by the first one shown. So Q is exactly the share of samples
    # whose shuffled references start with the correct one.
    res = _run(
        tmp_path,
        "--sim-follow",
        "1",
        "--samples",
        "40",
        "--limit",
        "2",
        "--n",
        "2",
        "--p",
        "0.5",
        "--wrong",
        "same",
        "--seed",
        "3",
    )
    qs = arithmetic_questions(2, seed=3)
    first_ok = 0
    for q in qs:
        for s in range(40):
            refs = q_np.build_references(q.gold, 2, 1, q_np.sample_rng(3, q.qid, 2, Fraction(1, 2), s, "refs"), "same")
            first_ok += refs[0][1]
    cell = res["cells"][0]
    assert cell["correct"] == first_ok
    assert cell["estimate"] == pytest.approx(first_ok / 80)
    assert 0 < first_ok < 80


def test_no_follow_uses_accuracy(tmp_path):
    right = _run(
        tmp_path, "--sim-follow", "0", "--sim-accuracy", "1", "--samples", "5", "--limit", "1", "--n", "3", "--p", "0"
    )
    assert right["cells"][0]["estimate"] == 1.0
    wrong = _run(
        tmp_path, "--sim-follow", "0", "--sim-accuracy", "0", "--samples", "5", "--limit", "1", "--n", "3", "--p", "1"
    )
    assert wrong["cells"][0]["estimate"] == 0.0


def test_json_schema(tmp_path):
    res = _run(tmp_path, "--samples", "7", "--limit", "2", "--n", "2,4", "--p", "0,0.5,1", "--sim-follow", "0.5")
    assert res["kind"] == "q_np" and res["backend"] == "simulated" and res["simulated"] is True
    assert res["n_values"] == [2, 4] and res["p_values"] == [0.0, 0.5, 1.0]
    assert res["samples_per_question"] == 7 and len(res["questions"]) == 2
    assert res["sim"] == {"follow": 0.5, "accuracy": 0.6, "reply_tokens": 60}
    assert [(c["n"], c["p"]) for c in res["cells"]] == [(2, 0.0), (2, 0.5), (2, 1.0), (4, 0.0), (4, 0.5), (4, 1.0)]
    for c in res["cells"]:
        assert set(c) >= {
            "n",
            "p",
            "n_correct_refs",
            "p_realized",
            "estimate",
            "stderr",
            "samples",
            "correct",
            "invalid",
            "errors",
            "prompt_tokens",
            "completion_tokens",
            "wall_s",
            "per_question",
        }
        assert c["samples"] == 14 and c["n_correct_refs"] == q_np.n_correct_refs(c["n"], c["p"])
        assert c["estimate"] == pytest.approx(c["correct"] / 14)
        assert c["stderr"] == pytest.approx(math.sqrt(c["estimate"] * (1 - c["estimate"]) / 14))
        assert [r["samples"] for r in c["per_question"]] == [7, 7]
        assert sum(r["correct"] for r in c["per_question"]) == c["correct"]


# ---------------------------------------------------------------- argument errors
@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--n", "0"], "--n"),
        (["--n", "two"], "--n"),
        (["--p", "1.5"], "--p"),
        (["--p", "x"], "--p"),
        (["--samples", "0"], "--samples"),
        (["--backend", "gpu"], "--backend"),
        (["--sim-follow", "2"], "--sim-follow"),
        (["--task", "math"], "--task"),
        (["--wrong", "many"], "--wrong"),
        (["--top-p", "0"], "--top-p"),
        (["--dataset", "/nonexistent/file.jsonl", "--task", "numeric"], "/nonexistent/file.jsonl"),
    ],
)
def test_argument_errors(argv, needle, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        q_np.main(["--backend", "simulated", "--out", str(tmp_path / "x.json"), *argv])
    assert exc.value.code == 2
    assert needle in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()
