"""lambdad in Jupyter: the notebook session and its magics, rich output of the Python API,
docs/tutorial.ipynb executed by a real kernel, and its HTML rendering in a real browser.

Needs the ``notebook`` extra (``pip install -e '.[test,notebook]'``).  The browser test
needs Chromium from the OS packages (Debian/Ubuntu: ``apt-get install chromium``) and is
skipped without it.  ``python tests/test_notebook.py --screenshot docs/images/notebook.png``
retakes the screenshot shown in docs/notebook.md.
"""

from __future__ import annotations

import base64
import html
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

pytest.importorskip("IPython", reason="the notebook extra is not installed")

import lambdad  # noqa: E402
from conftest import missing_tool  # noqa: E402
from lambdad import gradcheck  # noqa: E402
from lambdad.errors import LambdadError, TypeCheckError, UsageError, render  # noqa: E402
from lambdad.notebook import NotebookSession  # noqa: E402
from lambdad.trace import trace  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "docs" / "tutorial.ipynb"
BAYDIN = "def f (x1 : R) (x2 : R) : R =\n  log x1 + x1 * x2 - sin x2\n"


# ---------------------------------------------------------------- the session, no kernel


@pytest.fixture
def session():
    notebook = NotebookSession()
    notebook.run_cell(BAYDIN)
    return notebook


def test_a_cell_defines_and_a_redefinition_replaces(session):
    assert str(session.grad("f 2,5")) == "value: 11.652071455223084\n" \
                                         "gradient: (5.5, 1.7163378145367738)"
    answer = session.run_cell("def f (x1 : R) (x2 : R) : R = x1 * x2\ndef g x = f x x\n")
    assert str(answer) == "f : R -> R -> R\ng : R -> R"
    assert session.grad("f 2,5")["gradient"] == "(5, 2)"
    assert str(session.evaluate("g 3")) == "9 : R"


def test_errors_point_into_the_cell_and_leave_the_program_unchanged(session):
    with pytest.raises(TypeCheckError) as caught:
        session.run_cell("def f x = x\ndef h (x : R) = x + [1, 2]\n", number=7)
    text = render(caught.value, session.sources)
    assert text.startswith("<cell 7>:2:21: type error")
    assert "    2 | def h (x : R) = x + [1, 2]" in text and "^^^^^^" in text
    assert str(session.evaluate("f 2 5")) == "11.652071455223084 : R"  # f is still Baydin's
    with pytest.raises(UsageError, match="usage: %grad NAME POINT"):
        session.grad("f")
    with pytest.raises(LambdadError, match="no top-level definition named `nope`"):
        session.grad("nope 1")


def test_magics_return_rich_results_with_a_text_form(session):
    table = session.trace("f 2,5 reverse")
    assert "<table" in table._repr_html_() and "adjoint" in table._repr_html_()
    assert "v5   - v4, v3" in str(table)
    graph = session.graph("f 2,5")
    assert graph.title == "f at 2,5"
    ElementTree.fromstring(graph._repr_svg_())
    program = session.show("f")
    assert str(program).startswith("-- f : R * (R -o d)")
    assert '<span style="' in program._repr_html_()  # highlighted
    assert "(→D of R -> R -> R)" in str(session.show("f forward"))
    hessian = session.hessian("f 2,5")
    assert str(hessian).endswith("hessian:\n  x1 : (-0.25, 1)\n  x2 : (1, -0.9589242746631385)")
    assert hessian.cells == (("-0.25", "1"), ("1", "-0.9589242746631385"))
    report = session.check("f 2,5")
    assert report.ok and "agree" in report._repr_html_() and str(report) == report.render()


def test_graph_folds_constants_unless_asked_and_check_is_monospace(session):
    session.run_cell("def c (x : R) : R = x * (1 - 0)\n")
    assert [n.lines[0] for n in session.graph("c 2").nodes] == ["x", "v1 = x * 1"]
    drawn = session.graph("c 2 constants")
    assert [n.lines[0] for n in drawn.nodes] == ["x", "v1 = 1 - 0", "v2 = x * v1"]
    assert drawn.title == "c at 2"
    assert [n.lines[0] for n in session.graph("c 2 forward constants").nodes][1] == "v1 = 1 - 0"
    report = session.check("f 2,5")._repr_html_()
    pre = re.search(r'<pre style="([^"]*)"', report).group(1)
    assert "font-family:" in pre and "monospace" in pre and "white-space:pre" in pre


