"""The code the simulations generate around an engine, kept as template files shipped with the
package (``sim/templates/``: the batch harness's Verilog, the native harness's C++ main) and
filled here, in one place.

A template is the generated file as it will read, with ``${name}`` fields; any other ``$``
(Verilog's ``$readmemh``, ``$fwrite``, …) and every brace are text.
"""

from __future__ import annotations

import string
from pathlib import Path

__all__ = ["fill"]

TEMPLATES = Path(__file__).parent / "templates"


class _Fields(string.Template):
    """``${name}`` fields only."""

    pattern = r"""
        \$(?:
            \{(?P<braced>[a-z_][a-z0-9_]*)\}
            | (?P<named>(?!)) | (?P<escaped>(?!)) | (?P<invalid>(?!))
        )
    """


def fill(name: str, **fields: object) -> str:
    """The template ``name`` (a file in ``sim/templates/``) with its fields filled from
    ``fields``, each written with ``str``; ValueError unless ``fields`` names exactly the
    template's fields."""
    template = _Fields((TEMPLATES / name).read_text(encoding="ascii"))
    wanted = set(template.get_identifiers())
    if wanted != set(fields):
        raise ValueError(f"template {name}: fields {sorted(wanted)} wanted, {sorted(fields)} given")
    return template.substitute(fields)
