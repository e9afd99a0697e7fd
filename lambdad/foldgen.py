"""Code generation of batched folds: a ``fold`` of a fused ←D program whose step qualifies
(:func:`lambdad.batching.batched_fold_step`) runs its steps inline in one Python loop and
their backpropagators' bodies as one loop function, latest step first.

The door is the mixin :class:`BatchedFolds` of the code generator
(:class:`lambdad.codegen._CodeGenerator`), entered by two arms only: ``prim`` calls
:meth:`BatchedFolds.batched_fold` for a ``fold`` in a unit compiled with ``batch_folds``,
and ``lin_lam`` calls :meth:`BatchedFolds.batched_slot` for a backpropagator of the step
being batched (while ``batching`` is set).  The rest is the generator's own machinery
(``gen``, ``let``, ``staged``, ``apply_primitive``, ``write_out``...), reached through
``self``.  What it generates gives, bit for bit, what the same fold run step by step gives
(tests/test_batched_folds.py).
"""

from __future__ import annotations

import collections
import itertools
import re
from collections.abc import Callable, Sequence

from .batching import BatchedFold, batched_fold_step
from .errors import EvalError
from .generated import _MAX_IF_DEPTH, _Function, _lifted_reals
from .pieces import Line
from .primitives import FOLD, MAP, PRIMITIVES, ZIP
from .syntax import Const, Lam, Let, LetPair, LinLam, ListLit, Pair, Prim, Term, free_vars
from .tape import BATCHED_FOLD_MIN_STEPS


def _literal_reals_with_backprops(term: Term) -> bool:
    """Whether ``term`` is pairs of a literal scalar with a linear λ (``(0, \\a -o zero)``;
    a scalar is a real or, in forward mode over reverse mode, a pair of scalars), or pairs
    of such: then its value is one that :func:`~lambdad.tape.batches` accepts as a batched
    fold's start, whatever the run (a literal is a real, a linear λ a backpropagator)."""
    if not isinstance(term, Pair):
        return False
    if isinstance(term.second, LinLam):
        return _literal_scalar(term.first)
    return _literal_reals_with_backprops(term.first) and \
        _literal_reals_with_backprops(term.second)


def _literal_scalar(term: Term) -> bool:
    """Whether ``term`` is a real literal or pairs of them."""
    if isinstance(term, Pair):
        return _literal_scalar(term.first) and _literal_scalar(term.second)
    return isinstance(term, Const)


def _part(atom: str, path: tuple[int, ...]) -> str:
    """The Python expression of the part of the nested pairs ``atom`` at ``path``."""
    return atom + "".join(f"[{index}]" for index in path)


def _pairs_of(leaves: dict[tuple[int, ...], str], at: tuple[int, ...] = ()) -> str:
    """The Python expression of the nested pairs whose leaves are the atoms ``leaves``, by
    path (``at``: the path of the part being written)."""
    if at in leaves:
        return leaves[at]
    return f"({_pairs_of(leaves, at + (0,))}, {_pairs_of(leaves, at + (1,))})"


def _reads_element(step: Lam) -> bool:
    """Whether the batched step ``step`` (``\\acc -> lets in \\x -> e``, see
    :class:`~lambdad.batching.BatchedFold`) reads its element ``x``."""
    body: Term = step.body
    while isinstance(body, (Let, LetPair)):
        body = body.body
    return not isinstance(body, Lam) or body.param in free_vars(body.body)


# What a batched fold's step sends to a slot of the previous step, added to what it has
# (see LinearBodies.staged): the slot's local and the term.
_SENT_SUM = re.compile(r"(t[0-9]+) = (\S+) if \1 is None else \1 \+ \2 "
                       r"if type\(\2\) is float else _ssum\(\1, \2\)")


