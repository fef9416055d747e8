"""Text from data and models reaches the terminal inert: escape sequences, C1 controls and bidi
overrides in a question, a gold answer, a question id, a run option or a reply are printed as
visible escapes (``\\x1b``), and rich markup in them (``[/]``) prints as it is, in ``debate
show`` (list, full, --html), ``debate report``, ``debate sweep --list``, error lines and log
records (engine/safe_text.py)."""

from __future__ import annotations

import functools
import logging
import re
import sys
import unicodedata

import pytest

from app.cli import main, setup_logging
from backends.simulated_backend import SimulatedBackend
from engine.results import ParquetSink
from engine.safe_text import inert
from engine.tasks import Question
from tests.support.result_dirs import config, full, simulated_run, write_run

OSC_TITLE = "\x1b]0;pwned title\x07"  # sets the window title
OSC_CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"  # writes the clipboard
OSC_LINK = "\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\"  # a hyperlink
CLEAR = "\x1b[2J"  # clears the screen
C1 = "\x9b31m"  # CSI as one C1 byte
BIDI = "\u202eevil\u202c \u2066x\u2069"  # right-to-left override, isolate
MARKUP = "[/] [bold red]x[/]"
HOSTILE = f"{OSC_TITLE}{OSC_CLIPBOARD}{OSC_LINK}{CLEAR}\x07{C1}{BIDI} {MARKUP}"
# what a terminal would obey: ESC, BEL, C1 controls, bidi and other invisible format characters
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# how they must show instead
VISIBLE = ("\\x1b]0;pwned title\\x07", "\\x1b]52;c;", "\\x1b]8;;http://evil.example/", "\\x1b[2J", "\\x9b31m")
VISIBLE_BIDI = ("\\u202eevil\\u202c", "\\u2066x\\u2069")


class HostileModel(SimulatedBackend):
    """The simulated model, its every reply opening with :data:`HOSTILE`."""

    def _pad(self, tail: list[str], max_tokens: int, seed: int) -> str:
        return f"{HOSTILE}\n" + super()._pad(tail, max_tokens, seed)


def hostile_questions() -> list[Question]:
    return [
        Question(qid=f"q{i}{MARKUP}{OSC_TITLE}\u202e", task="numeric", text=f"What is 1+{i}? {HOSTILE}", gold=gold)
        for i, gold in enumerate(("1", f"2{CLEAR}[/]\u202e"))
    ]


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory):
    """A stored run whose question ids, questions, a gold answer, replies, a model name and the
    dataset option hold escape sequences, bidi controls and rich markup."""
    out = tmp_path_factory.mktemp("hostile")
    simulated_run(
        out,
        questions=hostile_questions(),
        backend=HostileModel(reply_tokens=12, accuracy=0.5, follow=0.3),
        protocol="mad",
        agents=3,
        rounds=2,
        models=f"m[bold]{OSC_TITLE}*1,small*2",
        dataset=f"d{MARKUP}{OSC_TITLE}.jsonl",
    )
    return out


def run_cli(capsys, monkeypatch, *args: object) -> tuple[int, str, str]:
    monkeypatch.setenv("COLUMNS", "1000")  # no wrapping: an escape is never cut across lines
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def assert_inert(text: str, *visible: str) -> None:
    """No byte a terminal obeys in ``text``, and each of ``visible`` shown in it."""
    raw = sorted({f"U+{ord(c):04X}" for c in RAW.findall(text)})
    assert not raw, f"raw control characters reach the terminal: {raw}"
    for shown in visible:
        assert shown in text, f"{shown!r} not shown"


# ----------------------------------------------------------------------------- the helper
@functools.cache
def by_category() -> dict[str, str]:
    """Every code point, by Unicode category (one pass over all 1.1 million, for both tests)."""
    found: dict[str, list[str]] = {}
    for c in range(sys.maxunicode + 1):
        found.setdefault(unicodedata.category(chr(c)), []).append(chr(c))
    return {category: "".join(chars) for category, chars in found.items()}


