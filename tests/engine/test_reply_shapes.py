"""Replies of the shapes real models write (issue 24, item 6), several phrasings each, and the
near misses that must not be read: a confidence line after the answer, an answer written first
and explained after, a reply that corrects itself, a choice named after the options were
discussed, a solution set ``x \\in (a, b)``, a pair verdict naming the assistant, and an echoed
question or expression left unevaluated. Written for this project (not copied from replies)."""

from __future__ import annotations

import pytest

from engine.extract import extract_answer
from engine.grading import is_correct


def _read(text, task, want, truncated=False):
    got = extract_answer(text, task, marked_only=truncated)
    if want is None:
        assert got is None, got
    else:
        assert got is not None and is_correct(got, want, task), (got, want)


# ------------------------------------------------------------------ a confidence line after the answer
@pytest.mark.parametrize(
    "text, task, want",
    [
        ("42\nConfidence: 0.9", "numeric", "42"),
        ("The eggs bring in 18 dollars a day.\nConfidence: 0.85", "numeric", "18"),
        ("Total: 7 bolts\n\nConfidence level: 9/10", "numeric", "7"),
        ("She pays $64 in all. I am 95% confident.", "numeric", "64"),
        ("Answer: 3\nConfidence: 0.7", "numeric", "3"),
        ("So the train is 120 km away (confidence: 0.6)", "numeric", "120"),
        ("\\frac{3}{4}\nConfidence: 0.9", "math", "\\frac34"),
        ("x = 5\n\n**Confidence:** 80%", "math", "5"),
        ("The sum is $-2$.\nConfidence score: 0.95", "math", "-2"),
        ("C\nConfidence: 0.8", "choice", "C"),
        ("The answer is (B).\nConfidence: 0.65", "choice", "B"),
        # near misses: a confidence alone is no answer
        ("I am not sure.\nConfidence: 0.4", "numeric", None),
        ("Confidence: 0.9", "math", None),
    ],
)
def test_a_confidence_is_never_the_answer(text, task, want):
    _read(text, task, want)


# ------------------------------------------------------------------ answer first, explanation after
@pytest.mark.parametrize(
    "text, task, want",
    [
        ("**42**\n\nExplanation: she has 16 eggs, eats 3, bakes 4 and sells 9 at $2.", "numeric", "42"),
        ("18\n\nShe lays 16 eggs, eats 3 and bakes 4, so 9 remain; 9 x 2 = 18, 3 more than 15.", "numeric", "18"),
        ("$1,250\nThe 5 payments of 250 add up; the 10 percent fee is already in.", "numeric", "1250"),
        ("- 70 dollars\nShe spent 30 of her 100 dollars.", "numeric", "70"),
        ("**-3**\n\nMoving 2 to the left and dividing by 4 gives it.", "numeric", "-3"),
        ("12 apples\nEach of the 4 baskets holds 3.", "numeric", "12"),
        ("$\\frac{9}{7}$\n\nCross-multiplying 7x = 9 and dividing by 7.", "math", "\\frac{9}{7}"),
        ("**x = 4**\nWe subtract 3 from both sides and divide by 2 after squaring 16.", "math", "4"),
        ("(D) False, True\n\nStatement 1 fails for S_3, and (A) is wrong because of it.", "choice", "D"),
        ("B) 4\nThe extension has degree 2 over each step, so 2 x 2.", "choice", "B"),
        ("(D) False, False\n\nStatement (A) is the first part and statement (C) the second.", "choice", "D"),
        ("C. 12\n\nEach of the 3 rows has 4 seats, the setting of option (A) in the last question.", "choice", "C"),
        # near misses: a derivation's first line, an options list
        ("2x + 3 = 11\nso 2x = 8 and x = 4", "math", "4"),
        ("Step 1: 16 - 3 - 4 = 9\nStep 2: 9 * 2 = 18", "numeric", "18"),
        ("(A) True, True\n(B) False, False", "choice", "B"),  # a list: the last line alone still reads
    ],
)
def test_an_answer_written_first_is_not_the_explanations_last_number(text, task, want):
    _read(text, task, want)


# ------------------------------------------------------------------ a reply that corrects itself
@pytest.mark.parametrize(
    "text, task, want",
    [
        ("Initially I thought the answer was 12. Rechecking: 3 * 4 + 2 = 14.", "numeric", "14"),
        ("At first I thought the answer was 30, but 5 * 7 = 35.", "numeric", "35"),
        ("My first answer was 8. I forgot the gift, so the total is 8 + 1 = 9", "numeric", "9"),
        ("I thought the answer was 100; the discount makes it 100 - 15 = 85", "numeric", "85"),
        ("The answer is 40, which was wrong: the second week adds 5 more, 45 in all", "numeric", "45"),
        ("The total is 307, not 308.", "numeric", "307"),
        ("She needs 6 boxes rather than 5.", "numeric", "6"),
        ("Initially I thought the answer was $\\frac{1}{2}$. Squaring again gives $\\frac{1}{4}$.", "math", "\\frac14"),
        ("Initially I thought the answer was (B), but (C) fits the data.", "choice", "C"),
        ("I originally chose (A). After the other arguments, I go with D", "choice", "D"),
        # the story's own "initially" / "originally" is not a retraction
        ("If he initially had 5000 dollars, he now has 12000 + 5000 = 17000 dollars.", "numeric", "17000"),
        ("Nick had twice as many, so he had 2 * 8 = 16 candies originally.", "numeric", "16"),
        ("My answer is 21. Initially the tank held 9 and 12 were added.", "numeric", "21"),
    ],
)
def test_a_corrected_answer_wins_over_the_first_one(text, task, want):
    _read(text, task, want)


