"""Bad input: one line naming the culprit, exit status 2, and no Ray started."""

import json

import pytest

from app.cli import main


def err(capsys, argv):
    with pytest.raises(SystemExit) as exc:  # argparse-level errors
        main(argv)
    return exc.value.code, capsys.readouterr().err


def fail(capsys, argv):
    code = main(argv)
    out = capsys.readouterr().err.strip()
    return code, out


def test_unknown_protocol_and_flag(capsys):
    for argv, needles in [
        (["run", "--protocol", "nope"], ["--protocol", "'nope'"]),
        (["run", "--agnets", "3"], ["unrecognized arguments: --agnets"]),
        (["run", "--context-overflow", "cut"], ["--context-overflow", "'cut'"]),
        (["run", "--agents", "many"], ["--agents", "invalid int value: 'many'"]),
        (["nonsense"], ["invalid choice: 'nonsense'"]),
    ]:
        code, text = err(capsys, argv)
        assert code == 2 and all(n in text for n in needles), text
        assert len(text.strip().splitlines()) == 1 and "error:" in text


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--protocol", "sparse", "--agents", "6", "--density", "0.5"], "--density 0.5 with --agents 6"),
        (["--protocol", "sparse", "--agents", "5", "--density", "0.25"], "--agents 5"),
        (["--protocol", "probmad"], "--density is required"),
        (["--dataset", "/nonexistent/data.jsonl", "--task", "numeric"], "/nonexistent/data.jsonl"),
        (["--limit", "0"], "--limit"),
        (["--model", "/tmp"], "--model /tmp"),
        (["--model", "no-such-model"], "--model no-such-model"),
        (["--protocol", "group", "--agents", "3", "--groups", "4"], "--groups '4' with --agents 3"),
        (["--protocol", "group", "--agents", "4", "--groups", "2+3"], "--groups"),
        (["--backend", "openai", "--api-base", "http://127.0.0.1:9"], "--api-base http://127.0.0.1:9: cannot connect"),
        (["--backend", "openai", "--api-base", "ftp://host"], "--api-base ftp://host: not an http(s) URL"),
        (["--backend", "openai"], "--api-base is required"),
        (["--replicas", "0"], "--replicas must be within [1, 1024]"),
        (["--tensor-parallel", "2", "--backend", "transformers"], "--tensor-parallel needs --backend vllm"),
        (["--call-retries", "-1"], "--call-retries must be within [0, 1000]"),
    ],
)
def test_bad_input_is_one_line_naming_the_culprit(capsys, monkeypatch, tmp_path, argv, needle):
    import actors.driver

    started = []
    monkeypatch.setattr(actors.driver, "init_ray", lambda *a, **k: started.append(a))
    out = tmp_path / "run"
    code, text = fail(capsys, ["run", "--no-progress", "--out", str(out), *argv])
    assert code == 2
    assert text.startswith("debate: error:") and needle in text and len(text.splitlines()) == 1
    assert not out.exists()  # stopped before the writer (or any other actor) made the run's folder
    assert not started  # every input is checked before Ray starts


def test_malformed_row_names_file_and_line(capsys, tmp_path):
    path = tmp_path / "gsm.jsonl"
    path.write_text(json.dumps({"question": "1+1?", "answer": "2"}) + "\n" + "{not json\n")
    code, text = fail(capsys, ["run", "--dataset", str(path), "--task", "numeric", "--backend", "simulated"])
    assert code == 2 and f"{path}:2" in text


def test_config_file_errors(capsys, tmp_path):
    bad = tmp_path / "c.yaml"
    bad.write_text("protocol: mad\nagnets: 3\n")
    code, text = fail(capsys, ["run", "--config", str(bad)])
    assert code == 2 and "unknown key 'agnets'" in text and str(bad) in text
    code, text = fail(capsys, ["run", "--config", str(tmp_path / "missing.yaml")])
    assert code == 2 and "missing.yaml" in text


@pytest.mark.parametrize(
    "make, needle",
    [
        (lambda d: (d / "x.gguf").write_text("hello"), "does not start with the GGUF magic bytes"),
        (lambda d: (d / "x.bin").write_text("hello"), "a file that is not .gguf"),
        (lambda d: (d / "m").mkdir() or (d / "m" / "config.json").write_text("{}"), "has no model_type"),
        (lambda d: (d / "m").mkdir() or (d / "m" / "config.json").write_text("[1"), "is not a JSON object"),
        (
            lambda d: (d / "m").mkdir() or (d / "m" / "config.json").write_text('{"model_type": "llama"}'),
            "has no weights",
        ),
        (lambda d: (d / "m").mkdir(), "has no config.json"),
    ],
)
def test_model_path_that_is_not_a_model(capsys, tmp_path, make, needle):
    make(tmp_path)
    target = next(p for p in tmp_path.iterdir())
    code, text = fail(capsys, ["run", "--no-progress", "--model", str(target)])
    assert code == 2 and text.startswith("debate: error: --model") and str(target) in text and needle in text
    assert len(text.splitlines()) == 1


def test_dataset_file_and_row_errors_name_file_and_line(capsys, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    code, text = fail(capsys, ["run", "--dataset", str(empty), "--task", "numeric", "--backend", "simulated"])
    assert code == 2 and str(empty) in text and "empty" in text
    noans = tmp_path / "noans.jsonl"
    noans.write_text(json.dumps({"question": "1+1?", "answer": "2"}) + "\n" + json.dumps({"question": "x"}) + "\n")
    code, text = fail(capsys, ["run", "--dataset", str(noans), "--task", "numeric", "--backend", "simulated"])
    assert code == 2 and f"{noans}:2" in text and "missing field 'answer'" in text


@pytest.mark.ray
def test_gguf_that_cannot_load_stops_the_run_with_one_line(capsys, tmp_path, ray_local):
    """Passes the header check, fails inside the replica: the replica reports it, the driver
    stops the run with one line naming --model (no Ray traceback), exit status 2."""
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 4)
    code, text = fail(
        capsys, ["run", "--no-progress", "--model", str(bad), "--limit", "1", "--out", str(tmp_path / "out")]
    )
    assert code == 2 and text.startswith(f"debate: error: --model {bad}: the replica could not load it:")
    assert len(text.splitlines()) == 1


