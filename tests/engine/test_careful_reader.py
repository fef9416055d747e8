"""Replies read as a careful reader reads them (issue 37, part 1): agreement that names other
agents, another agent's boxed answer quoted after one's own, a correction addressed to a peer, a
pair verdict after a contrasting clause, numbers in words, mixed numbers, an amount with its
breakdown after it, decimal commas and answer sentences in other languages, a last sentence that
restates the question's numbers, prose that states a quantity and ends with the count that
qualifies it, an arithmetic expression in a box, and multiple choice answered with the option's
text. Several phrasings of each, written for this project, and the near misses that must not
change."""

from __future__ import annotations

import pytest

from engine.extract import extract_answer
from engine.grading import is_correct


def _read(text, task, want, **kw):
    got = extract_answer(text, task, **kw)
    if want is None:
        assert got is None, got
    else:
        assert got is not None and is_correct(got, want, task), (got, want)


# ------------------------------------------------------------------ agreeing with named agents
@pytest.mark.parametrize(
    "text, want",
    [
        ("Agents 2 and 3 are right: it comes to 17.", "17"),
        ("Agent 1 is correct, the total comes to 17.", "17"),
        ("Agent 3's reasoning is correct and the answer is 17.", "17"),
        ("The other agents are right that the answer is 17.", "17"),
        ("Both other agents got it right: 17 apples in all.", "17"),
        ("I checked it again. Agent 2 is correct: 17.", "17"),
        ("Like agent 1, I get 17.", "17"),
        ("Agreeing with agents 1 and 3, the answer is 17.", "17"),
        # near misses: what another agent said and the writer does not take stays theirs
        ("Agent 2 said the answer is 15, but I get 17.", "17"),
        ("Agent 2 says 15, which is wrong; the total is 17.", "17"),
        ("Agent 3 claims the answer is 15. Checking: 8 + 9 = 17.", "17"),
        ("The other agents chose 15. Recounting the rows, there are 17.", "17"),
    ],
)
def test_agreeing_with_named_agents_is_the_writers_answer(text, want):
    _read(text, "numeric", want)


# ------------------------------------------------------------------ another agent's box after one's own
@pytest.mark.parametrize(
    "text, task, want",
    [
        ("I get \\boxed{9}; Agent 3's \\boxed{11} double-counts the ends.", "numeric", "9"),
        ("My answer: \\boxed{9}. Agent 2 wrote \\boxed{11}, which is off by two.", "numeric", "9"),
        ("\\boxed{9}\n\nThe other agents' \\boxed{11} counts both ends.", "numeric", "9"),
        ("So it is \\boxed{9}, not the other agents' $\\boxed{11}$.", "numeric", "9"),
        ("I get $\\boxed{\\frac{1}{2}}$, whereas agent 2's $\\boxed{\\frac{1}{3}}$ drops a case.", "math", "\\frac12"),
        ("Final answer \\boxed{C}. Agent 1's \\boxed{B} ignores friction.", "choice", "C"),
        # near misses: the writer's own box after the peer's wins, as before
        ("Agent 2 had \\boxed{11}, but I get \\boxed{9}.", "numeric", "9"),
        ("After checking agent 2's work, my final answer is \\boxed{11}.", "numeric", "11"),
        ("Agent 2 is right: \\boxed{11}.", "numeric", "11"),
    ],
)
def test_another_agents_box_quoted_after_ones_own_is_not_read(text, task, want):
    _read(text, task, want)


def test_a_peers_box_never_grades_a_wrong_reply_correct():
    """The false accept the issue names: the writer's 9 is wrong, the quoted peer's 11 is the gold."""
    got = extract_answer("I get \\boxed{9}; Agent 3's \\boxed{11} double-counts the ends.", "numeric")
    assert not is_correct(got, "11", "numeric"), got


