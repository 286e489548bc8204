"""KV104 value-from-key-twin: the value side built from a key-side name while its V twin exists."""

from __future__ import annotations

from textwrap import dedent

from linter.engine import lint_source


def kv104(source: str):
    return lint_source(dedent(source), codes=["KV104"])


# Cross-layer KV sharing: a layer that reuses another layer's keys as its values calls that
# layer's `k_proj`; the caller's own `v_proj` parameter (kept for a signature shared with the
# non-sharing path) is no twin of another object's projection.
DONOR_LAYER = """
    def project_shared_kv(hidden, donor, k_proj, v_proj):
        key = {key_call}(hidden)
        value = {value_call}(hidden)
        return key, value
"""


def test_value_from_another_objects_key_projection_is_silent():
    assert kv104(DONOR_LAYER.format(key_call="donor.k_proj", value_call="donor.k_proj")) == []


def test_value_from_the_functions_own_key_projection_is_reported():
    findings = kv104(DONOR_LAYER.format(key_call="k_proj", value_call="k_proj"))
    assert [(f.code, f.span.row) for f in findings] == [("KV104", 4)]
    assert "`v_proj` exists" in findings[0].message


# K=V attention writes the key projection's output into the value attribute itself: the value
# side is being set, not ignored, so it is no value-from-key slip.
TIED_VALUE = """
    class KEqualsVAttention(nn.Module):
        def __init__(self, hidden):
            super().__init__()
            self.key = nn.Linear(hidden, hidden)
            self.value = None

        def precompute(self, memory):
            {target} = self.key(memory)
"""


def test_key_projection_written_into_the_value_attribute_is_silent():
    assert kv104(TIED_VALUE.format(target="self.value")) == []


def test_key_projection_as_a_value_local_beside_an_unused_value_attribute_is_reported():
    findings = kv104(TIED_VALUE.format(target="v"))
    assert [(f.code, f.span.row) for f in findings] == [("KV104", 9)]


# A value-side property answering with the key's bookkeeping (plain MHA: the value head size is
# the key's) reaches no tensor, so it is no value-side method reading the key cache.
HEAD_SIZE = """
    class Attention(nn.Module):
        def __init__(self, k_head_dim, num_heads):
            super().__init__()
            self.k_head_dim = k_head_dim
            self.k_cache = torch.empty(0, num_heads, k_head_dim)
            self.v_cache = torch.empty(0, num_heads, k_head_dim)

        @property
        def v_head_dim(self):
            return self.k_head_dim

        def value_cache(self):
            return {returned}
"""


def test_value_side_property_returning_key_bookkeeping_is_silent():
    assert kv104(HEAD_SIZE.format(returned="self.v_cache")) == []


def test_value_side_method_returning_the_key_cache_is_reported():
    findings = kv104(HEAD_SIZE.format(returned="self.k_cache"))
    assert [(f.code, f.span.row) for f in findings] == [("KV104", 14)]


# Checkpoints quantised with one scale for both sides ship it under one name; loading it into
# the key's dequant tensor writes a V-side scale, not a value tensor, into the key side.
SHARED_SCALE = """
    class Int8KVCache:
        def __init__(self, k_cache, v_cache):
            self.k_cache = k_cache
            self.v_cache = v_cache
            self.k_dequant = torch.ones(1)
            self.v_dequant = torch.ones(1)

        def load_shared_scale(self, v_scale):
            self.k_dequant.copy_(v_scale)
            self.v_dequant.copy_(v_scale)

        def store(self, slots, k, v):
            self.k_cache.index_copy_(0, slots, k)
            self.v_cache.index_copy_(0, slots, v)
"""


def test_value_side_scale_loaded_into_the_key_dequant_tensor_is_silent():
    assert kv104(SHARED_SCALE) == []


def test_value_tensor_written_into_the_key_side_is_reported():
    source = SHARED_SCALE.replace("index_copy_(0, slots, k)", "index_copy_(0, slots, v)")
    findings = kv104(source)
    assert [(f.code, f.span.row) for f in findings] == [("KV104", 14)]
