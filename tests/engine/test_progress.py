"""Progress where stderr is not a terminal: whole lines, now and then, never carriage returns."""

import io

from engine.progress import LineProgress, progress


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_lines_come_at_most_once_per_interval_and_once_at_the_end():
    out, clock = io.StringIO(), Clock()
    bar = LineProgress(20, initial=5, unit="q", desc="mad (simulated)", interval=15, file=out, clock=clock)
    bar.update(1)  # at once: no line yet
    clock.t += 16
    bar.set_postfix(calls=72, tok=9400, refresh=False)
    bar.update(2)  # 16 s later: a line
    clock.t += 5
    bar.update(1)  # 5 s after that line: none
    clock.t += 10
    bar.update(0)  # nothing counted: no line whatever the time
    bar.close()
    bar.close()  # once
    lines = out.getvalue().splitlines()
    assert lines == [
        "mad (simulated): 8/20 q (40%) calls=72, tok=9400, 16 s",
        "mad (simulated): 9/20 q (45%) calls=72, tok=9400, 31 s",
    ]
    assert "\r" not in out.getvalue()


def test_off_a_terminal_progress_is_lines(monkeypatch, capsys):
    monkeypatch.setattr("sys.stderr.isatty", lambda: False, raising=False)
    bar = progress(3, unit="cell", desc="sweep")
    assert isinstance(bar, LineProgress)
    bar.update(3)
    bar.close()
    assert capsys.readouterr().err == "sweep: 3/3 cell (100%) 0 s\n"
    assert not isinstance(progress(3, disable=True), LineProgress)  # disabled: tqdm's silent bar
