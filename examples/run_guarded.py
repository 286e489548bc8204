"""The runtime guard stopping the truncated TND call of examples/tnd_truncated, on CPU.

No NPU here, so the kernel is a small pure-torch varlen attention with the TND contract of
`npu_fusion_attention`; `runtime_guard.guard(...)` gives it the same checks the guard applies
to the torch_npu op. Run: python examples/run_guarded.py (raise mode), or
KVGUARD=warn python examples/run_guarded.py to see warn mode let the call through.
"""

import warnings

import torch

import runtime_guard
from runtime_guard import KVConsistencyError, KVConsistencyWarning


@runtime_guard.guard(layout="TND", query="q", key="k", value="v",
                     seq_lens_q="cu_seqlens_q", seq_lens_kv="cu_seqlens_kv", heads="num_heads")
def varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_kv, num_heads, scale):
    """q [T, N, D], k/v [T, N_kv, D]; cu_seqlens_* are each request's cumulative end token."""
    group = num_heads // k.shape[1]
    out = torch.empty_like(q)
    q_start = kv_start = 0
    for q_end, kv_end in zip(cu_seqlens_q, cu_seqlens_kv):
        qs = q[q_start:q_end].transpose(0, 1)
        ks = k[kv_start:kv_end].repeat_interleave(group, dim=1).transpose(0, 1)
        vs = v[kv_start:kv_end].repeat_interleave(group, dim=1).transpose(0, 1)
        weights = torch.softmax(qs @ ks.transpose(1, 2) * scale, dim=-1)
        out[q_start:q_end] = (weights @ vs).transpose(0, 1)
        q_start, kv_start = q_end, kv_end
    return out


def main():
    # The mode KVGUARD asked for (the start-up hook has installed it), else raise.
    runtime_guard.install(runtime_guard.mode() or "raise")
    torch.manual_seed(0)
    num_heads, num_kv_heads, head_dim = 4, 2, 16
    cu_seqlens = [5, 12]  # two requests of 5 and 7 tokens, packed
    num_tokens, padded = cu_seqlens[-1], 16  # a graph batch padded to 16 tokens
    q = torch.randn(padded, num_heads, head_dim)
    k = torch.randn(padded, num_kv_heads, head_dim)
    v = torch.randn(padded, num_kv_heads, head_dim)
    scale = head_dim ** -0.5

    # The bug of examples/tnd_truncated/buggy.py: padding trimmed from Q and K, not from V.
    q = q[:num_tokens]
    k = k[:num_tokens]
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always", KVConsistencyWarning)
        try:
            varlen_attention(q, k, v, cu_seqlens, cu_seqlens, num_heads, scale)
        except KVConsistencyError as error:  # raise mode
            print(f"caught KVConsistencyError:\n{error}\n")
        else:
            found = [w for w in warned if issubclass(w.category, KVConsistencyWarning)]
            if not found:
                raise SystemExit("the guard let a K-truncated call through")
            print(f"KVGUARD=warn: the call ran, and the guard warned:\n{found[0].message}\n")

    v = v[:num_tokens]
    out = varlen_attention(q, k, v, cu_seqlens, cu_seqlens, num_heads, scale)
    print(f"fixed call ran: out {tuple(out.shape)}")


if __name__ == "__main__":
    main()
