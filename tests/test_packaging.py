"""What the README's first install command (``pip install -e .``) brings: every command of
the tool must work with the package's own dependencies, no extra needed."""

from importlib.metadata import requires


def _runtime_requirements() -> set[str]:
    """The names of the requirements that carry no extra marker."""
    names = set()
    for requirement in requires("lambdad") or []:
        if "extra ==" in requirement:
            continue
        name = requirement.split(";")[0]
        for stop in "<>=!~[ ":
            name = name.split(stop)[0]
        names.add(name.strip().lower().replace("_", "-"))
    return names


def test_lambdad_fuzz_needs_no_extra():
    # `lambdad fuzz` draws and shrinks programs with hypothesis.
    assert "hypothesis" in _runtime_requirements()


def test_the_pictures_and_highlighting_need_no_extra():
    assert {"grandalf", "pygments"} <= _runtime_requirements()
