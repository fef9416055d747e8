"""`debate sweep --list`'s predicted calls and tokens (engine/plan.py) against the cost model and
against measured simulated runs (the approach of tests/engine/test_cost_model.py: ``run_local``
on the SIMULATED backend, whose whitespace token counts make MAD-family costs exact)."""

from __future__ import annotations

import pytest
import yaml

from actors.local_run import run_local
from app.cli import main
from app.plan_table import header, plan_cells, plan_table
from app.sweep import expand, parse_sweep
from backends.simulated_backend import SimulatedBackend
from engine import cost_predict
from engine.dataset_routing import experiment_questions, load_questions
from engine.plan import MARKS, Planner, weakest
from engine.protocols.layout import PROMPT_LAYOUT
from engine.protocols.shared import MEMORY
from tests.support.cost import words

BASE = {"backend": "simulated", "limit": 4, "agents": 6, "rounds": 3, "sim_reply_tokens": 40}
GRID = {"protocol": ["mad", "sparse", "s2mad", "probmad", "prd"], "density": [0.4]}


@pytest.fixture()
def cells(tmp_path):
    return expand(parse_sweep({**BASE, "grid": GRID}, "s.yaml"), tmp_path / "out")


def by_protocol(cells):
    return {c.config.experiment.protocol: c for c in cells}


def test_plan_equals_predict(cells, sizes):
    """Each cell's numbers are predict() with the cell's agents, rounds, question length (the
    arithmetic questions all have the same) and --sim-reply-tokens, times its questions."""
    plans = plan_cells(cells)
    q = words(load_questions("arithmetic", None, 4, 0)[0].text)
    for proto, c in by_protocol(cells).items():
        pred = cost_predict.predict(proto, sizes, 6, 3, q, 40, density=0.4 if proto in ("sparse", "probmad") else None)
        p = plans[c.index]
        assert (p.n_questions, p.question_tokens, p.reply_tokens) == (4, q, 40)
        assert p.per_question == pred
        assert (p.calls, p.tokens) == (4 * pred.calls, 4 * pred.total)
    kinds = {proto: plans[c.index].tokens_kind for proto, c in by_protocol(cells).items()}
    assert kinds == {"mad": "exact", "sparse": "exact", "s2mad": "bound", "probmad": "estimate", "prd": "exact"}


@pytest.mark.parametrize("proto", ["mad", "sparse", "prd", "s2mad"])
def test_plan_against_a_measured_simulated_run(cells, proto):
    """A simulated run of the cell gives exactly the predicted calls and tokens (S2-MAD: at most)."""
    c = by_protocol(cells)[proto]
    p = Planner().plan(c.config)
    cfg = c.config
    qs = experiment_questions(cfg.experiment)
    backend = SimulatedBackend(
        reply_tokens=cfg.value("sim_reply_tokens"), accuracy=cfg.value("sim_accuracy"), follow=cfg.value("sim_follow")
    )
    rows = [r for r, _ in run_local(cfg, qs, backend)]
    tokens = sum(r["prompt_tokens"] + r["completion_tokens"] for r in rows)
    calls = sum(r["n_calls"] for r in rows)
    if p.tokens_kind == "exact":
        assert (calls, tokens) == (p.calls, p.tokens)
    else:
        assert p.tokens_kind == "bound" and calls <= p.calls and tokens <= p.tokens
        assert tokens < p.tokens  # the simulated agents agree at times: S2-MAD skips


def test_question_length_is_the_mean_of_the_data_set(tmp_path):
    data = tmp_path / "q.jsonl"
    data.write_text('{"question": "one two three", "answer": "1"}\n{"question": "a b c d e f g", "answer": "2"}\n')
    cfg = expand(parse_sweep({**BASE, "dataset": str(data), "task": "numeric", "limit": None}), tmp_path)[0].config
    p = Planner().plan(cfg)
    assert p.n_questions == 2 and p.question_tokens == 5.0
    bigger = Planner().plan(
        expand(parse_sweep({**BASE, "dataset": str(data), "task": "numeric", "limit": 1}), tmp_path)[0].config
    )
    assert bigger.question_tokens == 3.0 and bigger.per_question.total < p.per_question.total


