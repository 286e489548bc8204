"""KV211: a per-rank KV head count that a tensor-parallel group wider than the KV heads makes 0."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from linter.model.names import Role, name_role
from linter.model.pairs import callee_tail, dotted_name, source_of
from linter.model.shards import CHECKED_DIVISIONS, group_size_call, kv_head_count, shard_count
from linter.model.walk import children
from linter.plan.triggers import AnyCase, Trigger
from linter.rules.base import Example, Rule


def _tail(node: cst.BaseExpression) -> str | None:
    """The name a size is read by: ``config.num_key_value_heads``, ``cfg["num_key_value_heads"]``,
    ``getattr(cfg, "n_kv_heads")``, ``cfg.get("n_kv_heads", 1)``, ``get_tp_world_size()``."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    if isinstance(node, cst.Subscript):
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            key = node.slice[0].slice.value
            if isinstance(key, (cst.SimpleString, cst.ConcatenatedString)):
                return key.evaluated_value if isinstance(key.evaluated_value, str) else None
        return None
    if isinstance(node, cst.Call):
        keys = [a.value.evaluated_value for a in node.args
                if a.keyword is None and a.star == "" and isinstance(a.value, (cst.SimpleString, cst.ConcatenatedString))]
        keys = [k for k in keys if isinstance(k, str)]
        if keys:
            return keys[0]
        return _tail(node.func)
    return None


def _shards(node: cst.BaseExpression) -> bool:
    tail = _tail(node)
    if tail is not None and shard_count(tail):
        return True
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return group_size_call(node.func.attr.value, _tail(node.func.value), bool(node.args))
    return False


def _kv_heads(node: cst.BaseExpression) -> bool:
    tail = _tail(node)
    return tail is not None and kv_head_count(tail)


def _reads(node: cst.CSTNode) -> tuple[bool, bool]:
    """Does ``node`` read a KV head count, and a shard count?"""
    kv = shards = False
    stack = [node]
    while stack and not (kv and shards):
        current = stack.pop()
        if isinstance(current, cst.BaseExpression):
            kv = kv or _kv_heads(current)
            shards = shards or _shards(current)
        stack.extend(children(current))
    return kv, shards


def _own_nodes(function: cst.FunctionDef) -> Iterator[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]]:
    """Each node of ``function``'s body with its ancestors (innermost last), nested definitions
    left to their own visit."""
    stack: list[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]] = [(function.body, ())]
    while stack:
        node, above = stack.pop()
        yield node, above
        inner = above + (node,)
        stack.extend((child, inner) for child in children(node)
                     if not isinstance(child, (cst.FunctionDef, cst.ClassDef)))


def _class_nodes(node: cst.ClassDef) -> Iterator[tuple[cst.CSTNode, None]]:
    """Every node of a class body, its methods' bodies included, nested classes left out."""
    stack: list[cst.CSTNode] = [node.body]
    while stack:
        current = stack.pop()
        yield current, None
        stack.extend(child for child in children(current) if not isinstance(child, cst.ClassDef))


def _relates(node: cst.CSTNode) -> bool:
    """A test or check of the KV head count against the shard count: ``kv % tp == 0``,
    ``tp <= kv``, ``kv // tp >= 1``, ``divide(kv, tp)``. Code that holds one knows the
    quotient's range and decides what a rank with fewer heads than shards does."""
    if isinstance(node, cst.Comparison) or (
        isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo)
    ) or (isinstance(node, cst.Call) and callee_tail(node) in CHECKED_DIVISIONS):
        return all(_reads(node))
    return False


def _kept_positive(above: tuple[cst.CSTNode, ...], division: cst.CSTNode) -> bool:
    """Does an enclosing expression or branch keep the quotient >= 1: a conditional expression
    (``kv // tp if kv >= tp else 1``), a comparison, or an ``if`` whose test reads either count?
    (``max(1, ...)`` is a call around the quotient, which the rule leaves to the callee.)"""
    for node in above:
        if isinstance(node, (cst.IfExp, cst.Comparison)):
            return True
        if isinstance(node, (cst.If, cst.While)) and any(_reads(node.test)):
            return True
    return False


