"""Which torch_npu releases the runtime guard judges correctly: every guarded op's roles bound
against each release's own schemas.

    python -m benchmarks.guard_versions                      # the table, from the committed schemas
    python -m benchmarks.guard_versions --extract WHEEL...   # (re)write the schemas of these wheels

The guard binds each role by its argument name in the live schema when it wraps an op, so a role
a release moved is still read from the right place; a role a release lacks binds to nothing, and
the guard then leaves that op's calls not judged (ops.Binder.missing). This command shows, per
release, which ops bind fully, which would be left not judged and why, and which the release lacks.

Schemas are read from the wheel without importing it (its torch may not be installable here): the
dispatcher schema strings in torch_npu/lib/libtorch_npu.so (npu ops) and libop_plugin_atb.so (ATB
ops). Where the compiler split an ATB schema literal into pieces, the argument names and order come
from the C++ declaration in torch_npu/include/.../AtbOpsInterface.h instead (marked "header").
Only the guarded ops' schemas are kept: benchmarks/torch_npu_schemas/<version>.txt.
"""

from __future__ import annotations

import argparse
import re
import sys
import zipfile
from pathlib import Path

SCHEMA_DIR = Path(__file__).resolve().parent / "torch_npu_schemas"
LIBRARIES = (("npu", "torch_npu/lib/libtorch_npu.so"), ("atb", "torch_npu/lib/libop_plugin_atb.so"))
HEADER = "op_plugin/include/AtbOpsInterface.h"
_PRINTABLE = re.compile(rb"[\x20-\x7e]{12,}")
_DECLARATION = re.compile(r"TORCH_NPU_API\s+[^;(]*?\b(\w+)\(([^;]*)\);")


def guarded_names() -> dict:
    """namespace -> op names the guard wraps in torch_npu."""
    from runtime_guard import ops

    names: dict = {}
    for row in ops.ROWS:
        names.setdefault(row.namespace, set()).add(row.name)
    return names


def extract(wheel: Path) -> list:
    """The guarded ops' schema lines of one torch_npu wheel: 'ns::schema', or 'ns::name.overload[header](a, b, ...)'."""
    names = guarded_names()
    found: dict = {}
    with zipfile.ZipFile(wheel) as archive:
        for namespace, member in LIBRARIES:
            wanted = names.get(namespace, set())
            for run in _PRINTABLE.findall(archive.read(member)):
                text = run.decode()
                head = re.match(r"([A-Za-z_]\w*)(\.\w+)?\(", text)
                if head and head.group(1) in wanted and ") -> " in text:
                    found.setdefault(f"{namespace}::{head.group(1)}{head.group(2) or ''}", f"{namespace}::{text}")
        header = next((n for n in archive.namelist() if n.endswith(HEADER)), None)
        if header is not None:
            for name, params in _DECLARATION.findall(archive.read(header).decode()):
                base, overload = (name[:-4], ".out") if name.endswith("_out") else (name, "")
                key = f"atb::{base}{overload}"
                if base in names.get("atb", set()) and key not in found:
                    arguments = [re.split(r"[\s&*]+", p.strip())[-1] for p in params.split(",") if p.strip()]
                    found[key] = f"{key}[header]({', '.join(arguments)})"
        atb_library = archive.read(dict(LIBRARIES)["atb"])
        for name in names.get("atb", set()):
            # Neither text nor declaration: the kernel's mangled symbol still shows the op exists.
            if f"atb::{name}" not in found and f"3atb{len(name)}{name}E".encode() in atb_library:
                found[f"atb::{name}"] = f"atb::{name}[symbol]()"
    return sorted(found.values())


def version_of(wheel: Path) -> str:
    return wheel.name.split("-")[1]


def load(version: str) -> dict:
    """op key ('npu::name') -> [(overload, [(arg, kwarg_only or None if unknown)], source)]."""
    schemas: dict = {}
    for line in (SCHEMA_DIR / f"{version}.txt").read_text().splitlines():
        if not line.strip():
            continue
        namespace, _, text = line.partition("::")
        head = re.match(r"([A-Za-z_]\w*)(?:\.(\w+))?(\[header\]|\[symbol\])?\((.*)\)", text)
        name, overload, marker, body = head.group(1), head.group(2) or "default", head.group(3), head.group(4)
        if marker:
            params, source = [(arg, None) for arg in body.split(", ") if arg], marker.strip("[]")
        else:
            params, source = _schema_params(text), "schema"
        schemas.setdefault(f"{namespace}::{name}", []).append((overload, params, source))
    return schemas


