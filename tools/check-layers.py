#!/usr/bin/env python3
"""Print plateau's component dependency edges and fail on a violation of the layering rules (docs/ARCHITECTURE.md).

usage: tools/check-layers.py [SOURCE_ROOT]

Two readings, both against the one table ALLOWED below, over units: the components, with the tracer as three
(tracer.core, tracer.writer, tracer.reader) and the reports wing as seven (reports.ingest, .series, .model, .extract,
.analyze, .live, .render: one folder and one _dep each, under the facade `reports`):
  * meson: the `<unit>_dep` names each unit's meson.build uses (the edges a build links and includes through);
    each must be an allowed edge, or reached through allowed edges.
  * C: every `#include "x.h"` in a unit's sources, and in tests/<comp>/, must name a header of its own folder,
    of a unit it may reach, of include/ (public) or one the build generates (config.h); never a path through
    another folder ("reports/format.h", "../tracer/write/writer.h"): the repository root is not on the include
    path.
  * English: the run model writes no sentence (docs/ARCHITECTURE.md, "The reports wing"): a string literal of
    two words or more (letters, a space, letters) in a source of a unit of NO_ENGLISH is a violation, outside the
    functions named there; the sentences belong to the analysis (reports/analyze: sentences.c) or to the renderers
    (reports/render: words.c). Comments are not read; a name, a key or a format of symbols ("%s:%d") is no sentence.
  * Output: the units of NO_OUTPUT write no output (no stdio write, no JSON writer call): they judge and fill the
    model; the renderers (reports/render) write what they found.
Exit status 0 when clean, 1 with one line per violation.
"""
import os
import re
import sys

# Each unit is a folder with its own meson.build declaring its _dep(s): the components, and the tracer's three parts
# (tracer/meson.build only gathers them, and declares tracer_dep, both sides, for tests and tools).
UNITS = {
    "common": "common",
    "allocator": "allocator",
    "tracer.core": "tracer/core",
    "tracer.writer": "tracer/write",
    "tracer.reader": "tracer/read",
    "tracer": "tracer",
    "preload": "preload",
    "training": "training",
    "reports.ingest": "reports/ingest",
    "reports.series": "reports/series",
    "reports.model": "reports/model",
    "reports.extract": "reports/extract",
    "reports.analyze": "reports/analyze",
    "reports.live": "reports/live",
    "reports.render": "reports/render",
    "reports": "reports",
    "tune": "tune",
    "collector": "collector",
    "supervise": "supervise",
    "cli": "cli",
}
# The components: a tests/<comp> folder is checked against <comp> (tests/reports against the wing's facade, which
# reaches every part of the wing: a module's tests read what the modules below it wrote).
COMPONENTS = ["common", "allocator", "tracer", "preload", "training", "reports", "tune", "collector", "supervise",
              "cli"]
