"""``debate report``: tables and plots from hand-built result directories (no Ray, no model)."""

import csv
import json
import math

import pyarrow as pa
import pytest

from app.cli import main
from app.report import (
    COLUMNS,
    MATCH_KEYS,
    PLOTS,
    ReportError,
    build_report,
    complete_calls,
    consensus_curve,
    find_run_dirs,
    format_row,
    load_runs,
    pick_baseline,
    savings,
    summary_rows,
    wilson_interval,
)
from engine.results import ParquetSink
from tests.support.result_dirs import config, full, write_run


@pytest.fixture
def sweep(tmp_path):
    """The folder of :func:`_sweep_folder`, for one test."""
    return _sweep_folder(tmp_path)


def _sweep_folder(tmp_path):
    """tmp/sweep/a/mad32: a real-backend MAD 3x2 run (4 questions, 3 correct, 660 tokens/q);
    tmp/sweep/b/deep/shared: MAD 4x3 (2640 tokens/q) and sparse 4x3 D=2/3 written into ONE directory,
    the sparse run with calls of an interrupted attempt and of an unfinished question;
    tmp/sweep/g5: a group 5x3 run with summary calls and skipped turns."""
    root = tmp_path / "sweep"
    write_run(
        ParquetSink(root / "a" / "mad32"),
        "mad-32",
        config("mad", 3, 2, backend="transformers"),
        [(f"q{i}", i < 3, [1 / 3, 2 / 3], False, 2, 0, full(3, 2, 100, 10)) for i in range(4)],
    )
    shared = ParquetSink(root / "b" / "deep" / "shared")
    write_run(
        shared,
        "mad-43",
        config("mad", 4, 3),
        [
            ("q0", True, [0.5, 0.75, 1.0], False, 3, 0, full(4, 3, 200, 20)),
            ("q1", False, [0.5, 0.5, 0.5], False, 3, 0, full(4, 3, 200, 20)),
        ],
    )
    write_run(
        shared,
        "sparse-43",
        config("sparse", 4, 3, density=0.6666666667),
        [
            ("q0", True, [0.5, 1.0], True, 2, 0, full(4, 2, 150, 20)),  # stopped early after round 2
            ("q1", True, [0.5, 0.75, 0.75], False, 3, 0, full(4, 3, 150, 20)),
        ],
        stale=[("q0", "old", [(0, 999, 99)] * 5), ("q7", "new", [(1, 999, 99)] * 3)],
    )
    write_run(
        ParquetSink(root / "g5"),
        "group-53",
        config("group", 5, 3, groups="2+3"),
        [
            ("q0", False, [0.4, 0.6, 0.8], False, 3, 1, [(a, 100, 10) for a in range(5)] + [(-1, 50, 30)] * 2),
            ("q1", True, [1.0, 1.0, 1.0], False, 1, 2, [(a, 100, 10) for a in range(5)] + [(-1, 50, 30)] * 2),
        ],
    )
    return root


def by_label(rows):
    return {r["label"]: r for r in rows}


# ----------------------------------------------------------------------------- statistics
def test_wilson_interval_hand_computed():
    # k=3, n=4, z=1.96: p=.75, z2/n=.96037; centre=(.75+.48018)/1.96037=.62753;
    # half=(1.96/1.96037)*sqrt(.75*.25/4 + 3.84146/64)=.32689 -> (.30064, .95442)
    lo, hi = wilson_interval(3, 4)
    assert lo == pytest.approx(0.300642, abs=1e-5) and hi == pytest.approx(0.954413, abs=1e-5)
    # published reference values: 0/10 -> (0, .2775), 5/10 -> (.2366, .7634)
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.277533), abs=1e-5)
    assert wilson_interval(5, 10) == pytest.approx((0.236593, 0.763407), abs=1e-5)
    # not the Wald interval p +- z sqrt(p(1-p)/n) = (.3257, 1.1743)
    assert wilson_interval(3, 4)[1] < 1.0
    assert all(math.isnan(v) for v in wilson_interval(0, 0))


