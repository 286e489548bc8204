"""Model families whose configurations give K and V a head count of their own.

Attention code written for one of these families (``LlamaAttention``, ``GaudiFalconAttention``,
``llama_forward``) runs on checkpoints whose K/V head count is not the query's: Llama 2 70B and
every Llama 3 have 8 KV heads, Mistral 8, Qwen2 72B 8, Falcon 40B 8, Aquila2 34B 8. Code that
shapes K or V with the query head count and reads no KV head count is right only on the
family's oldest or smallest checkpoints, and the family's name is the evidence that a KV head
count exists, even where the file never spells it (the count lives in the configuration the
code was written against).

Text only: the text condition and the ``ast`` screen ask the same table.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

# The family's name part, and the configuration attribute that holds its KV head count.
_KV_HEADS_BY_FAMILY = {
    "llama": "num_key_value_heads",
    "mistral": "num_key_value_heads",
    "mixtral": "num_key_value_heads",
    "qwen2": "num_key_value_heads",
    "qwen3": "num_key_value_heads",
    "gemma": "num_key_value_heads",
    "gemma2": "num_key_value_heads",
    "gemma3": "num_key_value_heads",
    "starcoder2": "num_key_value_heads",
    "phi3": "num_key_value_heads",
    "internlm2": "num_key_value_heads",
    "falcon": "num_kv_heads",
    "chatglm": "multi_query_group_num",
    "aquila": "num_key_value_heads",
}
# Parts of the text name: a family's name also names its substrings (``llama`` in ``Mllama``)
# only as a whole part.
FAMILY_PARTS = frozenset(_KV_HEADS_BY_FAMILY)

# The parts of a multimodal model that are no language model: a vision or audio tower of a
# Qwen2-VL or a Gemma 3 has one head count for Q, K and V.
_TOWERS = frozenset({"vision", "visual", "vit", "image", "patch", "audio", "speech", "siglip", "clip", "whisper",
                     "encoder", "vae", "unet"})

_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+[0-9]*|[A-Z]+[0-9]*|[0-9]+")


@lru_cache(maxsize=1 << 12)
def _parts(name: str) -> tuple[str, ...]:
    """``FusedLlamaAttention`` -> (fused, llama, attention); ``qwen2_forward`` -> (qwen2, forward)."""
    return tuple(p.lower() for word in name.split("_") for p in _CAMEL.findall(word))


def family_kv_heads(names: Iterable[str]) -> tuple[str, str] | None:
    """(family, its KV head count's name) for the names of a definition (its own, its class's,
    the class's bases) when one names a family whose configuration has a KV head count, and
    none names a vision or audio tower; None otherwise."""
    found = None
    for name in names:
        parts = _parts(name.rsplit(".", 1)[-1])
        if _TOWERS.intersection(parts):
            return None
        if found is None:
            family = next((p for p in parts if p in _KV_HEADS_BY_FAMILY), None)
            if family is not None:
                found = (family, _KV_HEADS_BY_FAMILY[family])
    return found


def family_named(name: str) -> bool:
    """Does ``name`` name a family of the table (as a whole part)?"""
    return any(p in _KV_HEADS_BY_FAMILY for p in _parts(name))