def _self_target(statement: cst.CSTNode) -> str | None:
    """``self.num_kv_heads`` of ``self.num_kv_heads = ...``: an attribute of the layer or model,
    which sizes its caches and views (a local quotient may serve a one-off computation)."""
    if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
        target = statement.targets[0].target
    elif isinstance(statement, cst.AnnAssign) and statement.value is not None:
        target = statement.target
    else:
        return None
    name = dotted_name(target)
    return name if name is not None and name.startswith("self.") else None


def _assigned_query_count(statement: cst.CSTNode) -> str | None:
    """``self.total_num_kv_heads = config.num_attention_heads``: a KV head count bound to the
    query head count (full multi-head attention), which has as many heads as the query's."""
    if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
        target, value = statement.targets[0].target, statement.value
    elif isinstance(statement, cst.AnnAssign) and statement.value is not None:
        target, value = statement.target, statement.value
    else:
        return None
    tail = _tail(value)
    if tail is None or name_role(tail) is not Role.Q_HEADS:
        return None
    return dotted_name(target)


def _parameters(function: cst.FunctionDef) -> set[str]:
    params = function.params
    found = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            found.add(star.name.value)
    return found


def _stored(statement: cst.CSTNode) -> Iterator[str]:
    """The plain names an assignment binds (``a``, ``a, b = ...``, ``a += ...``)."""
    if isinstance(statement, cst.Assign):
        targets = [t.target for t in statement.targets]
    elif isinstance(statement, (cst.AnnAssign, cst.AugAssign)):
        targets = [statement.target]
    else:
        return
    while targets:
        target = targets.pop()
        if isinstance(target, cst.Name):
            yield target.value
        elif isinstance(target, (cst.Tuple, cst.List)):
            targets.extend(e.value for e in target.elements)
        elif isinstance(target, cst.StarredElement):
            targets.append(target.value)


