"""Packed (TND) prefill attention in the shape of an Ascend attention backend.

All requests of a batch are packed along one token axis: q, k and v are [T, N, D] and
`actual_seq_qlen` / `actual_seq_kvlen` hold the cumulative end of each request. Graph-mode
batches are padded to a captured size, so the backend first trims the padding tokens away.
"""

import torch_npu


def forward_prefill(query, key, value, metadata, num_heads, num_kv_heads, scale):
    num_tokens = metadata.num_actual_tokens
    query = query[:num_tokens]
    key = key[:num_tokens]
    value = value[:num_tokens]
    cu_seqlens = metadata.query_start_loc[1:].tolist()
    out = torch_npu.npu_fusion_attention(
        query, key, value, num_heads,
        input_layout="TND",
        scale=scale,
        sparse_mode=3,
        atten_mask=metadata.attn_mask,
        actual_seq_qlen=cu_seqlens,
        actual_seq_kvlen=cu_seqlens,
    )[0]
    return out.view(num_tokens, -1)
