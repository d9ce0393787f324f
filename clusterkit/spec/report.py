"""`clusterkit validate`: check several spec files, one report. PURE apart from reading."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from clusterkit.errors import SpecIssue
from clusterkit.spec import check


@dataclass(frozen=True)
class FileResult:
    file: str
    issues: tuple[SpecIssue, ...]

    @property
    def errors(self) -> int:
        return sum(1 for i in self.issues if i.level == "error")

    @property
    def warnings(self) -> int:
        return sum(1 for i in self.issues if i.level == "warning")

    @property
    def ok(self) -> bool:
        return self.errors == 0


@dataclass(frozen=True)
class ValidationReport:
    files: tuple[FileResult, ...]
    strict: bool = False

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.files)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "strict": self.strict,
            "errors": sum(f.errors for f in self.files),
            "warnings": sum(f.warnings for f in self.files),
            "files": [{"file": f.file, "ok": f.ok, "errors": f.errors, "warnings": f.warnings,
                       "issues": [asdict(i) for i in f.issues]} for f in self.files],
        }


def _promote(issue: SpecIssue) -> SpecIssue:
    if issue.level != "warning":
        return issue
    return replace(issue, level="error", message=f"{issue.message} (warning, --strict)")


def do_validate(paths: list[str] | tuple[str, ...], strict: bool = False) -> ValidationReport:
    """Check every file; with ``strict`` warnings count as errors. No AWS call."""
    results = []
    for path in paths:
        _spec, issues = check(path)
        if strict:
            issues = [_promote(i) for i in issues]
        results.append(FileResult(str(path), tuple(issues)))
    return ValidationReport(tuple(results), strict)
