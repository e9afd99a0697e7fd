"""What importing lambdad costs a scalar program: SciPy (whose import takes more time and
memory than lambdad's own) is imported only when a program takes erf of an array."""

import subprocess
import sys

SCALAR = """
import sys
import lambdad
program = lambdad.load("programs/newton.lam")
program.run()
print("scipy" in sys.modules, "scipy.special" in sys.modules)
"""

ERF = """
import math, sys
{setup}
import numpy as np
import lambdad
program = lambdad.loads("def f (x : Vec) : R = sum (erf x)")
value, gradient = program.value_and_grad("f", np.array([0.1, -0.5, 2.0]))
assert abs(value - sum(map(math.erf, [0.1, -0.5, 2.0]))) < 1e-14, value
assert np.allclose(gradient, 2 / math.sqrt(math.pi) * np.exp(-np.array([0.1, -0.5, 2.0]) ** 2))
print("scipy.special" in sys.modules)
"""


def _python(code):
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_a_scalar_program_does_not_import_scipy():
    assert _python(SCALAR) == ["False", "False"]


def test_erf_of_an_array_imports_scipy_when_it_is_used():
    assert _python(ERF.format(setup="")) == ["True"]


def test_erf_of_an_array_without_scipy_applies_math_erf_to_each_element():
    # (a None in sys.modules makes the import fail, as on a machine without SciPy)
    assert _python(ERF.format(setup="sys.modules['scipy'] = None")) == ["False"]
