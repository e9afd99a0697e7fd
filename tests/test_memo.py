"""What the runtime keeps for later calls is bounded: one table per kind of entry, the
least recently used forgotten first, and a forgotten entry is recomputed, never wrong."""

import pytest

import lambdad
from lambdad import images
from lambdad.memo import Memo


def test_a_memo_forgets_the_least_recently_used_entry():
    memo = Memo(2)
    memo.put("a", 1)
    memo.put("b", 2)
    assert memo.get("a") == 1  # now "b" is the least recently used
    memo.put("c", 3)
    assert ("a" in memo, "b" in memo, "c" in memo) == (True, False, True)
    assert len(memo) == 2 and memo.get("b") is None


def test_a_memo_makes_a_missing_value_once():
    memo = Memo(4)
    made = []
    for _ in range(3):
        assert memo.get_or_make("k", lambda: made.append(1) or "v") == "v"
    assert made == [1]
    with pytest.raises(ValueError):
        Memo(0)


SOURCE = "\n".join(f"def f{k} (x : R) : R = x * sin (x + {k}) + exp (x / {k + 2})"
                   for k in range(12)) + """
def outer (x : R) : R = grad (\\y -> x * y * y) x + grad (\\z -> sin (x * z)) (x + 1)
"""


def gradients(program):
    names = [f"f{k}" for k in range(12)] + ["outer"]
    return [program.value_and_grad(name, 0.5 + 0.1 * k) for k, name in enumerate(names)]


def test_the_differentiator_keeps_no_more_than_its_bounds(monkeypatch):
    expected = gradients(lambdad.loads(SOURCE))
    for name in ("_UNITS_KEPT", "_ANALYSES_KEPT", "_PIECES_KEPT", "_IMAGES_KEPT"):
        monkeypatch.setattr(images, name, 2)
    program = lambdad.loads(SOURCE)
    kept = program.runtime.differentiator
    for _ in range(2):  # twice: what was forgotten is made again, to the same results
        assert repr(gradients(program)) == repr(expected)
        for table in (kept._units, kept._analyses, kept._pieces, kept._images):
            assert len(table) <= 2
    assert len(kept._units) == 2  # (it did keep some)


def test_a_node_keeps_its_hash_and_equal_nodes_hash_alike():
    # (the hash is computed once per node: keys of the caches are hashed at every lookup)
    from lambdad.syntax import MAT, ArrayT, FunT, PairT, RealT

    made = FunT(PairT(ArrayT(2), RealT()), RealT())
    shared = FunT(PairT(MAT, RealT()), RealT())
    first = hash(made)
    assert made._hash == first and hash(made) == first
    assert hash(shared) == first and shared == made
    assert hash(FunT(PairT(ArrayT(1), RealT()), RealT())) != first
    deep = RealT()
    for _ in range(100_000):  # deep: hashed without recursion, then kept
        deep = PairT(RealT(), deep)
    assert hash(deep) == deep._hash
