"""Read the attention geometry out of a config.json the way transformers and vLLM read it.

Real configs spell the same number many ways: GPT-2 and Bloom say ``n_head``, MPT ``n_heads``,
Falcon ``n_head_kv`` or ``num_kv_heads`` (and ``multi_query`` for one KV head), ChatGLM
``multi_query_group_num``, DBRX ``attn_config.kv_n_heads``, multimodal models nest the language
model under ``text_config``. The lists below follow transformers' ``attribute_map`` aliases and
``PreTrainedConfig.get_text_config(decoder=True)`` (configuration_utils.py), and vLLM's
``CONFIG_FIELD_ALIASES["total_num_kv_heads"]`` (vllm/transformers_utils/config.py) with its
Falcon rule (a ``multi_query`` Falcon without ``new_decoder_architecture`` has one KV head,
model_arch_config_convertor.py). Every value remembers the JSON key it came from, so a finding
can point at it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from linter.checkpoint.jsonpos import Path

# get_text_config(decoder=True) looks for these sub-configs, in this order.
TEXT_CONFIG_KEYS = ("decoder", "generator", "text_config")
HEADS_KEYS = ("num_attention_heads", "n_head", "n_heads", "num_heads", "attention_heads", "decoder_attention_heads")
# vLLM's order: the first present wins.
KV_HEADS_KEYS = ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num", "num_attention_groups")
HIDDEN_KEYS = ("hidden_size", "n_embd", "d_model", "dim", "emb_dim", "hidden_dim", "embed_dim")
# transformers' attribute_map sends head_dim to d_kv (T5 family), kv_channels, attention_head_dim;
# Reformer says attention_head_size, PLaMo hidden_size_per_head.
HEAD_DIM_KEYS = ("head_dim", "hidden_size_per_head", "d_kv", "kv_channels", "attention_head_dim", "attention_head_size")
LAYERS_KEYS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers", "decoder_layers")
MLA_KEYS = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
# Configs whose layers differ in attention geometry in ways the top-level keys do not say
# (sliding-window layers with their own heads, per-layer lists, KV shared across layers,
# NAS block lists). Their weights are not compared layer by layer; the config checks still run.
PER_LAYER_KEYS = frozenset({"block_configs", "kv_source_layers", "layer_configs"})
PER_LAYER_WORDS = ("per_layer", "per_stage", "swa_", "sliding", "global_", "local_", "full_attention_")


@dataclass(frozen=True)
class Value:
    value: Any
    key: Path  # where it sits in config.json, e.g. ("text_config", "num_key_value_heads")

    @property
    def name(self) -> str:
        return ".".join(str(k) for k in self.key)


@dataclass
class Geometry:
    """The attention numbers of the (text) model; None where the config does not say."""

    base: Path  # () or ("text_config",): where the language model's keys live
    section: dict = field(default_factory=dict, repr=False)  # the language model's keys
    heads: Value | None = None
    kv_heads: Value | None = None  # None: as many as the query heads (no GQA key)
    kv_forced_by: Value | None = None  # multi_query: one KV head whatever the count keys say
    kv_aliases: list[Value] = field(default_factory=list)  # every KV-count key present
    hidden: Value | None = None
    head_dim: Value | None = None  # an explicit head size (0 or null count as absent, as in vLLM)
    layers: Value | None = None
    mla: dict[str, Value] = field(default_factory=dict)
    per_layer_sizes: Value | None = None  # see _per_layer_sizes

    def for_layer(self, layer: int) -> Geometry:
        """This geometry with the layer's ``per_layer_config`` entry applied (Gemma 4 gives its
        full-attention layers another head_dim there)."""
        overrides = self.section.get("per_layer_config")
        entry = overrides.get(str(layer)) if isinstance(overrides, dict) else None
        if not isinstance(entry, dict) or not entry:
            return self
        where = {k: (*self.base, "per_layer_config", str(layer), k) for k in entry}
        return _resolve({**self.section, **entry}, self.base, where)

    @property
    def is_mla(self) -> bool:
        rank = self.mla.get("kv_lora_rank")
        return rank is not None and rank.value is not None

    def num_heads(self) -> int | None:
        return self.heads.value if self.heads is not None and _count(self.heads.value) else None

    def num_kv_heads(self) -> int | None:
        """KV heads as a serving framework would take them, or None if not a valid count."""
        if self.kv_forced_by is not None:
            return 1
        if self.kv_heads is None:
            return self.num_heads()
        return self.kv_heads.value if _count(self.kv_heads.value) else None

    def kv_description(self) -> str:
        """Where the KV-head count comes from, for messages."""
        if self.kv_forced_by is not None:
            return f"{self.kv_forced_by.name}=true"
        if self.kv_heads is None:
            return f"no KV-head key: as many as {self.heads.name if self.heads else 'the query heads'}"
        return f"from {self.kv_heads.name}"

    def head_size(self) -> tuple[int, str] | None:
        """(head size, how it was found) for non-MLA attention, as vLLM's get_head_size."""
        if self.head_dim is not None:
            return (self.head_dim.value, self.head_dim.name) if _count(self.head_dim.value) else None
        heads, hidden = self.num_heads(), self.hidden
        if heads and hidden is not None and _count(hidden.value) and hidden.value % heads == 0:
            return hidden.value // heads, f"{hidden.name} / {self.heads.name} = {hidden.value} / {heads}"
        return None


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _first(config: dict, keys: tuple[str, ...], where) -> Value | None:
    for key in keys:
        value = config.get(key)
        if value is not None and not isinstance(value, (dict, list)):
            return Value(value, where(key))
    return None


