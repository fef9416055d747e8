"""A question metric made up for the plug-point tests, in one module: how many different answers
the agents gave over the question's debate. Registered by the test that uses it
(``register_metric(DISTINCT_ANSWERS)``, undone after)."""

from __future__ import annotations

import pyarrow as pa

from engine.metrics import Metric, QuestionFacts


def distinct_answers(facts: QuestionFacts) -> int:
    """Different answers read from the question's calls (a call without one left out)."""
    return len({r.answer for r in facts.records if r.answer is not None})


DISTINCT_ANSWERS = Metric(
    "distinct_answers",
    pa.int32(),
    "different answers the agents gave over the debate",
    summary="distinct_answers",
    agg="sum",
    label="distinct answers (summed over questions)",
    compute=distinct_answers,
)
