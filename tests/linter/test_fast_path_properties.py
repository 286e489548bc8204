"""Generated code reports the same findings with the pre-filter (fast path) as without it.

The corpus tests (``test_fast_path_equivalence``) cover real code, which has few findings; here
every rule example and generated attention code is placed where the pre-filter's cuts matter:
renamed to scope names that mark attention code in different ways, inside classes, after
decorators and form feeds, beside module-level code and docstrings that mention K/V.
"""

from __future__ import annotations

import re
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from linter.runner import check_stdin
from tests.linter.test_fuzz import (
    FIX_JOB,
    PROFILE,
    SNIPPETS,
    _attention_programs,
    _mixed,
)

FAST = replace(FIX_JOB, fix=False)
SLOW = replace(FAST, prefilter=False)

# Scope names: attention words, latent attention (MLA), cache managers, and plain ones.
_NAMES = ["forward", "attention", "forward_attn", "forward_mla", "MLAForward", "update_kv_cache", "step", "pool_write"]
_NEIGHBOURS = [
    "",
    'HELP = """k = k[:n]; flash_attn_func(q, k, v)"""\n',
    "# k = k[:n]  before attention(q, k, v)\n",
    "import torch\nfrom torch import nn\n",
    "def helper(x):\n    return x.view(2, 3, 4)\n",
    "class Config:\n    num_key_value_heads = 2\n",
]


def _findings(text: str, job) -> list:
    result = check_stdin(text.encode("utf-8", "surrogatepass"), "gen.py", job)
    return sorted((f.code, f.span, f.message) for f in result.findings)


def _rename(snippet: str, name: str) -> str:
    """The snippet's first function, renamed: the name alone can make it attention code."""
    return re.sub(r"def \w+\(", f"def {name}(", snippet, count=1)


def _indent(snippet: str) -> str:
    return "".join(f"    {line}\n" if line else "\n" for line in snippet.splitlines())


_placed = st.builds(
    lambda snippet, name, where, before, after: before + {
        "module": _rename(snippet, name),
        "class": f"class {name.title()}Block:\n" + _indent(_rename(snippet, name)),
        "decorated": "@torch.no_grad()\n@staticmethod\n" + _rename(snippet, name),
        "form feed": "\f" + _rename(snippet, name),
    }[where] + after,
    st.sampled_from(SNIPPETS),
    st.sampled_from(_NAMES),
    st.sampled_from(["module", "class", "decorated", "form feed"]),
    st.sampled_from(_NEIGHBOURS),
    st.sampled_from(_NEIGHBOURS),
)


@PROFILE
@given(_placed)
def test_rule_examples_placed_anywhere_give_the_same_findings_on_both_paths(text: str) -> None:
    assert _findings(text, FAST) == _findings(text, SLOW)


@PROFILE
@given(st.one_of(_attention_programs(), _mixed))
def test_generated_attention_code_gives_the_same_findings_on_both_paths(text: str) -> None:
    assert _findings(text, FAST) == _findings(text, SLOW)
