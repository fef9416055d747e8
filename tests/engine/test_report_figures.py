"""`debate report` for papers: PNG + PDF + SVG figures, intervals over seeds, the split tables and
their Markdown / CSV forms, on a real sweep of the simulated backend (labelled SIMULATED)."""

import csv
import io
import math
import xml.etree.ElementTree as ET

import pytest

from app.cli import main
from app.report import FORMATS, PALETTE, PLOTS, SECTIONS, build_report, seed_interval, t975


# ----------------------------------------------------------------------------- interval math
@pytest.mark.slow  # importing scipy takes a second; test_seed_interval_on_known_numbers takes t975's path
def test_t_quantile_matches_scipy():
    stats = pytest.importorskip("scipy.stats")
    for df in (1, 2, 3, 9, 30, 31, 45, 100, 1000):
        assert t975(df) == pytest.approx(stats.t.ppf(0.975, df), abs=1e-4)
    with pytest.raises(ValueError):
        t975(0)


def test_seed_interval_on_known_numbers():
    # mean 2, sample sd 1, k = 3: half width = t(0.975, 2) / sqrt(3) = 4.302653 / 1.732051
    mean, lo, hi = seed_interval([1.0, 2.0, 3.0])
    assert (
        mean == 2.0
        and hi - mean == pytest.approx(2.484138, abs=1e-5)
        and mean - lo == pytest.approx(2.484138, abs=1e-5)
    )
    # two seeds 0.5 and 0.75: sd = 0.1767767, half = 12.706205 * sd / sqrt(2) = 1.588276
    mean, lo, hi = seed_interval([0.5, 0.75])
    assert mean == 0.625 and hi == pytest.approx(0.625 + 1.588276, abs=1e-5)
    mean, lo, hi = seed_interval([0.4])
    assert mean == 0.4 and math.isnan(lo) and math.isnan(hi)  # one seed: no interval


def test_palette_is_okabe_ito():
    assert set(PALETTE) == {"#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#000000"}


# ----------------------------------------------------------------------------- a real sweep
@pytest.fixture(scope="module")
def sim_sweep(ray_local, tmp_path_factory):
    """A simulated sweep: MAD, agents {2, 3} x seeds {0, 1}, 3 questions, 2 rounds."""
    from actors.driver import DebateRunner
    from app.sweep import parse_sweep, run_sweep

    spec = parse_sweep(
        {
            "backend": "simulated",
            "limit": 3,
            "rounds": 2,
            "progress": False,
            "protocol": "mad",
            "grid": {"agents": [2, 3], "seed": [0, 1]},
        }
    )
    out = tmp_path_factory.mktemp("figs") / "sweep"
    with DebateRunner() as runner:
        cells = run_sweep(spec, out, runner=runner, echo=lambda s: None)
    assert [c.status for c in cells] == ["finished"] * 4
    return out


@pytest.mark.ray
def test_figures_in_png_pdf_and_svg(sim_sweep, tmp_path):
    from matplotlib.image import imread

    rep = build_report(sim_sweep, tmp_path / "r")
    drawn = [p for p in PLOTS if "vs_rounds" not in p]  # every run has 2 rounds: that one is skipped
    assert any("accuracy_tokens_vs_rounds.png skipped" in n for n in rep.notes)
    for name in drawn:
        png = tmp_path / "r" / name
        assert {png.with_suffix(ext) for ext in FORMATS} <= set(rep.files)
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and imread(png).shape[1] > 300
        assert png.with_suffix(".pdf").read_bytes()[:5] == b"%PDF-"
        assert ET.parse(png.with_suffix(".svg")).getroot().tag == "{http://www.w3.org/2000/svg}svg"
    assert rep.rows and all(r["simulated"] for r in rep.rows)
    assert {r["seeds"] for r in rep.rows} == {2}
    # a second report of the same data writes the same PDF and SVG bytes (no dates embedded)
    again = build_report(sim_sweep, tmp_path / "r2")
    for p in again.files:
        if p.suffix in (".pdf", ".svg"):
            assert p.read_bytes() == (tmp_path / "r" / p.name).read_bytes()


@pytest.mark.ray
def test_by_round_figures_number_rounds_from_0(sim_sweep, tmp_path, monkeypatch):
    """Rounds are 0-based as the tables store them: a 2-round run draws rounds 0 and 1."""
    import matplotlib.axes

    bars = []
    orig = matplotlib.axes.Axes.errorbar

    def spy(self, x, y, *a, **kw):
        bars.append((self, list(x)))
        return orig(self, x, y, *a, **kw)

    monkeypatch.setattr(matplotlib.axes.Axes, "errorbar", spy)
    build_report(sim_sweep, tmp_path / "r")
    by_round = [(ax, x) for ax, x in bars if ax.get_xlabel() == "round (0 = first answer)"]
    assert len({id(ax) for ax, _ in by_round}) == 2  # consensus and accuracy by round
    assert all(x == pytest.approx([0, 1], abs=0.1) for _, x in by_round)
    assert all(list(ax.get_xticks()) == [0, 1] for ax, _ in by_round)