def test_weakest_kind():
    assert weakest(["exact", "exact"]) == "exact"
    assert weakest(["exact", "bound"]) == "bound"
    assert weakest(["bound", "estimate", "exact"]) == "estimate"
    assert MARKS["bound"] == "≤" and MARKS["estimate"] == "~"


def _columns(cells) -> dict[str, list[str]]:
    """The plan table's columns (header -> cells as text), as ``--list`` prints them."""
    table = plan_table(cells, plan_cells(cells))
    return {str(col.header): [str(x) for x in col.cells] for col in table.columns}


def test_list_prints_the_plan(tmp_path, capsys, monkeypatch, sizes):
    """The table: per cell its calls and tokens per question and in all (the predictions, with
    their marks), questions and Q / C under its params, a "—" where there is no prediction, and
    the totals of the valid cells; the CLI prints it, writing nothing."""
    monkeypatch.setenv("COLUMNS", "160")
    grid = {"protocol": ["mad", "s2mad", "probmad", "sparse"], "density": [0.4]}
    data = {**BASE, "max_tokens": 30, "grid": grid}  # max_tokens cuts the simulated replies: C = 30
    cells = expand(parse_sweep(data), tmp_path / "o")
    cols = _columns(cells)
    q = words(load_questions("arithmetic", None, 4, 0)[0].text)
    mad = cost_predict.predict("mad", sizes, 6, 3, q, 30)
    s2 = cost_predict.predict("s2mad", sizes, 6, 3, q, 30)
    pm = cost_predict.predict("probmad", sizes, 6, 3, q, 30, density=0.4)
    sp = cost_predict.predict("sparse", sizes, 6, 3, q, 30, density=0.4)
    row = {h: v[0] for h, v in cols.items()}
    # every cell has the same questions, Q and C: the header says them once, no row repeats them
    assert f"every cell: 4 questions, Q {q:.1f}, C 30" in header(cells, plan_cells(cells))
    assert not any("questions, Q" in cell for cell in cols["cell"][:4])
    assert [row[h] for h in ("calls/q", "tokens/q", "calls", "tokens")] == [
        f"{mad.calls:,.0f}",
        f"{mad.total:,.0f}",
        "72",
        f"{4 * mad.total:,.0f}",
    ]
    assert [cols[h][1] for h in ("tokens/q", "calls", "tokens")] == [
        f"≤{s2.total:,.0f}",
        f"≤{4 * s2.calls:,.0f}",
        f"≤{4 * s2.total:,.0f}",
    ]
    assert cols["tokens"][2] == f"~{4 * pm.total:,.0f}"
    assert "all cells" in cols["cell"][4] and "16 questions" in cols["cell"][4]
    assert cols["tokens"][4] == f"~{4 * (mad.total + s2.total + pm.total + sp.total):,.0f}"
    assert len(cols["cell"]) == 5  # nothing finished: no "still to run" line (the same as all cells)

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["sweep", str(path), "--out", str(tmp_path / "o"), "--list"]) == 0
    out = capsys.readouterr().out
    assert not (tmp_path / "o").exists()  # --list writes nothing
    assert "whitespace" in out and "--sim-reply-tokens" in out
    assert f"{4 * mad.total:,.0f}" in out and f"≤{4 * s2.total:,.0f}" in out


def test_no_prediction_is_a_dash_and_a_reason(tmp_path):
    cells = expand(parse_sweep({**BASE, "protocol": "sparse", "topology": "ring"}), tmp_path / "o")
    cols = _columns(cells)
    assert [cols[h][0] for h in ("calls/q", "tokens/q", "calls", "tokens")] == ["—"] * 4
    assert "no cost model for --topology ring" in cols["cell"][0]
    assert len(cols["cell"]) == 1  # no totals without a prediction


