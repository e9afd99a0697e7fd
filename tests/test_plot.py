"""`lambdad plot`: a function of one real with its derivatives (computed by lambdad, nested
forward mode), a list of reals against its index, gaps where a curve is undefined, and a
clear message without matplotlib."""

from __future__ import annotations

import math
import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

import pytest

import lambdad
from conftest import ROOT
from lambdad import cli, plot
from lambdad.errors import ToolError, UsageError

SVG = "{http://www.w3.org/2000/svg}"
SOURCE = """\
def cube (x : R) : R = x * x * x - 2 * x
def bumpy (x : R) : R = sin x * exp (0 - x * x / 8)
def roots (x : R) : R = sqrt x + log x
def step (w : R) (i : R) : R = w - 0.1 * 2 * w
def losses = scan (\\w i -> w - 0.2 * w) 3 (range 30)
def pair (x : R) : R * R = (x, x)
"""


@pytest.fixture
def program_file(tmp_path):
    path = tmp_path / "curves.lam"
    path.write_text(SOURCE)
    return path


def curve_groups(svg: str) -> list[ElementTree.Element]:
    """The SVG groups of the drawn curves (one per curve, by the gid lambdad gives them)."""
    root = ElementTree.fromstring(svg)
    return [g for g in root.iter(f"{SVG}g") if (g.get("id") or "").startswith("lambdad-curve-")]


# ---------------------------------------------------------------- the numbers


def test_the_derivatives_are_lambdads_nested_forward_mode():
    drawn = plot.function_plot(lambdad.loads(SOURCE), "cube", -2, 2, order=3, samples=9)
    assert [c.label for c in drawn.curves] == ["cube", "cube′", "cube″", "cube‴"]
    assert [c.name for c in drawn.curves] == ["cube", "cube'", "cube''", "cube'''"]
    xs = drawn.curves[0].xs
    assert xs == (-2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0)
    exact = [lambda x: x ** 3 - 2 * x, lambda x: 3 * x * x - 2, lambda x: 6 * x, lambda x: 6.0]
    for curve, f in zip(drawn.curves, exact):
        assert curve.ys == pytest.approx([f(x) for x in xs], abs=1e-12)


def test_a_point_where_the_function_is_undefined_is_a_gap_not_an_error():
    drawn = plot.function_plot(lambdad.loads(SOURCE), "roots", -1, 4, order=1, samples=11)
    value, slope = drawn.curves
    assert [math.isnan(y) for y in value.ys] == [True, True, True] + [False] * 8  # x < 0, x = 0
    assert value.gaps == slope.gaps == 3
    assert slope.ys[-1] == pytest.approx(1 / (2 * 2) + 1 / 4)
    notes = drawn.notes()
    assert notes[0].startswith("roots is undefined at 3 of 11 points, gaps in the picture")
    assert "sqrt of a negative number" in notes[0]
    assert "undefined" in drawn.text().splitlines()[1]


def test_a_list_is_drawn_against_its_index():
    drawn = plot.list_plot(lambdad.loads(SOURCE), "losses")
    (curve,) = drawn.curves
    assert curve.xs[:3] == (0.0, 1.0, 2.0) and len(curve.ys) == len(curve.xs)
    assert curve.ys[0] == pytest.approx(3.0) and curve.ys[1] == pytest.approx(2.4)
    assert drawn.xlabel == "index"


