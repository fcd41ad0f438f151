/* plateau step and mark API.
 *
 * A training program calls plateau_step() once per optimizer step so reports can build per-step series.
 * The functions are defined by the preloaded tracer (libplateau_preload.so). A program links them from an install
 * with `pkg-config --cflags --libs plateau` (or CMake: find_package(plateau), plateau::plateau): libplateau's
 * definitions do nothing, and under `plateau run` the preloaded tracer's come first and record. Or, with nothing
 * to link, look them up at run time:
 *
 *     void (*step)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "plateau_step");
 *     if (step) step();
 *
 * From Python: `import plateau; plateau.step()` (python/, docs/python.md), or ctypes.CDLL(None).plateau_step()
 *
 * Thread safety: both are safe from any thread; they never allocate from the traced heap, never block on
 * I/O (records go to an in-memory buffer that a writer thread flushes), and never fail (when recording is
 * off, or no tracer is preloaded and the program resolved them at run time, they do nothing). They take short
 * internal locks, so they are NOT async-signal-safe: to mark steps from a signal, run with
 * PLATEAU_STEP_SIGNAL=1 (or `plateau run --steps-signal`) and send SIGUSR2 instead.
 * What a step records: a step record, the exact host heap totals at that moment, one statistics snapshot per
 * plateau caching allocator, and (from the sampler thread, right after) an RSS/PSS sample.
 * Compiles as C11 and as C++.
 */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define PL_STEP_API __attribute__((visibility("default")))
#else
#define PL_STEP_API
#endif

/* End of one training step (after the optimizer update). Steps are numbered from 1 in the trace. */
PL_STEP_API void plateau_step(void);

/* End of one training step, found automatically: what the Python bootstrap calls after each optimizer step
 * (docs/python.md). Explicit steps win: once the program has called plateau_step(), this records nothing; and the
 * first plateau_step() that follows an automatic step directly (no other step between them) is taken as that same
 * boundary and records nothing, so `optimizer.step(); plateau_step()` counts once per iteration. Auto steps
 * recorded before the first explicit call stay in the trace (step source 3). Same thread safety as plateau_step(). */
PL_STEP_API void plateau_step_auto(void);

/* A named point in time (e.g. "eval-begin", "epoch 3"). label is copied (truncated to 63 bytes); NULL = "". */
PL_STEP_API void plateau_mark(const char *label);

#ifdef __cplusplus
}
#endif
