/* Test helper for the python.* tests: for each trace file given, one JSON line with the process's argv, its step
 * records counted by source (include/plateau/trace.h pl_step_source_t) and its marks' labels. The report counts
 * steps without their source; the tests need to tell optimizer steps (3) from explicit ones (0).
 * Labels are printed with '"' and '\' replaced by '_' and control bytes dropped (test labels are plain ASCII). */
#include <stdint.h>
#include <stdio.h>

#include <plateau/trace.h>

static void put_str(const char *s) {
    putchar('"');
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20) continue;
        putchar(c == '"' || c == '\\' ? '_' : c);
    }
    putchar('"');
}

int main(int argc, char **argv) {
    int bad = 0;
    for (int i = 1; i < argc; i++) {
        pl_trace_reader_t *r;
        if (pl_trace_open(argv[i], &r) < 0) {
            fprintf(stderr, "trace_steps: %s\n", pl_trace_open_error());
            bad = 1;
            continue;
        }
        uint64_t by_source[4] = {0};
        int n_marks = 0;
        printf("{\"file\": ");
        put_str(argv[i]);
        printf(", \"argv\": [");
        pl_trace_record_t rec;
        int rc;
        while ((rc = pl_trace_next(r, &rec)) == 1) {
            if (rec.type == PL_REC_PROCESS_START)
                for (uint32_t k = 0; k < rec.u.process.n_argv; k++) {
                    if (k) printf(", ");
                    put_str(rec.u.process.argv[k]);
                }
            else if (rec.type == PL_REC_STEP && rec.u.step.source < 4)
                by_source[rec.u.step.source]++;
        }
        pl_trace_close(r);
        printf("], \"steps_api\": %llu, \"steps_signal\": %llu, \"steps_optimizer\": %llu, \"marks\": [",
               (unsigned long long)by_source[PL_STEP_API_CALL], (unsigned long long)by_source[PL_STEP_SIGNAL],
               (unsigned long long)by_source[PL_STEP_OPTIMIZER]);
        /* second pass for the marks, so argv comes first whatever the record order */
        if (pl_trace_open(argv[i], &r) == 0) {
            while (pl_trace_next(r, &rec) == 1)
                if (rec.type == PL_REC_MARK) {
                    if (n_marks++) printf(", ");
                    put_str(rec.u.mark.label);
                }
            pl_trace_close(r);
        }
        printf("], \"clean\": %s}\n", rc == 0 ? "true" : "false");
    }
    return bad;
}
