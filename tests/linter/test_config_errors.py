"""Every configuration mistake is one line on stderr naming where it is, and exit 2.

test_config.py covers the messages of load_settings; these run the real command, so an
exception escaping anywhere between reading pyproject.toml and linting shows up as a traceback.
"""

import pytest

from tests.linter.test_cli import kvlint

ATTENTION = "import torch_npu\n\ndef attend(q, k, v, n):\n    return torch_npu.npu_fusion_attention(q, k[:n], v, 8, 'TND')\n"

BAD_PYPROJECTS = {
    "unclosed table header": b"[tool.kvlint\n",
    "not UTF-8": b'[tool.kvlint]\nselect = ["\xff"]\n',
    "tool is not a table": b'tool = "kvlint"\n',
    "tool.kvlint is not a table": b"[tool]\nkvlint = 5\n",
    "unknown key": b'[tool.kvlint]\nselekt = ["KV101"]\n',
    "unknown code in select": b'[tool.kvlint]\nselect = ["KV999"]\n',
    "unknown code in extend-select": b'[tool.kvlint]\nextend-select = ["ZZ"]\n',
    "unknown code in ignore": b'[tool.kvlint]\nignore = ["KV9"]\n',
    "unknown code in per-file-ignores": b'[tool.kvlint]\nper-file-ignores = { "a.py" = ["KV999"] }\n',
    "select is a string": b'[tool.kvlint]\nselect = "KV101"\n',
    "ignore holds a number": b"[tool.kvlint]\nignore = [101]\n",
    "per-file-ignores is a list": b'[tool.kvlint]\nper-file-ignores = ["a.py"]\n',
    "per-file-ignores value is a string": b'[tool.kvlint]\nper-file-ignores = { "a.py" = "KV101" }\n',
    "exclude holds a number": b"[tool.kvlint]\nexclude = [1]\n",
    "respect-gitignore is a string": b'[tool.kvlint]\nrespect-gitignore = "yes"\n',
    "extra-pairs entry is not a pair": b'[tool.kvlint]\nextra-pairs = [["k"]]\n',
    "extra-pairs is a table": b'[tool.kvlint]\nextra-pairs = { k = "v" }\n',
    "attention-callables is a string": b'[tool.kvlint]\nattention-callables = "f"\n',
}

BAD_OPTIONS = {
    "--select": ["--select", "KV999"],
    "--extend-select": ["--extend-select", "QQ"],
    "--ignore": ["--ignore", "KV9"],
    "--config of a missing file": ["--config", "missing.toml"],
}


def _one_line_error(proc) -> str:
    lines = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr.decode()
    assert lines[0].startswith("kvlint: error: ")
    return lines[0]


@pytest.mark.parametrize("body", BAD_PYPROJECTS.values(), ids=BAD_PYPROJECTS.keys())
def test_a_bad_pyproject_is_a_one_line_error_naming_it(tmp_path, body):
    (tmp_path / "a.py").write_text(ATTENTION)
    (tmp_path / "pyproject.toml").write_bytes(body)
    assert "pyproject.toml" in _one_line_error(kvlint("check", "--no-cache", "a.py", cwd=tmp_path))


@pytest.mark.parametrize("name", ["unclosed table header", "not UTF-8", "tool is not a table", "unknown code in ignore"])
def test_a_bad_config_named_with_config_is_a_one_line_error(tmp_path, name):
    (tmp_path / "a.py").write_text(ATTENTION)
    (tmp_path / "kv.toml").write_bytes(BAD_PYPROJECTS[name])
    assert "kv.toml" in _one_line_error(kvlint("check", "--no-cache", "--config", "kv.toml", "a.py", cwd=tmp_path))


@pytest.mark.parametrize("args", BAD_OPTIONS.values(), ids=BAD_OPTIONS.keys())
def test_a_bad_option_is_a_one_line_error_naming_it(tmp_path, args):
    (tmp_path / "a.py").write_text(ATTENTION)
    line = _one_line_error(kvlint("check", "--no-cache", *args, "a.py", cwd=tmp_path))
    assert args[0] in line or args[1] in line


def test_a_bad_config_on_stdin_is_a_one_line_error(tmp_path):
    (tmp_path / "pyproject.toml").write_bytes(BAD_PYPROJECTS["unknown code in ignore"])
    proc = kvlint("check", "--stdin-filename", "a.py", "-", cwd=tmp_path, stdin=ATTENTION)
    assert "KV9" in _one_line_error(proc)


def test_an_unrelated_pyproject_without_a_kvlint_table_is_not_an_error(tmp_path):
    (tmp_path / "a.py").write_text(ATTENTION)
    (tmp_path / "pyproject.toml").write_text("[tool.other]\nx = 1\n")
    assert kvlint("check", "--no-cache", "a.py", cwd=tmp_path).returncode == 1
