"""The reference values of LANGUAGE.md section 8, through the API and the CLI, in both modes
and both strategies."""

import json
import math

import pytest

import lambdad
from conftest import PROGRAMS

# (program, function, point, value, gradient)
REFERENCE = [
    ("baydin.lam", "f", (2.0, 5.0), 11.652071455223084, (5.5, 1.7163378145367738)),
    ("jones.lam", "f", (1.0, 2.0), 10.972909262383508, (18.7781121978613, 3.090702573174318)),
    ("bmp.lam", "f", (3.0, 1.0), -0.7568024953079282, (-2.6145744834544478, 2.6145744834544478)),
    ("bmp.lam", "f_shared", (3.0, 1.0), -0.7568024953079282,
     (-2.6145744834544478, 2.6145744834544478)),
    ("quadratic.lam", "f", (1.0, 2.0, 3.0, 4.0), 27.0, (16.0, 4.0, 1.0, 10.0)),
]


def close(a, b, rel=1e-12):
    if isinstance(a, tuple):
        return len(a) == len(b) and all(close(x, y, rel) for x, y in zip(a, b))
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-14)


def flat(t):
    return t if not isinstance(t, tuple) else tuple(x for part in t for x in (flat(part) if isinstance(part, tuple) else (part,)))


@pytest.mark.parametrize("file,name,point,value,gradient", REFERENCE)
@pytest.mark.parametrize("mode,strategy", [("reverse", "factored"), ("reverse", "naive"),
                                           ("forward", "factored")])
def test_reference_gradients_api(file, name, point, value, gradient, mode, strategy):
    prog = lambdad.load(PROGRAMS / file)
    v, g = prog.value_and_grad(name, point, mode=mode, strategy=strategy)
    assert close(v, value)
    assert close(flat(g), gradient)


@pytest.mark.parametrize("file,name,point,value,gradient", REFERENCE)
def test_reference_values_call(file, name, point, value, gradient):
    prog = lambdad.load(PROGRAMS / file)
    assert close(prog.call(name, point), value)


def test_baydin_run_prints_reference(lambdad_cli):
    result = lambdad_cli("run", "programs/baydin.lam")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "(11.652071455223084, (5.5, 1.7163378145367738))"


@pytest.mark.parametrize("file,name,point,value,gradient", REFERENCE)
def test_reference_gradients_cli_json(lambdad_cli, file, name, point, value, gradient):
    at = ",".join(repr(p) for p in point)
    for mode in ("reverse", "forward"):
        result = lambdad_cli("grad", f"programs/{file}", name, "--at", at, "--mode", mode, "--json")
        assert result.returncode == 0, result.stderr
        out = json.loads(result.stdout)
        assert out["mode"] == mode
        assert close(out["value"], value)

        def flatten(x):
            return [y for part in x for y in flatten(part)] if isinstance(x, list) else [x]

        assert close(tuple(flatten(out["gradient"])), gradient)


def test_grad_cli_text_and_stats(lambdad_cli):
    result = lambdad_cli("grad", "programs/baydin.lam", "f", "--at", "2,5", "--stats")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "value: 11.652071455223084"
    assert lines[1] == "gradient: (5.5, 1.7163378145367738)"
    assert any(line.startswith("backpropagators created: ") for line in lines)
    assert any(line.startswith("backpropagator bodies run: ") for line in lines)


def test_grad_both_modes_side_by_side(lambdad_cli):
    result = lambdad_cli("grad", "programs/jones.lam", "f", "--at", "1,2", "--mode", "both")
    assert result.returncode == 0, result.stderr
    assert "gradient (reverse, fused): (18.7781121978613, 3.090702573174318)" in result.stdout
    assert "gradient (forward):" in result.stdout


@pytest.mark.parametrize("file", sorted(p.name for p in PROGRAMS.glob("*.lam")))
def test_every_program_runs(lambdad_cli, file):
    result = lambdad_cli("run", f"programs/{file}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