def test_all_right_or_all_wrong_bounds_are_exact():
    """30/30 right: the upper bound is exactly 1 (the formula rounds to 0.9999999999999999,
    which made matplotlib refuse the accuracy-vs-tokens plot of a perfect simulated run)."""
    from app.report import _bar

    assert wilson_interval(30, 30)[1] == 1.0 and wilson_interval(0, 30)[0] == 0.0
    assert _bar(1.0, 0.88, 0.9999999999999999) == [[pytest.approx(0.12)], [0.0]]
    assert _bar(0.5, math.nan, 0.6) == [[0.0], [pytest.approx(0.1)]]


@pytest.mark.slow  # draws the figures (the report's costliest part): the inner loop draws them once, below
def test_all_right_runs_plot(tmp_path):
    sink = ParquetSink(tmp_path)
    perfect = [(f"q{i}", True, [1.0, 1.0], False, 1, 0, full(3, 2, 1, 1)) for i in range(30)]
    write_run(sink, "mad-a", config("mad", 3, 2), perfect)
    write_run(sink, "mad-b", config("mad", 4, 2), perfect)
    build_report(tmp_path)
    assert (tmp_path / "report" / "accuracy_vs_tokens.png").is_file()
    assert (tmp_path / "report" / "accuracy_tokens_vs_agents.png").is_file()


def test_consensus_carries_the_last_value_forward():
    # the stopped question [1, 1] counts as 1 in round 3: (1 + .75) / 2
    assert consensus_curve([[1.0, 1.0], [0.5, 0.5, 0.75]]) == pytest.approx([0.75, 0.75, 0.875])
    # every question stopped at round 2 of 3: carried to the configured length
    assert consensus_curve([[0.5, 1.0], [1.0]], length=3) == pytest.approx([0.75, 1.0, 1.0])
    assert consensus_curve([[], None]) == []


def test_savings_is_one_minus_ratio():
    assert savings(1700, 2640) == pytest.approx(1 - 1700 / 2640)
    assert savings(3000, 2000) == pytest.approx(-0.5)  # costs more -> negative
    assert math.isnan(savings(100, 0))


# ----------------------------------------------------------------------------- attempt filter
def test_complete_calls_keeps_only_finished_attempts():
    questions = pa.table({"run_id": ["r", "r", "s"], "question_id": ["q0", "q1", "q0"], "attempt": ["b", "a", None]})
    calls = pa.table(
        {
            "run_id": ["r", "r", "r", "r", "s", "s", "r"],
            "question_id": ["q0", "q0", "q1", "q2", "q0", "q0", "q1"],
            "attempt": ["a", "b", "a", "a", None, "x", "b"],
            "prompt_tokens": [1, 2, 3, 4, 5, 6, 7],
        }
    )
    kept = complete_calls(calls, questions)
    # q0 attempt a was interrupted; q2 never finished; null matches null; s/q0 attempt x and r/q1 attempt b: no row
    assert kept.column("prompt_tokens").to_pylist() == [2, 3, 5]
    # without an attempt column (either table): every call row counts
    assert complete_calls(calls.drop_columns(["attempt"]), questions).num_rows == 7
    assert complete_calls(calls, questions.drop_columns(["attempt"])).num_rows == 7
    # pandas in, pandas out
    pd = pytest.importorskip("pandas")
    out = complete_calls(calls.to_pandas(), questions.to_pandas())
    assert isinstance(out, pd.DataFrame) and out["prompt_tokens"].tolist() == [2, 3, 5]


def test_directory_tokens_ignore_stale_attempts(sweep):
    runs = {r.run_id: r for r in load_runs(sweep)}
    sparse = runs["sparse-43"]
    # 8 + 12 calls of (150, 20); the 5 + 3 stale calls of 999/99 tokens are not counted
    assert sparse.calls == {
        "prompt_tokens": 20 * 150,
        "completion_tokens": 20 * 20,
        "calls": 20,
        "summary_calls": 0,
        "cached_prompt_tokens": None,  # no call reports a cached count: unknown, not 0
        "computed_prompt_tokens": None,
    }
    assert not sparse.notes  # calls agree with the question rows