def test_an_error_of_the_cost_model_is_not_taken_for_no_prediction(tmp_path, monkeypatch):
    """Only NotCovered (a setting the closed form does not cover) becomes a "—" cell; any other
    error of a cost function is a bug and surfaces."""

    def broken(*args, **kwargs):
        raise ValueError("a bug in a cost function")

    monkeypatch.setattr(cost_predict, "predict", broken)
    cells = expand(parse_sweep({**BASE, "protocol": "mad"}), tmp_path / "o")
    with pytest.raises(ValueError, match="a bug in a cost function"):
        plan_cells(cells)


def test_finished_cells_leave_the_still_to_run_line(tmp_path, sizes):
    cells = expand(parse_sweep({**BASE, "grid": {"protocol": ["mad", "sc"]}}), tmp_path / "o")
    cells[0].status, cells[0].result = "finished", {"accuracy": 0.5, "tokens": 123}
    cols = _columns(cells)
    q = words(load_questions("arithmetic", None, 4, 0)[0].text)
    sc = cost_predict.predict("sc", sizes, 6, 1, q, 40)
    assert "measured tokens 123" in cols["cell"][0]
    assert "still to run" in cols["cell"][3] and cols["tokens"][3] == f"{4 * sc.total:,.0f}"


def test_list_other_backends_assume_max_tokens_replies(tmp_path):
    """A real backend's cell: C = --max-tokens, its tokens marked ~ (calls stay exact)."""
    cells = expand(parse_sweep({**BASE, "backend": "transformers", "max_tokens": 200}), tmp_path / "o")
    cols = _columns(cells)
    assert any(line.endswith("C 200") for line in header(cells, plan_cells(cells)))  # one cell: said once
    assert (cols["calls/q"][0], cols["calls"][0]) == ("18", "72")  # calls do not depend on the tokenizer
    assert cols["tokens/q"][0].startswith("~") and cols["tokens"][0].startswith("~")
    assert any("other backends: C = --max-tokens" in line for line in header(cells))


def test_cells_of_other_sizes_say_their_own(tmp_path):
    base = {k: v for k, v in BASE.items() if k != "limit"}
    cells = expand(parse_sweep({**base, "grid": {"limit": [2, 4]}}), tmp_path / "o")
    cols = _columns(cells)
    assert "2 questions" in cols["cell"][0] and "4 questions" in cols["cell"][1]
    assert not any(line.startswith("every cell") for line in header(cells, plan_cells(cells)))


def test_list_at_80_columns_cuts_no_number(tmp_path, capsys, monkeypatch):
    """Too narrow for a cell column beside the numbers: the cells are listed by index above a
    table of numbers that fits, every number and total whole."""
    monkeypatch.setenv("COLUMNS", "80")
    grid = {"protocol": ["mad", "sparse", "probmad"], "agents": [4, 7], "density": ["1/3", "2/3"], "seed": [1, 2]}
    data = {**{k: v for k, v in BASE.items() if k != "agents"}, "limit": 30, "grid": grid}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["sweep", str(path), "--out", str(tmp_path / "o"), "--list"]) == 0
    out = capsys.readouterr().out
    assert max(map(len, out.splitlines())) <= 80 and "…" not in out
    lines = out.splitlines()
    assert [line.split()[0] for line in lines if line.startswith("#")] == [f"#{i}" for i in range(20)]
    assert all(" protocol=" in line and " seed=" in line for line in lines if line.startswith("#"))
    cells = expand(parse_sweep(data), tmp_path / "o")
    plans = plan_cells(cells)
    total = sum(p.tokens or 0 for p in plans.values())
    assert f"{total:,.0f}" in out.replace("~", "")  # the total whole
    assert "all: 20 cells, 600 questions" in out


