"""A study run's progress when stderr is not a terminal (``kernbench study all > log 2>&1``): plain lines, at most
one every five seconds plus a first and a last one, timed by a fake clock."""

from __future__ import annotations

import io

from kernbench.studies.progress import Progress


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.t = 50.0

    def __call__(self) -> float:
        return self.t


def test_lines_off_a_terminal_at_most_every_five_seconds():
    clock, out = FakeClock(), io.StringIO()
    bar = Progress(10, "gemm + gqa", None, out, clock=clock)
    for t in (1.0, 2.0, 5.0, 6.0, 9.9, 10.0, 10.1, 30.0, 31.0, 32.0):  # when each of the ten points finishes
        clock.t = 50.0 + t
        bar.step()
    bar.close()
    assert out.getvalue().splitlines() == [
        "gemm + gqa: 10 points to run",
        "gemm + gqa: 3/10 points (30%), 5.0 s",
        "gemm + gqa: 6/10 points (60%), 10.0 s",
        "gemm + gqa: 8/10 points (80%), 30.0 s",
        "gemm + gqa: all points done in 32.0 s",
    ]
    assert "\r" not in out.getvalue()


def test_an_interrupted_run_says_where_it_stopped_and_a_terminal_keeps_the_bar():
    clock, out = FakeClock(), io.StringIO()
    bar = Progress(4, "gqa", None, out, clock=clock)
    clock.t += 2.5
    bar.step()
    bar.close()
    assert out.getvalue().splitlines() == ["gqa: 4 points to run", "gqa: stopped after 1/4 points in 2.5 s"]

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    bar = Progress(2, "gemm", None, tty, clock=clock)
    clock.t += 1.0
    bar.step()
    bar.close()
    assert tty.getvalue() == ("\rgemm [..............................] 0/2 points, 0.0 s"
                              "\rgemm [###############...............] 1/2 points, 1.0 s\n")


def test_nothing_when_switched_off_or_when_nothing_runs():
    out = io.StringIO()
    bar = Progress(3, "gemm", False, out)
    bar.step()
    bar.close()
    idle = Progress(0, "gemm", None, out)
    idle.close()
    assert out.getvalue() == ""
