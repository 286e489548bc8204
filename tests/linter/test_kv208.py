"""KV208 finds the pool's constructor in the module its caller imports it from."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

from linter.engine import lint_source

POOL = dedent("""\
    class TokenToKVPool:
        def __init__(self, size, head_num, head_dim, v_head_dim=None):
            self.v_head_dim = v_head_dim if v_head_dim is not None else head_dim
""")
RUNNER = dedent("""\
    def init_memory_pool(self, size):
        from engine.mem_cache.pool import TokenToKVPool

        assert self.model_config.v_head_dim > 0
        return TokenToKVPool(size, self.num_kv_heads, head_dim=self.model_config.head_dim{extra})
""")


def _package(tmp_path: Path, extra: str = "") -> Path:
    for folder in ("engine", "engine/mem_cache", "engine/runner"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "engine" / "mem_cache" / "pool.py").write_text(POOL)
    runner = tmp_path / "engine" / "runner" / "model_runner.py"
    runner.write_text(RUNNER.format(extra=extra))
    return runner


def test_a_pool_imported_by_absolute_name_inside_the_function_is_read(tmp_path):
    runner = _package(tmp_path)
    [finding] = lint_source(runner.read_text(), path=str(runner), codes=["KV208"])
    assert finding.span.row == 5 and "`TokenToKVPool` accepts `v_head_dim`" in finding.message


def test_passing_the_value_head_dim_is_silent(tmp_path):
    runner = _package(tmp_path, extra=", v_head_dim=self.model_config.v_head_dim")
    assert lint_source(runner.read_text(), path=str(runner), codes=["KV208"]) == []


def test_a_package_of_another_name_is_not_searched(tmp_path):
    runner = _package(tmp_path)
    text = runner.read_text().replace("from engine.", "from other_engine.")
    assert lint_source(text, path=str(runner), codes=["KV208"]) == []