# ------------------------------------------------------------------ a correction addressed to a peer
@pytest.mark.parametrize(
    "text, want",
    [
        ("Your answer was 30, but you skipped the last row. The right total is 35.", "35"),
        ("You said 30; you forgot the last row. The total is 35.", "35"),
        ("Your final answer of 30 misses one row, so the total is 35.", "35"),
        ("You got 30 because you skipped a row; it should be 35.", "35"),
        ("You answered 30. That leaves out the last row: 35 in all.", "35"),
        # near misses: "you" of a word problem is no peer
        ("If you buy 3 packs of 10, you have 30 pencils. The answer is 30.", "30"),
        ("You will need 12 eggs in total, so the answer is 12.", "12"),
        ("You pay $4 for each of the 5 tickets, so you pay $20.", "20"),
    ],
)
def test_a_correction_addressed_to_a_peer_reads_the_corrected_value(text, want):
    _read(text, "numeric", want)


# ------------------------------------------------------------------ a pair verdict after a contrast
@pytest.mark.parametrize(
    "text, want",
    [
        ("Reply B is more detailed, but Reply A avoids harm.\n\nFinal verdict: (A)", "A"),
        ("Output B is more complete, but Output A is accurate.\n\nVerdict: A", "A"),
        ("Candidate A is more helpful, though candidate B is safer.\nFinal verdict: B", "B"),
        ("Dialogue B is better written, but dialogue A answers the question.\n\n**Verdict:** A", "A"),
        ("Summary A is more faithful, yet Summary B is more complete. My verdict: [[B]]", "B"),
        ("Reply A is more detailed, but Reply B is more accurate. Overall, Reply B is better.", "B"),
        # near misses
        ("Verdict: B is better than A.", "B"),
        ("Response B is more detailed.\n\nFinal verdict: (B)", "B"),
    ],
)
def test_a_pair_verdict_outranks_the_clauses_before_it(text, want):
    _read(text, "pair", want)


# ------------------------------------------------------------------ numbers in words
@pytest.mark.parametrize(
    "text, want",
    [
        ("She had 27 marbles and gave away 8, so that leaves nineteen marbles.", "19"),
        ("After 3 rounds of 4 points, the total is twelve.", "12"),
        ("The answer is twenty-five.", "25"),
        ("So he ends up with one hundred and five apples.", "105"),
        ("Each of the 6 boxes holds 7, which makes forty two in all.", "42"),
        ("12 minus 12 leaves zero cookies.", "0"),
        ("Final answer: Three thousand two hundred.", "3200"),
        # near misses: a number word that is no quantity of the answer
        ("One of the 12 boxes was empty, so 11 boxes remain.", "11"),
        ("There are 3 friends and each one gets 4 cookies, so 12 in total.", "12"),
        ("Two of the agents said 15, but the answer is 14.", "14"),
        ("It takes 45 minutes, one way.", "45"),
    ],
)
def test_numbers_written_in_words(text, want):
    _read(text, "numeric", want)


# ------------------------------------------------------------------ mixed numbers
@pytest.mark.parametrize(
    "text, want",
    [
        ("She needs 3 3/4 cups of flour.", "15/4"),
        ("The answer is 2 1/2 hours.", "5/2"),
        ("That makes 1 1/3 pizzas each.", "4/3"),
        ("#### 4 1/2", "9/2"),
        ("Each gets -1 1/4 degrees.", "-5/4"),
        # near misses
        ("Multiply 5 by 3/4 to get 15/4.", "15/4"),
        ("The 2 boxes hold 1/2 of the cake, so 1/4 each.", "1/4"),
    ],
)
def test_mixed_numbers_are_one_number(text, want):
    _read(text, "numeric", want)


# ------------------------------------------------------------------ an amount with its breakdown after it
@pytest.mark.parametrize(
    "text, want",
    [
        ("The total is $2,050.75 ($1,900 rent and $150.75 fees).", "2050.75"),
        ("She pays $45 ($30 for the shirt plus $15 for the hat).", "45"),
        ("That comes to 96 dollars (64 for adults and 32 for kids).", "96"),
        ("In all 120 km [80 km by train, 40 km by bus].", "120"),
        ("Answer: 18 (9 eggs at $2 each)", "18"),
        # near misses: a parenthesis that is not a breakdown of the number before it
        ("The shirt costs $30 (before tax). With tax it is $33.", "33"),
        ("She had 20 (10 red and 10 blue) and bought 5 more, so she has 25.", "25"),
        ("Step 1 (adding): 3 + 4 = 7", "7"),
    ],
)
def test_an_amount_is_not_its_breakdown(text, want):
    _read(text, "numeric", want)