# ------------------------------------------------------------------ a choice named after the options
@pytest.mark.parametrize(
    "text, want",
    [
        ("(A) and (B) are wrong, and (C) is too narrow; the answer must be D", "D"),
        ("A is wrong because it ignores friction. B is wrong too. C is too narrow, so D.", "D"),
        ("Options A and B are incorrect. C is too narrow. Therefore D.", "D"),
        ("(A) is incorrect, (B) is incorrect, (D) is incorrect, leaving (C).", "C"),
        ("We can rule out (A) and (D) at once. (B) is too broad. The answer is clearly C", "C"),
        ("Option C can be eliminated, and option A is false. I pick option B", "B"),
        ("The answer has to be (A); (B), (C) and (D) all fail for n = 2.", "A"),
        # near misses: options named as wrong are never chosen
        ("(A) and (B) are wrong, and (C) is too narrow.", None),
        ("Option D is incorrect because the rate doubles.", None),
        ("Not (B): it ignores the tax.", None),
    ],
)
def test_options_named_as_wrong_are_not_chosen(text, want):
    _read(text, "choice", want)


# ------------------------------------------------------------------ a solution set x \in (a, b)
@pytest.mark.parametrize(
    "text, gold",
    [
        ("The solution is $x \\in (2, 5)$.", "(2,5)"),
        ("x \\in (2, 5)", "(2, 5)"),
        ("So the inequality holds for $x \\in [-2, 7]$.", "x \\in [-2,7]"),
        ("Hence $x \\in (-\\infty, 3]$", "(-\\infty,3]"),
        ("Both factors are positive when $x \\in (-\\infty, -1) \\cup (4, \\infty)$.", "(-\\infty,-1)\\cup(4,\\infty)"),
        ("The answer is $x \\in \\left(1, \\frac{9}{2}\\right)$", "(1,\\frac92)"),
    ],
)
def test_a_solution_set_in_interval_form_grades_equal_to_the_interval(text, gold):
    _read(text, "math", gold)


def test_an_interval_before_later_work_is_not_the_answer():
    assert extract_answer("For $x \\in (0, 1)$ the term is small, and the sum is 7.", "math") == "7"


# ------------------------------------------------------------------ a pair verdict naming the assistant
@pytest.mark.parametrize(
    "text, want",
    [
        ("Assistant A's response is better.", "A"),
        ("Assistant B's answer is more helpful and accurate.", "B"),
        ("Assistant A's response is better than Assistant B's.", "A"),
        ("Overall, Assistant B provides a better response than Assistant A.", "B"),
        ("Assistant A gives the more accurate answer; Assistant B misses the second step.", "A"),
        ("Both are fluent, but Response B's reply is clearly better.", "B"),
        ("Assistant B is worse: it invents a citation. Assistant A is better.", "A"),
    ],
)
def test_a_pair_verdict_naming_the_assistant(text, want):
    _read(text, "pair", want)


# ------------------------------------------------------------------ echoes and cut-off statements
@pytest.mark.parametrize(
    "text, truncated, want",
    [
        ("26+9*15+11 - 18*28", False, None),  # the question echoed
        ("The original problem is: What is the result of 13+10*19+20-29*6?", False, None),
        ("17+15*14+27-16*8 = 17+15*14+27-16*8", False, None),
        ("The expression $5x - 1$ equals $3x + 2$.", False, None),
        ("This answer is the result of the original equation, 8+16*15+12-29*25.", False, None),
        ("27 + 44 = 42", False, "42"),  # an evaluated expression keeps its result
        ("The answer is 3 + 4 = 7", False, "7"),
        ("So, the answer is 8 + 12 + 20 = 27 + 28 = 5", True, None),  # cut off inside the statement
        ("So, the answer is 40. Checking: 8 * 5 = 4", True, "40"),
    ],
)
def test_an_unevaluated_or_cut_off_expression_is_no_answer(text, truncated, want):
    _read(text, "numeric", want, truncated)


# ------------------------------------------------------------------ a peer's reply echoed from the prompt
@pytest.mark.parametrize(
    "text, task, want",
    [
        ("5 + 3 * 4 = 5 + 12 = 17\n\nOne agent solution: ```I add them and get 32.```\n", "numeric", "17"),
        ("My total is 64.\nOne agent solution: ```She spends 8 a week: 416.``` Using the", "numeric", "64"),
        ("x = 4\n\nAgent 2: ```Subtracting gives \\boxed{7}.```", "math", "4"),
        ("The sum is 11.\nOne group response: ```The group agrees on (12).```", "numeric", "11"),
        ("(C) is right.\n\nOne agent solution: ```I think the answer is (A).```", "choice", "C"),
        # the quote is unclosed (the reply was cut inside it): still the peer's
        ("I get 9.\nOne agent solution: ```The answer is 12 because", "numeric", "9"),
        # near misses: the writer's own fenced work and an agreement stated in its own words are read
        ("My solution: ```3 * 4 = 12```", "numeric", "12"),
        ("One agent solution: ```\\boxed{5}```\nI agree: the answer is 5.", "numeric", "5"),
        # a reply that only echoes a peer has no answer of its own
        ("One agent solution: ```The answer is 40.```", "numeric", None),
    ],
)
def test_a_peers_reply_echoed_from_the_prompt_is_not_the_writers_answer(text, task, want):
    _read(text, task, want)