@pytest.mark.ray
def test_figure_points_are_seed_means_without_intervals_over_two_seeds(sim_sweep, tmp_path, monkeypatch):
    """Each point is the mean over its seeds; two seeds draw no bar (a 95 % t-interval over two
    spans most of the panel), and the legend says so."""
    import matplotlib.axes

    bars = []
    orig = matplotlib.axes.Axes.errorbar

    def spy(self, x, y, *a, **kw):
        bars.append((self, list(x), list(y), kw.get("yerr")))
        return orig(self, x, y, *a, **kw)

    monkeypatch.setattr(matplotlib.axes.Axes, "errorbar", spy)
    rep = build_report(sim_sweep, tmp_path / "r")
    by_agents = {a: [r for r in rep.rows if r["agents"] == a] for a in (2, 3)}
    acc = [b for b in bars if b[0].get_ylabel() == "accuracy (mean over seeds)"]  # labelled after drawing
    assert len(acc) == 1 and acc[0][1] == pytest.approx([2, 3], abs=0.2)
    for j, a in enumerate((2, 3)):
        mean, _, _ = seed_interval([r["accuracy"] for r in by_agents[a]])
        assert acc[0][2][j] == pytest.approx(mean)
        assert math.isnan(acc[0][3][0][j]) and math.isnan(acc[0][3][1][j])  # 2 seeds < MIN_SEEDS: no bar
    assert "no interval" in acc[0][0].figure.legends[0].get_title().get_text()


@pytest.mark.ray
def test_markdown_and_csv_tables_parse(sim_sweep, tmp_path, capsys):
    assert main(["report", str(sim_sweep), "--out", str(tmp_path / "r"), "--format", "csv", "--no-figures"]) == 0
    out, err = capsys.readouterr()
    table = list(csv.DictReader(io.StringIO(out)))
    assert len(table) == 4 and table[0]["n"] == "3" and "wrote" in err and "wrote" not in out
    assert {r["configuration"].split()[1] for r in table} == {"2x2", "3x2"}
    assert main(["report", str(sim_sweep), "--out", str(tmp_path / "r"), "--format", "md", "--no-figures"]) == 0
    out = capsys.readouterr().out
    for section, columns in SECTIONS.items():
        assert f"### {section}" in out
        block = out.split(f"### {section}")[1].split("###")[0]
        lines = [ln for ln in block.splitlines() if ln.startswith("|")]
        assert len(lines) == 2 + 4  # header, separator, one line per configuration
        assert all(ln.count("|") == len(columns) + 1 for ln in lines)


@pytest.mark.ray
@pytest.mark.parametrize("width", [80, 140])
def test_rich_tables_fit_the_width_and_never_wrap_a_number(sim_sweep, tmp_path, capsys, monkeypatch, width):
    monkeypatch.setenv("COLUMNS", str(width))  # stdout is not a terminal: rich takes $COLUMNS
    assert main(["report", str(sim_sweep), "--out", str(tmp_path / "r"), "--no-figures"]) == 0
    out = capsys.readouterr().out
    assert max(len(ln) for ln in out.splitlines()) <= width
    rep = build_report(sim_sweep, tmp_path / "r", figures=False)
    for r in rep.rows:  # every number cell appears whole on one line
        assert f"{r['total_per_q']:,.1f}" in out and f"{r['accuracy_lo']:.3f}" in out
    for section in SECTIONS:
        assert f"debate report: {section}" in out


def test_by_round_lines_pool_the_seeds_weighted_by_questions():
    from app.report import pooled_by_round

    a = {"accuracy_by_round": [0.0, 0.5], "accuracy_by_round_n": 4, "n_questions": 4}
    b = {"accuracy_by_round": [1.0], "accuracy_by_round_n": 2, "n_questions": 2}  # stopped: carries 1.0
    ys, n = pooled_by_round([a, b], "accuracy_by_round")
    assert n == 6 and ys == pytest.approx([2 / 6, (2 + 2) / 6])
    assert pooled_by_round([{**a, "accuracy_by_round": []}], "accuracy_by_round") == ([], 0)


def test_sections_split_every_column_once():
    from app.report import COLUMNS

    assert all(cols[0] == "configuration" for cols in SECTIONS.values())
    assert sorted(c for cols in SECTIONS.values() for c in cols[1:]) == sorted(COLUMNS[1:])