# ------------------------------------------------------------------ decimal commas, other languages
@pytest.mark.parametrize(
    "text, want",
    [
        ("Die Antwort ist 3,5.", "7/2"),
        ("Die Antwort lautet 12,25 Euro.", "49/4"),
        ("La réponse est 12,5.", "25/2"),
        ("La respuesta es 7, porque 3 + 4 = 7 y luego revisamos 2 veces.", "7"),
        ("A resposta é 0,75.", "3/4"),
        ("La risposta è 18: 9 uova a 2 euro.", "18"),
        ("答えは 18 です。計算：16 - 3 - 4 = 9 個の卵を 2 ドルで売ります。", "18"),
        ("答案是 42。因为 6 × 7 = 42，然后再检查 3 遍。", "42"),
        ("最终答案：15。解释：每人 5 个，共 3 人。", "15"),
        # near misses: an English comma is a thousands separator or a list, as before
        ("The answer is 3,500.", "3500"),
        ("The answer is 7, since 3 + 4 = 7.", "7"),
    ],
)
def test_decimal_commas_and_answer_sentences_in_other_languages(text, want):
    _read(text, "numeric", want)


# ------------------------------------------------------------------ a last sentence restating the question
@pytest.mark.parametrize(
    "question, text, want",
    [
        (
            "Ann has 4 books of 15 stamps. She uses 37 stamps. How many stamps are left?",
            "4 x 15 = 60 and 60 - 37 = 23. So Ann has 23 stamps left from her 4 books of 15.",
            "23",
        ),
        (
            "A farmer has 12 rows of 8 plants. 5 die. How many are alive?",
            "12 * 8 = 96, 96 - 5 = 91. There are 91 plants alive out of the 12 rows of 8.",
            "91",
        ),
        (
            "Tom reads 20 pages a day for 7 days. How many pages?",
            "That is 140 pages after reading 20 pages a day for 7 days.",
            "140",
        ),
        # near misses: the answer is one of the question's numbers; no question given
        ("Tom has 5 apples and eats none. How many does he have?", "So Tom still has 5 apples.", "5"),
        (None, "4 x 15 = 60 and 60 - 37 = 23. So Ann has 23 stamps.", "23"),
    ],
)
def test_a_last_sentence_restating_the_questions_numbers(question, text, want):
    _read(text, "numeric", want, question=question)


# ------------------------------------------------------------------ prose with no answer statement
@pytest.mark.parametrize(
    "question, text, want",
    [
        (None, "Adding them up gives 47 marbles across the 3 jars.", "47"),
        (None, "That makes 120 dollars for 4 weeks.", "120"),
        (None, "He walks 5 miles a day, so he walks 35 miles over 7 days.", "35"),
        (None, "Altogether she saves 360 dollars in 12 months.", "360"),
        (None, "Each of the 4 boxes holds 6 pens, so there are 24 pens in 4 boxes.", "24"),
        (None, "The total cost comes to 250 dollars for the 5 tickets.", "250"),
        (None, "Subtracting the used ones, 13 eggs remain from the 2 dozen.", "13"),
        (None, "6 * 7 = 42 chairs across all 6 rooms.", "42"),
        ("A jar holds 16 marbles. How many marbles in 3 jars?", "So there are 48 marbles in the 3 jars.", "48"),
        # near misses: the last number stays where it is the answer, or where no quantity is stated
        (None, "So the bus leaves at 3 and arrives in 2 hours.", "2"),
        (None, "So she reads 20 pages a day for 5 days.", "5"),
        (None, "3 apples cost 2 dollars each, so he pays 6 dollars.", "6"),
        (None, "It is 12 in the morning and 5 in the evening, a difference of 7.", "7"),
        (None, "The total is 120 for 4 weeks, or 30 per week.", "30"),
        (None, "So the answer comes out to 14 in total.", "14"),
        (None, "After 3 days, she has 12 left.", "12"),
        (None, "He finishes the 180 km in 3 hours.", "3"),
        ("How long does it take to drive 180 km at 60 km/h?", "So he drives 180 km in 3 hours.", "3"),
        (None, "So he drives 180 km in 3 hours, then rests for 2 hours.", "2"),
    ],
)
def test_prose_without_an_answer_statement_reads_the_quantity_it_states(question, text, want):
    _read(text, "numeric", want, question=question)


