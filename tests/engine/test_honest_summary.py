"""What a run's summary, ``debate show`` and the HTML page claim: a resumed run says how many
questions were already done and rates only what this process generated; a simulated run names
no model (issue 39)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from app.cli import main, print_summary, summary_rows
from app.transcript import debate_views
from engine.config import RunConfig
from engine.formatting import SIMULATED_MODEL, shown_model
from engine.results import load
from tests.support.result_dirs import simulated_run

MODEL = "smollm2-135m-instruct"  # the default model: what a simulated run's folder stores


def result(n=20, resumed=0, generated=None, wall_s=2.0, simulated=True):
    """A run's result as the summary reads it: ``generated`` completion tokens made now."""
    summary = {"n_questions": n, "accuracy": 0.5, "prompt_tokens": 900, "completion_tokens": 600}
    return SimpleNamespace(
        run_id="mad-0",
        summary=summary,
        wall_s=wall_s,
        simulated=simulated,
        out_dir="o",
        backend="simulated" if simulated else "vllm",
        resumed=resumed,
        generated_tokens=600 if generated is None else generated,
    )


def rows(res, **cfg) -> dict[str, str]:
    return dict(summary_rows(res, RunConfig.flat(backend="simulated", **cfg)))


def test_a_fully_resumed_run_says_so_and_reports_no_rate():
    out = rows(result(resumed=20, generated=0))
    assert out["questions"] == "20 (20 already done, 0 debated now)"
    assert out["generated tok/s"] == "-"


def test_a_partly_resumed_run_rates_the_questions_debated_now():
    out = rows(result(resumed=15, generated=150, wall_s=3.0))
    assert out["questions"] == "20 (15 already done, 5 debated now)"
    assert out["generated tok/s"] == "50.0"  # 150 tokens made now, not the run's 600


def test_a_fresh_run_counts_its_questions_and_rates_all_its_tokens():
    out = rows(result())
    assert out["questions"] == "20" and out["generated tok/s"] == "300.0"


def test_the_summary_says_when_nothing_was_debated(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    print_summary(result(resumed=20, generated=0), RunConfig.flat(backend="simulated"))
    assert "all 20 questions were already done in this folder: nothing debated now" in capsys.readouterr().out
    print_summary(result(), RunConfig.flat(backend="simulated"))
    assert "already done" not in capsys.readouterr().out


def test_the_summary_at_80_columns_folds_a_long_results_path_whole(capsys, monkeypatch):
    """Piped or logged (80 columns) the summary keeps every character of where the results are:
    a long path folds onto the next line instead of ending in an ellipsis."""
    monkeypatch.setenv("COLUMNS", "80")
    long = result()
    long.out_dir = "runs/20261128-202226-a-long-experiment-name/with/more/folders"
    print_summary(long, RunConfig.flat(backend="simulated"))
    out = capsys.readouterr().out
    assert "…" not in out and max(map(len, out.splitlines())) <= 80
    lines = out.splitlines()
    at = next(i for i, ln in enumerate(lines) if "│ results " in ln)
    folded = "".join(ln.split("│")[2].strip() for ln in lines[at:] if ln.startswith("│"))
    assert folded == long.out_dir + "/{calls,questions,runs}"


def test_a_simulated_summary_names_no_model():
    simulated = rows(result())["backend / dtype / model"]
    assert simulated == f"simulated / - / {SIMULATED_MODEL}" and MODEL not in simulated
    several = rows(result(), models="big*1,small*2")["backend / dtype / model"]
    assert several == f"simulated / - / {SIMULATED_MODEL}; agents labelled big*1,small*2"
    assert rows(result(simulated=False))["backend / dtype / model"] == f"vllm / - / {MODEL}"


def test_shown_model():
    assert shown_model(MODEL, False) == MODEL and shown_model(None, True) is None
    assert shown_model(MODEL, True) == SIMULATED_MODEL
    assert shown_model("big", True, several=True) == "simulated:big"


@pytest.fixture(scope="module")
def sim_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("sim")
    simulated_run(out, n_questions=2, protocol="mad", agents=3, rounds=2)
    return out


def test_the_folder_stores_the_configured_name_and_views_show_none(sim_dir):
    results = load(sim_dir)
    assert set(results.calls["model"]) == {MODEL}  # stored as configured: the run id hashes it
    (view, *_) = debate_views(results)
    assert view.simulated and view.options["model"] == SIMULATED_MODEL
    assert {a.model for a in view.agents} == {SIMULATED_MODEL}
    assert {t.model for rv in view.rounds for t in rv.turns} == {SIMULATED_MODEL}


def test_show_and_the_page_name_no_model(sim_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["show", str(sim_dir)]) == 0
    shown = capsys.readouterr().out
    assert f"model={SIMULATED_MODEL}" in shown and MODEL not in shown
    page = tmp_path / "p.html"
    assert main(["show", str(sim_dir), "--html", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    assert SIMULATED_MODEL in html and MODEL not in html
