from pathlib import Path

import pytest

from linter.config import (
    CliOptions,
    ConfigError,
    enabled_codes,
    find_config,
    load_settings,
)

CODES = ["KV101", "KV102", "KV103", "KV201", "KV202", "KV203"]


def _write(tmp_path: Path, body: str) -> Path:
    config = tmp_path / "pyproject.toml"
    config.write_text(body)
    return config


def test_without_config_every_rule_is_enabled():
    assert enabled_codes(load_settings(None, CliOptions(), CODES)) == set(CODES)


def test_select_takes_codes_and_prefixes(tmp_path):
    config = _write(tmp_path, '[tool.kvlint]\nselect = ["KV1", "KV203"]\n')
    assert enabled_codes(load_settings(config, CliOptions(), CODES)) == {"KV101", "KV102", "KV103", "KV203"}


def test_cli_select_replaces_config_select_and_ignore_adds(tmp_path):
    config = _write(tmp_path, '[tool.kvlint]\nselect = ["KV1"]\nignore = ["KV201"]\n')
    settings = load_settings(config, CliOptions(select=["KV2"], ignore=["KV202"]), CODES)
    assert enabled_codes(settings) == {"KV203"}


def test_extend_select_adds_to_select(tmp_path):
    config = _write(tmp_path, '[tool.kvlint]\nselect = ["KV101"]\nextend-select = ["KV202"]\n')
    assert enabled_codes(load_settings(config, CliOptions(extend_select=["KV203"]), CODES)) == {"KV101", "KV202", "KV203"}


def test_unknown_rule_code_is_a_one_line_error_listing_valid_codes(tmp_path):
    config = _write(tmp_path, '[tool.kvlint]\nignore = ["KV999"]\n')
    with pytest.raises(ConfigError) as info:
        load_settings(config, CliOptions(), CODES)
    message = str(info.value)
    assert "\n" not in message and "KV999" in message and "KV101" in message and str(config) in message


def test_unknown_code_on_the_command_line_is_an_error():
    with pytest.raises(ConfigError, match="--select"):
        load_settings(None, CliOptions(select=["XX1"]), CODES)


def test_malformed_toml_is_a_one_line_error_naming_the_file(tmp_path):
    config = _write(tmp_path, "[tool.kvlint\nselect = \n")
    with pytest.raises(ConfigError) as info:
        load_settings(config, CliOptions(), CODES)
    assert str(config) in str(info.value) and "\n" not in str(info.value)


def test_unknown_key_is_an_error(tmp_path):
    config = _write(tmp_path, '[tool.kvlint]\nselekt = ["KV101"]\n')
    with pytest.raises(ConfigError, match="selekt"):
        load_settings(config, CliOptions(), CODES)


def test_wrong_type_is_an_error(tmp_path):
    config = _write(tmp_path, '[tool.kvlint]\nselect = "KV101"\n')
    with pytest.raises(ConfigError, match="list of strings"):
        load_settings(config, CliOptions(), CODES)


def test_pairs_callables_and_gitignore_switch_are_read(tmp_path):
    config = _write(
        tmp_path,
        '[tool.kvlint]\nextra-pairs = [["kr", "vr"]]\nattention-callables = ["my_attn"]\nrespect-gitignore = false\n',
    )
    settings = load_settings(config, CliOptions(), CODES)
    assert settings.extra_pairs == (("kr", "vr"),)
    assert settings.extra_attention_callables == ("my_attn",)
    assert settings.respect_gitignore is False


def test_patterns_with_a_slash_are_anchored_at_the_config_directory(tmp_path):
    config = _write(tmp_path, '[tool.kvlint]\nexclude = ["gen/", "legacy/*.py"]\nper-file-ignores = { "tests/**" = ["KV101"] }\n')
    settings = load_settings(config, CliOptions(), CODES)
    root = tmp_path.resolve().as_posix()
    assert settings.exclude == ("gen/", f"{root}/legacy/*.py")
    assert settings.per_file_ignores == ((f"{root}/tests/**", frozenset({"KV101"})),)