# Direct edges (docs/ARCHITECTURE.md, "Edges"). The tracer is split: the codec (core) both sides speak, the writer side the
# preload links, the reader side report and tune link; neither side reaches the other. tracer.writer -> common:
# the stack hash (common/hash.h) the writer and the report share. The umbrella "tracer" (both sides) is no one's
# edge. A unit may also use what its dependencies reach (meson passes include folders on).
ALLOWED = {
    "common": set(),
    "allocator": {"common"},
    "tracer.core": set(),
    "tracer.writer": {"tracer.core", "common"},
    "tracer.reader": {"tracer.core", "common"},
    "tracer": {"tracer.core", "tracer.writer", "tracer.reader"},
    "preload": {"tracer.writer", "common"},
    "training": {"allocator"},
    "reports.ingest": {"tracer.reader", "common"},
    # the reports wing, from the ground up (docs/ARCHITECTURE.md, "The reports wing"): the per-series maths under the
    # run model; extraction and analysis write into the model and do not know each other; the renderers read the
    # model (and the live reader, for its Prometheus file; the traces again, for the PyTorch snapshot) and never reach
    # the analysis or the extraction. reports is the facade the command links: all of the wing.
    "reports.series": {"common"},
    "reports.model": {"reports.series", "common"},
    "reports.extract": {"reports.model", "reports.series", "reports.ingest", "tracer.reader", "common"},
    "reports.analyze": {"reports.model", "reports.series", "common"},
    "reports.live": {"reports.model", "reports.series", "reports.ingest", "tracer.reader", "common"},
    "reports.render": {"reports.model", "reports.series", "reports.live", "reports.ingest", "common"},
    "reports": {"reports.render", "reports.analyze", "reports.extract", "reports.live", "reports.model",
                "reports.series", "reports.ingest", "tracer.reader", "common"},
    "tune": {"reports.ingest", "tracer.reader", "allocator", "common"},
    "collector": {"tracer.writer", "common"},
    "supervise": set(),
    "cli": {"reports", "tune", "collector", "supervise"},
}
# Tests may include the private headers of the component they test (and what it reaches), and these besides: the
# preload's site and CUDA tests check what the report makes of a trace the preload recorded; the report's export
# tests read the PyTorch snapshot they write back through tune's pickle reader (the consumer's parser); the
# report's, tune's and the command's tests write the traces they read with the tracer's own writer; the collector's
# compaction test reads the traces it compacted through the report (what a bounded trace must not change).
TESTS_ALSO = {
    "collector": {"reports"},
    "preload": {"reports"},
    "reports": {"tune", "tracer.writer"},
    "tune": {"tracer.writer"},
    "cli": {"tracer.writer"},
}
# The units that write no English (the reader of traces, the run model), each with the functions that still do (to be
# moved out, not added to): none left.
NO_ENGLISH = {
    "reports.ingest": set(),
    "reports.model": set(),
}
# The units that write no output: the wing below its renderers (and above its reader).
NO_OUTPUT = ["reports.series", "reports.model", "reports.extract", "reports.analyze"]
OUTPUT_CALL = re.compile(r"\b(fprintf|vfprintf|fputs|fputc|fwrite|printf|puts|putchar|pl_json_\w+)\s*\(")
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


def cycles():
    """Every circle among the ALLOWED edges, each once, as a list of units from its smallest name round to it."""
    found = set()

    def walk(path):
        for nxt in sorted(ALLOWED[path[-1]]):
            if nxt == path[0]:
                i = path.index(min(path))
                found.add(tuple(path[i:] + path[:i]))
            elif nxt not in path and nxt > path[0]:
                walk(path + [nxt])

    for unit in sorted(ALLOWED):
        walk([unit])
    return sorted(found)


def meson_text(path):
    with open(path, encoding="utf-8") as f:
        return "\n".join(line.split("#", 1)[0] for line in f)


def unit_of(rel):
    """The unit whose folder holds rel (a path from the root), the deepest one; None outside every unit."""
    parts = rel.split(os.sep)
    best = None
    for unit, folder in UNITS.items():
        f = folder.split("/")
        if parts[:len(f)] == f and (best is None or len(f) > len(UNITS[best].split("/"))):
            best = unit
    return best


def c_code(path):
    """The C text of path with its comments blanked (line count kept)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def output(root, unit):
    """Violations of NO_OUTPUT in unit's C sources: a call that writes output."""
    problems = []
    folder = os.path.join(root, UNITS[unit])
    for fname in sorted(os.listdir(folder)):
        if not fname.endswith((".c", ".h")):
            continue
        for lineno, line in enumerate(c_code(os.path.join(folder, fname)).split("\n"), 1):
            m = OUTPUT_CALL.search(re.sub(r'"(?:[^"\\]|\\.)*"', '""', line))
            if m:
                problems.append(f"{os.path.join(UNITS[unit], fname)}:{lineno}: {m.group(1)}() writes output in "
                                f"{unit}: rendering is reports.render's")
    return problems


