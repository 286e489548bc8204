"""KV208 value-head-dim-not-passed: a pool that accepts a value head dim, built without one
while the caller has it."""

from __future__ import annotations

import libcst as cst

from linter.model.functions import FunctionModel, function_model, params_of
from linter.model.hierarchy import imported_classes, module_classes
from linter.model.twins import is_value_head_dim
from linter.model.names import Role, name_role
from linter.model.pairs import source_of
from linter.rules.base import Example, Rule
from linter.plan.triggers import AnyCase, Trigger


class ValueHeadDimNotPassed(Rule):
    code = "KV208"
    # A value head-dim name (with "dim" or "size" in it, any case) and a keyword argument.
    trigger = Trigger(AnyCase("dim", "size"), ("=",))
    name = "value-head-dim-not-passed"
    summary = "Cache pool built with the key head dim only, though it accepts a value head dim the caller has"
    what = (
        "Finds a call of a class whose `__init__` takes an optional value head dim (`v_head_dim`, "
        "`head_v_dim`, `value_head_dim` with a default) where the call passes a head dim "
        "(`head_dim=...`, `qk_head_dim=...`) but not the value head dim, while the calling "
        "function itself reads a value head dim (`self.model_config.v_head_dim`). The class is "
        "looked up in the module, in a sibling module it imports relatively, or in a module of "
        "its own package it imports by absolute name."
    )
    why = (
        "A pool that is not told the value head dim allocates the value buffers with the key's: "
        "right for models with Dk == Dv, wrong for MLA-style and MiMo-style models where the "
        "value head is narrower or wider. The caller has the right number at hand and drops it; "
        "the value cache is then mis-sized or silently reinterpreted."
    )
    bad = """\
class TokenToKVPool:
    def __init__(self, size, head_num, head_dim, v_head_dim=None):
        self.v_head_dim = v_head_dim if v_head_dim is not None else head_dim


class ModelRunner:
    def init_memory_pool(self, size):
        if self.model_config.v_head_dim != self.model_config.head_dim:
            logger.info("value head dim %d", self.model_config.v_head_dim)
        self.pool = TokenToKVPool(size, self.num_kv_heads, head_dim=self.model_config.head_dim)
"""
    good = """\
class TokenToKVPool:
    def __init__(self, size, head_num, head_dim, v_head_dim=None):
        self.v_head_dim = v_head_dim if v_head_dim is not None else head_dim


class ModelRunner:
    def init_memory_pool(self, size):
        self.pool = TokenToKVPool(
            size, self.num_kv_heads, head_dim=self.model_config.head_dim,
            v_head_dim=self.model_config.v_head_dim,
        )
"""
    fix_text = (
        "No automatic fix: pass the value head dim the caller has (`v_head_dim=...`) to the "
        "pool's constructor."
    )

    VALID = (
        Example(good),
        # Passed positionally.
        Example(bad.replace("head_dim=self.model_config.head_dim)",
                            "self.model_config.head_dim, self.model_config.v_head_dim)")),
        # The caller knows no value head dim: Dk == Dv is all it builds.
        Example("class TokenToKVPool:\n    def __init__(self, size, head_dim, v_head_dim=None):\n        pass\n\n\n"
                "def build(size, head_dim):\n    return TokenToKVPool(size, head_dim=head_dim)\n"),
        # Keyword arguments forwarded wholesale may carry it.
        Example("class TokenToKVPool:\n    def __init__(self, size, head_dim, v_head_dim=None):\n        pass\n\n\n"
                "def build(size, head_dim, v_head_dim, **kwargs):\n    return TokenToKVPool(size, head_dim=head_dim, **kwargs)\n"),
        # The constructor's value head dim is required, not optional: the call cannot omit it
        # silently (Python raises).
        Example("class MLAPool:\n    def __init__(self, size, qk_head_dim, v_head_dim):\n        pass\n\n\n"
                "def build(size, cfg):\n    print(cfg.v_head_dim)\n    return MLAPool(size, qk_head_dim=cfg.qk_head_dim)\n"),
        # Arguments unpacked from a sequence may hold the value head dim in its place.
        Example("""\
class PagedKVPool:
    def __init__(self, num_blocks, block_size, num_kv_heads, head_dim, v_head_dim=None):
        self.v_head_dim = v_head_dim or head_dim


class CacheEngine:
    def allocate(self, num_blocks):
        shape = (num_blocks, self.block_size, self.num_kv_heads)
        if self.model_config.v_head_dim != self.model_config.head_dim:
            shape = shape + (self.model_config.head_dim, self.model_config.v_head_dim)
            return PagedKVPool(*shape)
        return PagedKVPool(*shape, head_dim=self.model_config.head_dim)
"""),
        # A head dim passed by position: the rule reads only a call that names the key's.
        Example("""\
class PagedKVPool:
    def __init__(self, num_blocks, block_size, num_kv_heads, head_dim, dtype, v_head_dim=None):
        self.v_head_dim = v_head_dim or head_dim


class CacheEngine:
    def allocate_indexer(self, num_blocks):
        logger.debug("main cache value head dim %d", self.model_config.v_head_dim)
        # The indexer caches keys only; its value buffers are never read.
        return PagedKVPool(num_blocks, self.block_size, 1, self.index_head_dim, dtype=torch.uint8)
"""),
        # The value head dim in its place among the positional arguments, the rope dim by name.
        Example("""\
class MLATokenToKVPool:
    def __init__(self, size, kv_lora_rank, v_head_dim=None, qk_rope_head_dim=64):
        self.v_head_dim = v_head_dim or kv_lora_rank


class ModelRunner:
    def init_memory_pool(self, size):
        cfg = self.model_config
        return MLATokenToKVPool(size, cfg.kv_lora_rank, cfg.v_head_dim, qk_rope_head_dim=cfg.qk_rope_head_dim)
"""),
        # A pool from a package outside the linted tree: its parameters are unknown.
        Example("""\
from vllm.v1.kv_cache import PagedKVPool


class Runner:
    def build_cache(self, num_blocks):
        assert self.model_config.v_head_dim == self.model_config.head_dim
        return PagedKVPool(num_blocks, self.block_size, head_dim=self.model_config.head_dim)
"""),
        # A module-level spec: no function reads a value head dim beside it.
        Example("""\
class CacheSpec:
    def __init__(self, block_size, head_dim, v_head_dim=None):
        self.v_head_dim = v_head_dim or head_dim


DEFAULT_SPEC = CacheSpec(16, head_dim=128)
"""),
    )
    INVALID = (
        Example(bad, line=10),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        self._functions: list[cst.FunctionDef] = []
        self._candidates: list[tuple[cst.Call, str, FunctionModel, str]] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._functions.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._functions.pop()

    def visit_Call(self, node: cst.Call) -> None:
        if not self._functions or not isinstance(node.func, cst.Name) or any(a.star for a in node.args):
            return
        if not any(a.keyword is not None and name_role(a.keyword.value) is Role.HEAD_DIM for a in node.args):
            return
        model = function_model(self._functions[-1])
        known = next((n for n in model.first_read if is_value_head_dim(n)), None)
        if known is not None:
            self._candidates.append((node, node.func.value, model, known))

    def leave_Module(self, original_node: cst.Module) -> None:
        if not self._candidates:
            return
        classes = module_classes(original_node)
        outside = {name for _, name, _, _ in self._candidates if name not in classes}
        if outside:
            classes = {**imported_classes(original_node, self.context.path, outside, absolute=True), **classes}
        for call, name, _, known in self._candidates:
            target = classes.get(name)
            init = None if target is None else target.methods.get("__init__")
            if init is None:
                continue
            params = [p for p in params_of(init.params)][1:]
            optional = [
                (i, p.name.value) for i, p in enumerate(params)
                if p.default is not None and is_value_head_dim(p.name.value)
            ]
            if len(optional) != 1:
                continue
            index, param = optional[0]
            keywords = {a.keyword.value for a in call.args if a.keyword is not None}
            positional = sum(1 for a in call.args if a.keyword is None)
            if param in keywords or positional > index:
                continue
            passed = next(a for a in call.args if a.keyword is not None and name_role(a.keyword.value) is Role.HEAD_DIM)
            self.report(
                call,
                f"`{name}` accepts `{param}` but this call passes only "
                f"`{passed.keyword.value}={source_of(passed.value)}` while the function reads `{known}`: "
                "the value buffers get the key's head dim",
                suggestion=f"pass `{param}=` the value head dim (`{known}` here) to `{name}`",
            )
