"""No-op stand-ins for the CANN libraries torch_npu links against, so the real wheel imports on CPU.

This is a test harness and nothing more: every stub function returns 0, so no kernel can run.
What the real package still gives is everything the guard meets before a kernel: the op
schemas and OpOverloadPackets, torch_npu.X, the docstrings, the meta kernels, the lazy ATB
registration and torchair's converter registration.

``python tests/real_npu/stubs.py build DIR`` (run with the interpreter that has torch and
torch-npu installed) writes DIR/lib/<soname> for every library torch_npu needs that neither torch
nor the system provides, each defining every symbol torch_npu's libraries import and nothing else
defines. ``load(DIR)`` then opens them with RTLD_GLOBAL: glibc satisfies a later DT_NEEDED entry
from an already loaded object with the same soname, so ``import torch_npu`` works without
LD_LIBRARY_PATH (which would have to be set before the interpreter starts).

Building needs ldd, nm (binutils) and a C compiler; .ci/setup-npu records why when one is missing.
"""

from __future__ import annotations

import ctypes
import importlib.util
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

# Symbols that are weak hooks or thread-local helpers: defining them as functions would change
# what the C runtime does, and nothing requires them.
_NEVER_STUB = re.compile(r"^(_ITM_|__gmon_start__|_ZTH|__cxa_|_Jv_)")


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)  # finds without importing (importing torch_npu is what fails)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"{name} is not installed in {sys.executable}")
    return Path(next(iter(spec.submodule_search_locations)))


def _run(*command: str) -> str:
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def _npu_libraries(torch_npu: Path) -> list:
    """torch_npu's own libraries: _C, lib/, and torchair's under dynamo/ (imported by torch.compile)."""
    return sorted(torch_npu.rglob("*.so"))


def _missing_sonames(libraries: list, provided: set) -> list:
    """Sonames ldd cannot find for torch_npu's libraries, less those torch's own lib/ holds."""
    missing = set()
    for library in libraries:
        for line in _run("ldd", str(library)).splitlines():
            name, _, where = line.strip().partition(" => ")
            if where.strip() == "not found" and name not in provided:
                missing.add(name)
    return sorted(missing)


def _dynamic_symbols(library: Path, which: str) -> set:
    out = subprocess.run(["nm", "-D", which, str(library)], check=False, capture_output=True, text=True).stdout
    return {line.split()[-1].partition("@")[0] for line in out.splitlines() if line.strip()}


def _system_libraries(torch_lib: Path) -> list:
    """The libraries torch itself resolves (libc, libstdc++, libgomp...) and libpython."""
    found = []
    for line in _run("ldd", str(torch_lib / "libtorch_cpu.so")).splitlines():
        match = re.search(r"=> (/\S+)", line) or re.match(r"\s*(/\S+)", line)
        if match:
            found.append(Path(match.group(1)))
    libpython = Path(sysconfig.get_config_var("LIBDIR") or "", sysconfig.get_config_var("LDLIBRARY") or "")
    if libpython.is_file():
        found.append(libpython)
    return found


def build(out: Path) -> list:
    """Write the stub libraries into out/lib; return their paths."""
    torch_npu, torch_lib = _package_dir("torch_npu"), _package_dir("torch") / "lib"
    npu_libraries = _npu_libraries(torch_npu)
    sonames = _missing_sonames(npu_libraries, {p.name for p in [*torch_lib.glob("*.so*"), *npu_libraries]})
    defined: set = set()
    for library in [*torch_lib.glob("*.so*"), *npu_libraries, *_system_libraries(torch_lib)]:
        defined |= _dynamic_symbols(library, "--defined-only")
    needed: set = set()
    for library in npu_libraries:
        needed |= _dynamic_symbols(library, "--undefined-only")
    symbols = sorted(s for s in needed - defined if not _NEVER_STUB.match(s))
    lib = out / "lib"
    lib.mkdir(parents=True, exist_ok=True)
    source = out / "stubs.c"
    # One C function per symbol under the symbol's exact (mangled) name; each returns 0.
    source.write_text("".join(f'long kvlint_stub_{i}(void) __asm__("{s}");\nlong kvlint_stub_{i}(void) {{ return 0; }}\n' for i, s in enumerate(symbols)))
    built = []
    for soname in sonames:
        target = lib / soname
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(target), str(source), f"-Wl,-soname,{soname}"], check=True, capture_output=True, text=True)
        built.append(target)
    (out / "symbols.txt").write_text("\n".join(symbols) + "\n")
    return built


def load(out: Path) -> list:
    """Open every stub library globally, so torch_npu's DT_NEEDED entries resolve to them."""
    return [ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL) for path in sorted((out / "lib").glob("*.so"))]


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "build":
        sys.exit("usage: python tests/real_npu/stubs.py build DIR")
    paths = build(Path(sys.argv[2]))
    print(f"built {len(paths)} stub libraries in {sys.argv[2]}/lib: {', '.join(p.name for p in paths)}")
