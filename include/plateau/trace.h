/* plateau trace files: record model and reader API.
 *
 * A trace file holds one process image's events (docs/trace-format.md has the byte layout): a versioned
 * header, then checksummed chunks of records. The preloaded tracer writes them; reports read them here.
 * The reader stops cleanly at the first truncated or corrupted chunk: every record before it is delivered,
 * then pl_trace_next returns -EBADMSG and pl_trace_error() names the file, the offset and what was wrong.
 * Memory is bounded whatever the input (one chunk of at most PL_TRACE_MAX_CHUNK_BYTES at a time).
 *
 * Ownership: a reader is created by pl_trace_open / pl_trace_open_mem and released by pl_trace_close.
 * Strings and arrays in a decoded record point into the reader and stay valid until the next
 * pl_trace_next or pl_trace_close on that reader.
 * Thread safety: one reader per thread; distinct readers are independent.
 * Errors: functions returning int return 0 (or 1, see pl_trace_next) or a negative errno.
 * Compiles as C11 and as C++.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define PL_TRACE_API __attribute__((visibility("default")))
#else
#define PL_TRACE_API
#endif

#define PL_TRACE_VERSION 2u      /* 2.0: packed records, which a 1.x reader cannot skip (below) */
#define PL_TRACE_VERSION_MINOR 0u /* 1.1: module records carry build-id, file size and mtime (appended fields);
                                    * 1.2: process_start records carry the host allocator (appended fields);
                                    * 1.3: host_alloc records carry the thread's malloc-call ordinal (appended);
                                    * 1.4: the header carries the run id (formerly reserved bytes);
                                    * 1.5: stack records carry Python frame ids (appended); pyframe records;
                                    * 1.6: alloc_stats of allocator ids >= PL_ALLOC_ID_EXTERNAL (torch's
                                    *      counters through plateau_alloc_stats), whose counters may be NA;
                                    * 1.7: process_start records carry the host name (appended field), so the
                                    *      ranks of a multi-node job are told apart by (node, pid);
                                    * 1.8: retention records (the Python census: who keeps a leak);
                                    * 1.9: retention records carry storages reachable from the holder (appended);
                                    *      aggregate records (what plateau run's collector left out of a
                                    *      long run's trace, counted: docs/long-runs.md);
                                    * 2.0: packed records: step, rss, heap, host_alloc and host_free in a
                                    *      short form (varints, differences within a chunk), decoded by the
                                    *      reader into the same records (docs/trace-format.md); a major
                                    *      version because a 1.x reader cannot skip them. This reader reads
                                    *      every 1.x trace and 2.0. */
#define PL_TRACE_MAX_CHUNK_BYTES (1u << 20)  /* largest chunk payload a reader accepts */
#define PL_TRACE_MAX_FRAMES 128              /* frames per stack (native and Python together) */
#define PL_RETENTION_MAX_RANGES 32           /* storages a retention record carries (since 1.9) */
#define PL_TRACE_MAX_ARGV 32                 /* argv entries kept in a process record */
#define PL_TRACE_NA UINT64_MAX               /* "not available" in optional u64 fields */
#define PL_TRACE_MAX_T_NS ((INT64_C(1) << 62) - 1) /* a record's t_ns and a header's start times lie in [0, this] (146
                                              * years): a reader refuses others, so any difference or sum of two
                                              * is an int64_t without overflow */
#define PL_TRACE_MAX_SYMBOL_BYTES 65000u     /* frame symbols longer than this are cut (record limit 64 KiB) */

