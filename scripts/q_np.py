"""Q(n, p): how often a single agent answers correctly after reading n reference solutions, a
share p of which are correct (sparse-topology paper, sec. 5.4, "Impact of incorrect reference
solutions", Figure 3).

The paper: "we define Q(n, p) as the probability that a single agent delivers correct answers
given n reference solutions, where p percentage of these are correct. This probability can be
estimated using Monte Carlo sampling with constructed in-context reference solutions" — three
GSM8K questions, n in {2, 3, 4, 5} (a 6-agent debate at D = 2/5, 3/5, 4/5, 1), p in {0, 25, 50,
75, 100} %, 100 runs per question.

What this script does, per question q, per cell (n, p), per sample s = 0 .. K-1:

1. ``k = floor(n * p + 1/2)`` references are correct, ``n - k`` incorrect (see
   :func:`n_correct_refs`), in a seeded random order (:func:`build_references`).
2. Each reference is a short constructed solution text ending in
   ``The answer is \\boxed{X}.``: X is the gold answer for a correct one and a plausible wrong
   value for an incorrect one (:func:`wrong_values`). The wording is one of a few neutral
   templates, chosen at random, identical in style for correct and wrong references, so the
   only signal is the value.
3. The agent's prompt is the engine's own "debate" stage (:class:`engine.prompts.PromptSet`)
   showing those references as the peers' solutions, with no transcript before it.
4. The reply is sampled with its own seed; its extracted answer is compared with the gold.

``Q(n, p)`` is the share of correct replies over all questions and samples, with the binomial
standard error ``sqrt(Q (1 - Q) / N)`` (N = questions x samples); per-question estimates are
saved too (the paper's Figure 3 is per question).

Choices where the paper is vague (each also at the function that implements it):

* Rounding of n*p (e.g. n = 2, p = 25 %): the paper does not say; we round half up, and record
  the realised number of correct references and fraction in every cell.
* Own previous answer: the paper's Q is about "a single agent ... given n reference solutions";
  we show only the references (memory "none"), so Q depends on (n, p) and the model alone, not
  on a first answer of the agent's own.
* Incorrect values: "distinct" (default) gives each incorrect reference its own wrong value
  (independent mistakes rarely agree); ``--wrong same`` gives all of them one shared wrong
  value (the worst case: a wrong consensus).
* Order of references: shuffled per sample (seeded), so position effects average out.

Backends: ``--backend transformers`` (the real CPU model, all samples of a cell in one batched
``generate`` list) or ``--backend simulated`` (the seeded SIMULATED model of
``backends/simulated_backend.py``: it follows the majority of the reference answers with
probability ``--sim-follow``, else is right with probability ``--sim-accuracy``; it gets the
reference answers through ``GenRequest.meta`` exactly as ``AgentCore._oracle`` passes peer
answers). Every output is labelled with the backend and ``"simulated": true/false``. No Ray.

Usage::

    .venv/bin/python scripts/q_np.py --backend transformers --n 2,4 --p 0,1 --samples 8 --limit 2
    .venv/bin/python scripts/q_np.py --backend simulated --sim-follow 0.8 --samples 100
    .venv/bin/python scripts/q_np.py --dataset ../shared/data/gsm8k_test.jsonl --task numeric --limit 3
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import sys
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.config import DEFAULT_MODEL  # noqa: E402
from engine.dataset_routing import load_questions  # noqa: E402
from engine.extract import answers_equal, canonical_answer, extract_answer  # noqa: E402
from engine.prompts import PromptSet, build_messages  # noqa: E402
from engine.records import GenRequest  # noqa: E402
from engine.tasks import Question  # noqa: E402

DEFAULT_OUT = "bench/q_np.json"
WRONG_MODES = ("distinct", "same")

# Neutral solution texts: the same wording is used for correct and incorrect references.
SOLUTION_TEMPLATES = (
    "Let me solve this step by step. I work out each part of the problem carefully and then "
    "combine the partial results. The answer is \\boxed{$X}.",
    "First I identify the quantities given in the problem, then I compute the intermediate "
    "values one at a time and put them together. The answer is \\boxed{$X}.",
    "Breaking the problem into smaller steps and computing each one in order, I arrive at a "
    "final result of $X. The answer is \\boxed{$X}.",
)


# ------------------------------------------------------------------ pure pieces
def n_correct_refs(n: int, p: Fraction | float | str) -> int:
    """Number of correct references among ``n``: ``floor(n * p + 1/2)``.

    Paper is vague on how n*p is rounded when it is not whole (n = 2, p = 25 % -> 0.5); we round
    half up (the schoolbook rule, independent of parity), computed exactly with fractions so
    ``3 * 0.5`` is 1.5, not 1.4999.
    """
    x = Fraction(n) * Fraction(str(p)) if not isinstance(p, Fraction) else Fraction(n) * p
    return math.floor(x + Fraction(1, 2))


def binomial_estimate(correct: int, total: int) -> tuple[float, float]:
    """``(Q, stderr)`` with ``Q = correct / total`` and ``stderr = sqrt(Q (1 - Q) / total)``."""
    if total <= 0:
        raise ValueError("need at least one sample")
    q = correct / total
    return q, math.sqrt(q * (1.0 - q) / total)


def _fmt_number(x: Fraction) -> str:
    """A Fraction as an integer, a finite decimal, or a/b."""
    if x.denominator == 1:
        return str(x.numerator)
    den = x.denominator
    while den % 2 == 0:
        den //= 2
    while den % 5 == 0:
        den //= 5
    if den == 1:  # finite decimal
        digits = 0
        while (x * 10**digits).denominator != 1:
            digits += 1
        return f"{float(x):.{digits}f}"
    return f"{x.numerator}/{x.denominator}"


def wrong_values(gold: str, count: int, rng: random.Random, mode: str = "distinct") -> list[str]:
    """``count`` plausible wrong values for a numeric gold answer.

    How they are made (seeded by ``rng``): ``gold + d`` with a nonzero integer offset ``d`` in
    ``-m .. m``, ``m = max(10, count)`` — a near miss, like an arithmetic slip; when the gold is
    >= 0 only offsets that keep the value >= 0 are used (a GSM8K count is never negative).
    ``mode="distinct"``: ``count`` different offsets (drawn without replacement);
    ``mode="same"``: one offset shared by all. Raises ValueError for a non-numeric gold.
    """
    if mode not in WRONG_MODES:
        raise ValueError(f"--wrong {mode!r}: choose one of {', '.join(WRONG_MODES)}")
    canon = canonical_answer(gold, "numeric")
    if canon is None:
        raise ValueError(f"gold answer {gold!r} is not a number; Q(n, p) needs a numeric task")
    g = Fraction(canon)
    m = max(10, count)
    offsets = [d for d in range(-m, m + 1) if d != 0 and (g < 0 or g + d >= 0)]
    if count == 0:
        return []
    if mode == "same":
        return [_fmt_number(g + rng.choice(offsets))] * count
    return [_fmt_number(g + d) for d in rng.sample(offsets, count)]


def sample_rng(seed: int, qid: str, n: int, p: Fraction, sample: int, salt: str) -> random.Random:
    return random.Random(_hash_int(f"{seed}:{qid}:{n}:{p}:{sample}:{salt}"))


def _hash_int(text: str) -> int:
    return int.from_bytes(hashlib.sha1(text.encode()).digest()[:4], "big")


def build_references(gold: str, n: int, k: int, rng: random.Random, wrong: str = "distinct") -> list[tuple[str, bool]]:
    """``n`` reference solutions ``(text, is_correct)``, ``k`` of them correct, in seeded random
    order (paper is vague on the order; we shuffle so position effects average out)."""
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n (got k={k}, n={n})")
    values = [gold] * k + wrong_values(gold, n - k, rng, wrong)
    flags = [True] * k + [False] * (n - k)
    pairs = list(zip(values, flags))
    rng.shuffle(pairs)
    out = []
    for value, ok in pairs:
        template = rng.choice(SOLUTION_TEMPLATES)
        out.append((template.replace("$X", value), ok))
    return out


def make_request(
    prompts: PromptSet,
    question: Question,
    refs: list[tuple[str, bool]],
    *,
    seed: int,
    temperature: float,
    top_p: float,
    max_tokens: int,
    simulated: bool,
    system_prompt: str | None = None,
) -> GenRequest:
    """The agent's debate-stage request showing ``refs`` as its peers' solutions.

    The prompt is the engine's "debate" stage with memory "none" (no earlier turn of the
    agent's own). ``meta`` is filled only for the simulated backend, with the same keys as
    ``actors.agent_actor.AgentCore._oracle`` (the reference answers are what the engine's
    extractor reads from them; there is no own previous answer).
    """
    peer_texts = [(i, text) for i, (text, _) in enumerate(refs)]
    msgs, _ = build_messages(
        prompts, question.text, "debate", [], peer_texts, system_prompt=system_prompt, memory="none"
    )
    meta: dict[str, Any] = {}
    if simulated:
        n_choices = len(question.choices) or 4
        meta = {
            "gold": question.gold,
            "task": question.task,
            "n_choices": n_choices,
            "peer_answers": [extract_answer(text, question.task, n_choices) for text, _ in refs],
            "own_answer": None,
            "kind": "debate",
        }
    return GenRequest(messages=msgs, temperature=temperature, top_p=top_p, max_tokens=max_tokens, seed=seed, meta=meta)


# ------------------------------------------------------------------ arguments
def _int_list(text: str) -> list[int]:
    try:
        values = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated integers >= 1, e.g. 2,3,4,5") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated integers >= 1, e.g. 2,3,4,5")
    return values


def _p_list(text: str) -> list[Fraction]:
    out = []
    for t in (t.strip() for t in text.split(",")):
        if not t:
            continue
        try:
            f = Fraction(t)
        except (ValueError, ZeroDivisionError):
            raise argparse.ArgumentTypeError(f"{text!r}: {t!r} is not a number in [0, 1]") from None
        if not 0 <= f <= 1:
            raise argparse.ArgumentTypeError(f"{text!r}: {t} is outside [0, 1] (p is a share, 0.25 = 25 %)")
        out.append(f)
    if not out:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated shares, e.g. 0,0.25,0.5,0.75,1")
    return out


def _unit(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number in [0, 1]") from None
    if not 0 <= x <= 1:
        raise argparse.ArgumentTypeError(f"{text} is outside [0, 1]")
    return x


def _positive(text: str) -> int:
    try:
        x = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer") from None
    if x < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer (got {x})")
    return x


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="q_np.py", description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--dataset", default="arithmetic", help="'arithmetic' (generated, default) or a data file path")
    ap.add_argument("--task", default=None, help="task of --dataset; only 'numeric' is supported")
    ap.add_argument("--limit", type=_positive, default=3, help="questions (default 3, as in the paper)")
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n", type=_int_list, default=[2, 3, 4, 5], help="reference counts, e.g. 2,3,4,5")
    ap.add_argument(
        "--p",
        type=_p_list,
        default=[Fraction(0), Fraction(1, 4), Fraction(1, 2), Fraction(3, 4), Fraction(1)],
        help="shares of correct references, e.g. 0,0.25,0.5,0.75,1",
    )
    ap.add_argument("--samples", type=_positive, default=100, help="samples per question and cell (paper: 100)")
    ap.add_argument(
        "--wrong",
        choices=WRONG_MODES,
        default="distinct",
        help="incorrect references: each its own wrong value (distinct) or one shared value (same)",
    )
    ap.add_argument(
        "--backend",
        choices=("auto", "vllm", "transformers", "simulated"),
        default="auto",
        help="auto: vllm where installed, else transformers",
    )
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--max-tokens", type=_positive, default=256)
    ap.add_argument("--system-prompt", default=None)
    ap.add_argument(
        "--max-batch",
        type=_positive,
        default=None,
        help="concurrent sequences (vLLM max_num_seqs, default vLLM's; "
        "transformers: rows decoded together, default 16)",
    )
    ap.add_argument("--threads", type=_positive, default=None, help="transformers: torch threads (default: all CPUs)")
    ap.add_argument(
        "--sim-follow", type=_unit, default=0.5, help="simulated: probability of adopting the reference majority"
    )
    ap.add_argument("--sim-accuracy", type=_unit, default=0.6, help="simulated: accuracy when not following")
    ap.add_argument("--sim-reply-tokens", type=int, default=60)
    ap.add_argument("--out", default=DEFAULT_OUT, help=f"JSON output (default {DEFAULT_OUT})")
    ap.add_argument("--quiet", action="store_true", help="no table, no progress")
    return ap


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.temperature < 0:
        ap.error(f"--temperature must be >= 0 (got {args.temperature})")
    if not 0 < args.top_p <= 1:
        ap.error(f"--top-p must be in (0, 1] (got {args.top_p})")
    if args.offset < 0:
        ap.error(f"--offset must be >= 0 (got {args.offset})")
    if args.backend == "simulated" and args.sim_reply_tokens < 6:
        ap.error(f"--sim-reply-tokens must be at least 6 (got {args.sim_reply_tokens})")
    if args.task not in (None, "numeric"):
        ap.error(
            f"--task {args.task!r}: Q(n, p) needs numeric answers (wrong references are near-miss numbers); "
            "use --task numeric"
        )
    try:
        args.questions = load_questions(args.dataset, args.task, args.limit, args.seed, offset=args.offset)
    except ValueError as exc:  # DatasetError is a ValueError
        ap.error(str(exc))
    tasks = {q.task for q in args.questions}
    if tasks != {"numeric"}:
        ap.error(
            f"--dataset {args.dataset}: task {sorted(tasks)} is not numeric; pass a numeric dataset with --task numeric"
        )
    for q in args.questions:
        if canonical_answer(q.gold, "numeric") is None:
            ap.error(f"--dataset {args.dataset}: question {q.qid} has a non-numeric gold {q.gold!r}")
    return args


# ------------------------------------------------------------------ running
def make_backend(args: argparse.Namespace):
    if args.backend == "simulated":
        from backends.simulated_backend import SimulatedBackend

        return SimulatedBackend(
            model=args.model, accuracy=args.sim_accuracy, follow=args.sim_follow, reply_tokens=args.sim_reply_tokens
        )
    from engine.config import resolve_backend

    if resolve_backend(args.backend) == "vllm":
        from backends.vllm_backend import VLLMBackend

        return VLLMBackend(args.model, max_batch=args.max_batch)
    from backends.transformers_backend import TransformersBackend

    return TransformersBackend(args.model, threads=args.threads or os.cpu_count(), max_batch=args.max_batch)


def run(args: argparse.Namespace, backend=None, log=None) -> dict[str, Any]:
    """Estimate every cell; return the JSON-ready result (see module docstring)."""
    t_start = time.perf_counter()
    questions: list[Question] = args.questions
    prompts = PromptSet.for_task("numeric")
    t_load = time.perf_counter()
    own_backend = backend is None
    backend = backend or make_backend(args)
    load_s = time.perf_counter() - t_load
    try:
        return _cells(args, questions, prompts, backend, t_start, load_s, log)
    finally:
        if own_backend and hasattr(backend, "shutdown"):  # vLLM's engine processes end with it
            backend.shutdown()


def _cells(args, questions, prompts, backend, t_start: float, load_s: float, log) -> dict[str, Any]:
    simulated = bool(getattr(backend, "simulated", False))
    cells = []
    for n in args.n:
        for p in args.p:
            k = n_correct_refs(n, p)
            reqs, owners = [], []
            for q in questions:
                for s in range(args.samples):
                    refs = build_references(q.gold, n, k, sample_rng(args.seed, q.qid, n, p, s, "refs"), args.wrong)
                    reqs.append(
                        make_request(
                            prompts,
                            q,
                            refs,
                            seed=_hash_int(f"{args.seed}:{q.qid}:{n}:{p}:{s}:gen"),
                            temperature=args.temperature,
                            top_p=args.top_p,
                            max_tokens=args.max_tokens,
                            simulated=simulated,
                            system_prompt=args.system_prompt,
                        )
                    )
                    owners.append(q)
            t0 = time.perf_counter()
            results = backend.generate(reqs)  # all samples of the cell in one batched list
            cell_s = time.perf_counter() - t0
            per_q: dict[str, dict[str, Any]] = {
                q.qid: {"qid": q.qid, "gold": q.gold, "correct": 0, "invalid": 0, "errors": 0, "samples": 0}
                for q in questions
            }
            for q, res in zip(owners, results):
                row = per_q[q.qid]
                row["samples"] += 1
                if res.error is not None:
                    row["errors"] += 1
                    continue
                ans = extract_answer(res.text, "numeric")
                row["invalid"] += ans is None
                row["correct"] += answers_equal(ans, q.gold, "numeric")
            for row in per_q.values():
                row["estimate"], row["stderr"] = binomial_estimate(row["correct"], row["samples"])
            correct = sum(r["correct"] for r in per_q.values())
            total = len(results)
            est, se = binomial_estimate(correct, total)
            cell = {
                "n": n,
                "p": float(p),
                "n_correct_refs": k,
                "p_realized": k / n,
                "estimate": est,
                "stderr": se,
                "samples": total,
                "correct": correct,
                "invalid": sum(r["invalid"] for r in per_q.values()),
                "errors": sum(r["errors"] for r in per_q.values()),
                "prompt_tokens": sum(r.prompt_tokens for r in results),
                "completion_tokens": sum(r.completion_tokens for r in results),
                "wall_s": round(cell_s, 3),
                "per_question": list(per_q.values()),
            }
            cells.append(cell)
            if log:
                log(f"n={n} p={float(p):g} (k={k}): Q = {est:.3f} ± {se:.3f}  [{total} samples, {cell_s:.1f} s]")
    out = {
        "kind": "q_np",
        "paper": "sparse-topology sec. 5.4, Figure 3",
        "backend": args.backend,
        "simulated": simulated,
        "model": getattr(backend, "model", None) if simulated else args.model,
        "dataset": args.dataset,
        "task": "numeric",
        "questions": [{"qid": q.qid, "gold": q.gold} for q in questions],
        "n_values": list(args.n),
        "p_values": [float(p) for p in args.p],
        "samples_per_question": args.samples,
        "wrong": args.wrong,
        "rounding": "k = floor(n*p + 1/2) correct references",
        "seed": args.seed,
        "temperature": args.temperature,
        "top_p": args.top_p,
        "max_tokens": args.max_tokens,
        "model_load_s": round(load_s, 3),
        "wall_s": round(time.perf_counter() - t_start, 3),
        "cells": cells,
    }
    if simulated:
        out["sim"] = {"follow": args.sim_follow, "accuracy": args.sim_accuracy, "reply_tokens": args.sim_reply_tokens}
    return out


def render_table(result: dict[str, Any]):
    from rich.table import Table

    label = "SIMULATED" if result["simulated"] else result["backend"]
    table = Table(
        title=f"Q(n, p) — {label} model {result['model']}, {len(result['questions'])} question(s) "
        f"x {result['samples_per_question']} samples"
    )
    table.add_column("n \\ p", justify="right")
    for p in result["p_values"]:
        table.add_column(f"{p:g}", justify="right")
    by = {(c["n"], c["p"]): c for c in result["cells"]}
    for n in result["n_values"]:
        table.add_row(str(n), *(f"{by[(n, p)]['estimate']:.3f}±{by[(n, p)]['stderr']:.3f}" for p in result["p_values"]))
    return table


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from rich.console import Console

    console = Console(stderr=True)
    result = run(args, log=None if args.quiet else console.print)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    tmp.replace(out)
    if not args.quiet:
        Console().print(render_table(result))
        console.print(f"saved {out} (wall {result['wall_s']:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
