"""Persistent maps (the environments of a growing program): every version stays as it was,
and a long run of updates costs O(log n) each (the layers stay few)."""

from lambdad.persistent import PersistentMap
from lambdad.syntax import FunT, VarT
from lambdad.typecheck import Scheme, TypeEnv


def test_updates_leave_every_version_unchanged():
    versions = [PersistentMap()]
    for i in range(300):
        versions.append(versions[-1].set(f"x{i % 50}", i))
    for n, version in enumerate(versions):
        expected = {}
        for i in range(n):
            expected[f"x{i % 50}"] = i
        assert dict(version) == expected and len(version) == len(expected)
        assert list(version) == list(expected)  # the order names were first bound
    assert versions[10].get("x49") is None and "x9" in versions[10]


def test_many_updates_keep_few_layers():
    version = PersistentMap()
    for i in range(10_000):
        version = version.set(f"f{i}", i)
    assert len(version._layers) <= 14 and version["f0"] == 0 and version["f9999"] == 9999


def test_a_type_environment_knows_its_free_variables():
    identity = Scheme(("a",), FunT(VarT("a"), VarT("a")))
    open_ = Scheme((), FunT(VarT("b"), VarT("b")))
    env = TypeEnv({"id": identity})
    assert env.free == frozenset()
    extended = env.extend("g", open_)
    assert extended.free == {"b"} and env.free == frozenset() and "g" not in env
    assert extended.extend("g", identity).free == frozenset()  # the open scheme is gone