# ----------------------------------------------------------------------------- discovery and table
def test_finds_run_dirs_at_any_depth(sweep):
    found = [p.relative_to(sweep).as_posix() for p in find_run_dirs(sweep)]
    assert found == ["a/mad32", "b/deep/shared", "g5"]
    assert find_run_dirs(sweep / "g5") == [sweep / "g5"]  # a run directory itself
    with pytest.raises(ReportError, match="nope"):
        find_run_dirs(sweep / "nope")


def test_summary_table_values(sweep):
    rows = by_label(summary_rows(load_runs(sweep)))
    assert list(rows) == [
        "mad 3x2",
        "mad 4x3 (SIMULATED)",
        "sparse 4x3 D=2/3 (SIMULATED)",
        "group 5x3 G=2+3 (SIMULATED)",
    ]
    mad32 = rows["mad 3x2"]
    assert mad32["n_questions"] == 4 and mad32["accuracy"] == 0.75
    assert (mad32["accuracy_lo"], mad32["accuracy_hi"]) == pytest.approx((0.300642, 0.954413), abs=1e-5)
    assert mad32["total_per_q"] == 660 and mad32["calls_per_q"] == 6 and mad32["simulated"] is False
    assert mad32["savings"] == 0.0 and mad32["baseline_exact"]  # its own baseline
    sparse = rows["sparse 4x3 D=2/3 (SIMULATED)"]
    # (8 + 12 calls) * 170 tokens / 2 questions = 1700 per question vs MAD 4x3's 2640 (same agents/rounds),
    # not MAD 3x2's 660
    assert sparse["total_per_q"] == 1700 and sparse["prompt_per_q"] == 1500 and sparse["completion_per_q"] == 200
    assert sparse["baseline_run_id"] == "mad-43" and sparse["baseline_exact"] is True
    assert sparse["savings"] == pytest.approx(1 - 1700 / 2640)
    assert sparse["accuracy"] == 1.0 and sparse["effective_rounds"] == 2.5
    # q0 stopped after round 2 at 1.0 and carries it: round 3 = (1.0 + 0.75) / 2
    assert sparse["consensus_by_round"] == pytest.approx([0.5, 0.875, 0.875])
    group = rows["group 5x3 G=2+3 (SIMULATED)"]
    assert group["summary_calls"] == 4 and group["skipped_turns"] == 3 and group["calls_per_q"] == 7
    assert group["total_per_q"] == 5 * 110 + 2 * 80
    # no MAD 5x3: no savings at all (never against the nearest other run)
    assert group["baseline_run_id"] is None and math.isnan(group["savings"])
    assert format_row(group)[COLUMNS.index("savings vs {baseline}: total / input")] == "-"
    mad43 = rows["mad 4x3 (SIMULATED)"]
    assert sparse["input_savings"] == pytest.approx(1 - 1500 / mad43["prompt_per_q"])  # the sparse paper's cost
    assert format_row(sparse)[COLUMNS.index("savings vs {baseline}: total / input")] == (
        f"{100 * (1 - 1700 / 2640):+.1f}% / {100 * (1 - 1500 / mad43['prompt_per_q']):+.1f}%"
    )


def test_baseline_prefers_same_seed_and_labels_tell_runs_apart(tmp_path):
    for seed, tokens in ((0, 100), (1, 300)):
        write_run(
            ParquetSink(tmp_path / f"mad{seed}"),
            f"mad-s{seed}",
            config("mad", 3, 2, seed=seed),
            [("q0", True, [1.0, 1.0], False, 1, 0, full(3, 2, tokens, 0))],
        )
    write_run(
        ParquetSink(tmp_path / "sp"),
        "sparse-s1",
        config("sparse", 3, 2, seed=1, density=0.5),
        [("q0", True, [1.0, 1.0], False, 1, 0, full(3, 2, 150, 0))],
    )
    rows = by_label(summary_rows(load_runs(tmp_path)))
    assert set(rows) == {"mad 3x2 seed=0 (SIMULATED)", "mad 3x2 seed=1 (SIMULATED)", "sparse 3x2 D=0.5 (SIMULATED)"}
    sparse = rows["sparse 3x2 D=0.5 (SIMULATED)"]
    assert sparse["baseline_run_id"] == "mad-s1" and sparse["savings"] == pytest.approx(0.5)
    # no baseline protocol at all -> nan ('-')
    only = [r for r in load_runs(tmp_path) if r.run_id == "sparse-s1"]
    assert math.isnan(summary_rows(only)[0]["savings"]) and summary_rows(only)[0]["baseline_run_id"] is None


