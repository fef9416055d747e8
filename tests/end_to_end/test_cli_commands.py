"""A command of one's own: one module (tests/support/answers_command.py: its flags and its run
function) plus one :func:`app.cli.register_command`, run as ``debate answers OUT`` over a real
debate's results (``run_local``, simulated model, no Ray)."""

from collections import Counter

import pytest

from actors.local_run import run_local
from app.cli import COMMANDS, Command, build_parser, main, register_command, unregister_command
from backends.simulated_backend import SimulatedBackend
from engine.config import RunConfig
from engine.tasks import arithmetic_questions
from tests.support import answers_command


@pytest.fixture
def answers():
    """The made-up command, registered for one test."""
    register_command(
        Command("answers", "how often each final answer was given", answers_command.flags, answers_command.run)
    )
    yield "answers"
    unregister_command("answers")


def test_a_registered_command_is_listed_parsed_and_run(tmp_path, capsys, answers):
    cfg = RunConfig.flat(backend="simulated", protocol="mad", agents=3, rounds=2)
    backend = SimulatedBackend(reply_tokens=12, accuracy=0.4, follow=0.3)
    rows = [row for row, _ in run_local(cfg, arithmetic_questions(8, seed=5), backend, out=tmp_path)]
    assert "how often each final answer was given" in build_parser().format_help()
    assert main([answers, str(tmp_path), "--top", "2"]) == 0
    want = Counter(r["final_answer"] or "(none)" for r in rows).most_common(2)
    assert capsys.readouterr().out.splitlines() == [f"{a}: {n}" for a, n in want]


def test_its_user_errors_are_one_line_and_unknown_flags_name_the_command(tmp_path, capsys, answers):
    assert main([answers, str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("debate: error:") and len(err.splitlines()) == 1, err
    with pytest.raises(SystemExit):
        main([answers, str(tmp_path), "--bottom", "2"])
    assert "debate answers: error: unrecognized arguments: --bottom" in capsys.readouterr().err


def test_a_name_is_registered_once_and_unregistering_removes_it(capsys, answers):
    with pytest.raises(ValueError, match="'answers' is registered already"):
        register_command(COMMANDS[answers])
    unregister_command(answers)
    with pytest.raises(SystemExit):
        main([answers])
    assert "invalid choice: 'answers'" in capsys.readouterr().err