typedef enum pl_rec_type {
    PL_REC_PROCESS_START = 1, /* first record of every trace */
    PL_REC_PROCESS_END = 2,   /* exit, return from main or _exit (absent after exec, fatal signal, SIGKILL) */
    PL_REC_STEP = 3,          /* end of a training step */
    PL_REC_MARK = 4,          /* named point in time */
    PL_REC_RSS = 5,           /* resident memory sample */
    PL_REC_HEAP = 6,          /* exact host heap totals */
    PL_REC_HOST_ALLOC = 7,    /* sampled host allocation, with its stack */
    PL_REC_HOST_FREE = 8,     /* free of a sampled host allocation */
    PL_REC_DEVICE_ALLOC = 9,  /* device memory handed to the program (block / cudaMalloc / cuMemAlloc) */
    PL_REC_DEVICE_FREE = 10,
    PL_REC_DEVICE_MAP = 11,   /* device memory acquired from the driver (allocator segment, pages mapped) */
    PL_REC_DEVICE_UNMAP = 12,
    PL_REC_DEVICE_OOM = 13,   /* a device request failed */
    PL_REC_ALLOC_STATS = 14,  /* caching allocator statistics snapshot */
    PL_REC_STACK = 15,        /* stack table entry: id -> program counters */
    PL_REC_FRAME = 16,        /* one program counter resolved: module + symbol + offset */
    PL_REC_MODULE = 17,       /* a loaded object seen in a stack */
    PL_REC_THREAD_NAME = 18,
    PL_REC_LOST = 19,         /* records dropped because the writer could not keep up */
    PL_REC_EXEC = 20,         /* the process is about to exec (the new image writes its own trace) */
    PL_REC_PYFRAME = 21,      /* since 1.4: one Python frame (file, function, line) of stack records */
    PL_REC_RETENTION = 22,    /* since 1.8: one holder sized by the Python census, or one census (docs/retention.md) */
    PL_REC_AGGREGATE = 23,    /* since 1.9: records the collector left out, counted per call stack (docs/long-runs.md) */
    PL_REC_TYPE_MAX = 23
} pl_rec_type_t;

/* PL_STEP_AUTO: synthesised by the report's period detection; PL_STEP_OPTIMIZER: plateau_step_auto() (the Python
 * bootstrap's optimizer hook, python/plateau/_steps.py); PL_STEP_LOG: a line of the job's own log, read by
 * `plateau attach --steps-from` */
typedef enum pl_step_source {
    PL_STEP_API_CALL = 0, PL_STEP_SIGNAL = 1, PL_STEP_AUTO = 2, PL_STEP_OPTIMIZER = 3, PL_STEP_LOG = 4
} pl_step_source_t;

typedef enum pl_host_kind {
    PL_HOST_MALLOC = 0, PL_HOST_CALLOC = 1, PL_HOST_REALLOC = 2, PL_HOST_MEMALIGN = 3, PL_HOST_MMAP = 4
} pl_host_kind_t;

typedef enum pl_device_source {
    PL_DEV_SRC_RUNTIME = 0,   /* CUDA runtime interposer (cudaMalloc ...) */
    PL_DEV_SRC_DRIVER = 1,    /* CUDA driver interposer (cuMemAlloc ...) */
    PL_DEV_SRC_ALLOCATOR = 2, /* plateau's caching allocator event hook */
    PL_DEV_SRC_CUPTI = 3      /* CUPTI memory activity */
} pl_device_source_t;

typedef struct pl_trace_header {
    uint32_t version;
    uint32_t pid, ppid;
    uint32_t exec_seq;          /* 0 for the first image of a pid, +1 per exec */
    int64_t start_realtime_ns;  /* CLOCK_REALTIME at trace start */
    int64_t start_mono_ns;      /* CLOCK_MONOTONIC at trace start; record t_ns are CLOCK_MONOTONIC */
    uint32_t version_minor;     /* 0 for traces written before minor versions existed; additive changes only */
    uint64_t run_id;            /* since 1.4: PLATEAU_RUN_ID of the run that wrote it (plateau run sets it); 0 none */
} pl_trace_header_t;