def test_plot_draws_a_function_with_its_derivatives_or_a_list(session):
    session.run_cell("def h (x : R) : R = x * x * x\ndef losses = [4, 2, 1, 0.5]\n")
    drawn = session.plot("h -1 1 2")
    assert [c.label for c in drawn.curves] == ["h", "h′", "h″"]
    assert drawn.curves[2].ys[-1] == 6.0  # h'' = 6 x, at x = 1
    svg = ElementTree.fromstring(drawn._repr_svg_())
    assert len([g for g in svg.iter("{http://www.w3.org/2000/svg}g")
                if (g.get("id") or "").startswith("lambdad-curve-")]) == 3
    assert session.plot("losses").curves[0].ys == (4.0, 2.0, 1.0, 0.5)
    assert session.plot("h -1 1 0").curves[0].name == "h"
    with pytest.raises(UsageError, match="usage: %plot NAME A B"):
        session.plot("h 1")
    with pytest.raises(UsageError, match="is a list, drawn against its index"):
        session.plot("losses 0 1")


def test_a_file_is_loaded_with_its_imports_and_reloaded(tmp_path):
    main, lib = tmp_path / "main.lam", tmp_path / "lib.lam"
    main.write_text('import "lib.lam"\ndef f x = scale x * x\n')
    lib.write_text("def scale x = 2 * x\n")
    notebook = NotebookSession()
    notebook.run_cell("def forgotten = 1\n")
    assert str(notebook.load(f" {main} ")) == f"-- {main}\nscale : R -> R\nf : R -> R"
    assert notebook.grad("f 3")["gradient"] == "12"
    assert str(notebook.run_cell("def g x = f x + 1\n")) == "g : R -> R"
    assert str(notebook.evaluate("g 1")) == "3 : R"
    with pytest.raises(UsageError, match="no top-level definition named `forgotten`"):
        notebook.grad("forgotten 1")
    lib.write_text("def scale x = x + true\n")
    with pytest.raises(TypeCheckError) as caught:
        notebook.reload()
    assert render(caught.value, notebook.sources).splitlines()[1:] == [
        "    1 | def scale x = x + true", "      |                   ^^^^"]
    assert notebook.grad("f 3")["gradient"] == "12"  # the failed load changed nothing
    lib.write_text("def scale x = 3 * x\n")
    assert str(notebook.reload()).endswith("f : R -> R")
    assert notebook.grad("f 3")["gradient"] == "18"
    with pytest.raises(LambdadError, match="an import is read where a program file is loaded"):
        notebook.run_cell(f'import "{lib}"\n')


def test_magics_see_a_program_loaded_in_python_and_can_adopt_it():
    program = lambdad.load(ROOT / "programs" / "baydin.lam")
    notebook = NotebookSession({"prog": program, "other": 3})
    # a name the notebook does not define: the one Python program that defines it
    assert notebook.grad("f 2,5")["gradient"] == "(5.5, 1.7163378145367738)"
    assert "11.652071455223084" in str(notebook.hessian("f 2,5"))
    assert "x1_" in str(notebook.show("f"))
    with pytest.raises(UsageError, match="no top-level definition named `nothing`"):
        notebook.grad("nothing 1")
    # the notebook's own definitions come first
    notebook.run_cell("def f (x : R) (y : R) : R = x * y\n")
    assert notebook.grad("f 2,5")["gradient"] == "(5, 2)"
    # `%lambdad_use`: the program becomes the notebook's, for cells too
    assert str(notebook.use(program, "`prog`")).splitlines()[:2] == [
        "-- `prog`: " + str(ROOT / "programs" / "baydin.lam"), "f : R -> R -> R"]
    assert notebook.grad("f 2,5")["gradient"] == "(5.5, 1.7163378145367738)"
    assert str(notebook.evaluate("")).startswith("-- f : R -> R -> R\ndef f (x1 : R)")
    notebook.run_cell("def g x = f x x\n", number=3)
    assert "g" not in program.decls and "<cell 3>" not in program.sources
    with pytest.raises(UsageError, match="needs a lambdad program .*`other` is a int"):
        notebook.use(3, "`other`")


