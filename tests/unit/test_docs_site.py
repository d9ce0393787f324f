"""The docs site (mkdocs.yml, docs/) builds with `mkdocs build --strict`: no broken link or
anchor, no page missing from the nav; the nav has the parts a user looks for; search,
copy buttons on code blocks and admonitions are on; and README links only to pages that
exist."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests import support

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


DOCS_SCRIPT = support.load_script("docs")  # scripts/docs.py: mkdocs.yml and its nav
config, nav_pages = DOCS_SCRIPT.config, DOCS_SCRIPT.nav_pages


def test_the_site_builds_strictly(tmp_path: Path):
    support.require_module("mkdocs")  # the docs extra (scripts/install.sh installs it)
    support.require_module("material")
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(site)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "WARNING" not in proc.stderr, proc.stderr[-4000:]
    assert (site / "search" / "search_index.json").is_file()
    for page in nav_pages():
        built = site / (page.removesuffix(".md").removesuffix("index") + "/index.html"
                        if page != "index.md" else "index.html")
        assert built.is_file(), page
    tutorial = (site / "tutorial/sandbox/index.html").read_text()
    assert "sandbox session" in tutorial and 'class="filename"' in tutorial
    assert 'class="admonition warning"' in (site / "tutorial/aws/index.html").read_text()


def test_the_nav_has_what_users_look_for():
    top = [next(iter(item)) for item in config()["nav"]]
    assert top == ["Home", "Tutorial", "How-to guides", "Reference", "Operations", "Internals"]
    pages = nav_pages()
    assert len(pages) == len(set(pages))
    for page in pages:
        assert (DOCS / page).is_file(), page
    for page in ("reference/cli.md", "reference/spec.md", "reference/iam-policies.md",
                 "reference/exit-codes.md", "reference/sandbox-timings.md",
                 "operations/security.md", "operations/troubleshooting.md",
                 "operations/real-aws.md", "internals/testing.md"):
        assert page in pages, page


def test_search_copy_buttons_and_admonitions_are_on():
    cfg = config()
    assert "search" in cfg["plugins"]
    assert "content.code.copy" in cfg["theme"]["features"]
    extensions = [e if isinstance(e, str) else next(iter(e)) for e in cfg["markdown_extensions"]]
    assert {"admonition", "pymdownx.details", "pymdownx.superfences"} <= set(extensions)
    assert cfg["strict"] is True
    assert set(cfg["validation"].values()) == {"warn"}  # every one fails a strict build


def test_every_warning_that_costs_money_is_an_admonition():
    """Pages that tell you to spend (up on AWS, buying a Capacity Block) say so in a
    warning box, not in running text."""
    for page in ("tutorial/aws.md", "operations/real-aws.md", "howto/reserved-capacity.md"):
        assert re.search(r'^!!! warning ".*(money|\$).*"$', (DOCS / page).read_text(), re.M), \
            page


def test_readme_links_only_to_pages_that_exist():
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(((?:docs/)[^)#]+)(?:#[^)]*)?\)", readme)
    assert len(links) >= 10
    for link in links:
        assert (ROOT / link).is_file(), link


def test_docs_sh_is_shellcheck_clean_and_refuses_an_unknown_verb():
    support.shellcheck_clean(ROOT / "scripts/docs.sh")
    proc = subprocess.run(["bash", str(ROOT / "scripts/docs.sh"), "publish"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "usage: scripts/docs.sh build|serve|write" in proc.stderr


def test_readme_fits_on_two_screens_and_starts_with_the_two_set_up_commands():
    """README is at most 250 lines; its first command blocks are the demo and the tests
    (the rest lives on the site)."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, len(lines)
    commands = [line for line in lines if line.startswith("bash scripts/")]
    assert commands[:2] == ["bash scripts/demo.sh", "bash scripts/test.sh"], commands
