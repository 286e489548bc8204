"""Dispatcher schemas of the K/V ops other packages register, as those packages declare them.

The guard wraps these when the package has registered them (tests register them in the double and
in the real-package tier, as the package's library would on import). No torch import.

torch.ops._C_ascend.* (vllm-ascend): read from vllm_ascend/vllm_ascend_C.cpython-311-x86_64-linux-gnu.so
of the vllm-ascend 0.23.0 wheel (whitespace collapsed); the same definitions are in
github.com/vllm-project/vllm-ascend csrc/torch_binding.cpp at 182b75ea84ff13ece27b57391331ef8935410aea
(npu_sparse_flash_attention line 2091, npu_kv_quant_sparse_flash_attention 2104,
npu_lightning_indexer 2056, npu_lightning_indexer_quant 2524).

torch.ops.custom.* (the custom_ops package sglang's NPU backend loads for its sparse/DSA paths,
built from cann-recipes-infer's torch_ops_extension): from
ops/ascendc/torch_ops_extension/custom_ops/csrc/ops_def_registration.cpp of cann-recipes-infer,
GitHub mirror repo-mirror-test/cann-recipes-infer at 0d34a7a9a99901b461792c415b234834f51ab3f1.
"""

C_ASCEND_SCHEMAS = (
    "_C_ascend::npu_sparse_flash_attention(Tensor query, Tensor key, Tensor value, Tensor sparse_indices, float scale_value, *, Tensor? block_table=None, Tensor? actual_seq_lengths_query=None, Tensor? actual_seq_lengths_kv=None, Tensor? query_rope=None, Tensor? key_rope=None, int sparse_block_size=1, str layout_query='BSND', str layout_kv='BSND', int sparse_mode=3, int pre_tokens=9223372036854775807, int next_tokens=9223372036854775807, int attention_mode=2, bool return_softmax_lse=False) -> (Tensor attention_out, Tensor softmax_max, Tensor softmax_sum)",
    "_C_ascend::npu_kv_quant_sparse_flash_attention(Tensor query, Tensor key, Tensor value, Tensor sparse_indices, float scale_value, *, int key_quant_mode=1, int value_quant_mode=1, Tensor? key_dequant_scale=None, Tensor? value_dequant_scale=None, Tensor? block_table=None, Tensor? actual_seq_lengths_query=None, Tensor? actual_seq_lengths_kv=None, int sparse_block_size=1, str layout_query='BSND', str layout_kv='BSND', int sparse_mode=3, int pre_tokens=9223372036854775807, int next_tokens=9223372036854775807, int attention_mode=2, int quant_scale_repo_mode=1, int tile_size=128, int rope_head_dim=64, bool return_softmax_lse=False) -> (Tensor attention_out, Tensor softmax_max, Tensor softmax_sum)",
    '_C_ascend::npu_lightning_indexer(Tensor query, Tensor key, Tensor weights, *, Tensor? actual_seq_lengths_query=None, Tensor? actual_seq_lengths_key=None, Tensor? block_table=None, str layout_query="BSND", str layout_key="BSND", int sparse_count=2048, int sparse_mode=3, int pre_tokens=9223372036854775807, int next_tokens=9223372036854775807, bool return_value=False) -> (Tensor sparse_indices, Tensor sparse_values)',
    "_C_ascend::npu_lightning_indexer_quant(Tensor query, Tensor key, Tensor weights, Tensor query_dequant_scale, Tensor key_dequant_scale, *, Tensor? actual_seq_lengths_query=None, Tensor? actual_seq_lengths_key=None, Tensor? block_table=None, int query_quant_mode=0, int key_quant_mode=0, str layout_query='BSND', str layout_key='BSND', int sparse_count=2048, int sparse_mode=3) -> Tensor",
)

CUSTOM_SCHEMAS = (
    "custom::npu_sparse_flash_attention(Tensor query, Tensor key, Tensor value, Tensor sparse_indices, float scale_value, int sparse_block_size, *, Tensor? block_table=None, Tensor? actual_seq_lengths_query=None, Tensor? actual_seq_lengths_kv=None, Tensor? query_rope=None, Tensor? key_rope=None, str layout_query='BSND', str layout_kv='BSND', int sparse_mode=3) -> Tensor",
    "custom::npu_sparse_flash_attention_antiquant(Tensor query, Tensor key, Tensor value, Tensor sparse_indices, float scale_value, int sparse_block_size, int key_quant_mode, int value_quant_mode, *, Tensor? key_dequant_scale=None, Tensor? value_dequant_scale=None, Tensor? block_table=None, Tensor? actual_seq_lengths_query=None, Tensor? actual_seq_lengths_kv=None, str layout_query='BSND', str layout_kv='BSND', int sparse_mode=3, int attention_mode=0, int quant_scale_repo_mode=0, int tile_size=0, int rope_head_dim=0) -> Tensor",
    "custom::npu_lightning_indexer(Tensor query, Tensor key, Tensor weights, *, Tensor? actual_seq_lengths_query=None, Tensor? actual_seq_lengths_key=None, Tensor? block_table=None, str layout_query='BSND', str layout_key='BSND', int sparse_count=2048, int sparse_mode=3) -> Tensor",
    "custom::npu_lightning_indexer_quant(Tensor query, Tensor key, Tensor weights, Tensor query_dequant_scale, Tensor key_dequant_scale, *, Tensor? actual_seq_lengths_query=None, Tensor? actual_seq_lengths_key=None, Tensor? block_table=None, int query_quant_mode=0, int key_quant_mode=0, str layout_query='BSND', str layout_key='BSND', int sparse_count=2048, int sparse_mode=3) -> Tensor",
)

SCHEMAS = C_ASCEND_SCHEMAS + CUSTOM_SCHEMAS