def test_pick_baseline_only_an_exact_match():
    row = {
        "run_id": "x",
        "agents": 4,
        "rounds": 3,
        "dataset": "d",
        "limit": 5,
        "offset": 0,
        "backend": "simulated",
        "models": "m",
        "seed": 0,
    }
    mk = lambda rid, **kw: {**row, "run_id": rid, "n_questions": 5, "total_per_q": 10.0, **kw}  # noqa: E731
    near = [
        mk("agents-differ", agents=6),
        mk("seed-differs", seed=1),
        mk("models-differ", models="big"),
        mk("fewer-questions", limit=3),
        mk("empty", n_questions=0),
    ]
    assert pick_baseline(row, near) == (None, False)
    best, exact = pick_baseline(row, near + [mk("same")])
    assert best["run_id"] == "same" and exact is True


@pytest.mark.parametrize("key", MATCH_KEYS)
def test_pick_baseline_refuses_a_run_differing_in_any_match_key(key):
    """Each of MATCH_KEYS on its own (rounds, backend, ...): a baseline that differs only there is
    never used, so removing any key from the tuple fails one case here."""
    row = {"run_id": "x", "n_questions": 5, "total_per_q": 10.0, **{k: f"row-{k}" for k in MATCH_KEYS}}
    assert pick_baseline(row, [{**row, "run_id": "other", key: "differs"}]) == (None, False)
    assert pick_baseline(row, [{**row, "run_id": "other"}])[0]["run_id"] == "other"


def test_match_keys_cover_what_a_token_saving_depends_on():
    """The keys that change a MAD run's tokens per question are all matched."""
    assert {"agents", "rounds", "backend", "models", "dataset", "seed"} <= set(MATCH_KEYS)


def test_seed_groups_show_mean_and_sd_next_to_wilson(tmp_path):
    """Runs differing only in seed: every row of the group shows accuracy and tokens mean ± sd over
    the seeds; a run with another config (agents) is not part of it."""
    for seed, correct in ((1, [True, True]), (2, [True, False]), (3, [False, False])):
        write_run(
            ParquetSink(tmp_path / f"m{seed}"),
            f"mad-s{seed}",
            config("mad", 3, 2, seed=seed),
            [(f"q{i}", c, [1.0, 1.0], False, 1, 0, full(3, 2, 100 * seed, 0)) for i, c in enumerate(correct)],
        )
    write_run(
        ParquetSink(tmp_path / "other"),
        "mad-4",
        config("mad", 4, 2, seed=1),
        [("q0", True, [1.0, 1.0], False, 1, 0, full(4, 2, 100, 0))],
    )
    rows = {r["run_id"]: r for r in summary_rows(load_runs(tmp_path))}
    for rid in ("mad-s1", "mad-s2", "mad-s3"):
        r = rows[rid]
        assert r["seeds"] == 3 and r["accuracy_seeds_mean"] == pytest.approx(0.5)
        assert r["accuracy_seeds_sd"] == pytest.approx(0.5)  # sample sd of 1, 0.5, 0
        assert r["total_per_q_seeds_mean"] == pytest.approx(600 * 2)  # 6 calls x 100*seed, mean seed 2
        assert format_row(r)[3] == "0.500 ± 0.500 (3)"
    assert rows["mad-4"]["seeds"] is None and format_row(rows["mad-4"])[3] == "-"
    assert rows["mad-s2"]["prompt_per_call"] == 200


# ----------------------------------------------------------------------------- files and plots
@pytest.fixture(scope="module")
def sweep_report(tmp_path_factory):
    """The report of :func:`sweep`'s folder with its figures, built once for the tests that read it."""
    tmp = tmp_path_factory.mktemp("sweep_report")
    return build_report(_sweep_folder(tmp), tmp / "out"), tmp / "out"


