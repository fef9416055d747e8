"""`debate report --style paper`: column widths at 300 dpi, axes fitted to the data, facets past
a readable number of series, level by-round lines, seed intervals only from MIN_SEEDS seeds.

The plot functions are drawn on hand-built summary rows with ``_save`` replaced by a catcher,
so only the drawing is timed; one slow test writes a whole report through the CLI."""

import math
from pathlib import Path

import pytest

from app import report
from app.report import MIN_SEEDS, PAPER, SCREEN, _panels, seed_interval


def _row(protocol, variant="", agents=3, rounds=3, seed=0, acc=0.8, by_round=(0.6, 0.7, 0.8), tokens=1000.0):
    """One run's summary row, with what the plots read."""
    return {
        "label": f"{protocol} {agents}x{rounds}{variant} seed={seed}",
        "protocol": protocol,
        "simulated": False,
        "n_questions": 40,
        "total_per_q": tokens,
        "accuracy": acc,
        "accuracy_lo": acc - 0.1,
        "accuracy_hi": min(1.0, acc + 0.1),
        "accuracy_by_round": list(by_round),
        "accuracy_by_round_n": 40,
        "consensus_by_round": [0.5, 0.8, 0.9],
        "agents": agents,
        "rounds": rounds,
        "seed": seed,
    }


@pytest.fixture
def drawn(monkeypatch):
    """The figures the plot functions draw, with their captions, instead of writing them."""
    figs = []

    def catch(fig, png, style=SCREEN, caption=""):
        figs.append((fig, caption))
        return [png]

    monkeypatch.setattr(report, "_save", catch)
    return figs


def _lines(ax):
    """The series of ``ax`` (its errorbar containers, which carry the labels), as (label, x, y)."""
    out = []
    for bar in ax.containers:
        line = bar.lines[0]
        out.append((bar.get_label(), list(line.get_xdata()), list(line.get_ydata())))
    return out


# ----------------------------------------------------------------------------- facets
def test_few_series_share_one_panel():
    series = {f"mad {n}x3": "mad" for n in range(5)}
    assert _panels(series, 5) == [list(series)]


def test_many_series_split_by_protocol_about_evenly():
    series = {f"{p} {n}x3": p for p in ("mad", "sparse", "probmad", "group", "cortex", "chateval") for n in (3, 5)}
    panels = _panels(series, 5)
    assert [len(p) for p in panels] == [4, 4, 4]  # 12 in 3 panels, not 5 + 5 + 2
    assert all(len({series[label] for label in p}) == 2 for p in panels)  # protocols whole
    assert [label for p in panels for label in p] == list(series)


def test_panels_are_few_and_even():
    two_and_four = {"sparse a": "sparse", "sparse b": "sparse", **{f"probmad {d}": "probmad" for d in range(4)}}
    assert [len(p) for p in _panels(two_and_four, 5)] == [2, 4]  # not 2 | 3 | 1
    singles = {p: p for p in ("mad", "sparse", "probmad", "group", "cortex", "chateval")}
    assert [len(p) for p in _panels(singles, 5)] == [3, 3]  # not 5 | 1


def test_a_protocol_with_more_series_than_a_panel_is_split():
    series = {f"sparse 6x3 D={d}": "sparse" for d in range(7)}
    assert [len(p) for p in _panels(series, 5)] == [4, 3]


def test_ten_series_draw_panels_sharing_both_axes(drawn):
    rows = [
        _row(p, agents=n, by_round=(0.6 + 0.02 * i, 0.7, 0.9 - 0.01 * n))
        for i, p in enumerate(("mad", "sparse", "probmad", "group", "cortex"))
        for n in (3, 5)
    ]
    report.plot_accuracy_by_round(rows, Path("a.png"), PAPER)
    ((fig, _),) = drawn
    axes = fig.axes
    assert len(axes) == 3 and fig.get_figwidth() == PAPER.wide and fig.dpi == 300
    shown = [[label.split()[0] for label, _, _ in _lines(ax)] for ax in axes]
    assert shown == [["mad"] * 2 + ["sparse"] * 2, ["probmad"] * 2 + ["group"] * 2, ["cortex"] * 2]
    assert len({ax.get_ylim() for ax in axes}) == 1 and len({ax.get_xlim() for ax in axes}) == 1


def test_five_series_draw_one_single_column_panel(drawn):
    rows = [_row("mad", agents=n) for n in (2, 3, 4, 5, 6)]
    report.plot_consensus(rows, Path("c.png"), PAPER)
    ((fig, caption),) = drawn
    assert len(fig.axes) == 1 and tuple(fig.get_size_inches()) == (3.5, PAPER.height)
    assert not fig.get_suptitle() and caption.startswith("Consensus per round")  # real data: caption only