class BatchedFolds:
    """The code generator's arms for batched folds (see the module docstring); mixed into
    :class:`lambdad.codegen._CodeGenerator`, whose state (``batching``, ``pairs``,
    ``unpacked``, ``sent_to``...) they use."""

    def batched_fold(self, term: Prim, fn: _Function):
        """``fold f z xs`` in a unit compiled with ``batch_folds`` (a fused ←D program):
        batched when its step qualifies (:func:`lambdad.batching.batched_fold_step`).  ``f``
        is compiled as itself (a fold of too few steps, or of values that are not those of
        a first-order reverse-mode run, runs it as any fold does) and batched: its steps run
        inline in a Python loop here, each step's backpropagators made as the tuples of
        what they capture, kept as the step's record; one loop function runs every step's
        bodies, latest step first, carrying in locals what a step sends to the previous
        step's backpropagators, and :func:`lambdad.tape.batched_fold_result` makes the
        result's backpropagators.  (Nested too deep for Python's indentation, the batched
        step is a function of its own, run by :func:`lambdad.tape.batched_fold`.)"""
        step, start, items = term.args
        normal = yield self.gen(step, fn)
        step_term = step if isinstance(step, Lam) else self.lambda_terms.get((fn, normal))
        plan = batched_fold_step(step_term) if step_term is not None else None
        primitive = PRIMITIVES[FOLD.name]
        evaluator = self.evaluator(primitive)
        if plan is not None and fn.if_depth + 2 <= _MAX_IF_DEPTH:
            return (yield from self.inline_batched_fold(term, plan, normal, evaluator, fn))
        batched = loop = None
        if plan is not None:
            saved = self.batching
            # the loop's locals receiving what a step sends to the previous step's slots
            # (one Python function, the loop, holds them and the bodies: one numbering)
            loop_names = itertools.count()
            sent = [f"t{next(loop_names)}" for _ in plan.paths]
            self.batching = (plan, {name: sent[slot] for name, slot in plan.previous.items()},
                             [None] * len(plan.paths), loop_names)
            batched = yield self.gen(plan.step, fn)
            bodies = self.batching[2]
            self.batching = saved
            loop = self.batched_loop(bodies, sent, loop_names, indexed=True)
        z = yield self.gen(start, fn)
        xs = yield self.gen(items, fn)
        if batched is None:
            return self.apply_primitive(primitive, [normal, z, xs], term, term.span, fn)
        atoms = [normal, batched, loop, z, xs]
        site = self.site(primitive, term.span, term, (normal, z, xs), fn)
        t = fn.fresh("t")
        # (a short fold runs step by step, see BATCHED_FOLD_MIN_STEPS: tested here, at the
        # cost of one `len`, since most short folds are many)
        fn.emit(f"{t} = _bfold({', '.join(atoms)}, {self.constant(plan.paths)}, _newbp, "
                f"{self.constant(term.span)}) if len({xs}) >= {BATCHED_FOLD_MIN_STEPS} "
                f"else {evaluator}({normal}, {z}, {xs})", atoms, site)
        return t

    def inline_batched_fold(self, term: Prim, plan: BatchedFold, normal: str, evaluator: str,
                            fn: _Function):
        """The batched fold of :meth:`batched_fold`, its steps inline::

            if batches(z, xs):
                l1, .., lk = <the leaves of z>; records = []
                for x in xs:
                    <the step's statements, with p = the pairs of l1 .. lk>
                    records.append(<its backpropagators' records>)
                    l1, .., lk = <the leaves of what it returns>
                t = batched_fold_result(<the pairs of l1 .. lk>, records, loop, z, ...)
            else:
                t = fold(f, z, xs)

        A step whose records would hold parts of its element only appends nothing: the
        loop reads them from ``xs`` again (see :meth:`element_reads`).
        """
        _, start, items = term.args
        z = yield self.gen(start, fn)
        # A fold over `zip ys ws` (a dot product) runs over the two lists at once: no list
        # of pairs is made but where the steps run one by one.
        zipped = None
        if isinstance(items, Prim) and items.op == ZIP.name and not self.instrumented:
            lists = []
            for operand in items.args:
                lists.append((yield self.gen(operand, fn)))
            zipped = (lists, self.site(ZIP, items.span, items, lists, fn))
            # (zip's own error, where zip would raise it)
            fn.emit(f"if len({lists[0]}) != len({lists[1]}): "
                    f"{self.evaluator(ZIP)}({lists[0]}, {lists[1]})", lists, zipped[1])
            xs = lists[0]  # (its length is the steps')
        elif (isinstance(items, Prim) and items.op == MAP.name
              and _lifted_reals(items.args[0]) == "zero" and not _reads_element(plan.step)):
            # A fold over a list made constant (`range n` under ←D) whose step never reads
            # its element, the loop of the language: the batched steps run over the list
            # itself (the same length), which is lifted only where they run one by one.
            xs = yield self.gen(items.args[1], fn)
            lifted = xs
        else:
            xs = yield self.gen(items, fn)
            lifted = None
        primitive = PRIMITIVES[FOLD.name]
        records, element, t = fn.fresh("t"), fn.fresh("v"), fn.fresh("t")
        # The accumulator is nested pairs (scalars with their backpropagators, the slots at
        # plan.paths): its leaves are carried from step to step in locals, not as pairs
        # made at every step and taken apart at the next; the step sees the pairs made of
        # them, each made only if the step uses it whole.
        nodes = sorted({path[:end] for path in plan.paths for end in range(len(path))},
                       key=len)
        leaves = [node + (side,) for node in nodes for side in (0, 1)
                  if node + (side,) not in nodes]
        carried = {leaf: fn.fresh("v") for leaf in leaves}
        # (the length first, inline: most short folds are many, as the MLP's dot products;
        # a start written as literals with linear λs, `(0, \a -o zero)`, is known to batch)
        known = _literal_reals_with_backprops(start)
        fn.emit(f"if len({xs}) >= {BATCHED_FOLD_MIN_STEPS}"
                + ("" if known else f" and _batches({z}, {xs})") + ":", (z, xs))
        enclosing, indent = fn.blocks, fn.indent
        fn.blocks = enclosing + (next(self.counter),)
        fn.indent += 1
        fn.if_depth += 2
        self.carry(carried, nodes, z, fn)
        fn.emit(f"{records} = []", pure=(records,))  # (dropped when the steps keep none)
        if zipped is None:
            fn.emit(f"for {element} in {xs}:", (xs,))
        else:
            parts = (fn.fresh("v"), fn.fresh("v"))
            fn.emit(f"for {parts[0]}, {parts[1]} in zip({', '.join(zipped[0])}):", zipped[0])
        fn.indent += 1
        fn.blocks += (next(self.counter),)
        if zipped is not None:  # the element, made only if the step uses it whole
            fn.emit(f"{element} = ({parts[0]}, {parts[1]})", parts, pure=(element,))
            self.pairs[(fn, element)] = parts
        step = self.carried_pairs(carried, nodes, fn, pure=True)
        saved = self.batching
        # (one Python function, the loop, holds them and the bodies: one numbering)
        loop_names = itertools.count()
        sent = [f"t{next(loop_names)}" for _ in plan.paths]
        self.batching = (plan, {name: sent[slot] for name, slot in plan.previous.items()},
                         [None] * len(plan.paths), loop_names)
        lam = plan.step
        previous = self.bind(fn, lam.param, step)
        returned, made = yield self.step_spine(lam.body, fn, element)
        self.unbind(fn, lam.param, previous)
        bodies = self.batching[2]
        self.batching = saved
        # A step whose one backpropagator captures parts of the element only (a dot
        # product's: both operands with their backpropagators) keeps no record: the loop
        # reads them from the list(s) again, latest first.
        roots = [element] if zipped is None else list(parts)
        reads = (self.element_reads(bodies[0], roots, fn)
                 if len(made) == 1 and len(plan.paths) == 1 else None)
        if reads is None:
            record = made[0] if len(made) == 1 else f"({', '.join(made)},)"
            fn.emit(f"{records}.append({record})", (records, *made))
            steps, steps_uses = records, [records]
        else:
            steps_uses = [xs] if zipped is None else zipped[0]
            steps = xs if zipped is None else ", ".join(zipped[0])
        # (last in the loop: see apply_primitive)
        self.carry(carried, nodes, returned, fn, slots=plan.paths)
        fn.indent -= 1
        fn.blocks = enclosing + fn.blocks[len(enclosing):len(enclosing) + 1]
        loop = self.batched_loop(bodies, sent, loop_names, indexed=len(made) > 1,
                                 reads=reads, own_body=len(plan.paths) == 1)
        # batched_fold_result, written for these slots: the fold's backpropagator, then
        # the slots', in the accumulator of the last step
        # (one slot: its backpropagator is the fold's, the loop its body)
        span, slots = self.constant(term.span), {}
        if len(plan.paths) == 1:
            (path,) = plan.paths
            slots[path] = fn.fresh("t")
            fn.emit(f"{slots[path]} = _newbp({loop}, ({steps}, {_part(z, path)}), {span})",
                    (*steps_uses, z))
        else:
            cells, fold = fn.fresh("t"), fn.fresh("t")
            starts = "".join(f"{_part(z, path)}, " for path in plan.paths)
            fn.emit(f"{cells} = [{', '.join(['None'] * len(plan.paths))}]")
            fn.emit(f"{fold} = _newbp(_bsteps, ({loop}, {steps}, {cells}, ({starts})), "
                    f"{span})", (*steps_uses, cells, z))
            for slot, path in enumerate(plan.paths):
                slots[path] = fn.fresh("t")
                fn.emit(f"{slots[path]} = _newbp(_bslot, ({cells}, {slot}, {fold}), {span})",
                        (cells, fold))
        # (the last step's accumulator made of the carried leaves, its slots replaced)
        leaves = {path: atom for path, atom in carried.items() if path not in slots}
        fn.emit(f"{t} = {_pairs_of(carried | slots)}", (*leaves.values(), *slots.values()))
        fn.indent = indent
        fn.blocks = enclosing + (next(self.counter),)
        fn.emit("else:")
        fn.indent += 1
        if zipped is not None:
            xs = self.apply_primitive(ZIP, zipped[0], items, items.span, fn)
        elif lifted is not None:
            xs = fn.fresh("t")
            fn.emit(f"{xs} = [(_i, _Z) for _i in {lifted}]", (lifted,), pure=(xs,))
        site = self.site(primitive, term.span, term, (normal, z, xs), fn)
        fn.emit(f"{t} = {evaluator}({normal}, {z}, {xs})", (normal, z, xs), site)
        fn.indent = indent
        fn.blocks = enclosing
        fn.if_depth -= 2
        return t

    def carry(self, carried: dict[tuple[int, ...], str], nodes: list[tuple[int, ...]],
              value: str, fn: _Function, slots: Sequence[tuple[int, ...]] = ()) -> None:
        """Assigns the leaves of the nested pairs ``value`` (pairs at the paths ``nodes``)
        to their locals ``carried``, in one statement: the atoms a pair was made of when it
        was made in ``fn`` (:meth:`unpack`), else unpacked.  The leaves at ``slots`` (a
        batched step's records) are assigned by a statement of their own, dropped when no
        step reads them (see :func:`lambdad.generated.dead_statements`)."""
        atoms = {(): value}
        for node in nodes:  # (shortest first: a pair before its parts)
            atoms[node + (0,)], atoms[node + (1,)] = self.unpack(atoms[node], fn)
        for pure in (False, True):
            leaves = [leaf for leaf in carried if (leaf in slots) is pure]
            if leaves:
                targets = [carried[leaf] for leaf in leaves]
                sources = [atoms[leaf] for leaf in leaves]
                fn.emit(f"{', '.join(targets)}, = {', '.join(sources)},", sources,
                        pure=tuple(targets) if pure else ())

    def carried_pairs(self, carried: dict[tuple[int, ...], str], nodes: list[tuple[int, ...]],
                      fn: _Function, pure: bool) -> str:
        """The nested pairs of the leaves ``carried`` (pairs at the paths ``nodes``), made
        by a statement each (``pure``: dropped where unused) and known to :meth:`unpack`:
        the atom of the whole."""
        atoms = dict(carried)
        for node in reversed(nodes):  # (longest first: its parts before a pair)
            parts = (atoms[node + (0,)], atoms[node + (1,)])
            atoms[node] = t = fn.fresh("t")
            fn.emit(f"{t} = ({parts[0]}, {parts[1]})", parts, pure=(t,) if pure else ())
            self.pairs[(fn, t)] = parts
        return atoms[()]

    def step_spine(self, term: Term, fn: _Function, element: str):
        """The statements of a batched step's body ``lets in \\x -> lets in (e, [g1 .. gk])``
        (:class:`~lambdad.batching.BatchedFold`), ``x`` being ``element``: returns the atoms of
        ``e`` and of the records ``g1 .. gk``."""
        if isinstance(term, (Let, LetPair)):
            return (yield from self.let(term, fn, lambda t, f: self.step_spine(t, f, element)))
        if isinstance(term, Lam):
            previous = self.bind(fn, term.param, element)
            result = yield self.step_spine(term.body, fn, element)
            self.unbind(fn, term.param, previous)
            return result
        if isinstance(term, Pair) and isinstance(term.second, ListLit):
            returned = yield self.gen(term.first, fn)
            made = []
            for item in term.second.items:
                made.append((yield self.gen(item, fn)))
            return returned, made
        raise EvalError(f"not a batched step: a {type(term).__name__} term", term.span)

    def element_reads(self, body: tuple[_Function, str, list[str], list[str]],
                      roots: list[str], fn: _Function
                      ) -> tuple[int, dict[str, tuple[int, ...]]] | None:
        """Where each value the one backpropagator of a batched step captures (``body``,
        see :meth:`batched_slot`) lies in the step's element: its path from the element's
        ``roots`` (the loop's variables; one, or the two lists of a ``zip``), root index
        first; None unless every one lies there, each at a path of its own."""
        found: dict[str, tuple[int, ...]] = {}
        work = [(root, (index,)) for index, root in enumerate(roots)]
        while work:
            atom, path = work.pop()
            if atom in found:
                continue
            found[atom] = path
            parts = self.pairs.get((fn, atom))
            if parts is None:
                unpacked = self.unpacked.get((fn, atom))
                if unpacked is not None and unpacked[0] is fn:
                    parts = unpacked[2]
            if parts is not None:
                work.append((parts[0], path + (0,)))
                work.append((parts[1], path + (1,)))
        _, _, inner, values = body
        if not values:
            return None
        paths = [found.get(value) for value in values]
        if None in paths or len(set(paths)) < len(paths):
            return None
        return len(roots), dict(zip(inner, paths))

    @staticmethod
    def element_unpacking(reads: dict[str, tuple[int, ...]], roots: list[str],
                          fresh: Callable[[str], str]) -> list[str]:
        """The statements assigning the captured locals ``reads`` from the element, whose
        roots are ``roots``: pairs unpacked one by one (into new locals ``fresh`` makes
        where a part is not read, or is taken apart further), as :data:`lambdad.pieces._TARGETS` reads
        them."""
        by_path = {path: name for name, path in reads.items()}
        inner = {path[:end] for path in reads.values() for end in range(1, len(path))}
        statements = []
        work = [(path, root) for path, root in zip([(i,) for i in range(len(roots))], roots)
                if path in inner]
        while work:
            path, atom = work.pop()
            parts = []
            for side in (0, 1):
                part = by_path.get(path + (side,))
                if part is None:
                    part = fresh("v")
                    if path + (side,) in inner:
                        work.append((path + (side,), part))
                parts.append(part)
            statements.append(f"{parts[0]}, {parts[1]} = {atom}")
        statements.extend(f"{by_path[(index,)]} = {root}" for index, root in enumerate(roots)
                          if (index,) in by_path)
        return statements

    def batched_loop(self, bodies: list[tuple[_Function, str, list[str], list[str]]],
                     sent: list[str], names: "itertools.count[int]", indexed: bool,
                     reads: tuple[int, dict[str, tuple[int, ...]]] | None = None,
                     own_body: bool = False) -> str:
        """The loop function of a batched fold: ``(steps, a_1 .. a_n, stage)``, where each
        step is the tuple of what its slots' bodies capture, or the value itself when a body
        captures one (with ``indexed``, those in a tuple or list, one per slot) and ``a_j``
        is the adjoint of
        slot ``j`` of the last step (None if nothing reached it); it runs the bodies of
        each step, latest first, a body only when its slot received something, and
        returns what the first step sent to the start's slots.  With ``reads`` (see
        :meth:`element_reads`) the steps are the folded list, or the two lists zipped
        (``(xs, ys, a, stage)``), and the one body's captured values are read from each
        element.

        With ``own_body`` (one slot) the loop is the body of the fold's backpropagator
        itself, ``(captured, a, stage)``, capturing the steps (or the two lists) and the
        backpropagator of the start's slot, to which it sends what the first step sent
        (what :func:`lambdad.tape.batched_fold_body` does around a loop, without a call);
        when each step sends the previous one just what reached it
        (:meth:`passing_statement`), nothing is carried from step to step."""
        loop = _Function(None, names)
        if own_body:
            # (unpacked as a backpropagator body unpacks what it captures: see _pieces)
            lists = [loop.fresh("c") for _ in range(1 if reads is None else reads[0])]
            start = loop.fresh("c")
            loop.emit(f"{', '.join(lists)}, {start}, = _c", ("_c",))
        else:
            lists = ["_r0", "_r1"] if reads is not None and reads[0] == 2 else ["_r0"]
        adjoints = [loop.fresh("v") for _ in bodies]
        current = [loop.fresh("t") for _ in bodies]
        for a, c in zip(adjoints, current):
            loop.emit(f"{c} = {a}", (a,))  # parameters stay as given (lambdad.guard)
        passing = self.passing_statement(*bodies[0][:2], sent[0]) if own_body else None
        passed = passing is not None
        if passed:
            # Each step sends the previous one what reached it, unchanged (a sum's
            # accumulator, a dot product's): that adjoint is the same for every step, so
            # the test of it and the copy are made once, before the loop.
            (body, param, _, _), (reached,) = bodies[0], current
            body.lines = [line for line in body.lines if line is not passing]
            loop.emit(f"if {reached} is not None:", (reached,))
            loop.lines.append((2, f"{param} = {reached}", None, (), (reached,)))
            loop.indent = 2
            if not body.lines:  # (a step that does nothing else: `\acc x -> acc + 1`)
                bodies = []
        if reads is None or reads[0] == 1:
            roots = ["_r"]
            if bodies:
                loop.emit(f"for _r in reversed({lists[0]}):", (lists[0],))
        else:
            # (by index: short folds are many, and zip and reversed cost more to make)
            roots = [f"{lists[0]}[_n]", f"{lists[1]}[_n]"]
            if bodies:
                loop.emit(f"for _n in range(len({lists[0]}) - 1, -1, -1):", lists)
        # (the statements of a step: one level in from the `for` when the adjoint passes)
        level = loop.indent + 1 if passed else 3
        for target in sent if not passed else ():
            loop.lines.append((2, f"{target} = None", None, (), ()))
        for slot, (body, param, captured, _) in enumerate(bodies):
            if not passed:
                loop.lines.append((2, f"if {current[slot]} is not None:", None, (),
                                   (current[slot],)))
            if captured and reads is not None:
                loop.lines.extend((level, statement, None, (), ()) for statement
                                  in self.element_unpacking(reads[1], roots, loop.fresh))
            elif captured:
                record = f"_r[{slot}]" if indexed else "_r"
                targets = captured[0] if len(captured) == 1 else f"{', '.join(captured)},"
                loop.lines.append((level, f"{targets} = {record}", None, (), ()))
            if not passed:
                loop.lines.append((3, f"{param} = {current[slot]}", None, (),
                                   (current[slot],)))
            loop.lines.extend((indent + level - 1, text, site, pure, uses)
                              for indent, text, site, pure, uses in body.lines)
        loop.indent = 1
        if not passed:
            loop.lines.append((2, f"{', '.join(current)}, = {', '.join(sent)},", None, (),
                               tuple(sent)))
        if own_body:
            (reached,) = current
            # (a start of literals, a dot product's `0`, has the zero: nothing to send)
            loop.emit(f"if {reached} is not None and {start} is not _Z:", (reached, start))
            loop.lines.append((2, f"_st({start}, {reached})", None, (), (start, reached)))
        else:
            loop.emit(f"return ({', '.join(current)},)", current)
        # A slot of the previous step that one statement sends to is None before it (each
        # step starts them so): that sum is its one term.
        sums = [_SENT_SUM.fullmatch(line[1]) for line in loop.lines]
        terms = collections.Counter(found[1] for found in sums if found is not None)
        loop.lines = [line if found is None or terms[found[1]] > 1
                      else (line[0], f"{found[1]} = {found[2]}", *line[2:])
                      for line, found in zip(loop.lines, sums)]
        name = self.fresh("_f")
        # Kept whole (one `for`), and run again with every check to locate an error when
        # its checks were deferred (lambdad.guard).
        self.namespace["__lambdad_deferred__"].add(name)
        self.write_out(name, loop, [*(["_c"] if own_body else lists), *adjoints, "_st"])
        return name

    @staticmethod
    def passing_statement(body: _Function, param: str, sent: str) -> Line | None:
        """The statement of the batched step's body ``body`` (of parameter ``param``)
        sending to the previous step's slot (its local ``sent``) exactly what the body
        received, if that is all it sends there, outside any branch, and it uses ``sent``
        nowhere else; else None."""
        mentions = [line for line in body.lines if re.search(rf"\b{sent}\b", line[1])]
        if len(mentions) != 1 or mentions[0][0] != 1:
            return None
        found = _SENT_SUM.fullmatch(mentions[0][1])
        return mentions[0] if found is not None and found[2] == param else None

    def batched_slot(self, term: LinLam, fn: _Function):
        """A backpropagator of a batched fold's step (:meth:`batched_fold`): its body goes
        to the fold's loop function, what it sends to the previous step's slots into the
        loop's locals; its value here is the tuple of what the body captures (the value
        itself when it captures one)."""
        plan, previous, bodies, loop_names = self.batching
        child = _Function(fn, loop_names)  # (its lines go to the loop function)
        param = child.fresh("v")
        self.bind(child, term.param, param)
        if not self.instrumented:
            child.deferred = {}
        saved, self.batching = self.batching, None  # (a body holds no fold of its own)
        self.sent_to = previous
        yield self.staged(term.body, child)
        self.sent_to = {}
        self.batching = saved
        if child.deferred:
            self.deferred_checks(child)
        captured = list(child.captures.items())
        values = [self.lookup(source, fn, self.free_spans.get(source)) for source, _ in captured]
        bodies[plan.slots[id(term)]] = (child, param, [inner for _, inner in captured],
                                        values)
        if len(values) == 1:  # the one value is the record (no tuple a step)
            return values[0]
        t = fn.fresh("t")
        fn.emit(f"{t} = ({', '.join(values)},)" if values else f"{t} = ()", values, pure=(t,))
        return t
