#!/usr/bin/env python3
"""Fails on any #include that runs up a layer (ARCHITECTURE.md, "Layers").

    python3 tests/layering/check_includes.py [REPO_ROOT]

The layers, lowest first: kernels (CPU references and CUDA kernels: they may
use engine/kv_layout.h and engine/common/ only), engine (and the CUDA executor
beside it in engine/cuda/), traces, sim, experiments/cli. A file may include
its own layer and the layers below; tests/ and papers/ may include anything.
The CMake layer targets catch upward symbols at link time; this catches
upward headers, which compile and link silently (the include root is shared).
"""
import os
import re
import sys

# (directory prefix of the including file, include prefixes it may use); the
# first matching directory wins, so sub-rooms come before their room.
RULES = [
    ("kernels/", ("kernels/", "engine/kv_layout.h", "engine/common/")),
    ("engine/cuda/", ("engine/", "kernels/")),
    ("engine/bench/", ("engine/", "kernels/")),
    ("engine/", ("engine/", "kernels/attention/attention_ref.h", "kernels/spec/verify_ref.h", "kernels/gemm/gemm_ref.h",
                 "kernels/gemm/quantize_ref.h")),
    ("traces/", ("traces/", "engine/")),
    ("sim/", ("sim/", "traces/", "engine/")),
    ("experiments/", ("experiments/", "sim/", "traces/", "engine/")),
]
# Lower layers may never reach the CUDA executor's headers, even inside engine/.
FORBIDDEN_FOR_NON_CUDA = "engine/cuda/"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCES = (".h", ".hpp", ".cpp", ".cu", ".cuh")


def rule_for(path):
    for prefix, allowed in RULES:
        if path.startswith(prefix):
            return prefix, allowed
    return None, None


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    violations = []
    checked = 0
    for top in ("kernels", "engine", "traces", "sim", "experiments"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if not name.endswith(SOURCES):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")
                prefix, allowed = rule_for(path)
                if prefix is None:
                    continue
                checked += 1
                with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = m.group(1)
                        if "/" not in target:
                            continue  # a file beside it
                        ok = target.startswith(allowed)
                        if ok and target.startswith(FORBIDDEN_FOR_NON_CUDA) and prefix not in ("engine/cuda/",):
                            ok = False
                        if not ok:
                            violations.append(f"{path}:{lineno}: includes \"{target}\" (a {prefix} file may "
                                              f"include {', '.join(allowed)})")
    for v in violations:
        print(v)
    print(f"check_includes: {checked} files, {len(violations)} upward includes")
    return 1 if violations or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