# ----------------------------------------------------------------------------- axes
def test_accuracy_axis_fits_the_data_not_0_to_1(drawn):
    rows = [_row("mad", agents=n, by_round=(0.62, 0.7 + 0.05 * n, 0.8)) for n in (3, 4)]
    report.plot_accuracy_by_round(rows, Path("a.png"), PAPER)
    lo, hi = drawn[0][0].axes[0].get_ylim()
    bars_lo = min(report.wilson_interval(round(0.62 * 40), 40))  # the lowest bar's end
    assert 0.3 < lo < bars_lo and 0.8 < hi < 1.02  # what is drawn, a little padding, no more


def test_axis_widened_below_a_bound_not_past_it(drawn):
    rows = [{**_row("mad"), "consensus_by_round": [1.0, 1.0, 1.0]}]  # every agent agrees throughout
    report.plot_consensus(rows, Path("c.png"), PAPER)
    lo, hi = drawn[0][0].axes[0].get_ylim()
    assert 0.88 < lo < 0.9 and 1.0 < hi < 1.01  # 0.1 wide below 1, a little padding


def test_by_round_lines_stay_level_and_bars_apart(drawn):
    rows = [_row("mad", agents=n, by_round=(0.7, 0.7, 0.7)) for n in (2, 3, 4, 5)]
    report.plot_accuracy_by_round(rows, Path("a.png"), PAPER)
    lines = _lines(drawn[0][0].axes[0])
    starts = []
    for _, xs, ys in lines:
        assert [b - a for a, b in zip(xs, xs[1:])] == pytest.approx([1.0, 1.0])  # the same shift every round
        assert ys == pytest.approx([0.7] * 3)  # level data, level line
        starts.append(xs[0])
    assert len(set(starts)) == 4 and max(map(abs, starts)) <= 0.15  # bars apart, near their round


# ----------------------------------------------------------------------------- seed intervals
def _vs_bars(monkeypatch, rows):
    """plot_vs's accuracy series: label -> (means, yerr), from its errorbar calls."""
    import matplotlib.axes

    bars = {}
    orig = matplotlib.axes.Axes.errorbar

    def spy(self, x, y, *a, **kw):
        if kw.get("label") and self.get_subplotspec().rowspan.start == 0:  # the accuracy row
            bars[kw["label"]] = (list(y), kw["yerr"])
        return orig(self, x, y, *a, **kw)

    monkeypatch.setattr(matplotlib.axes.Axes, "errorbar", spy)
    return bars


def test_intervals_only_from_three_seeds(drawn, monkeypatch):
    accs = {1: 0.70, 2: 0.80, 3: 0.75}
    two = [_row("mad", agents=n, seed=s, acc=accs[s]) for n in (3, 5) for s in (1, 2)]
    three = [_row("sparse", " D=1/2", agents=n, seed=s, acc=accs[s] - 0.1) for n in (3, 5) for s in (1, 2, 3)]
    bars = _vs_bars(monkeypatch, two + three)
    report.plot_vs(two + three, "agents", Path("v.png"), PAPER)
    ((fig, caption),) = drawn
    means, (below, above) = bars["mad T=3"]
    assert means == pytest.approx([0.75, 0.75]) and all(math.isnan(b) for b in below + above)  # 2 seeds: none
    mean, lo, hi = seed_interval([0.6, 0.7, 0.65])
    means, (below, above) = bars["sparse T=3 D=1/2"]
    assert means == pytest.approx([mean] * 2)
    assert below == pytest.approx([mean - lo] * 2) and above == pytest.approx([hi - mean] * 2)
    assert MIN_SEEDS == 3 and f"≥{MIN_SEEDS} seeds" in fig.legends[0].get_title().get_text()
    assert "fewer than 3 seeds" in caption  # says which points have none


def test_two_seeds_everywhere_say_no_intervals(drawn, monkeypatch):
    rows = [_row("mad", agents=n, seed=s, acc=0.5 + 0.3 * s) for n in (3, 5) for s in (1, 2)]
    bars = _vs_bars(monkeypatch, rows)
    report.plot_vs(rows, "agents", Path("v.png"), PAPER)
    ((fig, caption),) = drawn
    _, (below, above) = bars["mad T=3"]
    assert all(math.isnan(b) for b in below + above)
    assert "no bars" in fig.legends[0].get_title().get_text() and "no interval" in caption
    lo, hi = fig.axes[0].get_ylim()
    assert 0.85 < lo and hi <= 1.01  # the means (0.95) fill the panel, not 0-1 of interval


