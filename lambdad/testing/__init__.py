"""Random well-typed lambdad programs: hypothesis strategies for property-testing the stages.

Programs are built as syntax trees (:mod:`lambdad.syntax`) by type-directed generation: pick
a target type, then a construct that produces it, with an environment of typed variables.
The whole language is covered: reals and every ``real`` primitive of the table, ``let`` with
heavy sharing, pairs and projections, ``let``-pair patterns, lambdas, higher-order and partial
application, local functions, lists with ``map``/``fold``/``zip``/``length``/``range``,
``if`` on comparisons, booleans, annotations, and top-level helper definitions.  Array
programs (``Vec`` and ``Mat`` parameters, elementwise operations, reductions, ``dot`` and
``@``...) come from a generator of their own, :mod:`.arrays`; ``lambdad fuzz`` draws one
program in four from it.

Keeping programs inside the primitives' domains
    Every real sub-term carries an *estimated range* (an interval computed by evaluating the
    primitives on a grid over their arguments' ranges).  Before a primitive is applied, the
    generator wraps its arguments until the primitive's ``domain`` predicate (from the table)
    holds on the whole grid: ``u e`` with ``u`` a bounded primitive (``sin``, ``tanh``...),
    ``let w = e in w * w + 1`` (positive), ``u e + 2`` (bounded, positive), or a literal
    second argument (``e ^ 2``).  Nothing here branches on a primitive's name: adding a
    primitive to the table makes the generator use it, inside the domain it declares.

Keeping values moderate
    Inputs lie in ``[-INPUT_BOUND, INPUT_BOUND]``; a λ is generated for arguments in
    ``[-PARAM_BOUND, PARAM_BOUND]`` and every argument is squashed into that box when its
    range may leave it; a term whose range may exceed ``MAGNITUDE`` is squashed too, so
    values (and derivatives) never overflow.  The ranges are estimates: a rare point may still
    raise a runtime error, and users of these strategies should skip such points.

The package, by concern: :mod:`.shapes` (estimated ranges and bounds), :mod:`.generate`
(programs, terms, points), :mod:`.arrays` (array programs and their points), :mod:`.properties` (the checks), :mod:`.fuzz` (``lambdad fuzz``).

Public API::

    programs(max_depth=4, inputs=INPUT_KINDS, helpers=True)  # strategy of GeneratedProgram
    points_for(generated)                                    # strategy of points for it
    cases(max_depth=4, arrays=False)                         # (program, point) pairs
    array_programs(max_depth=3), array_cases(max_depth=3)    # array programs (and points)
    terms_of_type(t, env=())                                 # strategy of terms of type t
    check_types, check_round_trip, check_primal, check_modes_agree,
    check_finite_differences, check_properties               # the properties of QUALITY.md
    fuzz(lambdad.loads, count, seed)                         # what `lambdad fuzz` runs

Example::

    from hypothesis import given
    import lambdad
    from lambdad.testing import cases

    @given(cases())
    def test_my_change(case):
        generated, point = case
        program = lambdad.loads(generated.source())
        ...
"""

from .shapes import (
    INPUT_BOUND,
    PARAM_BOUND,
    MAGNITUDE,
    MAX_LIST,
    INPUT_KINDS,
    RealShape,
    BoolShape,
    PairShape,
    ListShape,
    FunShape,
    PARAM_REAL,
    INPUT_REAL,
    standard_shape,
    image,
    Ranges,
)
from .generate import (
    GeneratedProgram,
    TRICKY_NAMES,
    MAX_HELPERS,
    programs,
    points_for,
    terms_of_type,
)
from .arrays import (
    ARRAY_LENGTH,
    array_programs,
    array_points_for,
    array_cases,
)
from .properties import (
    PROPERTIES,
    PropertyViolation,
    PointRejected,
    check_types,
    check_round_trip,
    first_difference,
    check_primal,
    check_modes_agree,
    check_finite_differences,
    check_in_language,
    check_nested_programs,
    check_products,
    nested_definitions,
    check_properties,
    cases,
    same_up_to_elaboration,
)
from .fuzz import (
    FuzzFailure,
    FuzzReport,
    FUZZ_SHARD,
    fuzz,
)

__all__ = [
    "INPUT_BOUND",
    "PARAM_BOUND",
    "MAGNITUDE",
    "MAX_LIST",
    "INPUT_KINDS",
    "RealShape",
    "BoolShape",
    "PairShape",
    "ListShape",
    "FunShape",
    "PARAM_REAL",
    "INPUT_REAL",
    "standard_shape",
    "image",
    "Ranges",
    "GeneratedProgram",
    "TRICKY_NAMES",
    "MAX_HELPERS",
    "programs",
    "points_for",
    "terms_of_type",
    "PROPERTIES",
    "PropertyViolation",
    "PointRejected",
    "check_types",
    "check_round_trip",
    "first_difference",
    "check_primal",
    "check_modes_agree",
    "check_finite_differences",
    "check_in_language",
    "check_nested_programs",
    "check_products",
    "nested_definitions",
    "check_properties",
    "cases",
    "same_up_to_elaboration",
    "ARRAY_LENGTH",
    "array_programs",
    "array_points_for",
    "array_cases",
    "FuzzFailure",
    "FuzzReport",
    "FUZZ_SHARD",
    "fuzz",
]
