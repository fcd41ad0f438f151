/* PLATEAU_* options of the preloaded tracer (docs/env.md). Parsing is pure: values come through a getenv-like
 * function and problems go to a warning callback as one line each; a malformed value keeps the default. Sizes
 * (PLATEAU_SAMPLE_BYTES, PLATEAU_BUFFER_BYTES) are read with common/units.h pl_units_parse. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

typedef struct pl_options {
    char dir[512];              /* PLATEAU_DIR; "" = make ./plateau-run-<time>-<pid> */
    uint64_t sample_bytes;      /* PLATEAU_SAMPLE_BYTES: mean bytes between stack samples; 0 = every call */
    uint32_t interval_ms;       /* PLATEAU_INTERVAL_MS: RSS/heap sampling period (1..60000, default 100) */
    uint32_t flush_ms;          /* PLATEAU_FLUSH_MS: writer flush period (10..1000, default 250) */
    uint32_t buffer_bytes;      /* PLATEAU_BUFFER_BYTES: writer chunk buffer, 256 B..1 MiB (default 256 KiB; 8) */
    bool step_signal;           /* PLATEAU_STEP_SIGNAL: SIGUSR2 marks a step (default off) */
    bool device_stacks;         /* PLATEAU_DEVICE_STACKS: stack of every device block allocation (default on) */
    bool pss;                   /* PLATEAU_PSS: read smaps_rollup for PSS (default on) */
    bool disable;               /* PLATEAU_DISABLE: forward every call, record nothing */
    bool quiet;                 /* PLATEAU_QUIET: no informational line on stderr */
    bool collector;             /* PLATEAU_COLLECTOR: plateau run collects the records through a shared ring
                                   (no thread, no descriptor in the program; docs/env.md) */
    uint8_t cupti;              /* PLATEAU_CUPTI: pl_cupti_mode_t (default PL_CUPTI_AUTO) */
    uint64_t run_id;            /* PLATEAU_RUN_ID: 1 to 16 hex digits, not 0, written in the trace header; 0 none */
    uint64_t host_memory_bytes; /* PLATEAU_HOST_MEMORY: the host memory recorded instead of the machine's (a size
                                 * > 0; for tests of limits and --stop-on-leak); 0 = the machine's */
} pl_options_t;

/* PLATEAU_CUPTI (docs/env.md): CUPTI memory activity once the program initialises CUDA. */
typedef enum pl_cupti_mode {
    PL_CUPTI_OFF = 0,  /* never load libcupti */
    PL_CUPTI_ON = 1,   /* load it; any failure, a missing library included, gives one line on stderr */
    PL_CUPTI_AUTO = 2  /* load it when present; silent when no libcupti is found at the default places */
} pl_cupti_mode_t;

void pl_options_default(pl_options_t *o);

/* Parse every PLATEAU_* option through getenv_fn. Returns the number of malformed values (each reported
 * through warn, which may be NULL). */
int pl_options_parse(pl_options_t *o, const char *(*getenv_fn)(const char *name), void (*warn)(const char *msg));

/* One more integer option read outside pl_options_parse (PLATEAU_DEBUG_CUDA): decimal digits only, in [lo, hi];
 * anything else (a sign, a suffix, an exponent, overflow) gives one line through warn and def. */
uint32_t pl_options_uint(const char *(*getenv_fn)(const char *name), void (*warn)(const char *msg), const char *name,
                         uint32_t lo, uint32_t hi, uint32_t def);