def test_plan_of_shared_layout_cells_against_measured_simulated_runs(tmp_path):
    """`sweep --list` plans --prompt-layout shared cells with the shared layout's closed form:
    exactly the simulated run's calls and tokens (MAD with one summary per model, GroupDebate);
    a paper cell of the same grid is planned otherwise."""
    grid = {"protocol": ["mad", "group"], "prompt_layout": ["paper", "shared"], "memory": ["summary", "last"]}
    spec = parse_sweep({**BASE, "limit": 2, "models": "big*2,small*4", "grid": grid}, "s.yaml")
    cells = [c for c in expand(spec, tmp_path / "out") if c.valid]
    plans = plan_cells(cells)
    shared = [c for c in cells if c.config.option(PROMPT_LAYOUT) == "shared"]
    assert {(c.config.experiment.protocol, c.config.option(MEMORY)) for c in shared} == {
        ("mad", "summary"),
        ("mad", "last"),
        ("group", "last"),
    }
    for c in shared:
        cfg, p = c.config, plans[c.index]
        qs = experiment_questions(cfg.experiment)
        backends = {m: SimulatedBackend(reply_tokens=40, accuracy=0.6, follow=0.5) for m in cfg.run_models()}
        rows = [r for r, _ in run_local(cfg, qs, backends)]
        measured = (sum(r["n_calls"] for r in rows), sum(r["prompt_tokens"] + r["completion_tokens"] for r in rows))
        assert p.tokens_kind == "exact" and measured == (p.calls, p.tokens)
        (paper,) = [
            d
            for d in cells
            if (d.config.experiment.protocol, d.config.option(MEMORY), d.config.option(PROMPT_LAYOUT))
            == (cfg.experiment.protocol, cfg.option(MEMORY), "paper")
        ]
        assert plans[paper.index].per_question != p.per_question


def test_list_shows_prompt_tokens_and_the_computed_prefill(tmp_path, capsys, sizes):
    """Beside the tokens: the cell's prompt tokens and those a perfect prefix cache leaves to
    compute (Planner's ``computed``: the closed form per question, the heads once per run); a
    protocol without that closed form shows —, and so do the totals it is part of."""
    grid = {"protocol": ["mad", "prd"], "prompt_layout": ["paper", "shared"]}
    cells = [c for c in expand(parse_sweep({**BASE, "grid": grid}), tmp_path / "o") if c.valid]
    plans = plan_cells(cells)
    cols = _columns(cells)
    q = words(load_questions("arithmetic", None, 4, 0)[0].text)
    labels = [c.label for c in cells]
    for i, c in enumerate(cells):
        p = plans[c.index]
        layout = c.config.option(PROMPT_LAYOUT) if c.config.experiment.protocol == "mad" else "paper"
        pred = cost_predict.predict(c.config.experiment.protocol, sizes, 6, 3, q, 40, prompt_layout=layout)
        assert cols["prompt"][i] == f"{4 * pred.prompt_tokens:,.0f}"
        if c.config.experiment.protocol == "prd":
            assert p.computed is None and cols["computed"][i] == "—"
        else:
            assert pred.computed_prompt_tokens is not None
            assert cols["computed"][i] == f"{p.computed:,.0f}"
            assert p.computed < p.prompt
            # per question, then the heads once and less the words the questions begin with alike
            assert abs(p.computed - 4 * pred.computed_prompt_tokens) < 50
    mad = {c.config.option(PROMPT_LAYOUT): plans[c.index] for c in cells if c.config.experiment.protocol == "mad"}
    assert mad["shared"].computed < mad["paper"].computed / 2, labels
    assert cols["computed"][len(cells)] == "—"  # the totals of cells one of which has none
    assert any("cached_prompt_tokens" in line for line in header(cells))

    mad_only = [c for c in cells if c.config.experiment.protocol == "mad"]
    totals = _columns(mad_only)["computed"][len(mad_only)]
    assert totals == f"{sum(plans[c.index].computed for c in mad_only):,.0f}"
