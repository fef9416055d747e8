"""Tests for engine.tasks: arithmetic generation and dataset loaders."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import pickle
import re
from collections import Counter
from pathlib import Path

import pytest

from engine.dataset_routing import load_questions
from engine.tasks import TASKS, DatasetError, Question, arithmetic_questions
from engine.tasks.files import FIELD_NAMES, infer_task, load_dataset

FORMATS = ("jsonl", "json", "csv", "parquet")


# --------------------------------------------------------------------------- helpers


def write(tmp_path: Path, fmt: str, rows: list[dict], name: str = "data") -> Path:
    """Write rows in one of the supported formats. For CSV the rows must be flat."""
    path = tmp_path / f"{name}.{fmt}"
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    elif fmt == "json":
        path.write_text(json.dumps(rows), encoding="utf-8")
    elif fmt == "csv":
        cols: list[str] = []
        for r in rows:
            cols += [k for k in r if k not in cols]
        with open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=cols)
            w.writeheader()
            for r in rows:
                w.writerow(r)
    elif fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), path)
    else:  # pragma: no cover
        raise AssertionError(fmt)
    return path


def first_row(fmt: str) -> int:
    """Row number of the first data row in a file written by write()."""
    return 2 if fmt == "csv" else 1


def raises_at(path: Path, row: int | None, *fragments: str):
    """Context manager: DatasetError naming the file (and row) and containing fragments."""

    class _Ctx:
        def __enter__(self):
            self.cm = pytest.raises(DatasetError)
            self.info = self.cm.__enter__()
            return self.info

        def __exit__(self, *exc):
            handled = self.cm.__exit__(*exc)
            msg = str(self.info.value)
            assert path.name in msg, msg
            if row is not None:
                assert f"{path.name}:{row}:" in msg, msg
            for frag in fragments:
                assert frag in msg, msg
            return handled

    return _Ctx()


# --------------------------------------------------------------------------- arithmetic

ARITH_RE = re.compile(
    r"^What is the result of (\d+)\+(\d+)\*(\d+)\+(\d+)-(\d+)\*(\d+)\? "
    r"Make sure to state your answer at the end of the response\.$"
)


def test_arithmetic_deterministic():
    assert arithmetic_questions(50, seed=3) == arithmetic_questions(50, seed=3)
    assert arithmetic_questions(50, seed=3) != arithmetic_questions(50, seed=4)


def test_arithmetic_gold_and_text_match_meta():
    qs = arithmetic_questions(300, seed=7)
    for i, q in enumerate(qs):
        m = q.meta
        assert set(m) >= set("abcdef")
        a, b, c, d, e, f = (m[k] for k in "abcdef")
        assert q.gold == str(a + b * c + d - e * f)
        assert tuple(int(x) for x in ARITH_RE.match(q.text).groups()) == (a, b, c, d, e, f)
        assert q.qid == f"arith-7-{i:05d}"
        assert q.task == "numeric" and q.source == "arithmetic" and q.row == 0 and q.choices == ()
    assert any(q.gold.startswith("-") for q in qs)  # negative results happen and keep the sign


def test_arithmetic_prefix_property():
    long = arithmetic_questions(20, seed=11)
    assert arithmetic_questions(5, seed=11) == long[:5]
    assert arithmetic_questions(0, seed=11) == []


def test_arithmetic_value_range_inclusive():
    values = Counter()
    for q in arithmetic_questions(2000, seed=0):
        for k in "abcdef":
            values[q.meta[k]] += 1
    assert set(values) == set(range(30))  # both ends reachable, nothing outside


def test_arithmetic_bad_n():
    with pytest.raises(ValueError):
        arithmetic_questions(-1)


def test_load_questions_arithmetic():
    assert len(load_questions("arithmetic", None, None, 0)) == 100
    five = load_questions("arithmetic", "numeric", 5, 9)
    assert five == arithmetic_questions(5, 9)
    assert load_questions("arithmetic", None, 3, 9, offset=2) == arithmetic_questions(5, 9)[2:]
    with pytest.raises(ValueError, match="--task"):
        load_questions("arithmetic", "choice", 5, 0)
    with pytest.raises(ValueError, match="--limit must be positive"):
        load_questions("arithmetic", None, 0, 0)
    with pytest.raises(ValueError, match="--task"):
        load_questions("arithmetic", "bogus", 5, 0)


def test_question_hashable_and_picklable():
    q = arithmetic_questions(1, 0)[0]
    assert hash(q) == hash(arithmetic_questions(1, 0)[0])
    assert pickle.loads(pickle.dumps(q)) == q
    with pytest.raises(dataclasses.FrozenInstanceError):
        q.gold = "1"  # frozen


# --------------------------------------------------------------------------- numeric

NUMERIC_ROWS = [
    {"id": "q1", "question": "How many?", "answer": "18", "subject": "eggs"},
    {"id": "q2", "question": " Big number? ", "answer": "1,450,000", "subject": "money"},
    {"id": "q3", "question": "Below zero?", "answer": "-3", "subject": "temp"},
    {"id": "q4", "question": "Share?", "answer": "3/4", "subject": "pie"},
    {"id": "q5", "question": "Full solution?", "answer": "2 + 2 = <<2+2=4>>4\n#### 4", "subject": "x"},
    {"id": "q6", "question": "Decimal?", "answer": "-0.25", "subject": "x"},
]


@pytest.mark.parametrize("fmt", FORMATS)
def test_numeric_all_formats(tmp_path, fmt):
    path = write(tmp_path, fmt, NUMERIC_ROWS)
    qs = load_dataset(path, "numeric")
    assert [q.gold for q in qs] == ["18", "1,450,000", "-3", "3/4", "4", "-0.25"]
    assert [q.qid for q in qs] == ["q1", "q2", "q3", "q4", "q5", "q6"]
    assert qs[1].text == "Big number?"
    assert [q.row for q in qs] == [first_row(fmt) + i for i in range(6)]
    assert all(q.task == "numeric" and q.source == str(path) for q in qs)
    assert qs[0].meta == {"id": "q1", "subject": "eggs"}


def test_numeric_solution_fallback_and_meta_excludes_solution(tmp_path):
    rows = [{"question": "Q?", "solution": "work\n#### 1,234", "level": 3}]
    path = write(tmp_path, "jsonl", rows, name="gsm_like")
    (q,) = load_dataset(path, "numeric")
    assert q.gold == "1,234"
    assert q.qid == "gsm_like-00000"
    assert q.meta == {"level": 3}
    # When an answer is present the solution is still not copied into meta.
    rows = [{"question": "Q?", "answer": "7", "solution": "#### 7"}]
    (q,) = load_dataset(write(tmp_path, "jsonl", rows, name="b"), "numeric")
    assert q.gold == "7" and "solution" not in q.meta


def test_numeric_int_and_float_answers(tmp_path):
    rows = [{"question": "a", "answer": 12}, {"question": "b", "answer": -2.5}]
    qs = load_dataset(write(tmp_path, "json", rows), "numeric")
    assert [q.gold for q in qs] == ["12", "-2.5"]


def test_alternative_field_names(tmp_path):
    rows = [
        {"problem": "p", "gold": "1"},
        {"input": "i", "label": "2"},
        {"prompt": "pr", "target": "3"},
    ]
    qs = load_dataset(write(tmp_path, "jsonl", rows), "numeric")
    assert [(q.text, q.gold) for q in qs] == [("p", "1"), ("i", "2"), ("pr", "3")]


def test_fields_override(tmp_path):
    rows = [{"uid": "u1", "body": "What?", "result": "5", "answer": "not used"}]
    path = write(tmp_path, "jsonl", rows)
    (q,) = load_dataset(path, "numeric", fields={"id": "uid", "question": "body", "answer": "result"})
    assert (q.qid, q.text, q.gold) == ("u1", "What?", "5")
    assert q.meta == {"uid": "u1", "answer": "not used"}
    with raises_at(path, 1, "missing field 'nope'"):
        load_dataset(path, "numeric", fields={"answer": "nope", "question": "body"})
    with pytest.raises(ValueError, match="unknown field name"):
        load_dataset(path, "numeric", fields={"bogus": "x"})


# --------------------------------------------------------------------------- math


@pytest.mark.parametrize("fmt", FORMATS)
def test_math_all_formats(tmp_path, fmt):
    rows = [
        {"id": "m1", "question": "Solve", "answer": "\\frac{9}{7}", "level": "Level 2"},
        {"id": "m2", "question": "Interval", "answer": "x \\in [-2,7]", "level": "Level 5"},
    ]
    qs = load_dataset(write(tmp_path, fmt, rows), "math")
    assert [q.gold for q in qs] == ["\\frac{9}{7}", "x \\in [-2,7]"]
    assert qs[1].meta == {"id": "m2", "level": "Level 5"}


def test_math_boxed_fallback(tmp_path):
    rows = [
        {"question": "a", "solution": "so $\\boxed{\\frac{1}{2}}$."},
        {"question": "b", "solution": "first \\boxed{1} then \\boxed{\\{1, 2\\}} done"},
        {"question": "c", "solution": "nested \\boxed{f(x)^{2}+\\sqrt{3}}"},
        {"question": "d", "solution": "no braces \\boxed 5$"},
    ]
    qs = load_dataset(write(tmp_path, "jsonl", rows), "math")
    assert [q.gold for q in qs] == ["\\frac{1}{2}", "\\{1, 2\\}", "f(x)^{2}+\\sqrt{3}", "5"]


def test_math_gold_reads_boxes_as_the_extractor_does(tmp_path):
    """The gold reader and the answer extractor share one box parser (engine.latex): blanks may
    come before the brace, ``\\boxedfoo`` is no box, and an unclosed last box is ignored."""
    from engine.extract import extract_answer

    rows = [
        {"question": "a", "solution": "so \\boxed\t{7}."},
        {"question": "b", "solution": "first \\boxed{1}, then \\boxedfoo{2}"},
        {"question": "c", "solution": "first \\boxed{ 3 }, then \\boxed{4"},
    ]
    qs = load_dataset(write(tmp_path, "jsonl", rows), "math")
    assert [q.gold for q in qs] == ["7", "1", "3"]
    assert [extract_answer(r["solution"], "math") for r in rows] == ["7", "1", "3"]
    path = write(tmp_path, "jsonl", [{"question": "a", "solution": "only \\boxedfoo{2}"}], name="foo")
    with raises_at(path, 1, "\\boxed"):
        load_dataset(path, "math")


def test_math_errors(tmp_path):
    path = write(tmp_path, "jsonl", [{"question": "a", "answer": "1"}, {"question": "b", "solution": "no box"}])
    with raises_at(path, 2, "missing field 'answer'", "\\boxed"):
        load_dataset(path, "math")
    path = write(tmp_path, "jsonl", [{"question": "a", "solution": "\\boxed{1"}], name="unbal")
    with raises_at(path, 1, "\\boxed"):
        load_dataset(path, "math")
    path = write(tmp_path, "jsonl", [{"question": "a", "answer": "  "}], name="empty")
    with raises_at(path, 1, "'answer' is empty"):
        load_dataset(path, "math")


# --------------------------------------------------------------------------- choice

CHOICE_ROWS = [
    {"id": "c1", "question": "Pick", "choices": ["red", "green", "blue", "black"], "answer": "C", "subject": "s"},
    {"id": "c2", "question": "Pick2", "choices": ["0", "4", "2", "6"], "answer": "B", "subject": "s"},
]


@pytest.mark.parametrize("fmt", ["jsonl", "json", "parquet"])
def test_choice_list_formats(tmp_path, fmt):
    qs = load_dataset(write(tmp_path, fmt, CHOICE_ROWS), "choice")
    assert qs[0].text == "Pick\n(A) red\n(B) green\n(C) blue\n(D) black"
    assert qs[0].choices == ("red", "green", "blue", "black")
    assert [q.gold for q in qs] == ["C", "B"]
    assert qs[0].meta == {"id": "c1", "subject": "s"}


@pytest.mark.parametrize("fmt", FORMATS)
def test_choice_letter_columns(tmp_path, fmt):
    rows = [{"question": "Q", "A": "x", "B": "y", "C": "z", "answer": "b", "subject": "t"}]
    (q,) = load_dataset(write(tmp_path, fmt, rows), "choice")
    assert q.choices == ("x", "y", "z")
    assert q.gold == "B"
    assert q.text == "Q\n(A) x\n(B) y\n(C) z"
    assert q.meta == {"subject": "t"}


def test_choice_csv_json_encoded_list(tmp_path):
    rows = [{"question": "Q", "choices": json.dumps(["p", "q"]), "answer": "A"}]
    (q,) = load_dataset(write(tmp_path, "csv", rows), "choice")
    assert q.choices == ("p", "q") and q.gold == "A"


def test_choice_answer_forms(tmp_path):
    ch = ["alpha", "beta", "gamma"]
    rows = [
        {"question": "1", "choices": ch, "answer": 0},  # int index, 0-based
        {"question": "2", "choices": ch, "answer": 2},
        {"question": "3", "choices": ch, "answer": "gamma"},  # choice text
        {"question": "4", "choices": ch, "answer": "(B)"},  # decorated letter
        {"question": "5", "choices": ch, "label": "1"},  # digit string index
        {"question": "6", "options": {"A": "u", "B": "v"}, "answer": "B"},
        {"question": "7", "options": ["u", "v"], "answer": "a"},
    ]
    qs = load_dataset(write(tmp_path, "jsonl", rows), "choice")
    assert [q.gold for q in qs] == ["A", "C", "C", "B", "B", "B", "A"]


@pytest.mark.parametrize(
    "row, fragment",
    [
        ({"question": "Q", "choices": ["only"], "answer": "A"}, "at least 2 choices"),
        ({"question": "Q", "choices": ["a", "b", "c", "d"], "answer": "E"}, "not one of the 4 choices"),
        ({"question": "Q", "choices": ["a", "b"], "answer": 2}, "out of range"),
        ({"question": "Q", "choices": ["a", "b"], "answer": "maybe"}, "'maybe'"),
        ({"question": "Q", "choices": ["a", "b"], "answer": True}, "bool"),
        ({"question": "Q", "choices": "a;b", "answer": "A"}, "must be a list"),
        ({"question": "Q", "choices": ["a", None], "answer": "A"}, "must be a string"),
        ({"question": "Q", "answer": "A"}, "missing field 'choices'"),
        ({"question": "Q", "choices": ["a", "b"]}, "missing field 'answer'"),
    ],
)
def test_choice_errors(tmp_path, row, fragment):
    good = CHOICE_ROWS[0]
    path = tmp_path / "bad.jsonl"
    # a blank line in front: row numbers are line numbers
    path.write_text(json.dumps(good) + "\n\n" + json.dumps(row) + "\n")
    with raises_at(path, 3, fragment):
        load_dataset(path, "choice")


# --------------------------------------------------------------------------- pair

CONV_A = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello there"}]
CONV_B = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "go away"}]


@pytest.mark.parametrize("fmt", ["jsonl", "json", "parquet"])
def test_pair_conversations(tmp_path, fmt):
    rows = [
        {"question_id": "x1", "conversation_a": CONV_A, "conversation_b": CONV_B, "winner": "model_a", "turn": 1},
        {"question_id": "x2", "conversation_a": CONV_B, "conversation_b": CONV_A, "winner": "model_b", "turn": 1},
    ]
    qs = load_dataset(write(tmp_path, fmt, rows), "pair")
    assert [q.gold for q in qs] == ["A", "B"]
    q = qs[0]
    assert q.task == "pair" and q.choices == ()
    assert q.text == (
        "Dialogue A:\nuser: hi\nassistant: hello there\n\n"
        "Dialogue B:\nuser: hi\nassistant: go away\n\n"
        "Which dialogue is better, A or B?"
    )
    assert q.meta == {"question_id": "x1", "turn": 1}


@pytest.mark.parametrize("fmt", FORMATS)
def test_pair_string_dialogues_and_labels(tmp_path, fmt):
    labels = ["A", "b", "model_a", "1", "a", "0"]
    rows = [
        {"id": f"p{i}", "prompt": "Say hi", "response_a": f"hi {i}", "response_b": f"yo {i}", "label": lab}
        for i, lab in enumerate(labels)
    ]
    qs = load_dataset(write(tmp_path, fmt, rows), "pair")
    assert [q.gold for q in qs] == ["A", "B", "A", "B", "A", "A"]
    assert qs[0].text.startswith("Say hi\n\nDialogue A:\nhi 0\n\nDialogue B:\nyo 0\n\n")


def test_pair_int_labels_and_dialogue_keys(tmp_path):
    rows = [
        {"dialogue_a": "x", "dialogue_b": "y", "preference": 0},
        {"dialogue_a": "x", "dialogue_b": "y", "preference": 1},
    ]
    qs = load_dataset(write(tmp_path, "jsonl", rows), "pair")
    assert [q.gold for q in qs] == ["A", "B"]


def test_pair_chosen_rejected_randomised(tmp_path):
    rows = [{"id": f"hh-{i}", "chosen": f"GOOD {i}", "rejected": f"BAD {i}"} for i in range(400)]
    path = write(tmp_path, "jsonl", rows, name="hh")
    qs = load_dataset(path, "pair")
    again = load_dataset(path, "pair")
    assert qs == again  # deterministic
    golds = Counter(q.gold for q in qs)
    assert 140 <= golds["A"] <= 260, golds  # balanced-ish
    for i, q in enumerate(qs):
        a_part = q.text.split("Dialogue B:")[0]
        assert (f"GOOD {i}" in a_part) == (q.gold == "A")
        assert f"GOOD {i}" in q.text and f"BAD {i}" in q.text
        assert "chosen" not in q.meta and "rejected" not in q.meta
    # The order depends on the question id only, not on file position or slicing.
    sliced = load_dataset(path, "pair", offset=100, limit=10)
    assert sliced == qs[100:110]
    # Without an id (qid from the file name and position) the order comes from the row's content:
    # renaming the file, or moving a row, does not change its gold letter.
    rows2 = [{"chosen": f"c{i}", "rejected": f"r{i}"} for i in range(50)]
    p2 = write(tmp_path, "json", rows2, name="noid")
    renamed = write(tmp_path, "json", rows2[::-1], name="other-name")
    gold = {q.text: q.gold for q in load_dataset(p2, "pair")}
    assert {q.text: q.gold for q in load_dataset(renamed, "pair")} == gold and len(set(gold.values())) == 2


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv"])
def test_gzipped_files_read_like_plain_ones(tmp_path, fmt):
    import gzip

    rows = [{"id": f"q{i}", "question": f"{i} + 1?", "answer": str(i + 1)} for i in range(5)]
    plain = write(tmp_path, fmt, rows)
    gz = tmp_path / f"data.{fmt}.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))

    def fields(qs):
        return [(q.qid, q.text, q.gold, q.row) for q in qs]

    assert fields(load_dataset(gz, "numeric")) == fields(load_dataset(plain, "numeric"))
    assert infer_task(gz) == "numeric"
    bad = tmp_path / "x.parquet.gz"
    bad.write_bytes(b"")
    with pytest.raises(DatasetError, match="unknown file extension"):
        load_dataset(bad, "numeric")


@pytest.mark.parametrize(
    "row, fragment",
    [
        ({"conversation_a": CONV_A, "conversation_b": CONV_B, "winner": "tie"}, "'tie'"),
        ({"conversation_a": CONV_A, "winner": "model_a"}, "no partner 'conversation_b'"),
        ({"conversation_a": CONV_A, "conversation_b": CONV_B}, "missing field 'answer'"),
        ({"conversation_a": [{"role": "user"}], "conversation_b": CONV_B, "winner": "model_a"}, "message 1"),
        ({"conversation_a": 5, "conversation_b": CONV_B, "winner": "model_a"}, "must be a string or a list"),
        ({"conversation_a": [], "conversation_b": CONV_B, "winner": "model_a"}, "empty dialogue"),
        ({"question": "q", "label": "A"}, "missing dialogue fields"),
        ({"response_a": "x", "response_b": "y", "label": 2}, "not a preference"),
    ],
)
def test_pair_errors(tmp_path, row, fragment):
    path = write(tmp_path, "jsonl", [{"response_a": "x", "response_b": "y", "label": "A"}, row], name="pairs")
    with raises_at(path, 2, fragment):
        load_dataset(path, "pair")


# --------------------------------------------------------------------------- malformed files


def test_jsonl_invalid_json_line_number_counts_blank_lines(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"question": "a", "answer": "1"}\n\n\n{"question": "b", "answer": 2\n')
    with raises_at(path, 4, "invalid JSON"):
        load_dataset(path, "numeric")


def test_jsonl_non_object_line(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"question": "a", "answer": "1"}\n[1, 2]\n')
    with raises_at(path, 2, "not a JSON object"):
        load_dataset(path, "numeric")


def test_jsonl_bad_utf8(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_bytes(b'{"question": "a", "answer": "1"}\n{"question": "\xff", "answer": "1"}\n')
    with raises_at(path, 2, "UTF-8"):
        load_dataset(path, "numeric")


def test_jsonl_bom_accepted(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"question": "a", "answer": "1"}\n')
    assert load_dataset(path, "numeric")[0].gold == "1"


def test_missing_field_message_format(tmp_path):
    path = tmp_path / "data.jsonl"
    lines = [f'{{"id": "x{i}", "question": "q", "answer": "1"}}' for i in range(16)]
    lines.append('{"id": "x16", "question": "q"}')
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DatasetError) as info:
        load_dataset(path, "numeric")
    assert str(info.value).startswith(f"{path}:17: missing field 'answer' (have: id, question")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    "bad, fragment",
    [
        ({"question": "", "answer": "1"}, "missing field 'question'"),  # CSV: empty cell is missing
        ({"question": "   ", "answer": "1"}, "'question' is empty"),
        ({"question": "q", "answer": "eighteen"}, "is not a number"),
        ({"question": "q", "answer": "18 dollars"}, "is not a number"),
        ({"question": "q", "answer": "#### "}, "nothing after '####'"),
        ({"question": "q", "answer": "1/0"}, "is not a number"),
        ({"answer": "1"}, "missing field 'question'"),
    ],
)
def test_numeric_row_errors_all_formats(tmp_path, fmt, bad, fragment):
    if fmt != "csv" and bad.get("question") == "":
        fragment = "'question' is empty"
    rows = [{"question": "ok", "answer": "1"}, {"question": "ok", "answer": "2"}, bad]
    path = write(tmp_path, fmt, rows)
    with raises_at(path, first_row(fmt) + 2, fragment):
        load_dataset(path, "numeric")


@pytest.mark.parametrize("fmt", ["jsonl", "json", "parquet"])
def test_non_string_question(tmp_path, fmt):
    path = write(tmp_path, fmt, [{"question": 12, "answer": "1"}])
    with raises_at(path, 1, "'question' must be a string, got int"):
        load_dataset(path, "numeric")


def test_null_fields_count_as_missing(tmp_path):
    path = write(tmp_path, "jsonl", [{"question": "q", "answer": None, "solution": "no marker"}])
    with raises_at(path, 1, "missing field 'answer'", "'solution' has no '####'"):
        load_dataset(path, "numeric")


def test_missing_file_and_unknown_extension(tmp_path):
    missing = tmp_path / "nowhere.jsonl"
    with raises_at(missing, None, "no such file"):
        load_dataset(missing, "numeric")
    with raises_at(missing, None, "no such file"):
        load_questions(str(missing), None, None, 0)
    odd = tmp_path / "data.xlsx"
    odd.write_text("whatever")
    with raises_at(odd, None, "unknown file extension", ".xlsx"):
        load_dataset(odd, "numeric")


@pytest.mark.parametrize("fmt", FORMATS)
def test_empty_files(tmp_path, fmt):
    path = tmp_path / f"empty.{fmt}"
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"question": pa.array([], pa.string()), "answer": pa.array([], pa.string())}), path)
    elif fmt == "csv":
        path.write_text("question,answer\n")
    elif fmt == "json":
        path.write_text("[]")
    else:
        path.write_text("\n\n")
    with raises_at(path, None, "empty"):
        load_dataset(path, "numeric")
    zero = tmp_path / f"zero.{fmt}"
    zero.write_bytes(b"")
    with pytest.raises(DatasetError, match="zero"):
        load_dataset(zero, "numeric")


def test_json_not_a_list_and_bad_json(tmp_path):
    path = tmp_path / "data.json"
    path.write_text('{"question": "a"}')
    with raises_at(path, None, "expected a JSON list"):
        load_dataset(path, "numeric")
    path.write_text('[\n {"question": "a", "answer": "1"},\n {"question": "b", answer: 1}\n]')
    with raises_at(path, 3, "invalid JSON"):
        load_dataset(path, "numeric")
    path.write_text('[{"question": "a", "answer": "1"}, "oops"]')
    with raises_at(path, 2, "not a JSON object"):
        load_dataset(path, "numeric")


def test_csv_wrong_number_of_values(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("question,answer\nq1,1\nq2,2,extra\n")
    with raises_at(path, 3, "3 values", "2 columns"):
        load_dataset(path, "numeric")


def test_csv_row_numbers_are_records_plus_header(tmp_path):
    path = tmp_path / "data.csv"
    # A quoted field spanning two lines is still one row; blank lines are counted.
    path.write_text('question,answer\n"line one\nline two",1\n\nq,oops\n')
    with raises_at(path, 4, "'oops'"):
        load_dataset(path, "numeric")
    (q,) = load_dataset(path, "numeric", limit=1)
    assert q.text == "line one\nline two" and q.row == 2


def test_parquet_garbage(tmp_path):
    path = tmp_path / "data.parquet"
    path.write_bytes(b"this is not parquet at all")
    with raises_at(path, None, "Parquet"):
        load_dataset(path, "numeric")


def test_duplicate_ids(tmp_path):
    rows = [{"id": "same", "question": "a", "answer": "1"}, {"id": "same", "question": "b", "answer": "2"}]
    path = write(tmp_path, "jsonl", rows)
    with raises_at(path, 2, "duplicate id 'same'", "row 1"):
        load_dataset(path, "numeric")


# --------------------------------------------------------------------------- limit / offset


def test_limit_offset(tmp_path):
    rows = [{"question": f"q{i}", "answer": str(i)} for i in range(10)]
    path = write(tmp_path, "jsonl", rows, name="ten")
    all_qs = load_dataset(path, "numeric")
    assert [q.qid for q in all_qs] == [f"ten-{i:05d}" for i in range(10)]
    assert load_dataset(path, "numeric", limit=3) == all_qs[:3]
    assert load_dataset(path, "numeric", offset=4) == all_qs[4:]
    assert load_dataset(path, "numeric", limit=3, offset=8) == all_qs[8:]
    assert load_dataset(path, "numeric", limit=100) == all_qs
    with pytest.raises(ValueError, match="--limit must be positive"):
        load_dataset(path, "numeric", limit=0)
    with pytest.raises(ValueError, match="--limit must be positive"):
        load_dataset(path, "numeric", limit=-2)
    with pytest.raises(ValueError, match="--offset"):
        load_dataset(path, "numeric", offset=-1)
    with pytest.raises(ValueError, match="--offset 10 is past the end"):
        load_dataset(path, "numeric", offset=10)
    with pytest.raises(ValueError, match="--task"):
        load_dataset(path, "essay")


def test_limit_stops_before_bad_rows(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"question": "a", "answer": "1"}\n{"question": "b", "answer": "1"}\nnot json\n')
    assert len(load_dataset(path, "numeric", limit=2)) == 2
    with raises_at(path, 3, "invalid JSON"):
        load_dataset(path, "numeric", limit=3)


# --------------------------------------------------------------------------- infer_task / front door


def test_infer_task(tmp_path):
    cases = {
        "choice": [{"question": "q", "choices": ["a", "b"], "answer": "A"}],
        "choice2": [{"question": "q", "A": "a", "B": "b", "answer": "A"}],
        "pair": [{"conversation_a": "x", "conversation_b": "y", "winner": "model_a"}],
        "pair2": [{"chosen": "x", "rejected": "y"}],
        "latex": [{"question": "q", "answer": "\\frac{1}{2}"}],
        "boxedonly": [{"question": "q", "solution": "\\boxed{3}"}],
        "freeform": [{"question": "q", "answer": "x < 3"}],
        "numeric": [{"question": "q", "answer": "1,234"}],
        "hashes": [{"question": "q", "solution": "blah #### 5"}],
        "mathsy_name": [{"question": "q", "answer": "5"}],
        "nothing": [{"foo": "bar"}],
    }
    expected = {
        "choice": "choice",
        "choice2": "choice",
        "pair": "pair",
        "pair2": "pair",
        "latex": "math",
        "boxedonly": "math",
        "freeform": "math",
        "numeric": "numeric",
        "hashes": "numeric",
        "mathsy_name": "math",
        "nothing": None,
    }
    for name, rows in cases.items():
        assert infer_task(write(tmp_path, "jsonl", rows, name=name)) == expected[name], name
    path = write(tmp_path, "csv", [{"question": "q", "answer": "12"}], name="plain")
    assert infer_task(path) == "numeric"
    assert [q.gold for q in load_questions(str(path), None, None, 0)] == ["12"]
    nothing = tmp_path / "nothing.jsonl"
    with raises_at(nothing, None, "cannot tell the task", "--task"):
        load_questions(str(nothing), None, None, 0)


def test_load_questions_file(tmp_path):
    rows = [{"question": f"q{i}", "answer": str(i)} for i in range(5)]
    path = write(tmp_path, "parquet", rows)
    qs = load_questions(str(path), "numeric", 2, 123)
    assert [q.gold for q in qs] == ["0", "1"]
    assert load_questions(path, None, None, 0, offset=3)[0].gold == "3"


def test_constants():
    assert TASKS == ("numeric", "math", "choice", "pair")
    assert {"question", "answer", "choices", "id"} <= set(FIELD_NAMES)
    assert issubclass(DatasetError, ValueError)
    assert Question("a", "numeric", "t", "1").meta == {}


# --------------------------------------------------------------------------- real data (optional)


def _data_dir() -> Path:
    env = os.environ.get("DEBATE_DATA_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2].parent / "shared" / "data"


def _real(name: str) -> Path:
    path = _data_dir() / name
    if not path.is_file():
        pytest.skip(f"real data file {name} not found in {_data_dir()} (set DEBATE_DATA_DIR)")
    return path


def test_real_gsm8k():
    path = _real("gsm8k_test.jsonl")
    qs = load_dataset(path, "numeric")
    assert len(qs) == 1319
    assert len({q.qid for q in qs}) == 1319
    assert all(re.fullmatch(r"-?\d{1,3}(,\d{3})*|-?\d+(\.\d+)?", q.gold) for q in qs)
    assert any("," in q.gold for q in qs) and any(q.gold.startswith("-") for q in qs)
    assert all("solution" not in q.meta for q in qs)
    assert infer_task(path) == "numeric"
    assert load_dataset(path, "numeric", limit=5) == qs[:5]
    # The gold from the full solution ('####' line) equals the answer field.
    from_solution = load_dataset(path, "numeric", limit=50, fields={"answer": "solution"})
    assert [q.gold for q in from_solution] == [q.gold for q in qs[:50]]


def test_real_math(tmp_path):
    path = _real("math_test_algebra.jsonl")
    qs = load_dataset(path, "math")
    assert len(qs) == 1187
    assert all(q.gold and q.meta["subject"] == "Algebra" and q.meta["level"].startswith("Level") for q in qs)
    assert infer_task(path) == "math"
    assert load_dataset(path, "math", limit=5) == qs[:5]
    # Without the answer field the last \boxed{} of the solution gives the same answers.
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for r in rows:
        del r["answer"]
    stripped = write(tmp_path, "jsonl", rows, name="math_noanswer")
    boxed = load_dataset(stripped, "math")
    assert [q.gold for q in boxed] == [q.gold for q in qs]


def test_real_mmlu():
    path = _real("mmlu_test.jsonl")
    qs = load_dataset(path, "choice")
    assert len(qs) == 14079
    assert all(len(q.choices) == 4 and q.gold in "ABCD" for q in qs)
    assert "(A) " in qs[0].text and qs[0].text.count("\n(") == 4
    assert sum(1 for q in qs if "duplicate_of" in q.meta) == 129
    assert infer_task(path) == "choice"
    five = load_dataset(path, "choice", limit=5)
    assert five == qs[:5]
    assert load_questions(str(path), None, 5, 0) == five


def test_pair_fields_override(tmp_path):
    rows = [{"left": "x", "right": "y", "verdict": "b", "good": "g", "bad": "h"}]
    path = write(tmp_path, "jsonl", rows)
    (q,) = load_dataset(path, "pair", fields={"a": "left", "b": "right", "answer": "verdict"})
    assert q.gold == "B" and "Dialogue A:\nx" in q.text
    (q,) = load_dataset(path, "pair", fields={"chosen": "good", "rejected": "bad"})
    assert ("Dialogue A:\ng" in q.text) == (q.gold == "A")
    assert q.meta == {"left": "x", "right": "y", "verdict": "b"}