def _user_errors():
    """Every UserError subclass the engine defines, imported where it lives."""
    from actors.cluster import PlacementTimeout
    from actors.driver import ReplicaStartError
    from app.report import ReportError
    from app.sweep import SweepError
    from backends.base import ImagesNotSupported, VLLMBuildError
    from backends.embedding import EmbeddingModelNotFound
    from backends.model_store import ModelNotFound
    from backends.preflight import EndpointError
    from engine.config import ConfigError
    from engine.prompts import PromptError
    from engine.tasks import DatasetError
    from topologies import TopologyError

    return [
        ConfigError,
        DatasetError,
        TopologyError,
        ModelNotFound,
        PromptError,
        ReplicaStartError,
        PlacementTimeout,
        EndpointError,
        VLLMBuildError,
        ImagesNotSupported,
        EmbeddingModelNotFound,
        ReportError,
        SweepError,
    ]


def _raising(monkeypatch, exc: BaseException) -> None:
    """``load_questions`` (inside ``debate run``, after the config checks) raises ``exc``; no Ray starts."""
    import actors.driver
    import actors.prepare

    def load_questions(*args, **kwargs):
        raise exc

    monkeypatch.setattr(actors.prepare, "experiment_questions", load_questions)
    monkeypatch.setattr(actors.driver, "init_ray", lambda *a, **k: None)


def own_lines(text: str) -> list[str]:
    """stderr without the lines Ray forwards from actors of earlier tests."""
    return [line for line in text.splitlines() if "pid=" not in line]


@pytest.mark.parametrize("cls", _user_errors(), ids=lambda c: c.__name__)
def test_every_user_error_is_exit_2_with_one_line(capsys, monkeypatch, tmp_path, cls):
    from engine.errors import UserError

    assert issubclass(cls, UserError)
    _raising(monkeypatch, cls("--dataset x.jsonl:3: bad row"))
    code, text = fail(capsys, ["run", "--no-progress", "--backend", "simulated", "--out", str(tmp_path / "o")])
    assert code == 2 and own_lines(text) == ["debate: error: --dataset x.jsonl:3: bad row"]


def test_a_plain_value_error_is_a_bug_not_a_user_error(capsys, monkeypatch, tmp_path):
    """A ValueError from a bug inside the run path is not turned into a one-line exit 2."""
    _raising(monkeypatch, ValueError("boom"))
    with pytest.raises(ValueError, match="boom"):
        main(["run", "--no-progress", "--backend", "simulated", "--out", str(tmp_path / "o")])
    assert "debate: error" not in capsys.readouterr().err


def test_a_bug_exits_1_with_its_traceback(tmp_path):
    """Through the real entry point: the traceback on stderr and exit status 1."""
    import subprocess
    import sys

    script = (
        "import sys, actors.driver as d, actors.prepare as p\n"
        "def boom(*a, **k):\n    raise ValueError('boom')\n"
        "p.experiment_questions = boom\n"
        "d.init_ray = lambda *a, **k: None\n"
        "from app.cli import main\n"
        f"sys.exit(main(['run', '--no-progress', '--backend', 'simulated', '--out', {str(tmp_path / 'o')!r}]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback (most recent call last)" in proc.stderr and "ValueError: boom" in proc.stderr
    assert "debate: error" not in proc.stderr


def test_a_run_stopped_on_the_error_rate_is_exit_1_with_one_line(capsys, monkeypatch, tmp_path):
    import actors.driver

    stop = actors.driver.ErrorRateExceeded(
        "run mad-x stopped: 9 of 20 calls errored (45%), more than --max-error-rate 0.2. The results ...",
        "9 of 20 calls errored",
    )
    _raising(monkeypatch, stop)
    code, text = fail(capsys, ["run", "--no-progress", "--backend", "simulated", "--out", str(tmp_path / "o")])
    assert (
        code == 1 and len(own_lines(text)) == 1 and own_lines(text)[0].startswith("debate: error: run mad-x stopped:")
    )


def test_max_error_rate_must_be_a_fraction(capsys):
    code, text = fail(capsys, ["run", "--no-progress", "--max-error-rate", "1.5"])
    assert code == 2 and text.startswith("debate: error: --max-error-rate is a fraction") and "1.5" in text


def test_a_ray_address_where_nothing_listens_is_one_line(capsys, monkeypatch, tmp_path):
    """Ray would retry a dead --ray-address for minutes and end in a traceback; the engine checks
    the port first and stops in one line, before ray.init."""
    import socket

    import ray

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens on it
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    reached = []
    monkeypatch.setattr(ray, "init", lambda *a, **k: reached.append(k))
    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # as in a fresh `debate run` process
    out = tmp_path / "run"
    argv = ["run", "--no-progress", "--backend", "simulated", "--limit", "1", "--out", str(out)]
    code, text = fail(capsys, [*argv, "--ray-address", f"127.0.0.1:{port}"])
    assert code == 2 and not reached, text
    assert text.startswith(f"debate: error: --ray-address 127.0.0.1:{port}: no Ray cluster answers there")
    assert len(text.splitlines()) == 1
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")  # the variable is checked the same way
    code, text = fail(capsys, argv)
    assert code == 2 and not reached and "no Ray cluster answers" in text