@pytest.mark.slow  # draws every figure of a four-run report in three formats (seconds)
def test_report_writes_csv_json_and_valid_pngs(sweep_report):
    from matplotlib.image import imread

    rep, out = sweep_report
    for name in PLOTS:
        path = out / name
        data = path.read_bytes()
        assert len(data) > 1000 and data[:8] == b"\x89PNG\r\n\x1a\n"
        img = imread(path)
        assert img.ndim == 3 and img.shape[0] > 200 and img.shape[1] > 300 and img.shape[2] in (3, 4)
    doc = json.loads((out / "summary.json").read_text())
    sparse = next(c for c in doc["configurations"] if c["run_id"] == "sparse-43")
    assert sparse["total_per_q"] == 1700 and sparse["consensus_by_round"] == pytest.approx([0.5, 0.875, 0.875])
    with open(out / "summary.csv") as fh:
        table = list(csv.DictReader(fh))
    assert [r["label"] for r in table] == [r["label"] for r in rep.rows]
    assert float(next(r for r in table if r["run_id"] == "mad-32")["accuracy"]) == 0.75
    assert not rep.notes  # agents 3/4/5 and rounds 2/3: both axis plots drawn


@pytest.mark.slow  # draws figures; the inner loop draws the shared report's once
def test_single_axis_value_skips_the_plot_with_a_note(tmp_path):
    write_run(
        ParquetSink(tmp_path), "mad-1", config("mad", 3, 2), [("q0", True, [1.0, 1.0], False, 1, 0, full(3, 2, 1, 1))]
    )
    rep = build_report(tmp_path)
    assert any("accuracy_tokens_vs_agents.png skipped" in n and "agents = 3" in n for n in rep.notes)
    assert any("accuracy_tokens_vs_rounds.png skipped" in n for n in rep.notes)
    assert (tmp_path / "report" / "accuracy_vs_tokens.png").is_file()
    assert not list((tmp_path / "report").glob("accuracy_tokens_vs_agents.*"))


@pytest.mark.slow  # draws two reports' figures; the inner loop draws the shared report's once
def test_plot_titles_say_simulated(sweep, tmp_path, monkeypatch):
    import matplotlib.figure

    titles = []
    orig = matplotlib.figure.Figure.savefig

    def spy(self, path, *a, **kw):
        if str(path).endswith(".png"):  # each figure is saved as .png, .pdf and .svg
            titles.append(self.axes[0].get_title() or self.get_suptitle())
        return orig(self, path, *a, **kw)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", spy)
    build_report(sweep, tmp_path / "o")
    assert len(titles) == 5 and all("includes SIMULATED" in t for t in titles)  # mixed real + simulated
    titles.clear()
    build_report(sweep / "b", tmp_path / "o2")  # simulated only
    assert len(titles) == 3 and all(t.endswith("SIMULATED backend") for t in titles)