typedef struct pl_rec_process {
    uint32_t pid, ppid, exec_seq;
    int32_t rank, local_rank;        /* -1 when not set */
    uint64_t sample_bytes;           /* mean of the Poisson-by-bytes stack sampling (0 = every call) */
    uint64_t interval_ns;            /* RSS sampling interval */
    uint64_t host_mem_bytes;         /* physical memory of the host */
    uint64_t cgroup_max_bytes;       /* the memory cgroup's effective limit (v2 memory.max, v1 memory.limit_in_bytes);
                                      * PL_TRACE_NA if absent or none */
    int64_t start_realtime_ns;
    const char *exe;
    uint32_t argc;                   /* real argc; at most PL_TRACE_MAX_ARGV kept in argv */
    uint32_t n_argv;
    const char *argv[PL_TRACE_MAX_ARGV];
    /* since 1.2 (older traces decode as "", ""): the allocator that served malloc, seen by the tracer at start */
    const char *host_allocator;          /* "glibc", "jemalloc", "tcmalloc", "mimalloc", "other:<file>", "unknown" */
    const char *host_allocator_version;  /* e.g. "2.36" or "5.3.0-0-g54eaed1d8b56..."; "" unknown */
    /* since 1.7 (older traces decode as ""): the host name (uname's nodename, at most 63 bytes), which tells the
     * nodes of a multi-node job apart: pids of different nodes may be equal */
    const char *node;
} pl_rec_process_t;

typedef struct pl_rec_step { uint64_t step; uint32_t source; } pl_rec_step_t;
typedef struct pl_rec_mark { uint64_t step; const char *label; } pl_rec_mark_t;

typedef struct pl_rec_rss {   /* bytes; PL_TRACE_NA when unavailable */
    uint64_t step;            /* the step this sample was taken for; 0 = periodic sample */
    uint64_t rss_anon, rss_file, rss_shmem, pss, cgroup_current;
    uint64_t device_used, device_total;
} pl_rec_rss_t;

typedef struct pl_rec_heap {  /* exact over every traced call since the image started */
    uint64_t step;            /* the step these totals close (taken inside plateau_step); 0 = periodic */
    int64_t live_bytes;       /* malloc family: sum of usable sizes of live blocks */
    int64_t live_count;
    uint64_t n_alloc, n_free;
    uint64_t alloc_bytes;     /* cumulative usable bytes allocated */
    int64_t mmap_live_bytes, mmap_live_count; /* anonymous mmap by the program */
} pl_rec_heap_t;

typedef struct pl_rec_host_alloc {
    uint64_t addr, size;      /* size = usable size */
    uint32_t stack_id, tid, kind;
    /* since 1.3 (older traces decode as PL_TRACE_NA): the recording thread's count of malloc-family calls seen
     * by the tracer, this one included (for kind mmap: the calls before it). Differences between records of one
     * tid are exact call counts; the absolute value has no meaning. PL_TRACE_NA when unknown. */
    uint64_t call_ordinal;
} pl_rec_host_alloc_t;

typedef struct pl_rec_host_free { uint64_t addr; uint32_t tid; } pl_rec_host_free_t;

typedef struct pl_rec_device {
    uint32_t source;          /* pl_device_source_t */
    int32_t device;
    uint32_t pool;            /* allocator pool (1 small, 2 large), 0 otherwise */
    uint32_t allocator_id;    /* which allocator instance (source allocator), 0 otherwise */
    uint64_t addr, size, requested, stream;
    uint32_t stack_id;        /* 0 = no stack */
    uint32_t tid;
} pl_rec_device_t;

/* alloc_stats allocator ids: 1..0xffff plateau's caching allocators in creation order; PL_ALLOC_ID_EXTERNAL +
 * PLATEAU_STATS_* (include/plateau/step.h): counters a framework handed over through plateau_alloc_stats() (torch's
 * CUDA caching allocator, live tensors counted by the Python bootstrap). */
#define PL_ALLOC_ID_EXTERNAL 0x10000u
#define PL_ALLOC_ID_TORCH_CUDA (PL_ALLOC_ID_EXTERNAL + 1u)
#define PL_ALLOC_ID_TORCH_TENSORS (PL_ALLOC_ID_EXTERNAL + 2u)
/* the used device memory of one process on one device, as NVML reports it from outside the process (`plateau
 * attach`): reserved_bytes holds it, capacity_bytes the device's memory, every other counter is NA */
#define PL_ALLOC_ID_NVML (PL_ALLOC_ID_EXTERNAL + 3u) /* PLATEAU_STATS_NVML: a program cannot write it */

