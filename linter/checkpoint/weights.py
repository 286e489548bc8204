"""Find the language model's attention projections among a checkpoint's tensor names.

Names follow the module tree: ``<prefix>.<layers|h|blocks|layer>.<i>.<attention
module>.<projection>.weight``. Towers that are not the language model (vision, audio, ...)
have their own configs and are left alone, as are cross-attention modules (``encoder_attn``),
whose K/V come from another stack. When more than one stack remains (an encoder-decoder),
nothing is checked: the config does not say which stack its head counts describe.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from linter.checkpoint.header import TensorInfo

PROJECTIONS = (
    "q_proj", "k_proj", "v_proj",  # Llama, Mistral, Qwen2, ...
    "qkv_proj", "W_pack", "query_key_value",  # fused Q|K|V: Phi-3, Baichuan, Falcon, GPT-NeoX, Bloom
    "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj",  # MLA: DeepSeek-V2/V3
)
FUSED = ("qkv_proj", "W_pack", "query_key_value")
_NAME = re.compile(
    r"^(?P<prefix>(?:.*\.)?)(?:layers|h|blocks|layer)\.(?P<layer>\d+)\."
    r"(?:self_attn|attention|self_attention|attn)\.(?P<proj>" + "|".join(PROJECTIONS) + r")\.weight$"
)
_OTHER_TOWER = re.compile(r"vision|visual|audio|image|speech|vit\b|encoder|perceiver|projector|talker|token2wav", re.IGNORECASE)
# Shapes of these dtypes are the logical [out, in]; packed 4-bit (U8) and other integer layouts
# are not, so they are not compared.
_LOGICAL_DTYPES = frozenset({"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "F8_E8M0", "I8"})


@dataclass(frozen=True)
class Projection:
    layer: int
    proj: str
    tensor: TensorInfo

    @property
    def rows(self) -> int:
        return self.tensor.shape[0]


def attention_projections(tensors: dict[str, TensorInfo]) -> list[Projection]:
    """The language model's projections, by layer; empty when there is no single such stack."""
    stacks: dict[str, list[Projection]] = defaultdict(list)
    for name, info in tensors.items():
        match = _NAME.match(name)
        if match is None or _OTHER_TOWER.search(match["prefix"]):
            continue
        if len(info.shape) != 2 or info.dtype not in _LOGICAL_DTYPES:
            continue
        stacks[match["prefix"]].append(Projection(int(match["layer"]), match["proj"], info))
    if len(stacks) != 1:
        return []
    (found,) = stacks.values()
    return sorted(found, key=lambda p: (p.layer, PROJECTIONS.index(p.proj)))


def shape_text(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"