def test_two_python_programs_defining_a_name_are_named_not_chosen():
    first = lambdad.loads("def k = 1\n", "first.lam")
    second = lambdad.loads("def k = 2\n", "second.lam")
    notebook = NotebookSession({"a": first, "b": second, "same": first})
    with pytest.raises(UsageError) as caught:
        notebook.grad("k 1")
    assert render(caught.value).splitlines() == [
        "usage error: no top-level definition named `k` (defined: none)",
        "  note: the Python variables `a`, `b`, `same` hold programs that define it: "
        "`%lambdad_use a` makes one the notebook's program"]
    assert str(NotebookSession({"a": first, "same": first}).evaluate("")) == "-- no definitions"


def test_the_python_api_results_show_richly():
    program = lambdad.load(ROOT / "programs" / "baydin.lam")
    html = program._repr_html_()
    assert "<pre" in html and "log x1 + x1" in re.sub(r"<[^>]+>", "", html)
    assert program.source().startswith("-- f : R -> R -> R\ndef f (x1 : R) (x2 : R) : R =")
    tr = trace(program, "f", (2.0, 5.0), mode="forward")
    assert "∂/∂x1" in tr._repr_html_()
    assert tr.graph("f")._repr_svg_().lstrip().startswith(("<svg", "<?xml"))
    report = gradcheck.check(program, "f", point=(2.0, 5.0))
    assert "derivatives agree" in report._repr_html_()


def test_the_extension_loads_into_ipython_and_shows_errors_without_a_traceback(capsys):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shell.run_line_magic("load_ext", "lambdad")
        shell.run_cell("%%lambdad\n" + BAYDIN)
        assert str(shell.run_line_magic("grad", "f 2,5")).endswith("(5.5, 1.7163378145367738)")
        result = shell.run_cell("%%lambdad\ndef h x = x + true\n")
        assert isinstance(result.error_in_exec, TypeCheckError)
        shown = capsys.readouterr()
        assert "type error: `+` expects R, but this has type Bool" in shown.out + shown.err
        assert "Traceback" not in shown.out + shown.err
        bmp = str(ROOT / "programs" / "bmp.lam")
        shell.run_cell(f"import lambdad\nprog = lambdad.load({bmp!r})")
        # the session: the notebook defines no `f_shared`, the program `prog` does
        assert shell.run_line_magic("grad", "f_shared 3,1")["gradient"] == \
            "(-2.6145744834544478, 2.6145744834544478)"
        result = shell.run_cell("%grad nowhere 1")
        assert isinstance(result.error_in_exec, UsageError)
        assert "no top-level definition named `nowhere`" in capsys.readouterr().out
        shell.run_line_magic("lambdad_use", "prog")
        assert shell.run_line_magic("grad", "f 3,1")["value"] == \
            shell.run_line_magic("grad", "f_shared 3,1")["value"]
        assert str(shell.run_line_magic("lambdad_load", str(ROOT / "programs" / "quadratic.lam"))
                   ).startswith("-- ")
        result = shell.run_cell("%lambdad_use nothing_here")
        assert isinstance(result.error_in_exec, UsageError)
        assert "NameError" in capsys.readouterr().out
    finally:
        InteractiveShell.clear_instance()


# ---------------------------------------------------------------- a real kernel


def _execute_notebook():
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=60, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    return notebook


@pytest.fixture(scope="module")
def executed():
    pytest.importorskip("nbclient", reason="the notebook extra is not installed")
    return _execute_notebook()


def outputs_of(notebook, source_start):
    """The outputs of the first code cell that is, or starts with, ``source_start``."""
    cells = [c for c in notebook.cells if c.cell_type == "code"
             and c.source.startswith(source_start)]
    assert cells, f"no cell starts with {source_start!r}"
    exact = [c for c in cells if c.source == source_start]
    return (exact or cells)[0].outputs