@pytest.mark.parametrize("call, message", [
    (lambda p: plot.plot_of(p, "pair", 0, 1), "`pair` has type R -> R * R"),
    (lambda p: plot.plot_of(p, "losses", 0, 1), "`losses` is a list, drawn against its index"),
    (lambda p: plot.plot_of(p, "cube"), "give the interval"),
    (lambda p: plot.plot_of(p, "cube", 2, 1), "from a number to a larger one"),
    (lambda p: plot.plot_of(p, "cube", 0, 1, order=9), "--order must be between 0 and 6"),
    (lambda p: plot.plot_of(p, "nope", 0, 1), "no top-level definition named `nope`"),
])
def test_what_cannot_be_drawn_is_a_usage_error(call, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        call(lambdad.loads(SOURCE))


# ---------------------------------------------------------------- the command


def test_the_cli_writes_an_svg_with_the_function_and_its_derivatives(program_file, tmp_path,
                                                                      capsys):
    out = tmp_path / "bumpy.svg"
    status = cli.main(["plot", str(program_file), "bumpy", "--from", "-6", "--to", "6",
                       "--order", "2", "-o", str(out)])
    assert status == 0 and capsys.readouterr().err == f"wrote {out}\n"
    groups = curve_groups(out.read_text())
    assert len(groups) == 3
    for group in groups:  # each curve is one long line through its samples
        path = group.find(f"{SVG}path").get("d")
        assert len(re.findall(r"[ML]", path)) >= 50


def test_the_cli_writes_a_png(program_file, tmp_path, capsys):
    out = tmp_path / "cube.png"
    assert cli.main(["plot", str(program_file), "cube", "--from", "-2", "--to", "2",
                     "-o", str(out)]) == 0
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width > 600 and height > 400


def test_the_figure_has_one_labelled_line_per_curve():
    drawn = plot.function_plot(lambdad.loads(SOURCE), "bumpy", -6, 6, order=2)
    axes = drawn.figure().axes[0]
    assert [line.get_label() for line in axes.get_lines()
            if (line.get_gid() or "").startswith("lambdad-curve")] == ["bumpy", "bumpy′", "bumpy″"]
    assert axes.get_xlim() == (-6.0, 6.0)
    assert [t.get_text() for t in axes.get_legend().get_texts()] == ["bumpy", "bumpy′", "bumpy″"]


def test_the_cli_draws_a_list_as_one_curve(program_file, tmp_path, capsys):
    out = tmp_path / "losses.svg"
    assert cli.main(["plot", str(program_file), "losses", "-o", str(out)]) == 0
    (group,) = curve_groups(out.read_text())
    assert group is not None
    assert cli.main(["plot", str(program_file), "losses"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["index", "losses"] and lines[1].split() == ["0", "3"]
    assert len(lines) == 1 + 31


def test_the_cli_prints_the_points_and_notes_the_gaps(program_file, capsys):
    assert cli.main(["plot", str(program_file), "roots", "--from", "-1", "--to", "1",
                     "--samples", "3"]) == 0
    shown = capsys.readouterr()
    assert shown.out.splitlines() == ["x   roots      roots'",
                                      "-1  undefined  undefined",
                                      "0   undefined  undefined",
                                      "1   1          1.5"]
    assert shown.err.startswith("note: roots is undefined at 2 of 3 points")


@pytest.mark.parametrize("arguments, message", [
    (["--from", "0", "--to", "1", "-o", "x.jpeg"], "unknown plot format `.jpeg`"),
    (["--from", "(1, 2)", "--to", "1"], "--from: expected a real number"),
    (["--from", "0", "--to", "nope"], "--to: not a value in lambdad syntax"),
])
def test_bad_arguments_are_usage_errors(program_file, arguments, message, capsys):
    assert cli.main(["plot", str(program_file), "cube", *arguments]) == 2
    assert message in capsys.readouterr().err


def test_without_matplotlib_a_picture_is_a_tool_error_that_says_how_to_install_it(
        program_file, tmp_path, monkeypatch, capsys):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` fails
    out = tmp_path / "cube.png"
    status = cli.main(["plot", str(program_file), "cube", "--from", "0", "--to", "1",
                       "-o", str(out)])
    err = capsys.readouterr().err
    assert status == ToolError.exit_code == 4 and not out.exists()
    assert err.startswith("tool error: matplotlib is not installed, so the plot cannot be drawn")
    assert "pip install 'lambdad[plot]'" in err and "Traceback" not in err
    # the points need no matplotlib
    assert cli.main(["plot", str(program_file), "cube", "--from", "0", "--to", "1",
                     "--samples", "2"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split() == ["0", "0", "-2"]


def test_drawing_leaves_matplotlib_as_it_was():
    """No pyplot, no backend chosen, no rc parameter changed: a program that uses
    matplotlib itself finds it as it left it."""
    script = (
        "import matplotlib, sys, lambdad\n"
        "from lambdad import plot\n"
        "before = matplotlib.rcParams.copy()  # (reading the backend would choose one)\n"
        "drawn = plot.function_plot(lambdad.loads('def f (x : R) : R = x * x'), 'f', 0, 1)\n"
        "assert drawn.png().startswith(b'\\x89PNG') and '<svg' in drawn.svg()\n"
        "assert 'matplotlib.pyplot' not in sys.modules\n"
        "assert matplotlib.rcParams.copy() == before\n"
        "print('ok')\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            cwd=ROOT, timeout=120)
    assert result.stdout == "ok\n", result.stderr