typedef struct pl_rec_alloc_stats {
    uint32_t allocator_id;
    int32_t device;
    uint64_t step;
    int64_t allocated_bytes, allocated_bytes_peak, reserved_bytes, reserved_bytes_peak;
    int64_t active_bytes, inactive_split_bytes, requested_bytes;
    int64_t n_allocations, n_segments;  /* live blocks (tensors) and segments */
    int64_t num_alloc_retries, num_ooms, num_device_alloc, num_device_free;
    uint64_t largest_free_bytes, capacity_bytes;
    double fragmentation;
} pl_rec_alloc_stats_t;

typedef struct pl_rec_stack {
    uint32_t stack_id;        /* >= 1 */
    uint32_t n_frames;        /* native frames, innermost first */
    uint64_t pcs[PL_TRACE_MAX_FRAMES];
    /* since 1.4 (older traces decode as 0): the Python frames of the allocating thread, innermost first, as
     * pyframe ids (PL_REC_PYFRAME); n_frames + n_py <= PL_TRACE_MAX_FRAMES */
    uint32_t n_py;
    uint32_t py[PL_TRACE_MAX_FRAMES];
} pl_rec_stack_t;

typedef struct pl_rec_pyframe {   /* since 1.4 */
    uint32_t pyframe_id;      /* >= 1, unique per trace */
    int32_t line;             /* line number in file; the function's first line when the offset has no line */
    const char *file;         /* the code object's co_filename (as Python has it: absolute for scripts) */
    const char *function;     /* co_qualname ("Trainer.step", "<module>", "<listcomp>") */
} pl_rec_pyframe_t;

typedef struct pl_rec_frame {
    uint64_t pc;
    uint32_t module_id;       /* 0 = unknown module */
    uint64_t module_offset;   /* pc - module base */
    const char *symbol;       /* dladdr's (dynamic, mangled) symbol; "" when none covers pc. Up to
                               * PL_TRACE_MAX_SYMBOL_BYTES; reports resolve static and C++ names offline */
    uint64_t symbol_offset;
} pl_rec_frame_t;

typedef struct pl_rec_module {
    uint32_t module_id;
    uint64_t base;            /* load address of the module's first mapping; frame module_offset = pc - base */
    const char *path;
    /* since 1.1 (older traces decode as "", PL_TRACE_NA, 0): identity of the file, so an offline symboliser
     * can tell whether the file on disk is still the one that ran */
    const char *build_id;     /* lowercase hex of the NT_GNU_BUILD_ID note of the loaded image, "" if none */
    uint64_t file_size;       /* st_size of path when the module was first seen; PL_TRACE_NA unknown */
    int64_t file_mtime_ns;    /* st_mtim of path; 0 unknown */
} pl_rec_module_t;
/* since 1.8: the Python bootstrap's census of what holds memory (docs/retention.md). A record with an empty path is
 * one census: items = objects visited, nodes = holders sized, bytes = its duration in ns. A record with a path is
 * one holder's size at census `census` (records of earlier censuses come with the first report of a holder). */
#define PL_RETENTION_SHORT 1u       /* the census stopped short (object or time cap): what it missed is unknown */
#define PL_RETENTION_GUESS 2u       /* the line is one of several that grow the holder */
#define PL_RETENTION_ESTIMATED 4u   /* bytes extrapolated from the container's first items */
#define PL_RETENTION_CAPPED 8u      /* the autograd walk hit its cap: nodes and bytes are lower bounds */
typedef struct pl_rec_retention {
    uint32_t census;          /* census number in this process, from 1 */
    uint32_t flags;           /* PL_RETENTION_* */
    uint64_t step;            /* steps completed when the record was written */
    uint64_t items;           /* container items; PL_TRACE_NA for a tensor */
    uint64_t nodes;           /* autograd nodes reachable (not counting leaves) */
    uint64_t bytes;           /* tensor storage reachable, each storage once; PL_TRACE_NA unknown */
    int32_t line;             /* the line that grows it (in file), 0 unknown */
    const char *path;         /* "model.history", "total_loss"; "" for a census record */
    const char *what;         /* "local of train() in main.py", "attribute of RNNModel" */
    const char *kind;         /* "list", "dict", "tensor", ...; "census" for a census record */
    const char *file;         /* the file of `line`, "" unknown */
    const char *fix;          /* a likely fix for a known shape, "" none */
    /* since 1.9 (older traces decode as 0): tensor storages reachable from the holder at this census, as (data
     * pointer, bytes), at most PL_RETENTION_MAX_RANGES: what lets a report say which allocation site's live bytes
     * the holder keeps */
    uint32_t n_ranges;
    uint64_t range_addr[PL_RETENTION_MAX_RANGES];
    uint64_t range_bytes[PL_RETENTION_MAX_RANGES];
} pl_rec_retention_t;

