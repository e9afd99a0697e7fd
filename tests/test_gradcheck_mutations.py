"""The gradient checker is itself checked: every partial derivative of every real primitive
of the table is broken in turn (doubled; in the long profile also shifted by 1, off by
0.1 % and negated) and `check`, with its default sampling, must report each broken rule;
unbroken, it must pass.  Also the
programs that once made the checker blind (a large constant switching the comparison off)."""

import pytest

import lambdad
from lambdad import gradcheck, rules
from lambdad.parser import parse_expr
from lambdad.primitives import PRIMITIVES
from lambdad.syntax import Const

REAL_PRIMITIVES = sorted(name for name, p in PRIMITIVES.items() if p.kind == "real")
PARTIALS = [(name, i) for name in REAL_PRIMITIVES for i in range(PRIMITIVES[name].arity)]
DOUBLED, SHIFTED = "2 * ({})", "({}) + 1"
LONG_MUTATIONS = (SHIFTED, "1.001 * ({})", "-({})")


def program_of(name: str) -> lambdad.Program:
    """``def f x1 .. xk = prim x1 .. xk``, in the primitive's own spelling."""
    prim = PRIMITIVES[name]
    params = [f"x{i + 1}" for i in range(prim.arity)]
    symbol = prim.spelling.symbol
    if prim.spelling.fixity == "infix":
        body = f"{params[0]} {symbol} {params[1]}"
    elif prim.spelling.fixity == "prefix":
        body = f"{symbol}{params[0]}"
    else:
        body = " ".join([symbol, *params])
    return lambdad.loads(f"def f {' '.join(params)} = {body}\n")


@pytest.fixture
def break_partial(monkeypatch):
    """Replaces partial ``index`` of primitive ``name`` in the derivative rules by
    ``mutation`` (a format string applied to the partial's source text)."""

    def patch(name: str, index: int, mutation: str) -> str:
        prim = PRIMITIVES[name]
        bound = prim.params + ((prim.result,) if prim.result else ())
        text = mutation.format(prim.partials[index])
        table = dict(rules.PARTIALS)
        entry = list(table[name])
        entry[index] = parse_expr(text, "<broken partial>", bound=bound)
        table[name] = tuple(entry)
        monkeypatch.setattr(rules, "PARTIALS", table)
        return text

    return patch


@pytest.mark.parametrize("name", REAL_PRIMITIVES)
def test_every_primitive_passes_unbroken(name):
    report = gradcheck.check(program_of(name))
    assert report.ok, report.render()


def assert_reported(name, index, text):
    if PRIMITIVES[name].partials[index] == "0" and not text.endswith(" + 1"):
        pytest.skip("scaling a zero partial (floor, sign, ...) leaves it unchanged")
    report = gradcheck.check(program_of(name))
    assert not report.ok, f"∂{index + 1} {name} = {text} passed:\n{report.render()}"
    assert report.functions[0].failed, report.render()
    assert report.render().splitlines()[-1] == "FAILED: f"


def is_zero(name: str, index: int) -> bool:
    """Whether the partial is the constant 0 (`ceil`, `floor`): scaling it changes nothing."""
    partial = rules.PARTIALS[name][index]
    return isinstance(partial, Const) and partial.value == 0.0


@pytest.mark.parametrize("name,index", PARTIALS)
def test_a_broken_partial_is_reported(break_partial, name, index):
    """Doubled (shifted by 1 where the partial is 0)."""
    mutation = SHIFTED if is_zero(name, index) else DOUBLED
    assert_reported(name, index, break_partial(name, index, mutation))


@pytest.mark.long
@pytest.mark.parametrize("mutation", LONG_MUTATIONS)
@pytest.mark.parametrize("name,index", PARTIALS)
def test_a_partial_broken_otherwise_is_reported(break_partial, name, index, mutation):
    if is_zero(name, index) and mutation != SHIFTED:
        pytest.skip("the mutation leaves this partial as it is")
    assert_reported(name, index, break_partial(name, index, mutation))


# ---------------------------------------------------------------- programs that hid a bug


BLINDING = [
    "def f x = max (sin x) (-1e30)",
    "def f x = sin x + log (exp 30)",
    "def f x = sin x * 1e-30 * 1e30",
    "def f (x : R) (y : R) = sin x * y + 1e20 * 0 + exp (y - 40)",
]


@pytest.mark.parametrize("source", BLINDING)
def test_a_large_constant_does_not_switch_the_check_off(break_partial, source):
    assert gradcheck.check(lambdad.loads(source)).ok
    break_partial("sin", 0, "2 * cos x")
    report = gradcheck.check(lambdad.loads(source))
    assert report.functions[0].failed, report.render()


def test_a_value_too_large_to_resolve_is_not_checked_never_ok(break_partial):
    """`sin x + 1e30` is 1e30 at every probe: finite differences cannot see `sin`."""
    break_partial("sin", 0, "2 * cos x")
    report = gradcheck.check(lambdad.loads("def f x = sin x + 1e30"))
    assert not report.ok
    assert "not checked" in report.render() and "rounding error" in report.render()


def test_the_error_is_the_relative_difference_on_a_softmax():
    """The error printed is the real relative difference, not one shrunk by the largest
    number of the run (here 1e30)."""
    program = lambdad.loads(
        "def f (a : R) (b : R) (c : R) : R =\n"
        "  let m = exp a + exp b + exp c in max (exp a / m) (-1e30)")
    report = gradcheck.check(program, point=(3.0, 1.0, -2.0))
    assert report.ok, report.render()
    relative_errors = []
    for row in report.functions[0].checks[0].rows:
        errors = []
        for d in row.derivatives.values():
            difference = abs(d - row.finite_difference)
            relative = difference / max(abs(d), abs(row.finite_difference))
            errors.append(difference / max(abs(d), abs(row.finite_difference), row.floor / 1e-5))
            if abs(d) > row.floor / 1e-5:  # above the floor, the error is plainly relative
                relative_errors.append((errors[-1], relative))
        assert row.error == max(errors)
        assert row.error < 1e-8
    assert relative_errors and all(e == pytest.approx(r) for e, r in relative_errors)


def test_domain_notes_do_not_fire_for_a_whole_power_of_a_negative_base():
    report = gradcheck.check(lambdad.loads("def g x = x ^ 2"), point=-1.0)
    assert report.ok and not report.functions[0].checks[0].notes, report.render()


@pytest.mark.parametrize("rtol", ["nan", "inf", "-1", "0", "1", "2"])
def test_nonsense_tolerances_are_usage_errors(lambdad_cli, rtol):
    for flag in ("--rtol", "--eps"):
        result = lambdad_cli("check", "programs/baydin.lam", flag, rtol)
        assert result.returncode == 2, (flag, rtol, result.stdout, result.stderr)
        assert "between 0 and 1" in result.stderr


def test_a_file_with_nothing_to_check_is_a_usage_error(tmp_path, lambdad_cli):
    file = tmp_path / "nothing.lam"
    file.write_text("def main = 1\ndef flag (b : Bool) : R = 1\n")
    result = lambdad_cli("check", str(file))
    assert result.returncode == 2
    assert "nothing to check" in result.stderr and "ok" not in result.stdout
