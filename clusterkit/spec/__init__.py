"""The cluster spec: YAML -> typed, immutable, located ``Spec``. PURE (reads the file only).

    load(path)  -> Spec, or raises SpecError carrying every issue (warnings don't raise)
    check(path) -> (Spec | None, issues incl. warnings)
    loads(text, file="<string>") / checks(text, file) : the same for text
"""

from __future__ import annotations

from clusterkit.errors import SpecError, SpecIssue
from clusterkit.spec.build import build_spec
from clusterkit.spec.checks import check_spec
from clusterkit.spec.model import Spec
from clusterkit.spec.walk import Walk, walk_spec
from clusterkit.spec.yamlload import MAX_BYTES, decode, parse, read_spec_file

__all__ = ["MAX_BYTES", "Spec", "SpecError", "SpecIssue", "check", "checks", "load", "loads"]


def _check_text(text: str, file: str) -> tuple[Spec | None, list[SpecIssue]]:
    root, issues = parse(text, file)
    if root is None:
        return None, issues
    w = Walk(file, issues=list(issues))
    plain = walk_spec(root, w)
    spec = build_spec(plain, w.locations, file)
    all_issues = w.issues + check_spec(spec)
    all_issues.sort(key=lambda i: (i.line, i.col))
    if any(i.level == "error" for i in all_issues):
        return None, all_issues
    return spec, all_issues


def checks(text: str | bytes, file: str = "<string>") -> tuple[Spec | None, list[SpecIssue]]:
    """Check spec text (or raw bytes); the Spec is None when any issue is an error."""
    if isinstance(text, bytes):
        decoded, issues = decode(text, file)
        if decoded is None:
            return None, issues
        text = decoded
    return _check_text(text, file)


def check(path: str) -> tuple[Spec | None, list[SpecIssue]]:
    """Check a spec file; every issue, warnings included, sorted by position."""
    text, issues = read_spec_file(str(path))
    if text is None:
        return None, issues
    return _check_text(text, str(path))


def _raise_or_return(result: tuple[Spec | None, list[SpecIssue]]) -> Spec:
    spec, issues = result
    if spec is None:
        raise SpecError(issues, "fix the errors above; `clusterkit validate` re-checks")
    return spec


def load(path: str) -> Spec:
    """The Spec of a file; SpecError (exit 2) with every located issue if any is an error."""
    return _raise_or_return(check(path))


def loads(text: str | bytes, file: str = "<string>") -> Spec:
    """The Spec of YAML text; raises SpecError like ``load``."""
    return _raise_or_return(checks(text, file))
