"""``engine.positions`` gives libcst's ``PositionProvider`` ranges, node for node, without the
metadata wrapper's passes: findings keep their rows and columns."""

from __future__ import annotations

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from linter.engine import positions
from tests.linter.test_traversal import _EVERY_FORM, _ROOT

# Line ends and indents a module's code generation must count as the provider does.
_ODD_LAYOUTS = [
    "class A:\r\n    def f(self, k, v):\r\n        return k[:1], v\r\n",
    "x = 1\rif x:\r\tk = (1,\r\t     2)\r",
    "def f():\n\tif a:\n\t\treturn {\n\t\t\t'k': 1,\n\t\t}\n",
    "s = '''a\nb''' + \\\n    f'{x!r}\\n'  # note\n",
]


def _provider_ranges(module: cst.Module) -> dict:
    return dict(MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider))


@pytest.mark.parametrize("source", [_EVERY_FORM, *_ODD_LAYOUTS])
def test_every_node_gets_the_providers_range(source: str) -> None:
    module = cst.parse_module(source)
    ranges = positions(module)
    assert ranges == _provider_ranges(module)
    assert len(ranges) > 10


def test_the_linters_own_modules_get_the_providers_ranges() -> None:
    for path in sorted((_ROOT / "linter" / "engine.py").parent.glob("*.py")):
        module = cst.parse_module(path.read_text(encoding="utf-8"))
        assert positions(module) == _provider_ranges(module), path


def _moved_state(**_kwargs):  # a libcst whose codegen state takes other arguments
    raise TypeError("unexpected keyword argument 'provider'")


@pytest.mark.parametrize("state", [None, _moved_state], ids=["state-gone", "state-changed"])
def test_a_libcst_without_the_codegen_state_gets_the_same_ranges(monkeypatch, state) -> None:
    import linter.engine as engine

    monkeypatch.setattr(engine, "PositionProvidingCodegenState", state)
    module = cst.parse_module(_ODD_LAYOUTS[0])
    assert positions(module) == _provider_ranges(module)
