#!/usr/bin/env python3
"""Print plateau's component dependency edges and fail on a violation of the layering rules (docs/ARCHITECTURE.md).

usage: tools/check-layers.py [SOURCE_ROOT]

Two readings, both against the one table ALLOWED below:
  * meson: the `<comp>_dep` names each component's meson.build uses (the edges a build links and includes through);
    each must be an allowed edge, or reached through allowed edges.
  * C: every `#include "x.h"` in a component's sources, and in tests/<comp>/, must name a header of its own folder,
    of a component it may reach, of include/ (public) or one the build generates (config.h); never a path through
    another folder ("reports/format.h"): the repository root is not on the include path.
Exit status 0 when clean, 1 with one line per violation.
"""
import os
import re
import sys

COMPONENTS = ["common", "allocator", "tracer", "preload", "training", "reports", "tune", "cli"]
# Direct edges (DESIGN.md section 1). tracer -> common: the stack hash (common/hash.h) the writer and the report
# share. A component may also use what its dependencies reach (meson passes include folders on).
ALLOWED = {
    "common": set(),
    "allocator": {"common"},
    "tracer": {"common"},
    "preload": {"tracer", "common"},
    "training": {"allocator"},
    "reports": {"tracer", "common"},
    "tune": {"tracer", "allocator", "common"},
    "cli": {"reports", "tune"},
}
# Tests may include the private headers of the component they test (and what it reaches), and these besides: the
# preload's site and CUDA tests check what the report makes of a trace the preload recorded; the report's export
# tests read the PyTorch snapshot they write back through tune's pickle reader (the consumer's parser).
TESTS_ALSO = {"preload": {"reports"}, "reports": {"tune"}}
HEADER_EXT = (".h", ".cuh")
SOURCE_EXT = (".c", ".h", ".cuh", ".cu")


def closure(comp):
    seen, todo = set(), list(ALLOWED[comp])
    while todo:
        c = todo.pop()
        if c not in seen:
            seen.add(c)
            todo.extend(ALLOWED[c])
    return seen


def meson_text(path):
    with open(path, encoding="utf-8") as f:
        return "\n".join(line.split("#", 1)[0] for line in f)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    problems = []
    # which component declares each <name>_dep
    owner = {}
    for comp in COMPONENTS:
        for name in re.findall(r"\b(\w+_dep)\s*=\s*declare_dependency", meson_text(os.path.join(root, comp,
                                                                                               "meson.build"))):
            owner[name] = comp
    # headers per component folder (top level: the folder its _dep exports)
    headers = {}
    for comp in COMPONENTS:
        for name in os.listdir(os.path.join(root, comp)):
            if name.endswith(HEADER_EXT):
                headers.setdefault(name, set()).add(comp)
    for name, comps in sorted(headers.items()):
        if len(comps) > 1:
            problems.append(f"header {name} exists in {', '.join(sorted(comps))}: one name, one folder")

    print("edges (meson dependencies: lines):")
    for comp in COMPONENTS:
        used = set(re.findall(r"\b(\w+_dep)\b", meson_text(os.path.join(root, comp, "meson.build"))))
        edges = sorted({owner[d] for d in used if d in owner and owner[d] != comp})
        print(f"  {comp} -> {{{', '.join(edges)}}}" if edges else f"  {comp} -> {{}}")
        reach = closure(comp)
        for e in edges:
            if e not in reach:
                problems.append(f"{comp}/meson.build: {comp} -> {e} is not an allowed edge")

    def check_includes(folder, comp, label, also=frozenset()):
        reach = closure(comp) | {comp} | set(also)
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for fname in sorted(files):
                if not fname.endswith(SOURCE_EXT):
                    continue
                path = os.path.join(dirpath, fname)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                        if not m:
                            continue
                        inc = m.group(1)
                        if os.path.exists(os.path.join(dirpath, inc)):  # beside the file, or a path from it
                            top = os.path.relpath(os.path.join(dirpath, inc), root).split(os.sep)[0]
                            if top in COMPONENTS and top not in reach:
                                problems.append(f"{rel}:{lineno}: \"{inc}\" reaches into {top}, which {label} "
                                                "may not use")
                            continue
                        if "/" in inc:
                            problems.append(f"{rel}:{lineno}: \"{inc}\" names a folder: the repository root is not "
                                            "on the include path")
                            continue
                        owners = headers.get(inc, set())
                        if owners and not owners & reach:
                            problems.append(f"{rel}:{lineno}: \"{inc}\" is a header of {', '.join(sorted(owners))}, "
                                            f"which {label} may not use")

    for comp in COMPONENTS:
        check_includes(comp, comp, comp)
        if os.path.isdir(os.path.join(root, "tests", comp)) and comp != "common":
            check_includes(os.path.join("tests", comp), comp, f"tests/{comp}", TESTS_ALSO.get(comp, ()))
    check_includes(os.path.join("tests", "common"), "common", "tests/common")

    if problems:
        print(f"{len(problems)} violation(s):")
        for p in problems:
            print("  " + p)
        return 1
    print("no violations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
