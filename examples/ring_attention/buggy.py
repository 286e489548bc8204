"""Chunked ring attention for one long prefill on an Ascend NPU.

The sequence is walked in K/V chunks (the order a ring of ranks would pass them round);
each step attends every query to one chunk and merges the partial outputs by their
log-sum-exp, so peak memory follows the chunk size instead of the sequence length.
"""

import torch
import torch_npu


def merge_partial(out, lse, step_out, step_lse):
    """Combine two softmax-normalised partial outputs by their log-sum-exp."""
    if out is None:
        return step_out, step_lse
    new_lse = torch.logaddexp(lse, step_lse)
    out = out * torch.exp(lse - new_lse).unsqueeze(-1) + step_out * torch.exp(step_lse - new_lse).unsqueeze(-1)
    return out, new_lse


def ring_prefill_attention(query, key, value, num_heads, chunk_size, scale):
    """query, key, value: [batch, num_heads, seq_len, head_dim] (BNSD)."""
    seq_len = key.shape[2]
    out, lse = None, None
    for start in range(0, seq_len, chunk_size):
        end = min(start + chunk_size, seq_len)
        k_chunk = key[:, :, start:end]
        step = torch_npu.npu_fusion_attention(
            query, k_chunk, value, num_heads, "BNSD",
            scale=scale, keep_prob=1.0, sparse_mode=0,
        )
        step_out, softmax_max, softmax_sum = step[0], step[1][..., 0], step[2][..., 0]
        out, lse = merge_partial(out, lse, step_out, softmax_max + torch.log(softmax_sum))
    return out
