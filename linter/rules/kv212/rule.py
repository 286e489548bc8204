"""KV212: K or V shaped with the query's length after the cache made them longer."""

from __future__ import annotations

import libcst as cst

from linter.finding import Finding
from linter.model.extended_kv import query_length_shapes
from linter.plan.triggers import AnyCase, Trigger
from linter.rules.base import Example, Rule


_DONE = {"view": "viewed", "reshape": "reshaped", "expand": "expanded"}


class ExtendedKVQueryLength(Rule):
    code = "KV212"
    # A length name, and a concatenation or a cache update that extends K/V.
    trigger = Trigger(AnyCase("len"), AnyCase("cat", "update"))
    name = "extended-kv-query-length"
    summary = "K or V viewed, reshaped or expanded with the query's length after the cache made them longer"
    what = (
        "Finds a key or value tensor given the query's length (`q_len`, `query_length`, "
        "`tgt_len`) as a size in `.view`, `.reshape` or `.expand` after the same function made it "
        "longer: the past concatenated in front (`K = torch.cat([past_key_value[0], K], dim=2)`) "
        "or a cache update that returns it (`k, v = cache.update(k, v, ...)`). A rebinding that "
        "reads the tensor (`K = K.transpose(1, 2)`) keeps it long; one that does not resets it. "
        "The function must also bind a KV length (`kv_seq_len`, `k_len`), the size the view "
        "should have taken. Views before the concatenation are not reported: there the new keys "
        "have the query's length."
    )
    why = (
        "Once the cache is in front, K and V have the KV length, which equals the query's only "
        "while there is no past. A view with the query's length fails when decoding with a "
        "cache, or, where the element counts happen to match (a grouped-query expand, a batch "
        "folded into the token axis), silently mixes tokens of different positions."
    )
    bad = """\
def attention_forward(self, hidden_states, past_key_value=None):
    bsz, q_len, _ = hidden_states.size()
    Q, K, V = self.project(hidden_states)
    kv_seq_len = K.shape[-2]
    if past_key_value is not None:
        K = torch.cat([past_key_value[0], K], dim=2)
        V = torch.cat([past_key_value[1], V], dim=2)
        kv_seq_len += past_key_value[0].shape[-2]
    K = K[:, :, None, :, :].expand(bsz, self.n_kv_heads, self.n_groups, q_len, self.head_dim)
    V = V[:, :, None, :, :].expand(bsz, self.n_kv_heads, self.n_groups, kv_seq_len, self.head_dim)
    return sdpa(Q, K, V)
"""
    good = bad.replace("self.n_groups, q_len,", "self.n_groups, kv_seq_len,")
    fix_text = "No automatic fix: shape K and V with their own length (the KV length, or `-1`)."

    VALID = (
        Example(good),
        # Viewed with the query's length before the past is concatenated: the new keys have it.
        Example("""\
def forward(self, hidden_states, past_key_value=None):
    bsz, q_len, _ = hidden_states.size()
    key_states = self.k_proj(hidden_states).view(bsz, q_len, self.num_kv_heads, self.head_dim)
    kv_seq_len = q_len
    if past_key_value is not None:
        key_states = torch.cat([past_key_value[0], key_states.transpose(1, 2)], dim=2)
        kv_seq_len += past_key_value[0].shape[-2]
    return key_states
"""),
        # Rebound from the projection after the concatenation: the tensor is new, not extended.
        Example("""\
def forward(self, x, past=None):
    bsz, q_len, _ = x.shape
    k = self.k_proj(x)
    k_len = q_len
    if past is not None:
        k = torch.cat([past, k], dim=1)
        k_len = k.shape[1]
    k = self.k_proj(x)
    return k.view(bsz, q_len, -1, self.head_dim), k_len
"""),
        # The past appended after the new keys: no past in front, nothing this rule reads.
        Example("""\
def stack(self, k, past_k, q_len, kv_len):
    k = torch.cat([k, past_k], dim=2)
    return k.reshape(1, q_len, -1)
"""),
        # No KV length in the function: nothing tells the query's length from the keys'.
        Example("""\
def forward(self, hidden_states, past_key_value):
    bsz, q_len, _ = hidden_states.size()
    k = self.k_proj(hidden_states)
    k = torch.cat([past_key_value[0], k], dim=1)
    return k.view(bsz, q_len, self.heads, self.head_dim)
"""),
        # The query itself shaped with its length after K was extended.
        Example("""\
def forward(self, q, k, past_k, q_len, kv_len):
    k = torch.cat([past_k, k], dim=2)
    return q.view(1, q_len, -1), k.view(1, kv_len, -1)
"""),
    )
    INVALID = (
        Example(bad, line=9),
        Example("""\
def forward(self, hidden_states, past_key_value, cache_kwargs):
    bsz, tgt_len, _ = hidden_states.size()
    key_states = self.k_proj(hidden_states)
    value_states = self.v_proj(hidden_states)
    key_states, value_states = past_key_value.update(key_states, value_states, self.layer_idx, cache_kwargs)
    kv_len = key_states.shape[-2]
    value_states = value_states.reshape(bsz * self.num_kv_heads, tgt_len, self.head_dim)
    return key_states, value_states, kv_len
""", line=7),
    )

    def visit_Module(self, node: cst.Module) -> None:
        # Read on the standard library's tree, the one the ``ast`` screen reads: one code for
        # both paths.
        parsed = self.context.python_tree(node)
        if parsed is None:
            return
        tree, lines = parsed
        for fault in query_length_shapes(tree, self.extra_pairs):
            span = self.ast_span(fault.node, lines)
            self.findings.append(Finding(
                code=self.code, path=self.context.path, span=span, noqa_row=span.row,
                message=(f"`{fault.tensor}` is {_DONE[fault.method]} with the query's length `{fault.length}`, but the "
                         f"cache made it longer on line {self.context.row_of(fault.extended_line)}: it has the KV "
                         f"length (`{fault.kv_length}` here)"),
                suggestion=f"shape `{fault.tensor}` with its own length (`{fault.kv_length}`, or `-1`)",
            ))
