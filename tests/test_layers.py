#!/usr/bin/env python3
"""build.layers_planted: tools/check-layers.py catches a reach across the layers: a copy of the tree's sources with
one planted include or meson edge each must fail the check with the line that names it, and the unchanged copy must
pass. Covers the supervisor (supervise/: it reaches nothing of plateau's; cli wires it) and the inside of the reports
wing (a renderer reaching the analysis, the model reaching a renderer or the analysis, the analysis reaching the
extraction) and a circle in the allowed table itself.

usage: test_layers.py CHECK_LAYERS SOURCE_ROOT
"""
import os
import shutil
import subprocess
import sys
import tempfile

KEEP = (".c", ".h", ".cuh", ".cu", "meson.build")


def copy_sources(root, dest):
    """The sources the checker reads: every folder's C files and meson.build, nothing built."""
    for dirpath, dirnames, files in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        dirnames[:] = [d for d in dirnames if not d.startswith((".", "build"))]
        for f in files:
            if f.endswith(KEEP):
                os.makedirs(os.path.join(dest, rel), exist_ok=True)
                shutil.copy(os.path.join(dirpath, f), os.path.join(dest, rel, f))


def check(checker, tree):
    r = subprocess.run([sys.executable, checker, tree], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def append(path, text):
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)


def main():
    checker, root = sys.argv[1], sys.argv[2]
    # (what is planted, file, text, what the checker must say)
    cases = [
        ("supervise includes a collector header", "supervise/planted.c", '#include "collector.h"\n',
         'supervise/planted.c:1: "collector.h" is a header of collector, which supervise may not use'),
        ("supervise includes the command's header", "supervise/planted.c", '#include "commands.h"\n',
         'supervise/planted.c:1: "commands.h" is a header of cli, which supervise may not use'),
        ("supervise includes a common header", "supervise/relay.c", '#include "format.h"\n',
         '"format.h" is a header of common, which supervise may not use'),
        ("the collector reaches up into the supervisor", "collector/planted.c", '#include "supervise.h"\n',
         'collector/planted.c:1: "supervise.h" is a header of supervise, which collector may not use'),
        ("supervise links the collector", "supervise/meson.build", "planted = [collector_dep]\n",
         "supervise/meson.build: supervise -> collector is not an allowed edge"),
        ("a supervisor test includes the command's header", "tests/supervise/test_planted.c",
         '#include "commands.h"\n',
         'tests/supervise/test_planted.c:1: "commands.h" is a header of cli, which tests/supervise may not use'),
        # the reports wing: the renderers read the model and never call the analysis; the model knows neither
        ("a renderer includes an analysis header", "reports/render/planted.c", '#include "diagnosis.h"\n',
         'reports/render/planted.c:1: "diagnosis.h" is a header of reports.analyze, which reports.render may not use'),
        ("a renderer includes the analysis driver", "reports/render/render_text.c", '#include "analyze.h"\n',
         '"analyze.h" is a header of reports.analyze, which reports.render may not use'),
        ("the model includes a renderer's header", "reports/model/planted.c", '#include "render.h"\n',
         'reports/model/planted.c:1: "render.h" is a header of reports.render, which reports.model may not use'),
        ("the model calls into the analysis", "reports/model/report.c", '#include "generations.h"\n',
         '"generations.h" is a header of reports.analyze, which reports.model may not use'),
        ("the analysis reads traces through the extraction", "reports/analyze/planted.c", '#include "extract.h"\n',
         'reports/analyze/planted.c:1: "extract.h" is a header of reports.extract, which reports.analyze may not use'),
        ("the per-series maths reaches up into the model", "reports/series/planted.c", '#include "report.h"\n',
         'reports/series/planted.c:1: "report.h" is a header of reports.model, which reports.series may not use'),
        ("a renderer links the analysis", "reports/render/meson.build", "planted = [reports_analyze_dep]\n",
         "reports/render/meson.build: reports.render -> reports.analyze is not an allowed edge"),
        ("the model links the renderers", "reports/model/meson.build", "planted = [reports_render_dep]\n",
         "reports/model/meson.build: reports.model -> reports.render is not an allowed edge"),
        # the model writes no English: a sentence moved back into it, or a new one beside its names
        ("the model formats a sentence", "reports/model/run.c",
         'int planted(char *b, size_t n, int k) {\n    return snprintf(b, n, "%d workers never step", k);\n}\n',
         '"%d workers never step" is English in reports.model (planted)'),
        ("the trace reader writes a sentence", "reports/ingest/planted.c",
         '#include <stdio.h>\nint planted(char *b, size_t n) { return snprintf(b, n, "a site that grows"); }\n',
         '"a site that grows" is English in reports.ingest (planted)'),
        # the analysis judges and writes into the model; it renders nothing
        ("the analysis renders", "reports/analyze/planted.c",
         '#include <stdio.h>\nvoid planted(FILE *o) { fprintf(o, "x"); }\n',
         "reports/analyze/planted.c:2: fprintf() writes output in reports.analyze: rendering is reports.render's"),
    ]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        clean = os.path.join(tmp, "clean")
        copy_sources(root, clean)
        rc, out = check(checker, clean)
        if rc != 0:
            print(f"FAIL: the unchanged tree does not pass (rc {rc}):\n{out}")
            failures += 1
        for i, (what, path, text, said) in enumerate(cases):
            tree = os.path.join(tmp, f"case{i}")
            shutil.copytree(clean, tree)
            os.makedirs(os.path.dirname(os.path.join(tree, path)), exist_ok=True)
            append(os.path.join(tree, path), text)
            rc, out = check(checker, tree)
            if rc != 1 or said not in out:
                print(f"FAIL: {what}: rc {rc}, expected 1 and '{said}' in:\n{out}")
                failures += 1
            else:
                print(f"ok: {what}")
        # a circle in the allowed table itself (the lowest floor allowed to use the command): the check refuses it
        # whatever the sources say
        with open(checker, encoding="utf-8") as f:
            text = f.read()
        planted = text.replace('    "common": set(),\n', '    "common": {"cli"},\n', 1)
        said = "ALLOWED has a circle: cli -> "
        if planted == text:
            print("FAIL: a circle in ALLOWED: the table's line for common was not found to plant it")
            failures += 1
        else:
            circular = os.path.join(tmp, "check-layers-circle.py")
            with open(circular, "w", encoding="utf-8") as f:
                f.write(planted)
            rc, out = check(circular, clean)
            if rc != 1 or said not in out:
                print(f"FAIL: a circle in ALLOWED: rc {rc}, expected 1 and '{said}' in:\n{out}")
                failures += 1
            else:
                print("ok: a circle in ALLOWED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
