"""Hand-built result directories: a run's questions, calls and runs row written through the
sink (no Ray, no model), for the report and results-loading tests."""

import json

from tests.support.rows import complete_rows


def config(protocol, agents, rounds, **kw):
    cfg = {
        "protocol": protocol,
        "agents": agents,
        "rounds": rounds,
        "dataset": "arithmetic",
        "seed": 0,
        "backend": "simulated",
        "density": None,
        "groups": None,
        "limit": 4,
        "out": "x",
    }
    cfg.update(kw)
    return cfg


def write_run(sink, run_id, cfg, questions, stale=()):
    """questions: (qid, correct, consensus, stopped_early, effective_rounds, skipped, [(agent, prompt, completion)]);
    a call may carry a fourth item, its cached prompt tokens (else null, as a backend that cannot say).
    stale: (qid, attempt, [(agent, prompt, completion)]) call rows of attempts without a question row."""
    sim = cfg["backend"] == "simulated"
    q_rows, c_rows = [], []

    def call_rows(qid, attempt, calls):
        return [
            {
                "run_id": run_id,
                "question_id": qid,
                "agent_id": a,
                "prompt_tokens": p,
                "completion_tokens": c,
                "cached_prompt_tokens": cached[0] if cached else None,
                "simulated": sim,
                "attempt": attempt,
            }
            for a, p, c, *cached in calls
        ]

    for qid, correct, cons, stopped, eff, skipped, calls in questions:
        q_rows.append(
            {
                "run_id": run_id,
                "question_id": qid,
                "protocol": cfg["protocol"],
                "n_agents": cfg["agents"],
                "rounds_run": len(cons),
                "effective_rounds": eff,
                "stopped_early": stopped,
                "correct": correct,
                "n_calls": len(calls),
                "n_summary_calls": sum(a == -1 for a, *_ in calls),
                "n_skipped": skipped,
                "prompt_tokens": sum(call[1] for call in calls),
                "completion_tokens": sum(call[2] for call in calls),
                **_cache_columns(calls),
                "consensus": cons,
                "simulated": sim,
                # right only after the last round (debate fixed it), as graded per round
                "correct_by_round": [False] * (len(cons) - 1) + [correct],
                "tie": qid == "q0",
                "backend": cfg["backend"],
                "attempt": "new",
            }
        )
        c_rows += call_rows(qid, "new", calls)
    for qid, attempt, calls in stale:
        c_rows += call_rows(qid, attempt, calls)
    sink.write("questions", complete_rows("questions", q_rows))
    sink.write("calls", complete_rows("calls", c_rows))
    sink.flush()
    sink.write_run(
        {
            "run_id": run_id,
            "protocol": cfg["protocol"],
            "backend": cfg["backend"],
            "simulated": sim,
            "config": json.dumps(cfg),
            "status": "finished",
            "n_questions": len(questions),
        }
    )


def _cache_columns(calls):
    """A question row's cached and computed prompt tokens over its calls that carry a cached count."""
    known = [(call[1], call[3]) for call in calls if len(call) > 3 and call[3] is not None]
    if not known:
        return {"cached_prompt_tokens": None, "computed_prompt_tokens": None}
    return {"cached_prompt_tokens": sum(c for _, c in known), "computed_prompt_tokens": sum(p - c for p, c in known)}


def full(agents, rounds, prompt, completion):
    return [(i % agents, prompt, completion) for i in range(agents * rounds)]


def simulated_run(out, n_questions=3, accuracy=0.5, similarity=None, questions=None, backend=None, **options):
    """A run folder made in-process on the simulated model (``actors.local_run.run_local``, no
    Ray): its questions, calls, graphs and prompts written through the run's sink as a run writes
    them, and its runs row. ``options`` are RunConfig fields (protocol, agents, rounds, ...);
    ``similarity`` (texts -> matrix) for the protocols that ask for one; ``questions`` (default:
    ``n_questions`` arithmetic ones) and ``backend`` (default: a SimulatedBackend) to debate other
    text. Returns the config."""
    from actors.local_run import run_local
    from backends.simulated_backend import SimulatedBackend
    from engine.config import RunConfig
    from engine.tasks import arithmetic_questions

    cfg = RunConfig.flat(backend="simulated", **options)
    backend = backend or SimulatedBackend(reply_tokens=12, accuracy=accuracy, follow=0.3)
    run_local(cfg, questions or arithmetic_questions(n_questions, seed=3), backend, similarity, out=out)
    return cfg
