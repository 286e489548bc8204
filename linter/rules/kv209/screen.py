"""KV209's module screens: the lines of a file's ``ast`` tree where KV209 may report
(``MODULE_SCREEN``), and whether the text (with the modules it imports) can hold a finding at
all (``TEXT_SCREEN``). Both over-approximate the rule (``linter.plan.screens``)."""

from __future__ import annotations
import ast
from linter.model.module_files import read_once
from linter.model.names import SAME_TENSOR_METHODS, key_counterpart, kv_side, value_counterpart
from linter.plan.imports import from_imports
from linter.rules.kv209.condition import kv209_facts, view_returning_defs
from linter.settings import Settings
from linter.plan.screen_facts import _dotted, _flat, _names_in, _seen_through, _tail, walk
from linter.plan.module_facts import _FUNCTIONS, _imported_tops, _module_at, _own_nodes


# KV209 -----------------------------------------------------------------------------------

_VIEW_TAILS = frozenset({"view", "reshape", "unflatten", "rearrange"})


def _may_return_a_view(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Has ``fn`` a view call, and can each of its returns be one (``KV209._summarize``): its
    first parameter viewed, through names and axis-keeping steps (``.transpose(1, 2)``)?"""
    own = list(_own_nodes(fn))
    returns = [n for n in own if isinstance(n, ast.Return)]
    if not returns or not any(isinstance(n, ast.Call) and _tail(n.func) in _VIEW_TAILS for n in own):
        return False
    # What each name is assigned: a name is read through its last binding before its use
    # (``t = t.view(s); t = t.permute(...)``); any binding stands for that one here, and a
    # positional parameter may be read before any of its own.
    bound: dict[str, list[ast.expr]] = {}
    for node in own:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            for target in _flat(node.targets if isinstance(node, ast.Assign) else [node.target]):
                if isinstance(target, ast.Name):
                    bound.setdefault(target.id, []).append(node.value)
    args = fn.args
    parameters = frozenset(a.arg for a in (*args.posonlyargs, *args.args))
    return all(_may_be_a_view(statement.value, bound, parameters, _NAME_STEPS) for statement in returns)


# How many names ``KV209._returned_view`` and ``_is_parameter`` follow, each.
_NAME_STEPS = 8


def _may_be_a_view(value: ast.expr | None, bound: dict[str, list[ast.expr]], parameters: frozenset[str], steps: int) -> bool:
    """Can ``value`` be a view of the parameter (``KV209._returned_view``): after axis-keeping
    steps, a view call of what may be the parameter, or a name bound to such a value?"""
    value = _seen_through(value)
    if isinstance(value, ast.Call) and _tail(value.func) in _VIEW_TAILS:
        return _may_be_the_parameter(_viewed(value), bound, parameters, _NAME_STEPS)
    if isinstance(value, ast.Name) and steps:
        return any(_may_be_a_view(v, bound, parameters, steps - 1) for v in bound.get(value.id, ()))
    return False


def _may_be_the_parameter(
    value: ast.expr | None, bound: dict[str, list[ast.expr]], parameters: frozenset[str], steps: int
) -> bool:
    """Can ``value`` be the parameter as passed (``KV209._is_parameter``): after axis-keeping
    steps, a parameter or a name never bound, or a name bound to such a value? Never another
    view."""
    value = _seen_through(value)
    if not isinstance(value, ast.Name):
        return value is None  # a view call of nothing the rule could read: unsure, so yes
    if value.id in parameters or value.id not in bound:
        return True
    return bool(steps) and any(_may_be_the_parameter(v, bound, parameters, steps - 1) for v in bound[value.id])


def _viewed(call: ast.Call) -> ast.expr | None:
    """What the view ``call`` views: the receiver of a method (``x.view(...)``), or the first
    argument of a function (``rearrange(x, ...)``; ``torch.reshape(x, ...)`` reads as a method
    of ``torch``, a name); None for a function called without one."""
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.value
    return call.args[0] if call.args else None


def _first_root(node: ast.expr) -> str | None:
    """``rules.kv209.first_root``: the root of a name chain passed first."""
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute):
            return node.attr if _dotted(node.value) is not None else None
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call):
            func = node.func
            node = func.value if isinstance(func, ast.Attribute) and func.attr in SAME_TENSOR_METHODS else func
        else:
            return None


def _viewed_names(tree: ast.AST) -> set[str]:
    """Every name spelled in the receiver of a view, reshape, unflatten or rearrange call, or
    in the target it is assigned to: a superset of what KV202 reads a view as about."""
    found: set[str] = set()
    for node in walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            if any(isinstance(n, ast.Call) and _tail(n.func) in _VIEW_TAILS for n in walk(node.value)):
                found |= _names_in(node.targets[0])
        elif isinstance(node, ast.Call) and _tail(node.func) in _VIEW_TAILS:
            if isinstance(node.func, ast.Attribute):
                found |= _names_in(node.func.value)
            if node.args:
                found |= _names_in(node.args[0])
    return found


def kv209(tree: ast.AST, settings: Settings, path: str) -> frozenset[int]:
    """A call with a K (V) name chain first, of a function of the file that may return a view
    (``name(...)``, ``self.name(...)``) or of one imported from a module of the tree that
    may; and the twin passed first to such a call with other arguments (the same helper
    with the same arguments views both alike), or viewed inline, in the same function (KV202
    compares the views of one scope). The lines of the calls through such a helper in the
    functions where some is (none: no finding)."""
    extra = settings.extra_pairs
    functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    calls: list[tuple[str, bool, str, str, ast.Call]] = []  # (callee, plain name?, root, side, call)
    imported: dict[str, list[tuple[ast.ImportFrom, str]]] = {}  # ``_imports``, in the same walk
    for node in walk(tree):
        if isinstance(node, _FUNCTIONS):
            functions.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                imported.setdefault(alias.asname or alias.name, []).append((node, alias.name))
        elif isinstance(node, ast.Call) and node.args and not isinstance(node.args[0], ast.Starred):
            func = node.func
            if isinstance(func, ast.Name):
                callee = func.id
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ("self", "cls"):
                callee = func.attr
            else:
                continue
            root = _first_root(node.args[0])
            side = kv_side(root, extra) if root is not None else None
            if side is not None:
                calls.append((callee, isinstance(func, ast.Name), root, side, node))
    if not calls:
        return frozenset()
    # Only the callees of such calls are read (a model file has hundreds of functions).
    viewing: dict[str, bool] = {}
    passed: list[tuple[str, str, str, int, ast.Call]] = []  # (root, side, the call less its first argument, line, call)
    for callee, plain, root, side, node in calls:
        if callee not in viewing:
            viewing[callee] = any(_may_return_a_view(fn) for fn in functions.get(callee, ()))
        helper = viewing[callee]
        if not helper and plain:
            helper = any(
                _may_return_a_view(fn)
                for statement, real in imported.get(callee, ())
                for fn in _imported_tops(statement, path).functions(real)
            )
        if helper:
            rest = ast.dump(ast.Call(node.func, node.args[1:], node.keywords))
            passed.append((root, side, rest, node.lineno, node))
    if not passed:
        return frozenset()
    # KV202's scopes: a view is compared with the views of its own function only (code
    # outside every function, with the module's). Each call is read with the outermost
    # function whose body holds it, a superset of its own; the module's calls with the file.
    bodies = sorted(
        [((fn.body[0].lineno, fn.body[0].col_offset), (fn.end_lineno, fn.end_col_offset), fn)
         for same_name in functions.values() for fn in same_name],
        key=lambda body: body[0],
    )
    scopes: dict[int, ast.AST] = {}
    for root, side, rest, line, node in passed:
        scopes[id(node)] = next((fn for start, end, fn in bodies if start <= (node.lineno, node.col_offset) <= end), tree)
    viewed: dict[int, set[str]] = {}
    matched: set[int] = set()  # the scopes where some call's twin is viewed otherwise
    for root, side, rest, _, node in passed:
        twin = (value_counterpart if side == "k" else key_counterpart)(root, extra)
        scope = scopes[id(node)]
        if twin is None or id(scope) in matched:
            continue
        if id(scope) not in viewed:
            viewed[id(scope)] = _viewed_names(scope)
        if twin in viewed[id(scope)] or any(
            other == twin and other_rest != rest and scopes[id(n)] is scope for other, _, other_rest, _, n in passed
        ):
            matched.add(id(scope))
    return frozenset(line for *_, line, node in passed if id(scopes[id(node)]) in matched)


def kv209_text(text: str, settings: Settings, path: str) -> bool:
    """``kv209`` asked of the text, before the file is parsed: the text condition asked again
    with, of the helpers ``from`` imports bind, only those whose module (read as text) has a
    ``def`` of that name that may return a view."""
    facts = kv209_facts(text, settings)
    if facts is None:
        return False
    bound: dict[str, list[tuple[int, list[str], str]]] = {}
    for level, parts, real, name in from_imports(text):
        if name in facts.imported:
            bound.setdefault(name, []).append((level, parts, real))
    viewing = {name for name in facts.imported if name not in bound}  # an import the text cannot read
    for name, sources in bound.items():
        for level, parts, real in sources:
            target = _module_at(path, level, parts)
            if target is not None and read_once(target, _ViewReturning, _NO_VIEWS).may(real):
                viewing.add(name)
                break
    return facts.holds(viewing)


class _ViewReturning:
    """Which functions of a module's text may return a view, asked name by name (a helpers
    module is imported by many files, each asking for a few of its functions)."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._known: dict[str, bool] = {}

    def may(self, name: str) -> bool:
        if name not in self._known:
            self._known[name] = bool(view_returning_defs(self._text, {name}))
        return self._known[name]


_NO_VIEWS = _ViewReturning("")

MODULE_SCREEN = kv209
TEXT_SCREEN = kv209_text