class KVHeadsShardedToZero(Rule):
    code = "KV211"
    # A floor division, and a KV head count (its name has "head" or "group" in it).
    trigger = Trigger(("//",), AnyCase("head", "group"))
    name = "kv-heads-sharded-to-zero"
    summary = "Per-rank KV head count divided by the tensor-parallel size with nothing that keeps it >= 1"
    what = (
        "Finds a layer or model attribute set to the KV head count floor-divided by the "
        "tensor-parallel size (`self.num_kv_heads = config.num_key_value_heads // tp_size`, "
        "`self.tp_k_head_num_ = cfg[\"num_key_value_heads\"] // self.tp_world_size_`, "
        "`... // self.process_group.size()`) where nothing in the function keeps the quotient at "
        "least 1: no `max(1, ...)`, no conditional or `if` on either count around it, and no "
        "check anywhere in the function or its class that relates the two (`kv % tp == 0` in a "
        "`_verify_params` method, `tp <= kv`, `divide(kv, tp)`). A quotient passed to a call "
        "(`MemoryManager(head_num=kv // tp)`) is the callee's to check. A KV head count the function takes as a parameter and never rebinds is "
        "the caller's to check and is not reported, nor is one bound to the query head count "
        "(full multi-head attention). A KV head count is a name such as `num_key_value_heads`, "
        "`total_num_kv_heads`, `num_query_groups`; a shard count is `tp_size`, `world_size`, "
        "`tensor_parallel_size`, `get_tensor_model_parallel_world_size()` or a process group's "
        "`.size()`."
    )
    why = (
        "Multi-query models have one KV head and grouped-query models a few (2, 4, 8). With more "
        "tensor-parallel ranks than KV heads the quotient is 0: the rank allocates a KV cache of "
        "no heads, and its K/V views or attention kernel fail or attend to nothing. The layers "
        "that project K and V replicate the KV heads in that case (each rank keeps one), so the "
        "per-rank count must be at least 1."
    )
    bad = """\
class FlashCausalLM:
    def __init__(self, config, process_group):
        self.process_group = process_group
        self.num_kv_heads = config.num_key_value_heads // self.process_group.size()
        self.head_size = config.hidden_size // config.num_attention_heads
"""
    good = """\
class FlashCausalLM:
    def __init__(self, config, process_group):
        self.process_group = process_group
        # With more ranks than KV heads, each rank keeps one replicated head.
        self.num_kv_heads = max(1, config.num_key_value_heads // self.process_group.size())
        self.head_size = config.hidden_size // config.num_attention_heads
"""
    fix_text = (
        "No automatic fix: keep at least one KV head per rank (`max(1, kv // tp)`) and replicate "
        "the KV heads when the TP size exceeds them, or assert that the KV head count is a "
        "multiple of the TP size."
    )

    VALID = (
        Example(good),
        # Replicated when the group is wider than the KV heads: the branch reads the counts.
        Example("""\
class Attention(nn.Module):
    def __init__(self, config, tp_size):
        super().__init__()
        self.total_num_kv_heads = config.num_key_value_heads
        if self.total_num_kv_heads >= tp_size:
            self.num_kv_heads = self.total_num_kv_heads // tp_size
        else:
            self.num_kv_heads = 1
"""),
        # Divisibility asserted: a group wider than the KV heads fails loudly, never with 0 heads.
        Example("""\
class Attention(nn.Module):
    def __init__(self, config, tp_size):
        super().__init__()
        if config.num_key_value_heads % tp_size:
            raise ValueError("the KV heads must divide over the TP ranks")
        self.num_kv_heads = config.num_key_value_heads // tp_size
"""),
        # A group wider than the KV heads refused up front.
        Example("""\
class Attention(nn.Module):
    def __init__(self, config, tp_size):
        super().__init__()
        assert tp_size <= config.num_key_value_heads, "more TP ranks than KV heads"
        self.num_kv_heads = config.num_key_value_heads // tp_size
"""),
        # Multi-query kept whole on every rank: the branch reads the KV head count.
        Example("""\
class GPTBigCodeAttention(nn.Module):
    def __init__(self, config, tp_size):
        super().__init__()
        if config.num_key_value_heads == 1:
            self.num_kv_heads = 1
        else:
            self.num_kv_heads = config.num_key_value_heads // tp_size
"""),
        # The shard count itself falls back to 1 when the heads do not divide.
        Example("""\
class VisionAttention(nn.Module):
    def __init__(self, config, tp_size):
        super().__init__()
        split = tp_size > 1 and config.num_key_value_heads % tp_size == 0
        self.tp_size = tp_size if split else 1
        self.num_kv_heads = config.num_key_value_heads // self.tp_size
"""),
        # A conditional expression decides the quotient.
        Example("""\
class Model:
    def __init__(self, config, world_size):
        num_kv_heads = config.num_key_value_heads
        self.num_kv_heads = num_kv_heads // world_size if num_kv_heads > 1 else num_kv_heads
"""),
        # A divide helper that checks divisibility itself.
        Example("""\
class SelfAttention(MegatronModule):
    def __init__(self, config, world_size):
        super().__init__()
        self.num_query_groups_per_partition = divide(config.num_query_groups, world_size)
        self.kv_width = config.num_query_groups // world_size * config.kv_channels
"""),
        # The KV head count is the caller's argument: the caller picked the layout and checks it.
        Example("""\
class ShardedStoreLayout:
    def __init__(self, num_kv_heads, store_tp_size):
        self.heads_per_shard = num_kv_heads // store_tp_size
"""),
        # A local quotient: a one-off computation, not the layer's head count.
        Example("""\
def load_qkv(self, weight, tp_size):
    kv_heads = self.config.num_key_value_heads // tp_size
    return weight.narrow(0, 0, kv_heads * self.head_dim)
"""),
        # Full multi-head attention: the KV head count is the query's, whose division is checked.
        Example("""\
class Attention(nn.Module):
    def __init__(self, config, tp_size):
        super().__init__()
        self.total_num_heads = config.num_attention_heads
        assert self.total_num_heads % tp_size == 0
        self.total_num_kv_heads = config.num_attention_heads  # no GQA
        self.num_kv_heads = self.total_num_kv_heads // tp_size
"""),
        # Divisibility asserted by another method of the class, run before the layers are built.
        Example("""\
class LlamaTpPartModel(TpPartBaseModel):
    def _verify_params(self):
        assert self.config["num_key_value_heads"] % self.world_size_ == 0

    def _init_some_value(self):
        self.tp_k_head_num_ = self.config["num_key_value_heads"] // self.world_size_
"""),
        # The quotient is an argument of a constructor: the attribute bound is the manager.
        Example("""\
class Model:
    def _init_mem_manager(self, config, world_size):
        self.mem_manager = MemoryManager(self.max_tokens, head_num=config["num_key_value_heads"] // world_size)
"""),
        # A patched __init__ outside any class that checks divisibility itself.
        Example("""\
def patched_attention_init(self, config, tp_size):
    assert config.num_key_value_heads % tp_size == 0
    self.num_kv_heads = config.num_key_value_heads // tp_size
"""),
        # The query head count: no MQA/GQA makes it smaller than the group.
        Example("""\
class Attention(nn.Module):
    def __init__(self, config, tp_size):
        super().__init__()
        self.num_heads = config.num_attention_heads // tp_size
"""),
    )
    INVALID = (
        Example(bad, line=4),
        Example("""\
class LlamaLayerInfer:
    def __init__(self, layer_num, network_config):
        self.tp_world_size_ = get_world_size()
        self.tp_q_head_num_ = network_config["num_attention_heads"] // self.tp_world_size_
        self.tp_k_head_num_ = network_config["num_key_value_heads"] // self.tp_world_size_
        self.tp_v_head_num_ = network_config["num_key_value_heads"] // self.tp_world_size_
""", line=5),
        Example("""\
class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        tp_size = get_tensor_model_parallel_world_size()
        self.num_heads = config.num_attention_heads // tp_size
        self.num_kv_heads: int = getattr(config, "num_key_value_heads", 1) // tp_size
        self.kv_size = self.num_kv_heads * config.head_dim
""", line=6),
        # The count read into an attribute first: still the KV head count.
        Example("""\
class MixtralAttention(nn.Module):
    def __init__(self, config, tp_size):
        super().__init__()
        self.total_num_kv_heads = config.num_key_value_heads
        self.num_kv_heads = self.total_num_kv_heads // tp_size
""", line=5),
        # Wrapped in int(): still the attribute's own count.
        Example("""\
class Attention(nn.Module):
    def __init__(self, config, tp_size):
        super().__init__()
        self.num_kv_heads = int(config.num_key_value_heads // tp_size)
""", line=4),
        # A parameter rebound from the config before the division: no longer the caller's.
        Example("""\
class FlashCausalLM:
    def __init__(self, config, num_kv_heads=None, world_size=1):
        if num_kv_heads is None:
            num_kv_heads = config.num_key_value_heads
        self.num_kv_heads = num_kv_heads // world_size
""", line=5),
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Per enclosing class: does any of its methods relate the two counts (a
        # ``_verify_params`` that asserts ``kv % tp == 0`` before the layers are built)?
        self._class_checks: list[bool] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._class_checks.append(any(_relates(current) for current, _ in _class_nodes(node)))

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._class_checks.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self._class_checks and self._class_checks[-1]:
            return
        divisions: list[tuple[cst.BinaryOperation, tuple[cst.CSTNode, ...]]] = []
        query_counts: set[str] = set()
        rebound: set[str] = set()
        for current, above in _own_nodes(node):
            if _relates(current):
                return
            rebound.update(_stored(current))
            if isinstance(current, (cst.Assign, cst.AnnAssign)):
                name = _assigned_query_count(current)
                if name is not None:
                    query_counts.add(name)
            if (isinstance(current, cst.BinaryOperation) and isinstance(current.operator, cst.FloorDivide)
                    and _kv_heads(current.left) and _shards(current.right)):
                divisions.append((current, above))
        passed = _parameters(node) - rebound
        for division, above in sorted(divisions, key=lambda found: len(found[1])):
            statement = next((n for n in reversed(above) if isinstance(n, (cst.Assign, cst.AnnAssign))), None)
            target = _self_target(statement) if statement is not None else None
            if target is None or _kept_positive(above, division) or dotted_name(division.left) in query_counts:
                continue
            # An argument of a call (``MemManager(head_num=kv // tp)``): the callee's parameter,
            # not the attribute the statement binds, carries the count.
            if any(isinstance(n, cst.Call) and callee_tail(n) != "int" for n in above[above.index(statement):]):
                continue
            # A count the caller passes in: the caller chose it for this TP size and may have
            # checked it there (no evidence here either way).
            if isinstance(division.left, cst.Name) and division.left.value in passed:
                continue
            kv, shards = source_of(division.left), source_of(division.right)
            self.report(
                division,
                f"`{target}` is the KV head count `{kv}` divided by the tensor-parallel size "
                f"`{shards}` with nothing that keeps it >= 1: with more ranks than KV heads "
                "(multi-query, small GQA groups) each rank gets 0 KV heads",
                suggestion=f"use `max(1, {kv} // {shards})` and replicate the KV heads when the TP size "
                "exceeds them, or assert that the TP size divides the KV head count",
            )