def test_every_control_and_format_character_is_shown_as_an_escape():
    kept = {"\n", "\t", "\u200c", "\u200d"}  # kept where lines count; ZWNJ / ZWJ join letters and emoji
    unsafe = [c for category in ("Cc", "Cf", "Zl", "Zp") for c in by_category().get(category, "") if c not in kept]
    assert {"\x1b", "\x07", "\x9b", "\x7f", "\u202e", "\u2066", "\u200b", "\ufeff", "\U000e0041"} <= set(unsafe)
    pieces = inert("|".join(unsafe)).split("|")
    assert len(pieces) == len(unsafe)
    for char, shown in zip(unsafe, pieces, strict=True):
        assert re.fullmatch(r"\\(x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8}|r)", shown), (char, shown)
        assert shown.encode("ascii").decode("unicode_escape") == char
    assert inert("a\nb\tc") == "a\nb\tc"
    assert inert("a\nb\tc\r", lines=False) == "a\\nb\\tc\\r"


def test_printable_text_of_any_script_is_left_as_it_is():
    shown = "".join(
        chars for category, chars in by_category().items() if category not in ("Cc", "Cf", "Zl", "Zp", "Cs", "Cn")
    )
    assert inert(shown, lines=False) == shown
    emoji = "family 👩\u200d👩\u200d👧, Persian می\u200cخواهم, \\boxed{42} [bold] \u00a0"
    assert inert(emoji) == emoji
    clean = "a reply of many words\n" * 1000
    assert inert(clean) is clean  # nothing to escape: no copy


# ----------------------------------------------------------------------------- debate show
def test_show_lists_and_prints_hostile_debates_inert_and_markup_literally(hostile_dir, capsys, monkeypatch):
    code, out, err = run_cli(capsys, monkeypatch, "show", hostile_dir, "--limit", "2", "--full")
    assert code == 0, err
    assert "2 questions" in out and out.count("final answer:") == 2
    assert_inert(out + err, *VISIBLE, *VISIBLE_BIDI, MARKUP, "m[bold]\\x1b]0;", f"d{MARKUP}\\x1b]0;")
    assert "gold: 2\\x1b[2J[/]\\u202e" in out
    assert "SIMULATED model" in out  # the engine's own styled label still prints
    code, short, err = run_cli(capsys, monkeypatch, "show", hostile_dir, "--question", "q1")
    assert code == 0, err
    assert_inert(short + err, "\\x1b]0;pwned title\\x07", MARKUP)


def test_show_html_prints_inert_lines(hostile_dir, tmp_path, capsys, monkeypatch):
    page = tmp_path / f"p{MARKUP}{OSC_TITLE}.html"  # a file name can hold escapes too
    code, out, err = run_cli(capsys, monkeypatch, "show", hostile_dir, "--html", page)
    assert code == 0 and page.is_file(), err
    assert_inert(out + err, f"p{MARKUP}\\x1b]0;pwned title\\x07.html")


def test_an_error_quoting_hostile_ids_is_one_inert_line(hostile_dir, capsys, monkeypatch):
    code, out, err = run_cli(capsys, monkeypatch, "show", hostile_dir, "--question", "zz")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("debate: error: ")
    assert_inert(err, "questions: q0[/] [bold red]x[/]\\x1b]0;pwned title\\x07\\u202e")


# ----------------------------------------------------------------------------- debate report
@pytest.fixture(scope="module")
def hostile_report_dir(tmp_path_factory):
    """Two runs of one shape that differ in a hostile dataset option (so the labels quote it),
    and one of a protocol the engine does not know, named with markup and escapes."""
    out = tmp_path_factory.mktemp("report")
    calls = full(3, 2, 10, 5)
    for name, cfg in (
        ("a", config("mad", 3, 2, dataset=f"d[bold red]x{OSC_TITLE}{C1}.jsonl")),
        ("b", config("mad", 3, 2, dataset="plain.jsonl")),
        ("c", config(f"p{MARKUP}{CLEAR}", 3, 2)),
    ):
        write_run(ParquetSink(out / name), f"run-{name}", cfg, [("q0", True, [1.0, 1.0], False, 1, 0, calls)])
    return out