# ------------------------------------------------------------------ an expression in a box
@pytest.mark.parametrize(
    "text, want",
    [
        ("\\boxed{12*7}", "84"),
        ("So the area is $\\boxed{12 \\times 7}$.", "84"),
        ("\\boxed{3 + 4}", "7"),
        ("\\boxed{(2+3) \\cdot 4}", "20"),
        ("\\boxed{90 \\div 4}", "45/2"),
        ("\\boxed{2^{10}}", "1024"),
        ("\\boxed{5 - 2}", "3"),
        # near misses
        ("\\boxed{12}", "12"),
        ("\\boxed{-5}", "-5"),
        ("\\boxed{1,000}", "1000"),
        ("\\boxed{x + 1}", None),
    ],
)
def test_an_expression_in_a_box_is_its_value(text, want):
    _read(text, "numeric", want)


def test_the_questions_own_expression_copied_into_a_box_is_no_answer():
    question = "What is the result of 12+6*8+11-28*23?"
    text = "The final answer is \\boxed{12+6*8+11-28*23}"
    assert extract_answer(text, "numeric", question=question) is None
    word_problem = "Each box holds 12 eggs and there are 7 boxes. How many eggs?"
    assert extract_answer("\\boxed{12 \\times 7}", "numeric", question=word_problem) == "84"
    assert extract_answer(text, "numeric") == "-573"  # without the question: computed


def test_an_expression_too_large_to_compute_is_no_answer():
    for text in ("\\boxed{9^{9^{9}}}", "\\boxed{" + "*".join(["99"] * 40) + "}", "\\boxed{2^{100000}}"):
        assert extract_answer(text, "numeric") is None, text


# ------------------------------------------------------------------ the option's text only
CELL = ("mitochondrion", "ribosome", "nucleus", "Golgi apparatus")
DEMAND = ("A fall in supply", "A fall in demand", "A rise in demand", "No change in price")


@pytest.mark.parametrize(
    "text, options, want",
    [
        ("Proteins are made at the ribosome, so it is the ribosome.", CELL, "B"),
        ("I think it's the nucleus.", CELL, "C"),
        ("The answer is the Golgi apparatus.", CELL, "D"),
        ("**Golgi apparatus**", CELL, "D"),
        ("The answer is A rise in demand.", DEMAND, "C"),
        ("Prices went up because of a rise in demand.", DEMAND, "C"),
        ("Answer: a fall in demand", DEMAND, "B"),
        ("Answer: the nucleus. The ribosome only reads the mRNA it exports.", CELL, "C"),
        ("The answer is A rise in demand; a fall in supply would do it too.", DEMAND, "C"),
        # near misses: a letter given outranks a text; a text named as wrong is not chosen
        ("Both the nucleus and the ribosome hold RNA, but the answer is (A).", CELL, "A"),
        ("It is not the nucleus; it is the ribosome.", CELL, "B"),
        ("The nucleus is wrong. The mitochondrion makes ATP.", CELL, "A"),
        ("The answer is A.", DEMAND, "A"),
        ("A rise in demand would raise prices, but supply fell: (A).", DEMAND, "A"),
    ],
)
def test_multiple_choice_answered_with_the_options_text(text, options, want):
    _read(text, "choice", want, choices=options)


def test_a_letter_before_a_reason_is_still_the_letter():
    for options in ((), DEMAND):
        assert extract_answer("The answer is A because demand rose.", "choice", choices=options) == "A"
