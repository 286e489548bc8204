"""Tiny real checkpoints, written by transformers' own model classes and save_pretrained.

Each entry is (model_type, config overrides); sizes are small so the whole set saves in
seconds, but the head geometry keeps what makes each family different (GQA, multi-query,
fused Q|K|V, explicit head_dim, MLA, a nested text_config).
"""

from __future__ import annotations

import warnings

SMALL = {"vocab_size": 128, "num_hidden_layers": 2, "intermediate_size": 64}
GQA = {**SMALL, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2}

MODELS: dict[str, tuple[str, dict]] = {
    "llama": ("llama", GQA),
    "mistral": ("mistral", GQA),
    "qwen2": ("qwen2", GQA),
    # head_dim 32 while hidden_size / heads = 16: the geometry vLLM PR #2622 got wrong
    "qwen3": ("qwen3", {**GQA, "head_dim": 32}),
    "phi3": ("phi3", GQA),  # fused qkv_proj
    "falcon_mq": ("falcon", {"vocab_size": 128, "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                             "multi_query": True, "new_decoder_architecture": False}),
    "falcon_new": ("falcon", {"vocab_size": 128, "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                              "num_kv_heads": 2, "new_decoder_architecture": True}),
    "gpt_neox": ("gpt_neox", {"vocab_size": 128, "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                              "intermediate_size": 64}),
    "deepseek_v3": ("deepseek_v3", {**SMALL, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 4,
                                    "kv_lora_rank": 16, "q_lora_rank": 24, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8,
                                    "v_head_dim": 8, "n_routed_experts": 4, "num_experts_per_tok": 2, "n_group": 1,
                                    "topk_group": 1, "moe_intermediate_size": 16, "first_k_dense_replace": 1}),
    # Gemma 4: per_layer_config gives the full-attention layer (5) head_dim 512
    "gemma4": ("gemma4_text", {**GQA, "num_hidden_layers": 6, "head_dim": 16, "hidden_size_per_layer_input": 16,
                               "vocab_size_per_layer_input": 128}),
    "deepseek_v2": ("deepseek_v2", {**SMALL, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 4,
                                    "kv_lora_rank": 16, "q_lora_rank": None, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8,
                                    "v_head_dim": 8, "n_routed_experts": 4, "num_experts_per_tok": 2, "n_group": 1,
                                    "topk_group": 1, "moe_intermediate_size": 16, "first_k_dense_replace": 1}),
}


def build(model_type: str, overrides: dict, directory: str, **save) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import transformers
        from transformers import AutoConfig, AutoModelForCausalLM

        transformers.logging.set_verbosity_error()
        config = AutoConfig.for_model(model_type, **{"pad_token_id": None, **overrides})
        AutoModelForCausalLM.from_config(config).save_pretrained(directory, **save)


def build_llava(directory: str) -> None:
    """A multimodal model: the language model's heads sit under text_config, and the vision
    tower has q/k/v projections of its own with other head counts."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from transformers import AutoConfig, LlavaForConditionalGeneration

        text = AutoConfig.for_model("llama", **GQA)
        vision = AutoConfig.for_model("clip_vision_model", hidden_size=48, intermediate_size=48, num_hidden_layers=2,
                                      num_attention_heads=3, image_size=32, patch_size=16, projection_dim=48)
        config = AutoConfig.for_model("llava", text_config=text.to_dict(), vision_config=vision.to_dict())
        LlavaForConditionalGeneration(config).save_pretrained(directory)


def build_v_with_query_heads(directory: str) -> None:
    """The Nemotron diarization bug, reproduced on Llama: a subclass redeclares v_proj with the
    query's head count, and save_pretrained writes that shape next to a GQA config."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch import nn
        from transformers import AutoConfig, LlamaForCausalLM

        config = AutoConfig.for_model("llama", **GQA)
        model = LlamaForCausalLM(config)
        for layer in model.model.layers:
            attn = layer.self_attn
            attn.v_proj = nn.Linear(config.hidden_size, config.num_attention_heads * attn.head_dim, bias=False)
        model.save_pretrained(directory)