# ----------------------------------------------------------------------------- CLI
def test_cli_report_prints_table(sweep, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")  # wide enough that no label folds
    assert main(["report", str(sweep), "--out", str(tmp_path / "r"), "--no-figures"]) == 0
    out = capsys.readouterr().out
    assert (
        "sparse 4x3 D=2/3" in out and "(SIMULATED)" in out and "+35.6% / +37.5%" in out
    )  # 1 - 1700/2640, 1 - 1500/2400
    assert "73.1%" not in out  # no savings for group 5x3 against MAD 4x3 (not the same agents)
    assert "3 of 4 rows SIMULATED" in out  # a mixed folder says which rows are simulated
    assert "0.750 [0.301, 0.954]" in out and "base" in out
    assert (tmp_path / "r" / "summary.csv").is_file()
    assert sorted(p.suffix for p in (tmp_path / "r").iterdir()) == [".csv", ".json"]  # --no-figures: tables only
    assert "wrote summary.csv, summary.json to" in out


def test_cli_report_missing_dir_is_exit_2_one_line(capsys, tmp_path):
    assert main(["report", "/nonexistent"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("debate: error:") and "/nonexistent" in err and len(err.splitlines()) == 1
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err.strip()
    assert str(tmp_path / "empty") in err and "no results" in err and len(err.splitlines()) == 1
    (tmp_path / "bare" / "runs").mkdir(parents=True)  # a run folder with nothing recorded
    assert main(["report", str(tmp_path / "bare")]) == 2
    err = capsys.readouterr().err.strip()
    assert str(tmp_path / "bare") in err and "no runs recorded" in err and len(err.splitlines()) == 1


def test_accuracy_by_round_is_tabulated(sweep, tmp_path):
    rep = build_report(sweep, tmp_path / "o", figures=False)
    rows = {r["run_id"]: r for r in rep.rows}
    assert rows["mad-32"]["accuracy_by_round"] == [0.0, 0.75] and rows["mad-32"]["accuracy_by_round_n"] == 4
    # the sparse run's q0 stopped after round 2: its last verdict carries to round 3
    assert rows["sparse-43"]["accuracy_by_round"] == [0.0, 0.5, 1.0]
    assert rows["mad-32"]["accuracy_by_round"][-1] == rows["mad-32"]["accuracy"]
    assert rows["mad-32"]["ties"] == 1
    cells = format_row(rows["mad-32"])
    assert cells[COLUMNS.index("accuracy by round")] == "0.00 0.75"


@pytest.mark.slow  # draws every figure of a four-run report in three formats (seconds)
def test_accuracy_by_round_is_plotted(sweep_report):
    rep, out = sweep_report
    assert (out / "accuracy_by_round.png").stat().st_size > 5000


def test_report_leaves_out_exactly_the_options_the_run_id_does():
    """The keys no label names and no seed group compares are the run id's unhashed options (unhashed_options())."""
    from app import report
    from engine.config import unhashed_options

    assert report._NOT_RESULT_KEYS == frozenset(unhashed_options())


def test_seed_groups_is_the_one_grouping_of_sweep_and_report():
    from engine.accounting import seed_groups

    items = [
        {"protocol": "mad", "seed": 1, "out": "a"},
        {"protocol": "mad", "seed": 2, "out": "b"},
        {"protocol": "cot", "seed": 1},
        {"protocol": "sc", "seed": 1, "out": "a"},
        {"protocol": "sc", "seed": 1, "out": "b"},
    ]
    groups = seed_groups(items, lambda x: x, ignore=("out",))
    assert groups == [items[:2]]  # cot: one seed; sc: two runs of one seed
    assert seed_groups(items, lambda x: x) == []  # "out" differs, so no two share the rest


def test_placement_is_said_once_per_place_and_once_per_report():
    from app.report import _placement_notes, placement_text

    entries = [
        {"role": "replica", "model": "m", "replica": 0, "node_ip": "10.0.0.2", "gpu_ids": [0]},
        {"role": "replica", "model": "m", "replica": 1, "node_ip": "10.0.0.2", "gpu_ids": [1]},
        {"role": "agents", "node_ip": "10.0.0.1"},
        {"role": "agents", "node_ip": "10.0.0.1"},
        {"role": "writer", "node_ip": "10.0.0.1"},
        {"role": "coordinator", "node_ip": "10.0.0.1"},
    ]
    text = placement_text(json.dumps(entries))
    assert text == "m#0 @ 10.0.0.2 GPU 0; m#1 @ 10.0.0.2 GPU 1; agents ×2, writer, coordinator @ 10.0.0.1"
    rows = [{"label": f"mad {n}x2", "placement": text} for n in range(3, 8)]
    assert _placement_notes(rows) == [f"placement of every run (5): {text}"]
    rows.append({"label": "sparse 6x2", "placement": "elsewhere"})
    assert _placement_notes(rows) == [
        f"placement of 5 runs (mad 3x2 ... mad 7x2): {text}",
        "placement of sparse 6x2: elsewhere",
    ]
    assert _placement_notes(rows[:1]) == [f"placement of mad 3x2: {text}"]


def _printed(rows, width: int, path) -> str:
    from rich.console import Console

    from app.report import render_tables

    with open(path, "w") as f:
        console = Console(width=width, record=True, file=f)
        for table in render_tables(rows, width=width):
            console.print(table)
    return console.export_text()


def _edges_whole(out: str, width: int) -> None:
    """No line wider than ``width``, every table row keeps its right edge, nothing shortened."""
    lines = out.splitlines()
    assert max(map(len, lines)) <= width
    rows = [ln for ln in lines if ln.startswith(("│", "┃"))]
    assert rows and all(ln.rstrip().endswith(("│", "┃")) for ln in rows), [ln for ln in rows if ln[-1] not in "│┃"][:2]
    assert "…" not in out


def test_a_report_at_80_columns_cuts_no_number(sweep, tmp_path):
    """Eight rounds of accuracy at 80 columns, long labels: the values wrap at spaces, each one
    whole, every column shown, and no table loses its right edge."""
    by_round = [n / 10 for n in range(1, 9)]
    rows = [
        dict(r, accuracy_by_round=by_round, label=r["label"] + " seed=12 dataset=gsm8k")
        for r in summary_rows(load_runs(sweep))
    ]
    out = _printed(rows, 80, tmp_path / "out.txt")
    _edges_whole(out, 80)
    words = out.split()
    assert all(words.count(f"{v:.2f}") >= len(rows) for v in by_round)  # each value whole, on every row
    assert all(r["protocol"] in words for r in rows) and "seed=12" in words  # labels kept (folded)
    assert "[0.301, 0.954]" in out and "left out" not in out  # the interval whole, every column there


def test_a_report_too_narrow_for_every_column_leaves_the_last_ones_out_and_says_so(sweep, tmp_path):
    rows = summary_rows(load_runs(sweep))
    out = _printed(rows, 50, tmp_path / "out.txt")
    _edges_whole(out, 50)
    said = " ".join(out.split())
    assert "left out at 50 columns:" in said and "a wider terminal or --format md shows them" in said
    assert "[0.301, 0.954]" in out  # what is shown is whole


def test_every_series_has_its_own_marker_and_a_protocol_one_colour():
    from app.report import MARKERS, _styles

    rows = [
        {"label": label, "protocol": label.split()[0], "simulated": False}
        for label in ("mad 3x2", "sparse 6x3 D=0.4", "sparse 6x3 D=0.8", "group 6x3 G=3+3", "probmad 6x3 D=0.4")
    ]
    styles = _styles(rows)
    markers = [m for _, m, _ in styles.values()]
    assert len(set(markers)) == len(rows) <= len(MARKERS)  # no shape repeats across protocols
    assert styles["sparse 6x3 D=0.4"][0] == styles["sparse 6x3 D=0.8"][0] != styles["mad 3x2"][0]
    assert styles["sparse 6x3 D=0.4"][2] != styles["sparse 6x3 D=0.8"][2]  # variants: line style too


def test_a_simulated_runs_placement_and_models_name_no_model():
    """A simulated run stores its configured model name, yet no model ran: its placement names
    the replicas ``simulated#i`` (``simulated:NAME#i`` with several models) and its models column
    says SIMULATED; a real run's keep the model's name."""
    from app.report import _models_of, placement_text
    from engine.formatting import SIMULATED_MODEL

    one = [
        {"role": "replica", "model": "smollm2", "replica": 0, "node_ip": "10.0.0.1"},
        {"role": "writer", "node_ip": "10.0.0.1"},
    ]
    assert placement_text(json.dumps(one), simulated=True) == "simulated#0, writer @ 10.0.0.1"
    assert placement_text(json.dumps(one)) == "smollm2#0, writer @ 10.0.0.1"
    two = one + [{"role": "replica", "model": "big", "replica": 0, "node_ip": "10.0.0.2"}]
    assert (
        placement_text(json.dumps(two), simulated=True)
        == "simulated:smollm2#0, writer @ 10.0.0.1; simulated:big#0 @ 10.0.0.2"
    )
    cfg = {"model": "smollm2", "models": None, "agent_settings": None}
    assert json.loads(_models_of(cfg, simulated=True)) == [SIMULATED_MODEL, []]
    assert json.loads(_models_of(cfg)) == ["smollm2", []]
    several = {"model": "smollm2", "models": "big*1,small*2"}
    assert json.loads(_models_of(several, simulated=True)) == ["simulated:big*1,small*2", []]