def test_the_tutorial_notebook_runs_in_a_kernel_with_the_expected_outputs(executed):
    def data(source_start, kind):
        outputs = outputs_of(executed, source_start)
        return "".join(o["data"][kind] for o in outputs if kind in o.get("data", {}))

    assert data("%%lambdad\ndef f (x1 : R) (x2 : R) : R =\n  log", "text/plain") \
        == "f : R -> R -> R"
    assert data("%lambdad f 2 5", "text/plain") == "11.652071455223084 : R"
    assert data("%grad f 2,5", "text/plain") == ("value: 11.652071455223084\n"
                                                 "gradient: (5.5, 1.7163378145367738)")
    forward = data("%trace f 2,5", "text/html")
    assert "<table" in forward and "∂/∂x1" in forward and "∂/∂x2" in forward
    reverse = data("%trace f 2,5 reverse", "text/html")
    assert "adjoint" in reverse and "1.7163378145367738" in reverse
    svg = data("%graph f 2,5", "image/svg+xml")
    texts = {t.text for t in ElementTree.fromstring(svg).iter()
             if t.tag.endswith("text") and t.text}
    assert {"v5 = v4 - v3", "adjoint 5.5", "x1", "x2"} <= texts
    assert "z_ (z * a) <+> z_ (z * a)" in data("%show f_shared", "text/plain")
    assert '<span style="' in data("%show f_shared", "text/html")
    assert data("%check f 2,5", "text/plain").rstrip().endswith("agree (error <= rtol 1e-05)")
    error = outputs_of(executed, "%%lambdad\ndef g (x : R)")[0]
    assert error["output_type"] == "error" and error["ename"] == "TypeCheckError"
    assert error["traceback"] == [
        f"<cell {error_cell_number(executed)}>:1:21: type error: `+` expects R, but this has "
        "type [R]\n    1 | def g (x : R) = x + [1, 2]\n      |                     ^^^^^^"]
    # the redefinition of f replaced the old one
    last_grad = [c for c in executed.cells if c.cell_type == "code"
                 and c.source == "%grad f 2,5"][-1]
    assert last_grad.outputs[0]["data"]["text/plain"].endswith("gradient: (5, 2)")
    assert "<td" in data('trace(bmp, "f_shared"', "text/html")
    assert data("%hessian f 2,5", "text/plain").endswith(
        "hessian:\n  x1 : (-0.25, 1)\n  x2 : (1, -0.9589242746631385)")
    assert "<caption" in data("%hessian f 2,5", "text/html")


def error_cell_number(notebook):
    cell = next(c for c in notebook.cells if c.source.startswith("%%lambdad\ndef g (x : R)"))
    return cell.execution_count


# ---------------------------------------------------------------- a real browser

CHROMIUM_HINT = ("headless Chromium is not installed; to run this test install it from the "
                 "OS packages (Debian/Ubuntu: `apt-get install chromium`)")


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def render_html(notebook) -> str:
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(notebook)
    return body


def run_chromium(*arguments: str) -> subprocess.CompletedProcess:
    # No network here: every outside request (the page's CDN scripts) fails at once.
    return subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                           "--host-resolver-rules=MAP * ~NOTFOUND", *arguments],
                          capture_output=True, text=True, timeout=90)


# Run in the page once it has loaded: records the size at which the browser decoded each
# picture, so that the dumped page shows whether the graph was really drawn.
MEASURE_IMAGES = """<script>
window.addEventListener("load", () => {
  for (const image of document.images)
    image.setAttribute("data-drawn", image.naturalWidth + "x" + image.naturalHeight);
});
</script>"""


def test_the_rendered_notebook_shows_the_graph_and_the_table_in_a_browser(executed, tmp_path):
    if chromium() is None:
        missing_tool(CHROMIUM_HINT)
    page = tmp_path / "tutorial.html"
    page.write_text(render_html(executed).replace("</body>", MEASURE_IMAGES + "</body>"),
                    encoding="utf-8")
    dom = run_chromium("--dump-dom", page.as_uri()).stdout
    # nbconvert embeds SVG output as an image with a data: URL
    pictures = re.findall(r'<img [^>]*src="data:image/svg\+xml;base64,([^"]+)"[^>]*'
                          r'data-drawn="(\d+)x(\d+)"', dom)
    graphs = [base64.b64decode(data).decode() for data, _, _ in pictures]
    assert len(graphs) == 2  # f and f_shared
    # drawn by Graphviz when it is installed, else by lambdad's own layout
    drawn_by = 'class="graph"' if shutil.which("dot") else 'class="lambdad-graph"'
    assert drawn_by in graphs[0] and "v5 = v4 - v3" in html.unescape(graphs[0])
    assert all(int(width) > 300 and int(height) > 100 for _, width, height in pictures)
    tables = re.findall(r'<table class="lambdad-table".*?</table>', dom, re.S)
    captions = [re.search(r"<caption[^>]*>([^<]*)", t).group(1) for t in tables]
    assert captions == ["hessian", "forward trace: values and tangents",
                        "reverse trace: values and adjoints", "reverse trace: values and adjoints"]
    assert "∂/∂x1" in tables[1] and "1.7163378145367738" in tables[2]