def english(root, unit, allowed):
    """Violations of NO_ENGLISH in unit's C sources: a literal with two words in it, outside the allowed functions."""
    problems = []
    folder = os.path.join(root, UNITS[unit])
    for fname in sorted(os.listdir(folder)):
        if not fname.endswith((".c", ".h")):
            continue
        rel = os.path.join(UNITS[unit], fname)
        with open(os.path.join(folder, fname), encoding="utf-8", errors="replace") as f:
            text = f.read()
        # comments out, line count kept
        text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
        text = re.sub(r"//[^\n]*", "", text)
        func = None
        for lineno, line in enumerate(text.split("\n"), 1):
            m = re.match(r"[A-Za-z_][\w\s\*]*?\b(\w+)\(", line)
            if m and not line.rstrip().endswith(";"):  # a definition at the left margin: the function we are in
                func = m.group(1)
            for lit in re.findall(r'"((?:[^"\\]|\\.)*)"', line):
                if re.search(r"[A-Za-z]{2,} [A-Za-z]{2,}", lit) and func not in allowed:
                    problems.append(f"{rel}:{lineno}: \"{lit[:40]}\" is English in {unit}"
                                    f"{' (' + func + ')' if func else ''}: the sentence belongs to the analysis or "
                                    "the renderers")
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    problems = []
    for circle in cycles():
        problems.append(f"ALLOWED has a circle: {' -> '.join(circle + (circle[0],))}")
    # which unit declares each <name>_dep
    owner = {}
    for unit, folder in UNITS.items():
        for name in re.findall(r"\b(\w+_dep)\s*=\s*declare_dependency", meson_text(os.path.join(root, folder,
                                                                                               "meson.build"))):
            owner[name] = unit
    # headers per unit folder (top level: the folder its _dep exports)
    headers = {}
    for unit, folder in UNITS.items():
        for name in os.listdir(os.path.join(root, folder)):
            if name.endswith(HEADER_EXT):
                headers.setdefault(name, set()).add(unit)
    for name, units in sorted(headers.items()):
        if len(units) > 1:
            problems.append(f"header {name} exists in {', '.join(sorted(units))}: one name, one folder")

    print("edges (meson dependencies: lines):")
    for unit, folder in UNITS.items():
        used = set(re.findall(r"\b(\w+_dep)\b", meson_text(os.path.join(root, folder, "meson.build"))))
        edges = sorted({owner[d] for d in used if d in owner and owner[d] != unit})
        print(f"  {unit} -> {{{', '.join(edges)}}}" if edges else f"  {unit} -> {{}}")
        reach = closure(unit)
        for e in edges:
            if e not in reach:
                problems.append(f"{folder}/meson.build: {unit} -> {e} is not an allowed edge")

    def check_includes(folder, unit, label, also=frozenset()):
        reach = closure(unit) | {unit} | set(also)
        for a in also:  # a unit a test may also use, with what it reaches (the wing's facade: all of the wing)
            reach |= closure(a)
        for dirpath, dirnames, files in os.walk(os.path.join(root, folder)):
            # a unit's folder holding other units (tracer/): each is checked as itself
            dirnames[:] = [d for d in dirnames
                           if unit_of(os.path.relpath(os.path.join(dirpath, d), root)) in (unit, None)]
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
                            there = unit_of(os.path.relpath(os.path.join(dirpath, inc), root))
                            if there is not None and there not in reach:
                                problems.append(f"{rel}:{lineno}: \"{inc}\" reaches into {there}, which {label} "
                                                "may not use")
                            elif there is not None and there != unit_of(rel):
                                problems.append(f"{rel}:{lineno}: \"{inc}\" names a folder of {there}: include its "
                                                "headers by their bare name")
                            continue
                        if "/" in inc:
                            problems.append(f"{rel}:{lineno}: \"{inc}\" names a folder: the repository root is not "
                                            "on the include path")
                            continue
                        owners = headers.get(inc, set())
                        if owners and not owners & reach:
                            problems.append(f"{rel}:{lineno}: \"{inc}\" is a header of {', '.join(sorted(owners))}, "
                                            f"which {label} may not use")

    for unit, folder in UNITS.items():
        check_includes(folder, unit, unit)
    for comp in COMPONENTS:
        if os.path.isdir(os.path.join(root, "tests", comp)):
            check_includes(os.path.join("tests", comp), comp, f"tests/{comp}", TESTS_ALSO.get(comp, ()))

    for unit, allowed in NO_ENGLISH.items():
        problems.extend(english(root, unit, allowed))
    for unit in NO_OUTPUT:
        problems.extend(output(root, unit))

    if problems:
        print(f"{len(problems)} violation(s):")
        for p in problems:
            print("  " + p)
        return 1
    print("no violations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