def text_config(config: dict) -> tuple[dict, Path]:
    """The language model's section: get_text_config(decoder=True), one level deep like it."""
    for key in TEXT_CONFIG_KEYS:
        section = config.get(key)
        if isinstance(section, dict):
            return section, (key,)
    return config, ()


def resolve(config: dict) -> Geometry:
    section, base = text_config(config)
    return _resolve(section, base, {})


def _resolve(section: dict, base: Path, overridden: dict[str, Path]) -> Geometry:
    def where(key: str) -> Path:
        return overridden.get(key, (*base, key))

    g = Geometry(base, section=section)
    g.heads = _first(section, HEADS_KEYS, where)
    g.hidden = _first(section, HIDDEN_KEYS, where)
    g.layers = _first(section, LAYERS_KEYS, where)
    g.kv_aliases = [Value(section[k], where(k)) for k in KV_HEADS_KEYS if section.get(k) is not None]
    attn = section.get("attn_config")
    if isinstance(attn, dict) and attn.get("kv_n_heads") is not None:  # DBRX, MPT
        g.kv_aliases.append(Value(attn["kv_n_heads"], (*base, "attn_config", "kv_n_heads")))
    g.kv_heads = g.kv_aliases[0] if g.kv_aliases else None
    if section.get("multi_query") is True and not section.get("new_decoder_architecture"):
        g.kv_forced_by = Value(True, where("multi_query"))
    for key in HEAD_DIM_KEYS:
        value = section.get(key)
        if value is not None and value != 0:
            g.head_dim = Value(value, where(key))
            break
    g.mla = {k: Value(section.get(k), where(k)) for k in MLA_KEYS if k in section}
    g.per_layer_sizes = _per_layer_sizes(section, base)
    return g


def _per_layer_sizes(section: dict, base: Path) -> Value | None:
    """A key that gives some layers other head counts or sizes than the top-level ones, in a
    form kvlint does not read per layer (``per_layer_config`` it does read)."""
    for key, value in section.items():
        lowered = key.lower()
        if key in PER_LAYER_KEYS or (
            ("head" in lowered or "kv" in lowered)
            and (isinstance(value, list) or any(word in lowered for word in PER_LAYER_WORDS))
        ):
            return Value(value, (*base, key))
    return None