def _tokens_points(monkeypatch, rows):
    """plot_accuracy_vs_tokens's points: label -> (x, y, yerr), from its errorbar calls."""
    import matplotlib.axes

    points = {}
    orig = matplotlib.axes.Axes.errorbar

    def spy(self, x, y, *a, **kw):
        assert kw["label"] not in points  # one point per configuration
        points[kw["label"]] = (list(x), list(y), kw["yerr"])
        return orig(self, x, y, *a, **kw)

    monkeypatch.setattr(matplotlib.axes.Axes, "errorbar", spy)
    return points


def test_tokens_three_seeds_one_point_at_the_mean_with_a_t_bar(drawn, monkeypatch):
    rows = [_row("mad", seed=s, acc=a, tokens=t) for s, a, t in ((1, 0.7, 900.0), (2, 0.8, 1000.0), (3, 0.75, 1100.0))]
    points = _tokens_points(monkeypatch, rows)
    report.plot_accuracy_vs_tokens(rows, Path("t.png"), PAPER)
    ((fig, caption),) = drawn
    (x, y, ((below,), (above,))) = points["mad 3x3 (3 seeds)"]
    mean, lo, hi = seed_interval([0.7, 0.8, 0.75])
    assert x == pytest.approx([1000.0]) and y == pytest.approx([mean])
    assert below == pytest.approx(mean - lo) and above == pytest.approx(min(1.0, hi) - mean)
    assert f"t over ≥{MIN_SEEDS} seeds" in fig.legends[0].get_title().get_text()
    assert "Student-t interval over the k seeds" in caption and "Wilson" not in caption


def test_tokens_two_seeds_one_point_with_a_pooled_wilson_bar(drawn, monkeypatch):
    rows = [_row("mad", seed=s, acc=a) for s, a in ((1, 0.7), (2, 0.8))]
    points = _tokens_points(monkeypatch, rows)
    report.plot_accuracy_vs_tokens(rows, Path("t.png"), SCREEN)
    ((fig, caption),) = drawn
    (x, y, ((below,), (above,))) = points["mad 3x3 (2 seeds)"]
    lo, hi = report.wilson_interval(28 + 32, 80)  # the 80 questions of both seeds pooled
    assert x == pytest.approx([1000.0]) and y == pytest.approx([0.75])
    assert below == pytest.approx(0.75 - lo) and above == pytest.approx(hi - 0.75)
    assert "seeds pooled" in fig.get_suptitle() and "questions pooled" in caption


def test_tokens_a_single_run_keeps_its_own_wilson_bar(drawn, monkeypatch):
    rows = [_row("mad", acc=0.8, tokens=1234.0), *(_row("sparse", seed=s, acc=0.6) for s in (1, 2, 3))]
    points = _tokens_points(monkeypatch, rows)
    report.plot_accuracy_vs_tokens(rows, Path("t.png"), PAPER)
    ((fig, caption),) = drawn
    x, y, ((below,), (above,)) = points["mad 3x3"]  # no seed count: one run
    assert x == [1234.0] and y == [0.8] and below == pytest.approx(0.1) and above == pytest.approx(0.1)
    assert set(points) == {"mad 3x3", "sparse 3x3 (3 seeds)"}
    assert "1 run: its Wilson" in fig.legends[0].get_title().get_text() and "single run" in caption


# ----------------------------------------------------------------------------- a whole report
@pytest.mark.slow  # draws and writes a report's figures in three formats
def test_paper_report_prints_at_column_widths(tmp_path):
    from PIL import Image

    from app.cli import main
    from engine.results import ParquetSink
    from tests.support.result_dirs import config, full, write_run

    for agents in (3, 4):
        for seed in (1, 2):
            cfg = config("mad", agents, 2, seed=seed, backend="transformers")
            qs = [(f"q{i}", i < 3, [0.5, 1.0], False, 2, 0, full(agents, 2, 100, 10)) for i in range(4)]
            write_run(ParquetSink(tmp_path / f"mad{agents}{seed}"), f"mad-{agents}-{seed}", cfg, qs)
    out = tmp_path / "r"
    assert main(["report", str(tmp_path), "--out", str(out), "--style", "paper"]) == 0
    for name, inches in (("accuracy_vs_tokens", 3.5), ("accuracy_by_round", 3.5), ("accuracy_tokens_vs_agents", 3.5)):
        with Image.open(out / f"{name}.png") as img:
            assert img.size[0] == round(inches * 300)  # not cropped: prints at the column's width
            assert img.info["dpi"][0] == pytest.approx(300, abs=0.01)
        assert (out / f"{name}.caption.txt").read_text().strip()
    assert main(["report", str(tmp_path), "--out", str(out)]) == 0  # screen style: no stale captions
    assert not list(out.glob("*.caption.txt"))
    with Image.open(out / "accuracy_by_round.png") as img:
        assert img.info["dpi"][0] == pytest.approx(110, abs=0.01)
