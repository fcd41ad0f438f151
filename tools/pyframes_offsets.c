/* Prints the CPython struct offsets that preload/pyframes.c reads, from a Python's own internal headers, to check
 * or extend its per-version layout table (docs/python-frames.md). Not built by meson (it needs one Python's headers
 * at a time):
 *   P=~/.pyenv/versions/3.12.1/include/python3.12
 *   gcc -I$P -I$P/internal tools/pyframes_offsets.c -o /tmp/pyoff && /tmp/pyoff
 * Debian: gcc -I/usr/include/python3.11 tools/pyframes_offsets.c (python3.11-dev ships the internal headers).
 * 3.9 and 3.10 need only the public headers: gcc -I$P tools/pyframes_offsets.c. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#if PY_VERSION_HEX < 0x030b0000
#include <frameobject.h>

int main(void) { /* 3.9, 3.10: PyFrameObject chain */
    printf("minor %d\n", PY_MINOR_VERSION);
    printf("ts_thread_id %zu\nts_frame (frame) %zu\n", offsetof(PyThreadState, thread_id),
           offsetof(PyThreadState, frame));
    printf("fr_code %zu\nfr_previous (f_back) %zu\nfr_lasti %zu\n", offsetof(PyFrameObject, f_code),
           offsetof(PyFrameObject, f_back), offsetof(PyFrameObject, f_lasti));
    printf("co_filename %zu\nco_qualname (co_name) %zu\nco_firstlineno %zu\n", offsetof(PyCodeObject, co_filename),
           offsetof(PyCodeObject, co_name), offsetof(PyCodeObject, co_firstlineno));
#if PY_VERSION_HEX >= 0x030a0000
    printf("co_linetable %zu\n", offsetof(PyCodeObject, co_linetable));
#else
    printf("co_linetable (co_lnotab) %zu\n", offsetof(PyCodeObject, co_lnotab));
#endif
    printf("ascii_size %zu\ncompact_size %zu\ncompact_utf8_len %zu\ncompact_utf8 %zu\n", sizeof(PyASCIIObject),
           sizeof(PyCompactUnicodeObject), offsetof(PyCompactUnicodeObject, utf8_length),
           offsetof(PyCompactUnicodeObject, utf8));
    return 0;
}
#else
#include "internal/pycore_code.h"
#include "internal/pycore_frame.h"

int main(void) {
    printf("minor %d\n", PY_MINOR_VERSION);
    printf("ts_thread_id %zu\n", offsetof(PyThreadState, thread_id));
#if PY_VERSION_HEX < 0x030d0000
    printf("ts_frame (cframe) %zu\ncframe_current %zu\n", offsetof(PyThreadState, cframe),
           offsetof(_PyCFrame, current_frame));
    printf("fr_code %zu\nfr_instr %zu\n", offsetof(_PyInterpreterFrame, f_code),
           offsetof(_PyInterpreterFrame, prev_instr));
#else
    printf("ts_frame (current_frame) %zu\ncframe_current -1\n", offsetof(PyThreadState, current_frame));
    printf("fr_code %zu\nfr_instr %zu\n", offsetof(_PyInterpreterFrame, f_executable),
           offsetof(_PyInterpreterFrame, instr_ptr));
#endif
    printf("fr_previous %zu\nfr_owner %zu\n", offsetof(_PyInterpreterFrame, previous),
           offsetof(_PyInterpreterFrame, owner));
    printf("co_filename %zu\nco_qualname %zu\nco_firstlineno %zu\nco_linetable %zu\n",
           offsetof(PyCodeObject, co_filename), offsetof(PyCodeObject, co_qualname),
           offsetof(PyCodeObject, co_firstlineno), offsetof(PyCodeObject, co_linetable));
    printf("co_firsttraceable %zu\nco_code %zu\n", offsetof(PyCodeObject, _co_firsttraceable),
           offsetof(PyCodeObject, co_code_adaptive));
    printf("ascii_size %zu\ncompact_size %zu\ncompact_utf8_len %zu\ncompact_utf8 %zu\n", sizeof(PyASCIIObject),
           sizeof(PyCompactUnicodeObject), offsetof(PyCompactUnicodeObject, utf8_length),
           offsetof(PyCompactUnicodeObject, utf8));
    printf("owner: generator %d\n", FRAME_OWNED_BY_GENERATOR);
#if PY_VERSION_HEX >= 0x030c0000
    printf("owner: cstack %d\n", FRAME_OWNED_BY_CSTACK);
#endif
    return 0;
}
#endif
