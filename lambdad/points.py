"""The calling convention of one program: points read (text, files, Python data) and
fitted to a function's parameters, the function a point is applied to (uncurried when it
gives several curried arguments), and the names of a point's reals.

:class:`Points` belongs to a :class:`lambdad.pipeline.Program` (``program.points``), with
the two caches it fills: the uncurried adapters, and for points of Python reals the plan
the general path found (what :meth:`Program.call` and the derivatives reuse).
"""

from __future__ import annotations

import weakref
from typing import Any

from .calling import (
    Shape,
    abridged,
    argument_type,
    arguments_covered,
    check_functions,
    first_non_finite,
    first_too_deep,
    holds_lists,
    input_names,
    literal_value,
    longer_tuple,
    point_from_file,
    point_from_python,
    point_arrays,
    point_source,
    point_span,
    real_point,
    too_deep_message,
    uncurried_lambda,
    uncurried_term,
    with_arrays,
)
from .derivatives import remember
from .edge import checked_class
from .errors import LambdadError, ResourceError, UsageError
from .parser import parse_expr
from .printer import print_type
from .syntax import (ANY_ARITY, ArrayT, FunT, ListT, PairT, Type, free_vars, result_after,
                     tuple_components, walk)
from .values import has_tuples


@checked_class
class Points:
    """Points of one program, fitted to its functions (see the module docstring).  Its
    public methods are part of the API (``program.points.parse_point(text)``): checked at
    the edge as Program's are."""

    def __init__(self, program: Any):
        # The lambdad.pipeline.Program these points are of, which owns them: referred to
        # weakly, so that a program dropped is freed at once (no reference cycle waits for
        # the collector).
        self.program = weakref.proxy(program)
        # ``name`` as a closure of one k-tuple, by (name, k) (see _uncurried).
        self._adapters: dict[tuple[str, int], Any] = {}
        # Calls with points of Python reals, by (name, shape of the point; see real_point):
        # the function to apply (adapter included), its result type, the argument type
        # when it holds arrays and whether the result holds a tuple of more than two
        # components (see values.written), found by the first.  (A shape names its lists'
        # lengths: the cache past a bounded number of entries starts again, so points of
        # ever new lengths do not fill it.)
        self._plans: dict[tuple[str, Shape], tuple[Any, Type, Type | None, bool]] = {}

    def _planned(self, name: str, point: Any
                 ) -> tuple[Any, Any, Type | None, tuple | None] | None:
        """The function, argument and result type (None when the result holds no tuple of
        more than two components, so that its value is written as it is) for ``point``
        when it is Python reals (in pairs, lists) whose plan the general path found
        before (:meth:`function_and_point`), else None; and the point's arrays, which it
        has not tested finite (None for a point of reals: see
        :func:`lambdad.calling.point_arrays`).  For :meth:`Program.call
        <lambdad.pipeline.Program.call>`, which checked its arguments and tests them."""
        reals = real_point(point, False)
        if reals is None:
            return None
        plan = self._plans.get((name, reals[0]))
        if plan is None:
            return None
        # (lists where the function takes arrays are made arrays)
        return (plan[0], reals[1] if plan[2] is None else with_arrays(reals[1], plan[2]),
                plan[1] if plan[3] else None,
                None if type(reals[0]) is int else point_arrays(point, reals[0]))

    def parse_point(self, text: str, what: str = "--at") -> Any:
        """The runtime value written as ``text`` in the language's syntax (``2,5``,
        ``(2, 5)``, ``[1, 2, 3]``), which may use the program's definitions (``--at w0``);
        raises UsageError if it is not a well-typed expression.  A point written with
        literals only is read without evaluating anything."""
        return self._parsed(text, what)[0]

    def parse_point_for(self, name: str, text: str, what: str = "--at") -> Any:
        """:meth:`parse_point`, for a point of ``name``: raises UsageError if a tuple of it
        is written with another nesting than ``name``'s parameters have (``(1, (2, 3))``
        where ``name`` takes an ``R * R * R``: a tuple is what was written)."""
        value, written = self._parsed(text, what)
        self.program.require(name)
        f_type = self.program.scheme(name).type
        expected = argument_type(f_type, arguments_covered(name, f_type, value))
        if _nested_otherwise(written, expected):
            raise UsageError(f"{what}: the point {text.strip()} does not fit `{name}`, which "
                             f"expects {print_type(expected)} (a tuple is what was written)")
        return value

    def _parsed(self, text: str, what: str) -> tuple[Any, Type]:
        """The runtime value written as ``text`` and its type (see :meth:`parse_point`)."""
        program = self.program
        source = point_source(text, what)
        try:
            term = parse_expr(source, what, bound=program.decls,
                              declared=program.declared_primitives())
        except LambdadError as exc:
            raise UsageError(f"{what}: not a value in lambdad syntax: {text!r} ({exc.message})") from None
        deep = first_too_deep(term)
        if deep is not None:
            raise UsageError(too_deep_message(what), point_span(deep.span, text, source))
        try:
            written = program.type_of_term(term)
            value = literal_value(term)
            if value is None:
                needed = {name for name in free_vars(term) if name in program.decls}
                value = program.runtime.evaluate(
                    term, {n: program.value_of(n) for n in needed})
        except ResourceError:
            raise  # a limit of the run (steps, time, memory), not a fault of the text
        except LambdadError as exc:
            raise UsageError(f"{what}: not a value in lambdad syntax: {text!r} ({exc.message})") from None
        bad = first_non_finite(value)
        if bad is not None:
            raise UsageError(f"{what}: the point contains the non-finite real {bad!r}; "
                             "every coordinate must be a finite number")
        return value, written

    def point_from_file(self, path: str, what: str = "--at") -> Any:
        """The point stored in the file ``path`` (JSON, ``.npy`` or ``.npz``; see
        :func:`lambdad.calling.point_from_file`); raises UsageError."""
        return point_from_file(path, what)

    def value(self, point: Any) -> Any:
        """Python data (or an already parsed runtime value) as a runtime value."""
        if isinstance(point, str):
            return self.parse_point(point, "the point")
        return point_from_python(point)

    def arguments_covered(self, name: str, point: Any) -> int:
        """How many of ``name``'s curried parameters the point supplies: 1 if it fits the
        first parameter, k if it is a k-tuple fitting the first k.  Raises UsageError if
        the point does not fit the function's input."""
        self.program.require(name)
        return arguments_covered(name, self.program.scheme(name).type, self.value(point))

    def fitted_point(self, name: str, point: Any) -> tuple[Any, int]:
        """The point (Python data, text or a runtime value) as a runtime value fitting
        ``name``, and how many curried arguments it gives; Python functions in it are
        wrapped so their results are checked.  Raises UsageError if it does not fit."""
        self.program.require(name)
        value = self.value(point)  # converted once, then checked against the type
        f_type = self.program.scheme(name).type
        k = arguments_covered(name, f_type, value)
        if not isinstance(point, str):
            longer = longer_tuple(point, argument_type(f_type, k))
            if longer is not None:
                raise UsageError(
                    f"the point does not fit `{name}`: {abridged(repr(longer[0]))} has "
                    f"{len(longer[0])} components where `{name}` expects "
                    f"{print_type(longer[1])} (a tuple is what was written)")
        value = with_arrays(value, argument_type(f_type, k))
        return check_functions(value, argument_type(f_type, k), f"the point of `{name}`"), k

    def function_and_point(self, name: str, point: Any) -> tuple[Any, Any, Type]:
        """The function to differentiate (uncurried if needed), its argument value, and the
        result type.  Raises UsageError if the point does not fit the function's input."""
        reals = real_point(point)
        if reals is not None:
            plan = self._plans.get((name, reals[0]))
            if plan is not None:
                # (lists where the function takes arrays are made arrays)
                return plan[0], reals[1] if plan[2] is None else with_arrays(
                    reals[1], plan[2]), plan[1]
        value, k = self.fitted_point(name, point)
        f = self.program.value_of(name) if k == 1 else self._uncurried(name, k)
        result = result_after(self.program.scheme(name).type, k)
        if reals is not None:
            taken = argument_type(self.program.scheme(name).type, k)
            arrays = any(isinstance(node, ArrayT) for node in walk(taken))
            # (only a point holding lists has lists to make arrays)
            remember(self._plans, (name, reals[0]),
                     (f, result, taken if arrays and holds_lists(reals[0]) else None,
                      has_tuples(result)))
        return f, value, result

    def point_type(self, name: str, point: Any) -> Type:
        """The type of the point (Python data, text or a runtime value) giving ``name`` its
        first k curried arguments: the first parameter's, or the k-tuple of the first k
        (a gradient at the point has it).  Raises UsageError if it does not fit."""
        return argument_type(self.program.scheme(name).type,
                             self.arguments_covered(name, point))

    def input_names(self, name: str, point: Any) -> list[str]:
        """A name for each real of the point, left to right, as the user wrote it: the
        parameter's name, with ``.0``/``.1`` for pair components and ``[i]`` for list
        elements (``w.1[2]``); a component that a pattern parameter names (``\\(a, b) ->``)
        has that name."""
        value = self.value(point)
        k = self.arguments_covered(name, value)
        return input_names(self.program.decls[name].value, value, k,
                           t=argument_type(self.program.scheme(name).type, k))

    def _uncurried(self, name: str, k: int) -> Any:
        """``name`` as a closure of one k-tuple, so it can be transformed (made once per
        name and k: its compiled code and transformed versions are cached by term): its
        λ with the k parameters bound by patterns (:func:`uncurried_lambda`) when its
        value is a closure of k λs, else ``\\p -> name p1 ... pk``."""
        key = (name, k)
        if key not in self._adapters:
            f = self.program.value_of(name)
            parts = self.program.runtime.function_parts(f)
            lam = uncurried_lambda(parts.lam, k) if parts is not None and parts.lam else None
            self._adapters[key] = (
                self.program.runtime.evaluate(lam, dict(parts.captured)) if lam is not None
                else self.program.runtime.evaluate(uncurried_term(name, k), {name: f}))
        return self._adapters[key]


def _nested_otherwise(written: Type, expected: Type) -> bool:
    """Whether the type of a written point has a tuple of another arity than the type
    ``expected`` has at its place.  Iterative."""
    stack = [(written, expected)]
    while stack:
        w, e = stack.pop()
        if isinstance(w, PairT) and isinstance(e, PairT):
            if ANY_ARITY not in (w.arity, e.arity) and max(w.arity, 2) != max(e.arity, 2):
                return True
            stack.extend(zip(tuple_components(w), tuple_components(e)))
        elif isinstance(w, ListT) and isinstance(e, ListT):
            stack.append((w.item, e.item))
        elif isinstance(w, FunT) and isinstance(e, FunT):
            stack.extend(((w.arg, e.arg), (w.result, e.result)))
    return False
