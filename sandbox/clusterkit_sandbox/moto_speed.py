"""moto's per-request work that never changes, done once: the emulator's CPU is most of
a sandbox `up`, and moto repeats two costly things on every call.

- ``list_of_moto_modules`` lists moto's package directory (a ``stat`` per service) to
  route each request: the directory does not change while the server runs.
- CloudFormation parses each template with PyYAML's pure-Python loader; the C loader
  (libyaml, when PyYAML has it) builds the same objects, with moto's tag constructor
  registered on it too.

(The handler lookup, ``method_names_from_class``, is left alone: the sandbox adds
actions moto lacks to its response classes, at any time, so a class's methods do.)
Each is the function moto would call, memoised or given the faster equivalent; nothing
moto returns changes. ``install()`` is idempotent."""

from __future__ import annotations

from typing import Any

_installed = False


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    _memoise_routing()
    _c_yaml_templates()


def _memoise_routing() -> None:
    import moto.backends

    modules = tuple(moto.backends.list_of_moto_modules())
    moto.backends.list_of_moto_modules = lambda: iter(modules)


def _c_yaml_templates() -> None:
    import yaml

    if not getattr(yaml, "__with_libyaml__", False):
        return
    from moto.cloudformation import models
    from moto.cloudformation.utils import yaml_tag_constructor

    pure = models.Stack.parse_template
    yaml.add_multi_constructor("", yaml_tag_constructor, Loader=yaml.CLoader)

    def parse_template(template: str) -> dict[str, Any]:
        try:
            return yaml.load(template, Loader=yaml.CLoader)  # noqa: S506 - moto's own loader
        except (yaml.parser.ParserError, yaml.scanner.ScannerError):
            return pure(template)  # JSON, as moto falls back to

    models.Stack.parse_template = staticmethod(parse_template)
