"""Tests for engine.latex: the one parser of \\boxed{} and \\fbox{}."""

from __future__ import annotations

import pytest

from engine.grading import gold_answer
from engine.latex import boxed_contents, brace_map, last_boxed


@pytest.mark.parametrize(
    "text, boxes",
    [
        ("no box", []),
        ("\\boxed{1} and \\fbox{2}", ["1", "2"]),
        ("\\boxed\t{7}", ["7"]),
        ("\\boxed {7}", ["7"]),
        ("\\boxedfoo{1}", []),
        ("\\fboxes{1}", []),
        ("\\boxed{1} \\boxed{2", ["1"]),
        ("\\boxed{f(x)^{2}}", ["f(x)^{2}"]),
        ("\\boxed{\\{1, 2\\}}", ["\\{1, 2\\}"]),
        ("\\boxed 5$", ["5"]),
    ],
)
def test_boxed_contents(text, boxes):
    assert boxed_contents(text) == boxes


def test_last_boxed_strips_and_tells_no_box_from_an_empty_one():
    assert last_boxed("\\boxed{1} then \\boxed{ 2 }") == "2"
    assert last_boxed("\\boxed{1} then \\boxed{2") == "1"
    assert last_boxed("\\boxed{}") == ""
    assert last_boxed("\\boxedfoo{1}") is None


def test_brace_map_skips_escaped_braces():
    assert brace_map("{a\\}{b}}") == {0: 7, 4: 6}


def test_gold_answer_uses_the_same_parser():
    assert gold_answer("so \\boxed\t{7}.", "math") == "7"
    assert gold_answer("\\boxed{ \\frac{1}{8}}", "math") == "\\frac{1}{8}"
    assert gold_answer("\\boxed{3} then \\boxedfoo{4}", "numeric") == "3"
