"""--dataset hf:NAME[:CONFIG][:SPLIT] through Hugging Face `datasets`, tested on local folders
(this machine reaches no hub): the same questions as the file loader, the papers' column
mappings (GPQA, ARC, MMLU, GSM-IC), split/config parsing and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import hf_datasets
from engine.dataset_routing import load_questions
from engine.tasks import DatasetError
from engine.tasks.files import load_dataset
from tests.support.paths import DATA_DIR as DATA


def _folder(root: Path, name: str, rows: list[dict], split: str = "test") -> str:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(folder)


def test_parse_name_config_split():
    assert hf_datasets.parse("hf:openai/gsm8k") == ("openai/gsm8k", None, "test")
    assert hf_datasets.parse("hf:openai/gsm8k:main:test") == ("openai/gsm8k", "main", "test")
    assert hf_datasets.parse("hf:cais/mmlu:all") == ("cais/mmlu", "all", "test")
    assert hf_datasets.parse("hf:gsm8k:train[:100]") == ("gsm8k", None, "train[:100]")
    assert hf_datasets.parse("hf:/data/gpqa:gpqa_diamond:train") == ("/data/gpqa", "gpqa_diamond", "train")
    with pytest.raises(DatasetError, match="give a data set name"):
        hf_datasets.parse("hf:")


def test_real_gsm8k_rows_load_as_the_file_loader_reads_them(tmp_path):
    source = DATA / "gsm8k_test.jsonl"
    if not source.is_file():
        pytest.skip("../shared/data not present")
    rows = [json.loads(line) for line in source.read_text().splitlines()[:6]]
    folder = _folder(tmp_path, "gsm8k", rows)
    got = load_questions(f"hf:{folder}", None, 4, 0, offset=1)
    want = load_dataset(source, "numeric", limit=4, offset=1)
    assert [(q.qid, q.task, q.text, q.gold) for q in got] == [(q.qid, q.task, q.text, q.gold) for q in want]
    assert got[0].source == f"--dataset hf:{folder}" and got[0].row == 2


def test_gpqa_columns_become_shuffled_choices_with_the_right_gold(tmp_path):
    rows = [
        {
            "Record ID": f"rec{i}",
            "Question": f"Which particle is number {i}?",
            "Correct Answer": f"right{i}",
            "Incorrect Answer 1": f"w1-{i}",
            "Incorrect Answer 2": f"w2-{i}",
            "Incorrect Answer 3": f"w3-{i}",
            "Explanation": "because",
        }
        for i in range(8)
    ]
    folder = _folder(tmp_path, "Idavidrein-gpqa", rows, split="train")
    qs = load_questions(f"hf:{folder}:train", None, None, 0)
    assert [q.qid for q in qs] == [f"rec{i}" for i in range(8)] and {q.task for q in qs} == {"choice"}
    for i, q in enumerate(qs):
        assert q.choices[ord(q.gold) - ord("A")] == f"right{i}"
        assert sorted(q.choices) == sorted([f"right{i}", f"w1-{i}", f"w2-{i}", f"w3-{i}"])
        assert "because" not in q.text and "Explanation" not in q.meta  # the explanation gives it away
    assert len({q.gold for q in qs}) > 1  # not always the first position
    again = load_questions(f"hf:{folder}:train", None, None, 0)
    assert [q.choices for q in again] == [q.choices for q in qs]  # deterministic


def test_arc_mmlu_and_gsm_ic_mappings(tmp_path):
    arc = _folder(
        tmp_path,
        "ai2_arc",
        [
            {
                "id": "Mercury_1",
                "question": "Which is a metal?",
                "choices": {"text": ["wood", "iron", "glass"], "label": ["1", "2", "3"]},
                "answerKey": "2",
            }
        ],
    )
    (q,) = load_questions(f"hf:{arc}", None, None, 0)
    assert (q.qid, q.task, q.gold, q.choices) == ("Mercury_1", "choice", "B", ("wood", "iron", "glass"))
    mmlu = tmp_path / "cais-mmlu"
    mmlu.mkdir()
    pq.write_table(
        pa.table({"question": ["2+2?"], "subject": ["math"], "choices": [["3", "4", "5", "6"]], "answer": [1]}),
        mmlu / "test.parquet",
    )
    (q,) = load_questions(f"hf:{mmlu}", None, None, 0)
    assert (q.task, q.gold, q.meta["subject"]) == ("choice", "B", "math")
    gsm_ic = _folder(
        tmp_path,
        "gsm-ic",
        [{"original_question": "1+1?", "new_question": "1+1? My dog is 3.", "answer": "2"}],
        split="validation",
    )
    (q,) = load_questions(f"hf:{gsm_ic}:validation", None, None, 0)
    assert (q.task, q.text, q.gold) == ("numeric", "1+1? My dog is 3.", "2")


def test_errors_are_one_line_naming_the_dataset_and_row(tmp_path):
    with pytest.raises(DatasetError, match=r"^--dataset hf:/nonexistent/x: cannot load with Hugging Face datasets"):
        load_questions("hf:/nonexistent/x", None, None, 0)
    folder = _folder(tmp_path, "gsm8k", [{"question": "1+1?", "answer": "#### 2"}, {"question": "2+2?"}])
    with pytest.raises(DatasetError, match=r"--dataset hf:.*gsm8k:2: missing field 'answer'"):
        load_questions(f"hf:{folder}", None, None, 0)
    with pytest.raises(ValueError, match="--offset 5 is past the end"):
        load_questions(f"hf:{folder}", None, None, 0, offset=5)
    assert "\n" not in str(pytest.raises(DatasetError, load_questions, "hf:/nonexistent/x", None, None, 0).value)


def test_a_run_reads_an_hf_dataset(tmp_path):
    """Through the engine's own debate driver (run_local, simulated model)."""
    from actors.local_run import run_local
    from backends.simulated_backend import SimulatedBackend
    from engine.config import RunConfig

    folder = _folder(tmp_path, "gsm8k", [{"question": f"{i}+1?", "answer": f"#### {i + 1}"} for i in range(3)])
    cfg = RunConfig.flat(protocol="mad", agents=2, rounds=2, backend="simulated", dataset=f"hf:{folder}").validate()
    qs = load_questions(cfg.experiment.dataset, cfg.experiment.task, cfg.experiment.limit, cfg.experiment.seed)
    rows = run_local(cfg, qs, SimulatedBackend())
    assert len(rows) == 3 and all(row["n_calls"] == 4 for row, _ in rows)