/* since 1.9: what plateau run's collector left out of the trace, counted (docs/long-runs.md). One record per call
 * stack and kind, written at least every 65,536 steps or hour and when the trace ends; a trace may hold several for the
 * same stack (add them up). */
#define PL_AGG_HOST_PAIRS 1u        /* sampled host allocations freed within the step that made them: a host_alloc
                                     * and its host_free, neither written */
#define PL_AGG_LIMIT 3u             /* the trace reached its size limit (PLATEAU_TRACE_MAX) when step_first steps were
                                     * complete: n records (bytes) after it were not written, the process went on to
                                     * step_last; stack_id 0 */
#define PL_AGG_SAMPLES 2u           /* periodic heap and rss samples (step 0) that were neither the first, the last,
                                     * nor any metric's lowest or highest of their step: stack_id 0, bytes 0 */
typedef struct pl_rec_aggregate {
    uint32_t what;            /* PL_AGG_* */
    uint32_t stack_id;        /* the stack of the allocations counted (its stack record is in the trace) */
    uint64_t step_first;      /* steps completed when the first of them was made */
    uint64_t step_last;       /* ... and the last */
    uint64_t n;               /* allocations counted (each with its free) */
    uint64_t bytes;           /* their usable bytes, summed */
    uint64_t n_sized;         /* of them, those not mmap and over 16 bytes ... */
    uint64_t n_8mod16;        /* ... and of those, the ones whose usable size is 8 mod 16 (the host allocator's mark) */
} pl_rec_aggregate_t;

typedef struct pl_rec_thread_name { uint32_t tid; const char *name; } pl_rec_thread_name_t;
typedef struct pl_rec_lost { uint64_t n_records, n_bytes; } pl_rec_lost_t;
typedef struct pl_rec_exec { const char *path; } pl_rec_exec_t;

typedef struct pl_trace_record {
    pl_rec_type_t type;
    int64_t t_ns;             /* CLOCK_MONOTONIC */
    union {
        pl_rec_process_t process;
        pl_rec_step_t step;
        pl_rec_mark_t mark;
        pl_rec_rss_t rss;
        pl_rec_heap_t heap;
        pl_rec_host_alloc_t host_alloc;
        pl_rec_host_free_t host_free;
        pl_rec_device_t device;     /* PL_REC_DEVICE_* */
        pl_rec_alloc_stats_t alloc_stats;
        pl_rec_stack_t stack;
        pl_rec_frame_t frame;
        pl_rec_module_t module;
        pl_rec_thread_name_t thread_name;
        pl_rec_lost_t lost;
        pl_rec_exec_t exec;
        pl_rec_pyframe_t pyframe;
        pl_rec_retention_t retention;
        pl_rec_aggregate_t aggregate;
    } u;
} pl_trace_record_t;

typedef struct pl_trace_reader pl_trace_reader_t;

/* Open a trace file and validate its header. Returns 0, -errno from open, or -EBADMSG for a file that is
 * not a plateau trace / has an unsupported version (pl_trace_open_error() then holds the message). */
PL_TRACE_API int pl_trace_open(const char *path, pl_trace_reader_t **out);

/* Same over a memory buffer (not copied: it must outlive the reader). `name` is used in messages. */
PL_TRACE_API int pl_trace_open_mem(const void *data, size_t len, const char *name, pl_trace_reader_t **out);