def _schema_params(text: str) -> list:
    import torch

    schema = torch._C.parse_schema(text)
    return [(a.name, a.kwarg_only) for a in schema.arguments]


def bind(row: object, overloads: list) -> tuple:
    """(status, detail, source) of one op row against one release's overloads of it."""
    from runtime_guard import ops

    default = next((o for o in overloads if o[0] == "default"), overloads[0])
    if default[2] == "symbol":
        return "by name at run time", "the wheel holds this op's schema only as compiler-split text: the guard binds it from the live schema", "symbol"
    params = [(n, k, None) for n, k in default[1]]
    known = {n for n, _, _ in params}
    for _, others, _ in overloads:
        # Keyword-only arguments of another overload (None: a header, which cannot say) are read by keyword.
        params += [(n, True, None) for n, k in others if k is not False and n not in known]
        known |= {n for n, k in others if k is not False}
    missing = ops.Binder(row, params).missing
    positions = {n: i for i, (n, k, _) in enumerate(params) if not k}
    bound = [f"{role}@{positions[role]}" if role in positions else role for role in row.roles if isinstance(role, str) and role in known]
    if missing:
        return "not judged", "lacks " + ", ".join(missing), default[2]
    return "judged", " ".join(bound), default[2]


def matrix(versions: list) -> list:
    """Rows (version, op, status, detail, source) for every guarded torch_npu op."""
    from runtime_guard import ops

    rows = []
    for version in versions:
        schemas = load(version)
        for row in ops.ROWS:
            overloads = schemas.get(f"{row.namespace}::{row.name}")
            if overloads is None:
                rows.append((version, row.name, "absent", "the release has no such op: nothing to wrap", "-"))
            else:
                rows.append((version, row.name, *bind(row, overloads)))
    return rows


def versions_committed() -> list:
    def key(version: str) -> tuple:
        return tuple(int(part) if part.isdigit() else part for part in re.split(r"[.+]|post", version) if part)

    return sorted((path.stem for path in SCHEMA_DIR.glob("*.txt")), key=key)


def summary(rows: list) -> list:
    """One line per release: how many guarded ops it judges, leaves not judged, lacks."""
    lines = []
    for version in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == version]
        count = {status: sum(r[2] == status for r in mine) for status in ("judged", "by name at run time", "not judged", "absent")}
        lines.append(f"| {version} | {count['judged']} | {count['by name at run time']} | {count['not judged']} | {count['absent']} |")
    return lines


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.guard_versions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--extract", nargs="+", type=Path, metavar="WHEEL", help="torch_npu wheels to read schemas from (pip download --no-deps torch-npu==X)")
    parser.add_argument("--all", action="store_true", help="list every op, not only those a release does not judge")
    args = parser.parse_args(argv)
    if args.extract:
        SCHEMA_DIR.mkdir(exist_ok=True)
        for wheel in args.extract:
            lines = extract(wheel)
            (SCHEMA_DIR / f"{version_of(wheel)}.txt").write_text("\n".join(lines) + "\n")
            print(f"{version_of(wheel)}: {len(lines)} schema lines -> {SCHEMA_DIR / (version_of(wheel) + '.txt')}")
    rows = matrix(versions_committed())
    print("| torch_npu | guarded ops judged | bound by name at run time (schema text unreadable in the wheel) | not judged | absent |\n| --- | --- | --- | --- | --- |")
    print("\n".join(summary(rows)))
    print()
    print("| torch_npu | op | status | roles (name@position; keyword-only without) | schema from |\n| --- | --- | --- | --- | --- |")
    for version, op, status, detail, source in rows:
        if args.all or status != "judged" or source == "header":
            print(f"| {version} | `{op}` | {status} | {detail} | {source} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
