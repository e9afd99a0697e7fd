"""Run-time support of generated code: the guard around runs, limits, located errors.

Generated code runs under a guard (see :class:`lambdad.interpreter.Interpreter`): the
recursion limit and the stack are raised for deep call chains while a run lasts, and put
back as they were when it ends however it ends (:func:`raise_limits`, :func:`restore_limits`),
Python exceptions raised by a primitive become :class:`~lambdad.errors.EvalError` located
at the primitive whose line of generated code raised them (:func:`locate`, which reads
the line table of the generated module and the operands from the failing frame), and a
real result that is not finite stops the run at the operation (:func:`not_finite`).
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
import types
from collections.abc import Sequence
from typing import Any

import attrs

from .errors import DerivativeSpan, EvalError, LambdadError, Span
from .primitives import PRIMITIVES, DomainError, Primitive
from .syntax import Prim
from .values import MadeFunction, format_value

try:  # POSIX only; without it the default stack budget is assumed
    import resource
except ImportError:  # pragma: no cover - non-POSIX platforms
    resource = None  # type: ignore[assignment]

__all__ = ["RAISED_IN_RUNS", "RUNTIME_ERRORS", "PrimSite", "checked_ad_result", "describe",
           "locate", "located",
           "limits_now", "not_finite", "raise_limits", "restore_limits"]

# Python exceptions a primitive's evaluation may raise on bad input; they become EvalErrors.
RUNTIME_ERRORS = (DomainError, ArithmeticError, ValueError)

# Why the limits are raised at all (the one place lambdad changes them, STYLE 23): every
# pass over terms and types is iterative, but a program's run is generated Python, where a
# lambdad function call is a Python call, so a run that nests calls (a chain of closures a
# fold builds, `fold (\f _ -> \x -> f x + 1) (\x -> x) (range n) 0`) nests Python frames as
# deep.  Making those runs iterative would mean a trampolined evaluator instead of compiled
# Python; so the limits are raised while a run lasts, by Interpreter._outermost only, and
# put back in its ``finally`` clause (after an error and a KeyboardInterrupt too).
#
# Call depth at run time: the C stack each Python-level call of generated code costs is
# about 0.5 KB on CPython 3.11; the recursion limit is set from the stack available, with a
# factor of two to spare, so deep programs hit RecursionError (reported) before a segfault.
_BYTES_PER_CALL = 1024
_DEFAULT_STACK = 8 * 1024 * 1024
# On Linux the main thread's stack grows on demand up to RLIMIT_STACK, read at fault time,
# so raising the soft limit while generated code runs gives deep programs room.  Kept well
# under the 128 MB the kernel leaves between the stack and the mappings below it.
_GROWN_STACK = 64 * 1024 * 1024
_CAN_GROW_STACK = resource is not None and sys.platform.startswith("linux")


# Not frozen: code generation makes one per operation (a long program's first gradient,
# hundreds of thousands) and never changes it; a frozen class's __init__ sets each field by
# a call.  Compared by identity: each site is its own.
@attrs.define(eq=False, weakref_slot=False)
class PrimSite:
    """A primitive evaluation site of generated code: what events and errors report."""

    primitive: Primitive
    span: Span | None
    term: Prim | None  # for events: None in code that reports none (see codegen's site)
    atoms: tuple[str, ...] = ()
    # Where the site computes part of a source primitive's derivative (a DerivativeSpan):
    # the atoms holding that primitive's arguments when they are at hand in the generated
    # function (else "=" and the atom of its value), so an error can say at which point
    # the derivative fails.
    source_atoms: tuple[str, ...] = ()


def _short(value: Any) -> str:
    text = format_value(value, summarised=True)
    return text if len(text) <= 40 else text[:37] + "..."


def describe(primitive: Primitive, args: Sequence[Any], exc: BaseException) -> str:
    """The message of a failed primitive evaluation, naming the operation."""
    if isinstance(exc, DomainError):
        return str(exc)
    if primitive.inline_at_literals is not None and isinstance(exc, OverflowError):
        # raised by the inline form: the evaluation says it as it does everywhere else
        try:
            primitive.evaluate(*args)
        except DomainError as own:
            return str(own)
    shown = ", ".join(_short(a) for a in args)
    return f"`{primitive.spelling.symbol}` failed on {shown}: {exc}"


class _NotFinite(ArithmeticError):
    """Raised by generated code when a real primitive's result is not finite; :func:`locate`
    turns it into the located EvalError naming the operation (the line table gives the
    site, the frame the operands)."""

    def __init__(self, result: float):
        super().__init__(result)
        self.result = result


def not_finite(result: Any) -> None:
    """Raises :class:`_NotFinite` for a real primitive's result that is not finite
    (overflow, or an undefined operation on an infinite operand)."""
    if type(result) is float:
        raise _NotFinite(result)


def _not_finite_message(site: PrimSite, args: Sequence[Any], result: float) -> str:
    """The message of a real primitive whose result ``result`` is not finite, naming the
    operation (or the source operation whose derivative it computes)."""
    message = (f"{_operation(site.primitive, args)} is {format_value(result)}: "
               f"{'an overflow' if result == result else 'undefined'} (lambdad computes "
               "with finite reals only)")
    return _of_derivative(site.span, message, "not finite")


def checked_ad_result(site: PrimSite, result: Any) -> Any:
    """``result`` of ``grad``/``jvp``/``vjp`` at ``site``: an EvalError there if one of its
    reals is not finite (adjoints are summed outside generated code), and a pull-back in it
    that fails without a location (a cotangent of the wrong shape) reports ``site``."""
    stack = [result]
    while stack:
        value = stack.pop()
        if type(value) is float:
            if value - value:
                raise EvalError(f"`{site.primitive.spelling.symbol}` computed "
                                f"{format_value(value)}: adjoints summed to an overflow",
                                site.span)
        elif isinstance(value, (tuple, list)):
            stack.extend(value)
    # A pull-back made by the runtime (not by generated code) has no span.
    if type(result) is tuple and len(result) == 2 and type(result[1]) is MadeFunction:
        pullback = result[1]

        def located(cotangent: Any) -> Any:
            try:
                return pullback(cotangent)
            except LambdadError as exc:
                raise exc.with_span(site.span)

        return (result[0], pullback.calling(located))
    return result


def _of_derivative(span: Span | None, message: str, what: str) -> str:
    """``message`` about an operation; about the derivative of the source primitive when
    the operation is part of it (its span is a :class:`DerivativeSpan`)."""
    if isinstance(span, DerivativeSpan):
        return f"the derivative of `{span.primitive}` is {what} here: {message}"
    return message


def _operation(primitive: Primitive, args: Sequence[Any]) -> str:
    """The application of ``primitive`` to ``args`` in lambdad syntax (``1e+300 * 10``)."""
    shown = [_short(a) for a in args]
    spelling = primitive.spelling
    if spelling.fixity == "infix" and len(shown) == 2:
        return f"`{shown[0]} {spelling.symbol} {shown[1]}`"
    if spelling.fixity == "prefix" and len(shown) == 1:
        return f"`{spelling.symbol}{shown[0]}`"
    return f"`{' '.join([spelling.symbol, *shown])}`"


# What a run may raise that it reports as a lambdad error (see :func:`located`).
RAISED_IN_RUNS = (LambdadError, *RUNTIME_ERRORS)


def located(exc: BaseException) -> BaseException:
    """The error a run reports for ``exc`` (one of :data:`RAISED_IN_RUNS`): a lambdad error
    as it is, but a DomainError (raised by a primitive without a location) and a Python
    error of a primitive located by :func:`locate`."""
    if isinstance(exc, LambdadError) and not isinstance(exc, DomainError):
        return exc
    return locate(exc)


def locate(exc: BaseException) -> EvalError:
    """``exc``, raised while generated code ran, as an EvalError at the primitive whose line
    raised it (the innermost line of generated code with a recorded primitive)."""
    found: tuple[PrimSite, Any] | None = None
    tb = exc.__traceback__
    while tb is not None:
        table = tb.tb_frame.f_globals.get("__lambdad_lines__")
        if table is not None:
            site = table.get(tb.tb_lineno)
            if site is not None:
                found = (site, tb.tb_frame)
        tb = tb.tb_next
    if found is None:
        message = str(exc) if isinstance(exc, DomainError) else f"{type(exc).__name__}: {exc}"
        return EvalError(message)
    site, frame = found
    name = frame.f_code.co_name
    if name in frame.f_globals.get("__lambdad_deferred__", ()) or \
            name in frame.f_globals.get("__lambdad_piece_of__", ()):
        again = _run_checked(frame)
        if again is not None:
            return again
    swapped = frame.f_globals.get("__lambdad_untested__", {}).get(name)
    if swapped is not None:
        again = _run_tested(frame, swapped)
        if again is not None:
            return again
    if isinstance(site.span, DerivativeSpan) and isinstance(exc, (DomainError, _NotFinite)):
        what = "undefined" if isinstance(exc, DomainError) else "not finite"
        at = _source_operation(site, frame)
        if at is not None:
            inner = str(exc) if isinstance(exc, DomainError) else _not_finite_message(
                attrs.evolve(site, span=None), _values(site.atoms, frame), exc.result)
            return EvalError(f"the derivative of `{site.span.primitive}` is {what} at {at}",
                             site.span, (f"computing it: {inner}",))
        if isinstance(exc, DomainError):
            return EvalError(_of_derivative(site.span, str(exc), what), site.span)
    args = _values(site.atoms, frame)
    if isinstance(exc, _NotFinite):
        return EvalError(_not_finite_message(site, args, exc.result), site.span)
    return EvalError(describe(site.primitive, args, exc), site.span)


# A statement of generated code assigning a primitive's result to a temporary.
_ASSIGNMENT = re.compile(r"( *)(t[0-9]+) = ")


def _run_checked(frame: Any) -> EvalError | None:
    """The error of the linear body running in ``frame`` (one whose finiteness checks were
    deferred to its stagings, see ``lambdad.codegen``; or a piece of one, whose body's frame
    is then the one calling it) found by running it again, with the same arguments,
    compiled with a check after every real operation, its pieces too: the first operation
    whose result is not finite, or that fails, is the one reported.  None if it passes."""
    namespace = frame.f_globals
    body = namespace.get("__lambdad_piece_of__", {}).get(frame.f_code.co_name)
    while body is not None and frame is not None and frame.f_code.co_name != body:
        frame = frame.f_back
    if frame is None:
        return None
    code = frame.f_code
    table = namespace["__lambdad_lines__"]
    lines = namespace["__lambdad_source__"].split("\n")
    checked: list[str] = []
    checked_table: dict[int, PrimSite] = {}
    pieces = [name for name, of in namespace.get("__lambdad_piece_of__", {}).items()
              if of == code.co_name]
    for function in [code, *(namespace[piece].__code__ for piece in pieces)]:
        _checked_text(function, lines, table, checked, checked_table)
    scope = {**namespace, "__lambdad_lines__": checked_table, "__lambdad_deferred__": (),
             "__lambdad_piece_of__": {}}
    exec(compile("\n".join(checked) + "\n", code.co_filename, "exec"), scope)
    arguments = [frame.f_locals[name] for name in code.co_varnames[:code.co_argcount]]
    try:
        # (captured, cotangent, stage): what it stages is dropped, only its failure counts
        scope[code.co_name](*arguments[:-1], lambda g, b: None)
    except RUNTIME_ERRORS as exc:
        return locate(exc)
    return None


def _run_tested(frame: Any, swapped: dict[str, str]) -> EvalError | None:
    """The error of the function running in ``frame``, which left out finiteness tests of
    array results that a later test would catch (see ``lambdad.codegen``'s
    untested_arrays), found by running its code again with the same arguments and every
    test: the same code, its globals of the untested evaluations bound to the tested ones
    (``swapped`` maps the first to the second), so that the first operation whose result
    is not finite, or that fails, is the one reported.  (Such a function runs straight
    through primitive operations: running it again computes the same values and changes
    nothing.)  None if it passes."""
    namespace = frame.f_globals
    code = frame.f_code
    scope = {**namespace, "__lambdad_untested__": {}}
    scope.update((untested, namespace[checked]) for untested, checked in swapped.items())
    arguments = [frame.f_locals[name] for name in code.co_varnames[:code.co_argcount]]
    try:
        types.FunctionType(code, scope)(*arguments)
    except RUNTIME_ERRORS as exc:
        return locate(exc)
    return None


def _checked_text(code: Any, lines: list[str], table: dict[int, PrimSite],
                  checked: list[str], checked_table: dict[int, PrimSite]) -> None:
    """Appends to ``checked`` the text of the generated function of ``code`` (from the
    module's ``lines``) with a check after every real operation, and to ``checked_table``
    the sites of its lines, by their numbers in ``checked``."""
    checked.append(lines[code.co_firstlineno - 1])
    number = code.co_firstlineno + 1  # the body: the indented lines after the `def`
    while number <= len(lines) and lines[number - 1].startswith(" "):
        text = lines[number - 1]
        checked.append(text)
        site = table.get(number)
        if site is not None:
            checked_table[len(checked)] = site
            assignment = _ASSIGNMENT.match(text)
            if assignment is not None and site.primitive.kind == "real":
                indent, atom = assignment.groups()
                checked.append(f"{indent}if {atom} - {atom}: _nonfinite({atom})")
                checked_table[len(checked)] = site
        number += 1


def _values(atoms: Sequence[str], frame: Any) -> list[Any]:
    """The values of the atoms of generated code in ``frame``."""
    values = []
    for atom in atoms:
        if atom in frame.f_locals:
            values.append(frame.f_locals[atom])
        elif atom in frame.f_globals:
            values.append(frame.f_globals[atom])
        else:
            values.append(_literal(atom))
    return values


def _source_operation(site: PrimSite, frame: Any) -> str | None:
    """The source primitive application whose derivative ``site`` computes, with its
    arguments' values, in lambdad syntax (``0``, or ```-1 ^ 0.5```), or None when they
    are not at hand or not plain reals."""
    span = site.span
    if not isinstance(span, DerivativeSpan) or not site.source_atoms:
        return None
    if site.source_atoms[0] == "=":  # only the primitive's value is at hand
        (value,) = _values(site.source_atoms[1:], frame)
        return f"a point where `{span.primitive}` is {format_value(value)}" \
            if type(value) is float else None
    values = _values(site.source_atoms, frame)
    if not all(type(v) is float for v in values):
        return None
    primitive = next((p for p in PRIMITIVES.values() if p.spelling.symbol == span.primitive
                      and p.arity == len(values)), None)
    if primitive is None:
        return None
    if len(values) == 1:
        return format_value(values[0])
    return _operation(primitive, values)


def _literal(atom: str) -> Any:
    """The value of a literal atom of generated code (a real, ``True``, ``False``), or the
    atom itself shown as written."""
    text = atom.strip("()")
    try:
        return float(text)
    except ValueError:
        return {"True": True, "False": False}.get(text, _Atom(text))


class _Atom:
    """A literal atom of generated code, shown as written when describing an error."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text.strip("()")


# --------------------------------------------------------------------------- limits


def limits_now() -> tuple[int, tuple[int, int] | None]:
    """The limits :func:`raise_limits` may raise, as they are now: the recursion limit and,
    where the stack can grow (Linux, the main thread), the stack's ``RLIMIT_STACK``."""
    stack = None
    if _CAN_GROW_STACK and threading.current_thread() is threading.main_thread():
        with contextlib.suppress(ValueError, OSError):
            stack = resource.getrlimit(resource.RLIMIT_STACK)
    return sys.getrecursionlimit(), stack


def raise_limits(now: tuple[int, tuple[int, int] | None]) -> None:
    """Raises the recursion limit (and, on Linux, the stack size) for generated code, from
    the limits ``now`` (:func:`limits_now`).  A caller puts them back with
    :func:`restore_limits` in a ``finally`` clause whose ``try`` starts before this call, so
    that nothing it raises leaves them raised."""
    old, rlimit = now
    stack = _DEFAULT_STACK
    if rlimit is not None:
        soft, hard = rlimit
        if soft == resource.RLIM_INFINITY or soft >= _GROWN_STACK:
            stack = _GROWN_STACK
        elif _raisable(rlimit):
            try:
                resource.setrlimit(resource.RLIMIT_STACK, (_GROWN_STACK, hard))
                stack = _GROWN_STACK
            except (ValueError, OSError):
                stack = soft
        else:
            stack = soft
    sys.setrecursionlimit(max(old, stack // _BYTES_PER_CALL))


def restore_limits(now: tuple[int, tuple[int, int] | None]) -> None:
    """Puts back the limits ``now`` (:func:`limits_now`, taken before
    :func:`raise_limits`)."""
    old, rlimit = now
    sys.setrecursionlimit(old)
    if rlimit is not None and _raisable(rlimit):
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_STACK, rlimit)


def _raisable(rlimit: tuple[int, int]) -> bool:
    """Whether :func:`raise_limits` raises the stack limit ``rlimit``."""
    soft, hard = rlimit
    return soft != resource.RLIM_INFINITY and soft < _GROWN_STACK and (
        hard == resource.RLIM_INFINITY or hard >= _GROWN_STACK)