@pytest.mark.parametrize("fmt", ["table", "md", "csv"])
def test_report_prints_hostile_labels_inert_and_markup_literally(
    hostile_report_dir, tmp_path, fmt, capsys, monkeypatch
):
    code, out, err = run_cli(
        capsys, monkeypatch, "report", hostile_report_dir, "--out", tmp_path, "--format", fmt, "--no-figures"
    )
    assert code == 0, err
    assert_inert(out + err, "dataset=d[bold red]x\\x1b]0;pwned title\\x07\\x9b31m.jsonl", f"p{MARKUP}\\x1b[2J 3x2")


# ----------------------------------------------------------------------------- debate sweep --list
def test_sweep_list_prints_hostile_grid_values_inert_and_markup_literally(tmp_path, capsys, monkeypatch):
    sweep = tmp_path / "sweep.yaml"
    # YAML's double-quoted escapes: ESC, BEL and a C1 byte in a dataset path (no such file: the
    # cell is invalid, and its note quotes the path too)
    sweep.write_text(
        'backend: simulated\nlimit: 2\ngrid:\n  dataset: ["d[/] [bold red]x[/]\\e]0;t\\a\\x9b.jsonl", arithmetic]\n'
    )
    code, out, err = run_cli(capsys, monkeypatch, "sweep", sweep, "--out", tmp_path / "out", "--list")
    assert code == 0, err
    assert_inert(out + err, "d[/] [bold red]x[/]\\x1b]0;t\\x07\\x9b.jsonl")


# ----------------------------------------------------------------------------- log records
@pytest.fixture
def engine_logging():
    """Restore the engine loggers that :func:`setup_logging` sets."""
    saved = {
        n: (lg.handlers[:], lg.level, lg.propagate)
        for n in ("engine", "actors", "topologies")
        for lg in [logging.getLogger(n)]
    }
    yield
    for name, (handlers, level, propagate) in saved.items():
        lg = logging.getLogger(name)
        lg.handlers[:], lg.level, lg.propagate = handlers, level, propagate


def test_log_records_quoting_data_are_printed_inert_with_their_traceback_lines(engine_logging, capsys):
    setup_logging()
    log = logging.getLogger("engine.test_terminal_safety")
    try:
        raise ValueError(f"bad reply {HOSTILE}")
    except ValueError:
        log.warning("question %s failed", f"q{OSC_TITLE}{MARKUP}", exc_info=True)
    err = capsys.readouterr().err
    assert_inert(err, "question q\\x1b]0;pwned title\\x07[/]", *VISIBLE, *VISIBLE_BIDI)
    lines = err.splitlines()
    assert lines[0].startswith("WARNING engine.test_terminal_safety: question q")
    assert "Traceback (most recent call last):" in lines and lines[-1].startswith("ValueError: bad reply")


def test_the_run_summary_prints_config_values_inert_and_markup_literally(tmp_path, capsys, monkeypatch):
    from types import SimpleNamespace

    from app.cli import print_summary
    from engine.config import RunConfig

    cfg = RunConfig.flat(backend="simulated", model=f"org/m{MARKUP}{OSC_TITLE}")
    summary = {"n_questions": 2, "accuracy": 0.5, "prompt_tokens": 10, "completion_tokens": 4}
    result = SimpleNamespace(  # not simulated: the summary names the configured model
        run_id=cfg.run_id(), summary=summary, wall_s=1.0, simulated=False, out_dir=tmp_path, backend="vllm"
    )
    monkeypatch.setenv("COLUMNS", "1000")
    print_summary(result, cfg)
    out = capsys.readouterr().out
    assert_inert(out, f"vllm / - / org/m{MARKUP}\\x1b]0;pwned title\\x07", f"run {cfg.run_id()}")