def test_nearest_pyproject_with_a_kvlint_table_wins(tmp_path):
    outer = _write(tmp_path, "[tool.kvlint]\n")
    inner = tmp_path / "pkg"
    inner.mkdir()
    (inner / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert find_config(inner) == outer.resolve()


def test_a_pyproject_that_never_mentions_kvlint_is_not_parsed(tmp_path):
    # Another tool's broken pyproject.toml is not kvlint's to report; the one above it is found.
    outer = _write(tmp_path, "[tool.kvlint]\n")
    inner = tmp_path / "pkg"
    inner.mkdir()
    (inner / "pyproject.toml").write_text("[project\nname = 'x'\n")
    assert find_config(inner) == outer.resolve()


def test_settings_fingerprint_changes_with_selection(tmp_path):
    a = load_settings(None, CliOptions(select=["KV101"]), CODES)
    b = load_settings(None, CliOptions(select=["KV102"]), CODES)
    assert a.fingerprint() != b.fingerprint()


# ruff keeps rule selection under [tool.ruff.lint]; a ruff user writes [tool.kvlint.lint].
def test_a_lint_subtable_holds_the_rule_keys(tmp_path):
    config = _write(tmp_path, '[tool.kvlint]\nexclude = ["gen/"]\n\n[tool.kvlint.lint]\nselect = ["KV1"]\nignore = ["KV102"]\nextra-pairs = [["k_rope", "v_rope"]]\n')
    settings = load_settings(config, CliOptions(), CODES)
    assert enabled_codes(settings) == {"KV101", "KV103"}
    assert settings.extra_pairs == (("k_rope", "v_rope"),)


def test_a_lint_subtable_in_a_kvlint_toml(tmp_path):
    config = tmp_path / "kvlint.toml"
    config.write_text('[lint]\nextend-ignore = ["KV2"]\n')
    assert enabled_codes(load_settings(config, CliOptions(), CODES)) == {"KV101", "KV102", "KV103"}


def test_extend_ignore_adds_to_ignore(tmp_path):
    config = _write(tmp_path, '[tool.kvlint]\nignore = ["KV101"]\nextend-ignore = ["KV202"]\n')
    assert enabled_codes(load_settings(config, CliOptions(ignore=["KV103"]), CODES)) == {"KV102", "KV201", "KV203"}


def test_a_key_set_at_the_top_level_and_in_lint_is_an_error(tmp_path):
    config = _write(tmp_path, '[tool.kvlint]\nselect = ["KV1"]\n\n[tool.kvlint.lint]\nselect = ["KV2"]\n')
    with pytest.raises(ConfigError, match=r"select is set both at the top level and in \[tool.kvlint.lint\]; keep one"):
        load_settings(config, CliOptions(), CODES)


def test_a_file_key_in_lint_is_an_unknown_key_there(tmp_path):
    config = _write(tmp_path, '[tool.kvlint.lint]\nexclude = ["gen/"]\n')
    with pytest.raises(ConfigError, match=r"unknown key 'exclude' in \[tool.kvlint.lint\]"):
        load_settings(config, CliOptions(), CODES)


PREVIEWED = ["KV101", "KV102", "KV107", "KV201", "KV210"]


def test_preview_rules_stay_out_of_all_and_prefixes_without_preview():
    settings = load_settings(None, CliOptions(select=["ALL"]), PREVIEWED, {"KV107", "KV210"})
    assert enabled_codes(settings) == {"KV101", "KV102", "KV201"}
    settings = load_settings(None, CliOptions(select=["KV1"]), PREVIEWED, {"KV107", "KV210"})
    assert enabled_codes(settings) == {"KV101", "KV102"}


def test_a_preview_rule_named_by_its_code_runs_without_preview():
    settings = load_settings(None, CliOptions(select=["KV1"], extend_select=["KV210"]), PREVIEWED, {"KV107", "KV210"})
    assert enabled_codes(settings) == {"KV101", "KV102", "KV210"}


def test_preview_on_the_command_line_or_in_the_config_selects_the_preview_rules(tmp_path):
    assert enabled_codes(load_settings(None, CliOptions(preview=True), PREVIEWED, {"KV107", "KV210"})) == set(PREVIEWED)
    config = _write(tmp_path, "[tool.kvlint.lint]\npreview = true\n")
    assert enabled_codes(load_settings(config, CliOptions(), PREVIEWED, {"KV107", "KV210"})) == set(PREVIEWED)
    assert enabled_codes(load_settings(config, CliOptions(preview=False), PREVIEWED, {"KV107", "KV210"})) == {"KV101", "KV102", "KV201"}


def test_a_preview_that_is_not_a_boolean_is_refused(tmp_path):
    config = _write(tmp_path, '[tool.kvlint]\npreview = "yes"\n')
    with pytest.raises(ConfigError, match="preview must be true or false"):
        load_settings(config, CliOptions(), PREVIEWED, {"KV107"})
