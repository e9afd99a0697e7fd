"""The docs' install lines give each command what it needs, and the files they cite exist."""

import re

import pytest

from conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_test_suite_is_run_after_installing_the_test_extra(page):
    # A page that shows how to install shows all of it; the others follow the README's.
    text = page.read_text(encoding="utf-8")
    if "pip install" not in text:
        pytest.skip("no install lines")
    for match in re.finditer(r"python -m pytest", text):
        before = text[:match.start()]
        assert re.search(r"pip install[^\n]*\[[^\]]*\btest\b", before), (
            f"{page.name}: pytest runs before the test extra is installed")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_program_cited_exists(page):
    text = page.read_text(encoding="utf-8")
    for cited in set(re.findall(r"\bprograms/[\w-]+\.lam\b", text)):
        assert (ROOT / cited).is_file(), f"{page.name} cites {cited}, which does not exist"