def take_screenshot(output: Path) -> None:
    """Executes the notebook, renders it and photographs the top of the graph section."""
    notebook = _execute_notebook()
    page = output.with_suffix(".html")
    page.write_text(render_html(notebook), encoding="utf-8")
    try:
        result = run_chromium("--hide-scrollbars", "--window-size=1100,2100",
                              f"--screenshot={output}", page.as_uri())
    finally:
        page.unlink()
    if result.returncode != 0:
        raise SystemExit(result.stderr)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--screenshot":
        if chromium() is None:
            raise SystemExit(CHROMIUM_HINT)
        take_screenshot(Path(sys.argv[2]).resolve())
    else:
        raise SystemExit(__doc__)


# A notebook of its own for the plot, so that the tutorial's pictures are counted apart.
PLOT_CELLS = [
    "%load_ext lambdad",
    "%%lambdad\ndef wave (x : R) : R = sin x * exp (0 - x * x / 8)",
    "%plot wave -6 6 2",
    "%check wave 1",
]

# Run in the page once it has loaded: the size at which each picture was decoded, and
# whether the check report's font gives every character one width (its columns line up).
MEASURE_PLOT_PAGE = """<script>
window.addEventListener("load", () => {
  for (const image of document.images)
    image.setAttribute("data-drawn", image.naturalWidth + "x" + image.naturalHeight);
  for (const pre of document.querySelectorAll(".lambdad-report pre")) {
    const widths = ["iiiiiiiiii", "mmmmmmmmmm"].map(text => {
      const probe = document.createElement("span");
      probe.textContent = text;
      pre.appendChild(probe);
      const width = probe.getBoundingClientRect().width;
      probe.remove();
      return width;
    });
    pre.setAttribute("data-widths", widths.join(","));
  }
});
</script>"""


def test_a_plot_and_the_check_report_are_drawn_in_a_browser(tmp_path, monkeypatch):
    if chromium() is None:
        pytest.skip(CHROMIUM_HINT)
    pytest.importorskip("nbclient", reason="the notebook extra is not installed")
    pytest.importorskip("matplotlib", reason="the plot extra is not installed")
    import nbformat
    from nbclient import NotebookClient

    # the kernel imports this checkout's lambdad
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(source) for source in PLOT_CELLS])
    NotebookClient(notebook, timeout=60, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    page = tmp_path / "plot.html"
    page.write_text(render_html(notebook).replace("</body>", MEASURE_PLOT_PAGE + "</body>"),
                    encoding="utf-8")
    dom = run_chromium("--dump-dom", page.as_uri()).stdout
    pictures = re.findall(r'<img [^>]*src="data:image/svg\+xml;base64,([^"]+)"[^>]*'
                          r'data-drawn="(\d+)x(\d+)"', dom)
    assert len(pictures) == 1
    data, width, height = pictures[0]
    assert int(width) > 500 and int(height) > 300  # decoded and drawn at full size
    svg = ElementTree.fromstring(base64.b64decode(data))
    curves = [g for g in svg.iter("{http://www.w3.org/2000/svg}g")
              if (g.get("id") or "").startswith("lambdad-curve-")]
    assert len(curves) == 3 and all(g.find("{http://www.w3.org/2000/svg}path") is not None
                                    for g in curves)
    widths = re.search(r'<pre [^>]*data-widths="([\d.]+),([\d.]+)"', dom)
    assert widths is not None and "derivatives agree" in dom
    narrow, wide = map(float, widths.groups())
    assert narrow > 0 and narrow == wide  # monospace: the report's columns line up
