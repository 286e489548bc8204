"""The real-call corpus as data: each call site's shapes and arguments, and its seeded mutations.

A case names the call site it was read from (repository, file, function: the code path that
produced these shapes) and holds its arguments as specs, built fresh for each run: ``T`` is an
npu tensor (meta-backed, see harness.npu_tensor), ``Cpu`` a host int32 tensor, ``Np`` a NumPy
array; plain lists and ints are passed as they are. A spec object used twice in one call is
built once, so ``key=k, value=k`` stays one tensor as at the call site.

A mutation replaces one argument (a position or a keyword) and names the check that must stop
it: K truncated, V heads, a wrong length list, a cache from another pool.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from tests.real_npu.harness import npu_tensor, torch, torch_npu


class T(NamedTuple):
    shape: tuple
    dtype: str = "bfloat16"


class Cpu(NamedTuple):
    values: tuple


class Np(NamedTuple):
    values: tuple


class Mutation(NamedTuple):
    label: str
    changes: dict  # argument position (int) or keyword (str) -> spec
    check: str


class Case(NamedTuple):
    site: str  # repository:path function, the code path these shapes come from
    scenario: str
    op: str  # "npu.X" (torch_npu.X) or "atb.X" (torch.ops.atb.X)
    args: tuple
    kwargs: dict
    mutations: tuple = ()

    @property
    def id(self) -> str:
        return f"{self.site.split(':')[-1]}-{self.scenario}".replace(" ", "_")


def t(*shape: int, dtype: str = "bfloat16") -> T:
    return T(tuple(shape), dtype)


def guarded_op(name: str) -> Any:
    namespace, _, op = name.partition(".")
    return getattr(torch_npu, op) if namespace == "npu" else getattr(torch.ops.atb, op)


def build(case: Case, mutation: Mutation | None = None) -> tuple:
    """The call's (args, kwargs), with one mutation applied."""
    args, kwargs = list(case.args), dict(case.kwargs)
    for where, spec in (mutation.changes.items() if mutation else ()):
        if isinstance(where, int):
            args[where] = spec
        else:
            kwargs[where] = spec
    built: dict = {}

    def make(spec: Any) -> Any:
        if not isinstance(spec, (T, Cpu, Np)):
            return spec
        if id(spec) not in built:
            if isinstance(spec, T):
                built[id(spec)] = npu_tensor(*spec.shape, dtype=getattr(torch, spec.dtype))
            elif isinstance(spec, Cpu):
                built[id(spec)] = torch.tensor(spec.values, dtype=torch.int32)
            else:
                built[id(spec)] = np.array(spec.values, dtype=np.int64)
        return built[id(spec)]

    return tuple(make(a) for a in args), {k: make(v) for k, v in kwargs.items()}


def mutation_cases(cases: tuple) -> list:
    return [(case, mutation) for case in cases for mutation in case.mutations]


def mutation_id(pair: tuple) -> str:
    case, mutation = pair
    return f"{case.id}-{mutation.label}".replace(" ", "_")
