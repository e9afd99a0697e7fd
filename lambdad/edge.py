"""The API's edge: where a caller's arguments enter lambdad, checked once.

A function of the public API (``lambdad.load``, ``loads``, ``render`` and the public methods
of ``Program``) is wrapped by :func:`checked`: a call with too many or too few arguments, an
unknown keyword, or an argument of the wrong kind for its annotation (a name that is not a
str, a ``wrt`` that is not a sequence of names, a term that is not a term) raises UsageError
naming the function and the parameter, where Python would raise a TypeError, or the
function a KeyError or an AttributeError far inside.  Points are not checked here: their
conversion (``calling.from_python``) says what is wrong with one.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from .errors import LambdadError, UsageError
from .syntax import Decl, Module, Term
from .typecheck import ModuleTyping


def _instance(*kinds: type) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, kinds)


def _sequence_of(*kinds: type) -> Callable[[Any], bool]:
    return lambda value: (isinstance(value, (list, tuple))
                          and all(isinstance(item, kinds) for item in value))


def _optional(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: value is None or check(value)


def _names_of_str(value: Any) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items())


# What each annotation of the public API accepts, and how a message says it.  An
# annotation not listed (``Any``: a point, a direction, a value to show; ``bool``: any
# value is true or false) is not checked here.
KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "str": (_instance(str), "a str"),
    "str | None": (_optional(_instance(str)), "a str or None"),
    "Sequence[str]": (_sequence_of(str), "a list or tuple of names (str)"),
    "Sequence[str] | None": (_optional(_sequence_of(str)),
                             "a list or tuple of names (str), or None"),
    "tuple[str, ...]": (_sequence_of(str), "a tuple of names (str)"),
    "Term": (_instance(Term), "a term (lambdad.syntax)"),
    "Sequence[Decl]": (_sequence_of(Decl), "a list or tuple of declarations (lambdad.syntax)"),
    "Module": (_instance(Module), "a module (lambdad.syntax)"),
    "ModuleTyping": (_instance(ModuleTyping), "a module typing (lambdad.typecheck)"),
    "LambdadError": (_instance(LambdadError), "an error of the lambdad family"),
    "dict[str, str] | None": (_optional(_names_of_str),
                              "None or a mapping of file names to source texts"),
}


def _described(value: Any) -> str:
    text = repr(value) if not callable(value) else type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def checked(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function``, whose arguments are checked when it is called: raises UsageError for a
    call that does not match its signature or an argument that its annotation (one of
    :data:`KINDS`) refuses.  A call with positional arguments only, as many as the
    signature takes, each of the right kind, goes straight through (a method's hot path:
    see :func:`_positional_door`)."""
    signature = inspect.signature(function)
    parameters = list(signature.parameters.values())
    label = function.__qualname__.replace(".__init__", "")
    shown = [p.name for p in parameters if p.name != "self"]
    checks = [(index, parameter.name, *KINDS[parameter.annotation])
              for index, parameter in enumerate(parameters)
              if isinstance(parameter.annotation, str) and parameter.annotation in KINDS]
    positional = [p for p in parameters
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    most = len(positional)
    fewest = sum(p.default is p.empty for p in positional)
    if len(positional) < len(parameters):  # *args, keyword-only or **kwargs: always bind
        most = -1

    def refuse(message: str) -> UsageError:
        return UsageError(f"{label}({', '.join(shown)}): {message}")

    def refuse_kind(index: int, value: Any) -> UsageError:
        _, name, _, wanted = next(check for check in checks if check[0] == index)
        return refuse(f"`{name}` must be {wanted}, not {_described(value)}")

    def bound(*args: Any, **kwargs: Any) -> Any:
        """The call, its arguments bound to the signature and checked by name."""
        try:
            given = signature.bind(*args, **kwargs).arguments
        except TypeError as exc:
            raise refuse(str(exc)) from None
        for _, name, accepts, wanted in checks:
            if name in given and not accepts(given[name]):
                raise refuse(f"`{name}` must be {wanted}, not {_described(given[name])}")
        return function(*args, **kwargs)

    if most >= 0 and fewest > 0 and not any(p.name.startswith("_") for p in positional):
        call = _positional_door(function, positional, fewest, checks, bound, refuse_kind)
    else:
        def call(*args: Any, **kwargs: Any) -> Any:
            if kwargs or not fewest <= len(args) <= most:
                return bound(*args, **kwargs)
            for index, _, accepts, _ in checks:
                if index < len(args) and not accepts(args[index]):
                    raise refuse_kind(index, args[index])
            return function(*args)

    return functools.wraps(function)(call)


_UNGIVEN = object()
"""The default of each parameter of a wrapper made by :func:`_positional_door`: not given."""

# The type an argument checked by a KINDS entry mostly has, accepted without calling the
# check (a name is a str).
_USUAL = {KINDS["str"][0]: "str", KINDS["str | None"][0]: "str"}

# The checks that accept None (the default of the parameters they check, mostly).
_NONE_TOO = {accepts for annotation, (accepts, _) in KINDS.items()
             if annotation.endswith("| None")}


def _positional_door(function: Callable[..., Any], positional: list[inspect.Parameter],
                     fewest: int, checks: list[tuple[int, str, Callable[[Any], bool], str]],
                     bound: Callable[..., Any],
                     refuse_kind: Callable[[int, Any], UsageError]) -> Callable[..., Any]:
    """The wrapper :func:`checked` makes for ``function`` of the ``positional`` parameters
    (``fewest`` of them required), none keyword-only, none named with a leading ``_``.  It
    takes as many positional-only parameters (``_a0``, ``_a1``...), each not given by
    default, then each optional parameter again by its own name, keyword-only (not given
    by default), then any other arguments (``*_extra``, ``**_keywords``).

    A call giving ``fewest`` to ``most`` positional arguments, and naming optional
    parameters it did not give (``strategy="fused"``), has each argument put in its place
    (defaults for those not given), checked, and ``function`` called with them directly:
    Python itself binds the names, so the usual call costs a frame and a test or two per
    parameter (one per optional parameter when none is given by position, the usual call:
    then only what is given is checked).  Any other call (a required parameter by name, an unknown name, one given
    twice, too many arguments) is bound by Python to a function of the parameters' own
    names and defaults (``_named``), then goes the same way; if that binding refuses it, it
    is ``bound(*args, **keywords)``, which says why as a UsageError.  (The wrapper is
    compiled from the lines below, which name only its own parameters and the
    ``_``-prefixed names of its namespace.)"""
    most = len(positional)
    names = [f"_a{index}" for index in range(most)]
    every = "".join(name + ", " for name in names)
    optional = [(index, positional[index].name) for index in range(fewest, most)]
    # The parameters by their own names, with their own defaults: Python's binding of a
    # call naming some of them, into the tuple of them all (TypeError if it refuses).
    lines = [f"def named({', '.join(parameter.name for parameter in positional)}):",
             f"    return ({''.join(parameter.name + ', ' for parameter in positional)})"]
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(lines), f"<named {function.__qualname__}>", "exec"), namespace)
    named = namespace["named"]
    named.__defaults__ = tuple(parameter.default for parameter in positional[fewest:])

    kinds = {index: accepts for index, _, accepts, _ in checks}
    mirrors = "".join(f", {name}=_UNGIVEN" for _, name in optional)
    lines = [f"def call({', '.join(name + '=_UNGIVEN' for name in names)}, /, *_extra"
             f"{mirrors}, **_keywords):",
             f"    if _extra or _keywords or {names[fewest - 1]} is _UNGIVEN:",
             "        return _by_name(" + every + "_extra, {"
             + "".join(f"'{name}': {name}, " for _, name in optional) + "}, _keywords)"]

    def check(index: int, indent: str) -> list[str]:
        """The lines refusing a wrong ``_a{index}`` (none if its parameter is not checked)."""
        if index not in kinds:
            return []
        usual = _USUAL.get(kinds[index])
        test = f"not _accepts{index}(_a{index})"
        if kinds[index] in _NONE_TOO:
            test = f"_a{index} is not None and {test}"
        if usual is not None:
            test = f"type(_a{index}) is not {usual} and {test}"
        return [f"{indent}if {test}:", f"{indent}    raise _refuse_kind({index}, _a{index})"]

    if optional:
        # The usual call: no optional parameter given by position, so each is the argument
        # named by it or its default (a default is not checked, as binding checks only
        # what is given).
        lines.append(f"    if _a{fewest} is _UNGIVEN:")
        for index in range(fewest):
            lines += check(index, "        ")
        for index, name in optional:
            lines += [f"        if {name} is _UNGIVEN:",
                      f"            _a{index} = _default{index}",
                      "        else:",
                      f"            _a{index} = {name}",
                      *check(index, "            ")]
        lines.append(f"        return _function({', '.join(names)})")
    for index, name in optional:
        lines += [f"    if _a{index} is _UNGIVEN:",
                  f"        _a{index} = _default{index} if {name} is _UNGIVEN else {name}",
                  f"    elif {name} is not _UNGIVEN:",
                  "        return _by_name(" + every + "_extra, {"
                  + "".join(f"'{other}': {other}, " for _, other in optional) + "}, _keywords)"]
    for index in range(most):
        lines += check(index, "    ")
    lines.append(f"    return _function({', '.join(names)})")

    def by_name(*args: Any) -> Any:
        """A call other than the usual one (see above): its positional arguments given
        (``args[:most]``, those not given ``_UNGIVEN``), ``extra`` ones, the optional
        parameters given by name (``mirrored``, ``_UNGIVEN`` where not) and other
        keywords."""
        *slots, extra, mirrored, keywords = args
        given = [value for value in slots if value is not _UNGIVEN]
        keywords = {**{key: value for key, value in mirrored.items()
                       if value is not _UNGIVEN}, **keywords}
        if extra:
            return bound(*given, *extra, **keywords)
        try:
            everything = named(*given, **keywords)
        except TypeError:  # refused by the signature: bound() says why
            return bound(*given, **keywords)
        return door(*everything)

    namespace = {"_UNGIVEN": _UNGIVEN, "_function": function, "_by_name": by_name,
                 "_refuse_kind": refuse_kind}
    namespace.update((f"_accepts{index}", accepts) for index, accepts in kinds.items())
    namespace.update((f"_default{index}", positional[index].default)
                     for index, _ in optional)
    exec(compile("\n".join(lines), f"<checked {function.__qualname__}>", "exec"), namespace)
    door = namespace["call"]
    return door


def checked_class(cls: type) -> type:
    """``cls`` with its public methods and property setters :func:`checked` (methods whose
    name starts with ``_`` are left as they are)."""
    for name, member in list(vars(cls).items()):
        if name.startswith("_") and name != "__init__":
            continue
        if isinstance(member, staticmethod):
            setattr(cls, name, staticmethod(checked(member.__func__)))
        elif isinstance(member, property) and member.fset is not None:
            setattr(cls, name, member.setter(checked(member.fset)))
        elif inspect.isfunction(member):
            setattr(cls, name, checked(member))
    return cls
