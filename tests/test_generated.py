"""A Python function being generated (lambdad.generated): its statements and their roles,
and its dead pure statements (dead_statements: unused names, directly or through other
dead statements; never an effect)."""

from lambdad.generated import TESTS, UNPACKS, _Function, dead_statements


def line(text, pure=(), uses=()):
    """A statement as the code generator records it: (indent, text, site, pure, uses)."""
    return (1, text, None, tuple(pure), tuple(uses))


def test_a_pure_statement_whose_name_is_never_used_is_dead():
    lines = [line("t0 = a + b", pure=["t0"], uses=["a", "b"]),
             line("t1 = a * b", pure=["t1"], uses=["a", "b"]),
             line("return t1", uses=["t1"])]
    assert dead_statements(lines) == {0}


def test_statements_used_only_by_dead_ones_are_dead_too():
    # `let (x, y) = p in ...` of a pair built at once and never used: the unpacking, then
    # the pair, then what only the pair used
    lines = [line("t0 = a * a", pure=["t0"], uses=["a"]),
             line("t1 = (t0, a)", pure=["t1"], uses=["t0", "a"]),
             line("v2, v3 = t1", pure=["v2", "v3"], uses=["t1"]),
             line("return a", uses=["a"])]
    assert dead_statements(lines) == {0, 1, 2}


def test_a_statement_with_an_effect_keeps_what_it_uses():
    lines = [line("t0 = a * a", pure=["t0"], uses=["a"]),
             line("_st(c1, t0)", uses=["c1", "t0"]),
             line("t2 = t0 + 1.0", pure=["t2"], uses=["t0"])]
    assert dead_statements(lines) == {2}


def test_an_unpacking_with_one_part_used_is_kept():
    lines = [line("v0, v1 = p", pure=["v0", "v1"], uses=["p"]),
             line("return v1", uses=["v1"])]
    assert dead_statements(lines) == set()


def test_a_function_without_pure_statements_has_none_dead():
    assert dead_statements([line("_st(c1, a)", uses=["c1", "a"]), line("return")]) == set()
    assert dead_statements([]) == set()


def test_a_statement_has_a_role_only_when_emitted_with_one():
    fn = _Function(None)
    fn.emit("t0 = a * b", ("a", "b"), pure=("t0",))
    fn.emit_with_role((UNPACKS,), "v1, v2 = p", ("p",), pure=("v1", "v2"))
    fn.emit_with_role((TESTS, "t0"), "if t0 - t0: _nonfinite(t0)", ("t0",))
    assert [text for _, text, _, _, _ in fn.lines] == [
        "t0 = a * b", "v1, v2 = p", "if t0 - t0: _nonfinite(t0)"]
    assert [fn.roles.get(id(line)) for line in fn.lines] == [None, (UNPACKS,), (TESTS, "t0")]
    assert fn.lines[1][3:] == (("v1", "v2"), ("p",))
