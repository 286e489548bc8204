"""A token-to-KV pool in the shape of sglang's MHATokenToKVPool on Ascend.

Each layer owns one K buffer and one V buffer of [num_slots, num_kv_heads, head_dim]. The
scheduler hands the pool `out_cache_loc`, the slot of every new token; models with a sliding
window may pass `swa_loc` instead, the same tokens translated into the window pool's slots.
"""

import torch


class AscendTokenToKVPool:
    def __init__(self, size, num_kv_heads, head_dim, layer_num, dtype, device="npu"):
        self.size = size
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        # One extra slot: slot 0 is the padding target of dummy tokens.
        self.k_buffer = [
            torch.zeros((size + 1, num_kv_heads, head_dim), dtype=dtype, device=device)
            for _ in range(layer_num)
        ]
        self.v_buffer = [
            torch.zeros((size + 1, num_kv_heads, head_dim), dtype=dtype, device=device)
            for _ in range(layer_num)
        ]

    def get_kv_buffer(self, layer_id):
        return self.k_buffer[layer_id], self.v_buffer[layer_id]

    def set_kv_buffer(self, layer_id, loc, cache_k, cache_v, swa_loc=None):
        # K and V of a token live in the same slot of their buffers: translate once, use twice.
        slots = swa_loc if swa_loc is not None else loc
        self.k_buffer[layer_id][slots] = cache_k
        self.v_buffer[layer_id][slots] = cache_v

    def gather_kv(self, layer_id, req_to_token, seq_len):
        k = self.k_buffer[layer_id][req_to_token[:seq_len]]
        v = self.v_buffer[layer_id][req_to_token[:seq_len]]
        return k, v