/* Message of the last failed pl_trace_open* on this thread ("" if none). */
PL_TRACE_API const char *pl_trace_open_error(void);

PL_TRACE_API const pl_trace_header_t *pl_trace_header(const pl_trace_reader_t *r);

/* Decode the next record into *rec. Returns 1 with a record, 0 at a clean end of file, -EBADMSG when the rest
 * of the file is truncated or corrupted (every earlier record was delivered; pl_trace_error() says where and
 * why), or -errno on an I/O error. After a non-positive return, further calls return the same value. */
PL_TRACE_API int pl_trace_next(pl_trace_reader_t *r, pl_trace_record_t *rec);

/* Follow a trace still being written (plateau watch): with follow != 0, a chunk cut short at the end of the file is
 * taken as not yet written, not as damage: pl_trace_next returns 0 (end for now) and a later call re-reads it from
 * its header once it is complete. A bad magic, length, sequence or checksum still stops the stream. */
PL_TRACE_API void pl_trace_follow(pl_trace_reader_t *r, int follow);

/* "" while reading is clean, else "FILE: offset N: what was wrong". */
PL_TRACE_API const char *pl_trace_error(const pl_trace_reader_t *r);

/* Byte offset of the end of the last whole chunk delivered (where a reader stopped, if it did). */
PL_TRACE_API uint64_t pl_trace_offset(const pl_trace_reader_t *r);

PL_TRACE_API void pl_trace_close(pl_trace_reader_t *r);

/* The run-id file `plateau run` writes in a run directory: the run id as 16 hex digits and a newline, then
 * `host-allocator NAME` and a newline: what `plateau run --host-allocator` asked for (glibc or jemalloc). */
#define PL_TRACE_RUN_ID_FILE "plateau-run-id"

/* plateau's notes in a run directory (preload/note.c, docs/env.md "Notes"): one line per note, "PID<TAB>TEXT",
 * appended by the traced processes (each text once per process) and by the Python bootstrap; `plateau run` prints
 * them grouped when the command ends. */
#define PL_TRACE_NOTES_FILE "plateau-notes"

/* `plateau attach`'s note in its run directory: plain text, a few lines saying what a run followed from outside could
 * not see and what its verdict rests on; `plateau report` shows it under the text report. */
#define PL_TRACE_ATTACH_FILE "plateau-attach"

/* The trace files of a run directory (tracer/read/rundir.c): every regular file named *.pltrace, sorted by name,
 * owned by the directory's owner and, when the directory has a run-id file (owned by its owner), whose header
 * carries that run id. Other files with that name (FIFO, socket, device, directory, symbolic link; planted by
 * another user; left by another run) are never read: they are listed in `skipped` as "NAME: why", so callers
 * can say what they left out. */
typedef struct pl_trace_dir {
    char **paths;          /* "DIR/NAME" of each trace to read, sorted; owned */
    size_t n_paths;
    char **skipped;        /* "NAME: why" of each *.pltrace left out, sorted; owned */
    size_t n_skipped;
    uint64_t run_id;       /* the directory's run id, 0 when it has no run-id file (every owned trace is read) */
    uint32_t owner_uid;    /* the directory's owner */
    char host_allocator[16]; /* the run-id file's host allocator ("glibc", "jemalloc": what plateau run was asked
                                for, with --append the first run's); "" when it names none */
} pl_trace_dir_t;

/* List dir into *out (zeroed first). Returns 0, -ENOMEM, or -errno from opendir. Not thread-safe per *out;
 * release with pl_trace_dir_free (safe on a zeroed or freed list). */
PL_TRACE_API int pl_trace_dir_list(const char *dir, pl_trace_dir_t *out);
PL_TRACE_API void pl_trace_dir_free(pl_trace_dir_t *list);

/* "a FIFO", "a directory", ... for a st_mode (messages about files that are not traces). */
PL_TRACE_API const char *pl_trace_file_kind(unsigned mode);

/* Name of a record type ("step", "device_alloc", ...), "unknown" for others. */
PL_TRACE_API const char *pl_trace_type_name(pl_rec_type_t type);

#ifdef __cplusplus
}
#endif
