"""Refuse a CUDA torch before pip downloads it: reads ``pip install --dry-run --report -`` on stdin.

The tests need CPU torch 2.13.0. On Linux, PyPI's ``torch==2.13.0`` is the CUDA build (several GB
with its nvidia-* wheels); the CPU build is ``2.13.0+cpu``, found here in a local wheel
directory. When pip would pick anything else, stop and say how to choose the CPU wheel.
KVLINT_ALLOW_CUDA_TORCH=1 accepts whatever pip picked.
"""

from __future__ import annotations

import json
import os
import sys

HOW = """\
.ci/setup: torch==2.13.0 would be installed from
  {url}
version {version}: not the CPU build (a CUDA build is a multi-GB download). Choose the CPU wheel:
  - download torch-2.13.0+cpu for this Python from https://download.pytorch.org/whl/cpu/torch/
    and rerun:  PIP_FIND_LINKS=/dir/holding/the/wheel bash .ci/setup
  - or, where that index is reachable:  PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu bash .ci/setup
    (2.13.0+cpu then outranks PyPI's 2.13.0 for the same pin)
  - or accept this build:  KVLINT_ALLOW_CUDA_TORCH=1 bash .ci/setup
"""


def main() -> int:
    try:
        (item,) = [i for i in json.load(sys.stdin)["install"] if i["metadata"]["name"].lower() == "torch"]
    except (ValueError, KeyError) as exc:
        print(f".ci/setup: could not read pip's plan for torch==2.13.0 ({exc}); is a torch 2.13.0 wheel reachable?", file=sys.stderr)
        return 1
    version, url = item["metadata"]["version"], item["download_info"]["url"]
    cpu = version.endswith("+cpu") or sys.platform != "linux"  # PyPI's macOS/Windows wheels are CPU-only
    if cpu or os.environ.get("KVLINT_ALLOW_CUDA_TORCH") == "1":
        return 0
    print(HOW.format(url=url, version=version), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
