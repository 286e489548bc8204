import subprocess
import sys
from pathlib import Path

from linter.cache import Cache
from linter.diagnostics import FileProblem
from linter.finding import Edit, Finding, Fix, Related, Span
from linter.runner import check_file
from tests.linter.fakes import fake_job

FINDING = Finding(
    "KV101", "m", "a.py", Span(1, 2, 1, 5), "s", (Related(Span(2, 1, 2, 2), "V side"),),
    Fix("f", (Edit(Span(1, 2, 1, 5), "x"),), "unsafe"), 1,
)


def _cache(tmp_path: Path, fingerprint: str = "settings") -> Cache:
    return Cache(tmp_path / "cache", fingerprint, ["rule"])


def test_an_entry_round_trips(tmp_path):
    cache = _cache(tmp_path)
    key = cache.key("a.py", b"data")
    cache.put(key, [FINDING], [FileProblem("a.py", "E999", "bad", 3, 4)])
    assert cache.get(key) == ([FINDING], [FileProblem("a.py", "E999", "bad", 3, 4)])


def test_key_changes_with_content_settings_and_path(tmp_path):
    cache = _cache(tmp_path)
    keys = {
        cache.key("a.py", b"data"), cache.key("a.py", b"datb"), cache.key("b.py", b"data"),
        _cache(tmp_path, "other settings").key("a.py", b"data"),
    }
    assert len(keys) == 4


def test_a_truncated_entry_is_ignored(tmp_path):
    cache = _cache(tmp_path)
    key = cache.key("a.py", b"data")
    cache.put(key, [FINDING], [])
    entry = next((tmp_path / "cache").rglob(f"{key}.json"))
    entry.write_bytes(entry.read_bytes()[:20])
    assert cache.get(key) is None


def test_garbage_and_foreign_entries_are_ignored(tmp_path):
    cache = _cache(tmp_path)
    key, other = cache.key("a.py", b"data"), cache.key("b.py", b"data")
    cache.put(other, [FINDING], [])
    entry = (tmp_path / "cache" / key[:2] / f"{key}.json")
    entry.parent.mkdir(parents=True, exist_ok=True)
    entry.write_bytes((tmp_path / "cache" / other[:2] / f"{other}.json").read_bytes())
    assert cache.get(key) is None
    entry.write_bytes(b"\x00\xffnot json")
    assert cache.get(key) is None


def test_a_cached_run_reports_what_an_uncached_run_reports(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("flag_me(v)\n")
    job = fake_job(cache_dir=str(tmp_path / "cache"))
    first = check_file(str(path), job)
    second = check_file(str(path), job)
    assert first.findings == second.findings and len(second.findings) == 1
    assert any((tmp_path / "cache").rglob("*.json"))


def test_a_changed_file_is_linted_again(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("flag_me(v)\n")
    job = fake_job(cache_dir=str(tmp_path / "cache"))
    check_file(str(path), job)
    path.write_text("x = 1\n")
    assert check_file(str(path), job).findings == []


def test_a_corrupt_cache_does_not_change_findings(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("flag_me(v)\n")
    job = fake_job(cache_dir=str(tmp_path / "cache"))
    check_file(str(path), job)
    for entry in (tmp_path / "cache").rglob("*.json"):
        entry.write_text('{"key": "x", "findings": [')
    assert len(check_file(str(path), job).findings) == 1


def test_two_concurrent_processes_give_the_findings_of_one(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(30):
        (tree / f"m{i}.py").write_text(
            "import torch_npu\n\ndef attend(q, k, v, n):\n"
            f"    return torch_npu.npu_fusion_attention(q, k[:n{i}], v, 8, 'TND')\n"
        )
    cmd = [sys.executable, "-m", "linter", "check", "--format", "concise", "--cache-dir", str(tmp_path / "c"), str(tree)]
    runs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [run.communicate()[0] for run in runs]
    alone = subprocess.run([*cmd[:-3], "--no-cache", str(tree)], capture_output=True, text=True, check=False).stdout
    assert outputs[0] == outputs[1] == alone and alone.count("KV101") == 30


def test_an_entry_is_stale_once_a_file_the_lint_read_changes(tmp_path):
    # KV207 reads the base class from the module the modular file imports: a cached result of
    # the modular file must not outlive an edit of that module.
    from linter import runner
    from linter.settings import Settings

    (tmp_path / "encoder").mkdir()
    base = tmp_path / "encoder" / "modeling_encoder.py"
    base.write_text(
        "class EncoderAttention(nn.Module):\n"
        "    def __init__(self, config):\n"
        "        super().__init__()\n"
        "        self.k_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * config.head_dim)\n"
        "        self.v_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * config.head_dim)\n"
    )
    (tmp_path / "diarization").mkdir()
    modular = tmp_path / "diarization" / "modular_diarization.py"
    modular.write_text(
        "from ..encoder.modeling_encoder import EncoderAttention\n\n\n"
        "class DiarizationAttention(EncoderAttention):\n"
        "    def __init__(self, config):\n"
        "        super().__init__(config)\n"
        "        self.v_proj = nn.Linear(config.hidden_size, config.num_attention_heads * config.head_dim)\n"
    )
    job = runner.job_for(Settings(select=frozenset({"KV207"})), cache_dir=str(tmp_path / "cache"))
    assert [f.code for f in check_file(str(modular), job).findings] == ["KV207"]
    assert [f.code for f in check_file(str(modular), job).findings] == ["KV207"]  # from the cache
    base.write_text(base.read_text().replace("num_key_value_heads * config.head_dim)\n        self.v_proj",
                                             "num_attention_heads * config.head_dim)\n        self.v_proj"))
    assert check_file(str(modular), job).findings == []


def test_an_entry_is_stale_once_an_imported_helper_changes(tmp_path):
    # KV105 reads a helper from the module its caller imports it from by absolute name.
    from linter import runner
    from linter.settings import Settings

    for folder in ("engine", "engine/attention", "engine/models"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    utils = tmp_path / "engine" / "attention" / "utils.py"
    utils.write_text("def trim_keys(x, window):\n    return x[:, -window:]\n")
    caller = tmp_path / "engine" / "models" / "sliding.py"
    caller.write_text(
        "from engine.attention.utils import trim_keys\n\n\n"
        "class SlidingAttention(nn.Module):\n"
        "    def forward(self, q, k, v, n):\n"
        "        k = trim_keys(k, n)\n"
        "        return self.attn(q, k, v)\n"
    )
    job = runner.job_for(Settings(select=frozenset({"KV105"})), cache_dir=str(tmp_path / "cache"))
    assert [f.code for f in check_file(str(caller), job).findings] == ["KV105"]
    assert [f.code for f in check_file(str(caller), job).findings] == ["KV105"]  # from the cache
    utils.write_text("def trim_keys(x, window):\n    return x\n")
    assert check_file(str(caller), job).findings == []
