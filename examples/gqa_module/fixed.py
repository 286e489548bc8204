"""A grouped-query attention layer in the shape of vllm-ascend's Qwen2/Llama attention.

32 query heads share 8 K/V heads: K and V each carry num_key_value_heads heads, and the
NPU kernel is told both counts so it can map every query head to its K/V group.
"""

import torch_npu
from torch import nn


class Qwen2Attention(nn.Module):
    def __init__(self, hidden_size, num_heads, num_key_value_heads, rope_theta=1000000.0):
        super().__init__()
        self.num_heads = num_heads
        self.num_key_value_heads = num_key_value_heads
        self.head_dim = hidden_size // num_heads
        self.scale = self.head_dim ** -0.5
        self.rope_theta = rope_theta
        self.q_proj = nn.Linear(hidden_size, num_heads * self.head_dim, bias=True)
        self.k_proj = nn.Linear(hidden_size, num_key_value_heads * self.head_dim, bias=True)
        self.v_proj = nn.Linear(hidden_size, num_key_value_heads * self.head_dim, bias=True)
        self.o_proj = nn.Linear(num_heads * self.head_dim, hidden_size, bias=False)

    def forward(self, hidden_states, cos, sin):
        bsz, q_len, _ = hidden_states.shape
        query_states = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim)
        key_states = self.k_proj(hidden_states).view(bsz, q_len, self.num_key_value_heads, self.head_dim)
        value_states = self.v_proj(hidden_states).view(bsz, q_len, self.num_key_value_heads, self.head_dim)
        query_states, key_states = torch_npu.npu_apply_rotary_pos_emb(query_states, key_states, cos, sin)
        attn_output = torch_npu.npu_prompt_flash_attention(
            query_states, key_states, value_states,
            num_heads=self.num_heads,
            num_key_value_heads=self.num_key_value_heads,
            scale_value=self.scale,
            input_layout="BSND",
        )
        return self.o_proj(attn_output.reshape(bsz, q_len, -1))
