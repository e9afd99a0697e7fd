"""The one runtime: what runs a program, built in one place.

An interpreter evaluates terms; the differentiator serves the interpreter's AD primitives
(``grad``, ``jvp``, ``vjp``, ``jacfwd``, ``jacrev``) and the pipeline's derivatives; the
backward strategy (from the registry in :mod:`lambdad.tape`) says how both run
backpropagators; an event hook sees every primitive evaluation (trace tables, gradient
checks).  These four are wired together here and nowhere else: the pipeline, the trace,
the gradient checker and the REPL ask for a :class:`Runtime`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from .differentiate import Differentiator
from .interpreter import NOT_FINITE, Interpreter
from .syntax import Module, Term
from .tape import DEFAULT_STRATEGY, strategy_named
from .values import FunctionParts

__all__ = ["NOT_FINITE", "Runtime"]  # (NOT_FINITE: what apply_restartable may give)


class Runtime:
    """An interpreter with its differentiator, backward strategy and event hook.

    ``differentiator`` makes the differentiator from the interpreter and the strategy name
    (a subclass that watches the transformed terms, for a trace).  Raises UsageError for an
    unknown strategy."""

    def __init__(self, *, strategy: str = DEFAULT_STRATEGY,
                 on_event: Callable[[Any], None] | None = None,
                 max_steps: int | None = None, timeout: float | None = None,
                 differentiator: Callable[[Interpreter, str], Differentiator] = Differentiator):
        self.interpreter = Interpreter(strategy=strategy, on_event=on_event,
                                       max_steps=max_steps, timeout=timeout)
        self.differentiator = differentiator(self.interpreter, self.interpreter.strategy)
        self.interpreter.ad_hooks = self.differentiator.hooks()

    # ---- settings
    @property
    def strategy(self) -> str:
        """The backward strategy's name."""
        return self.interpreter.strategy

    def set_strategy(self, strategy: str | None) -> None:
        """Run backpropagators by ``strategy`` from now on (None: the default,
        :data:`~lambdad.tape.DEFAULT_STRATEGY`); UsageError for an unknown one."""
        name = strategy_named(strategy or DEFAULT_STRATEGY).name
        self.interpreter.strategy = name
        self.differentiator.strategy = name

    @contextlib.contextmanager
    def strategy_of_call(self, strategy: str | None) -> Iterator[str]:
        """A context in which backpropagators run by ``strategy`` (None: the one set now),
        yielded by name; the strategy set before is set again after, whatever happens.
        UsageError for an unknown strategy (before anything changes)."""
        before = self.strategy
        name = before if strategy is None else strategy_named(strategy).name
        if name == before:
            yield name
            return
        self.set_strategy(name)
        try:
            yield name
        finally:
            self.set_strategy(before)

    @property
    def max_steps(self) -> int | None:
        """The budget of primitive evaluations per run (None: no limit)."""
        return self.interpreter.max_steps

    @max_steps.setter
    def max_steps(self, steps: int | None) -> None:
        self.interpreter.max_steps = steps

    # ---- evaluation
    def evaluate(self, term: Term, env: Mapping[str, Any] | None = None) -> Any:
        """The value of ``term`` with its free variables bound by ``env``."""
        return self.interpreter.evaluate(term, env)

    def evaluate_module(self, module: Module, upto: str | None = None,
                        env: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The values of the module's declarations (up to ``upto``), by name."""
        return self.interpreter.evaluate_module(module, upto, env)

    def apply(self, f: Any, *args: Any) -> Any:
        """The function value ``f`` applied to ``args``."""
        return self.interpreter.apply(f, *args)

    def apply_restartable(self, f: Any, arg: Any, tested: Sequence[Any] | None = None) -> Any:
        """``f arg`` for a run that computes a value and changes nothing else, so that it
        may run again from the start (:meth:`Interpreter.restartable`): it takes the
        raised recursion limits only if it needs them.  Given ``tested`` (the arrays of
        ``arg``, not tested yet), :data:`NOT_FINITE`, nothing run, when one of them has an
        element that is not finite."""
        return self.interpreter.apply_restartable(f, arg, tested)

    def function_parts(self, f: Any) -> FunctionParts | None:
        """The λ-term and captured values of the closure ``f`` (or the built-in it applies),
        None for a function the interpreter did not make from a term."""
        return self.interpreter.function_parts(f)
