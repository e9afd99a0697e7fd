"""Tuples are written flat, as in the source: ``(1, 2, 3)`` is the pair ``(1, (2, 3))``
(LANGUAGE.md), and values, types, JSON and the names of their reals all print it as
written -- text that parses back to the same value."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

import lambdad
from lambdad import cli
from lambdad.values import JSON_ABBREVIATED, format_value, to_json

PROGRAM = lambdad.loads(
    "def triple = (1, 2, 3)\n"
    "def nested = ((1, 2), 3)\n"
    "def written = (1, (2, 3))\n"
    "def mixed = ([1, 2], (true, [(3, 4, 5)]), -6)\n"
    "def f (x : R) = (x, x * x, x * x * x)\n")


def test_tuples_print_flat_as_written_and_types_agree():
    assert format_value(PROGRAM.run_raw("triple")) == "(1, 2, 3)"
    assert format_value(PROGRAM.run_raw("nested")) == "((1, 2), 3)"
    assert format_value(PROGRAM.run_raw("mixed")) == "([1, 2], (true, [(3, 4, 5)]), -6)"
    assert dict(PROGRAM.types())["triple"] == "R * R * R"
    assert dict(PROGRAM.types())["nested"] == "(R * R) * R"


def test_a_pair_written_with_a_pair_inside_is_the_same_value_as_the_triple():
    """``(1, (2, 3))`` and ``(1, 2, 3)`` are one value (and one type): it prints flat."""
    assert PROGRAM.run_raw("written") == PROGRAM.run_raw("triple")
    assert format_value(PROGRAM.run_raw("written")) == "(1, 2, 3)"


def test_json_writes_tuples_flat_too(capsys, tmp_path):
    file = tmp_path / "t.lam"
    file.write_text("def main = ((1, 2), 3, (true, [4]))\n")
    assert cli.main(["run", str(file), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"value": [[1.0, 2.0], 3.0, True, [4.0]]}


def test_json_of_a_huge_shared_value_is_bounded_and_says_so():
    value = 1.0
    for _ in range(40):  # 2^40 reals written out, a few objects in memory
        value = (value, value)
    data = to_json(value)
    text = json.dumps(data)
    assert JSON_ABBREVIATED in text and len(text) < 2_000_000
    assert json.loads(text) == data
    assert to_json([[1.0, 2.0], [3.0, 4.0]], limit=4) == [[1.0, 2.0], JSON_ABBREVIATED]


def test_output_names_are_flat_like_input_names():
    jacobian = PROGRAM.jacobian("f", 2.0)
    assert jacobian.outputs == ["f.0", "f.1", "f.2"]


values = st.recursive(
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False) | st.booleans(),
    lambda inner: st.tuples(inner, inner) | st.lists(inner, min_size=1, max_size=3),
    max_leaves=12)


def _lists_of_one_type(value) -> bool:
    """Whether every list holds items of one shape (a well-typed value)."""
    def shape(v):
        if isinstance(v, tuple):
            return ("pair", shape(v[0]), shape(v[1]))
        if isinstance(v, list):
            shapes = {shape(item) for item in v}
            return ("list", shapes.pop()) if len(shapes) == 1 else None
        return type(v).__name__
    return shape(value) is not None and "None" not in repr(shape(value))


@settings(max_examples=60, deadline=None)
@given(values)
def test_what_prints_parses_back_to_the_same_value(value):
    if not _lists_of_one_type(value):
        return
    runtime = PROGRAM.points.value(value)
    printed = format_value(runtime)
    assert PROGRAM.points.parse_point(printed) == runtime
