"""mkdocs hooks (mkdocs.yml ``hooks:``): tables generated from the code, so the site cannot drift from it.

``<!-- jaxrl:config MODULE -->`` on a page becomes the table of ``MODULE.Config``'s fields: name, default, what it
does (the field's docstring, as ``jaxrl train --help`` shows it) and, where the module's ``OFFICIAL`` mapping has the
field, the official code's value and its source. ``MODULE:CLASS`` names another config class of the module (a
plug-in with one config per base agent).
"""
from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import re
import textwrap

MARKER = re.compile(r"<!-- jaxrl:config ([\w.]+(?::\w+)?) -->")


def field_docs(cls) -> dict[str, str]:
    """{field: docstring} from the string literal under each annotated field, over the class and its bases."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or not dataclasses.is_dataclass(klass):
            continue
        try:
            body = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0].body
        except (OSError, TypeError):
            continue
        for node, after in zip(body, body[1:], strict=False):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(after, ast.Expr) \
                    and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
                docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def _cell(value) -> str:
    text = repr(list(value)) if isinstance(value, tuple) else repr(value)
    return "`" + text.replace("|", "\\|") + "`"


def config_table(module_name: str) -> str:
    module_name, _, class_name = module_name.partition(":")
    module = importlib.import_module(module_name)
    cls, official = getattr(module, class_name or "Config"), getattr(module, "OFFICIAL", {})
    unknown = set(official) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise ValueError(f"{module_name}.OFFICIAL names fields its Config lacks: {', '.join(sorted(unknown))}")
    docs = field_docs(cls)
    rows = ["| field | default | meaning | official value (source) |", "|---|---|---|---|"]
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        value, source = official.get(f.name, (None, None))
        theirs = "" if source is None else f"{_cell(value)} ({source.replace('|', '&#124;')})"
        meaning = docs.get(f.name, "").replace("|", "\\|")
        rows.append(f"| `{f.name}` | {_cell(default)} | {meaning} | {theirs} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, page, config, files) -> str:
    return MARKER.sub(lambda match: config_table(match.group(1)), markdown)
