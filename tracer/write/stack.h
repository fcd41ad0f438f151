/* Stack table: each distinct call stack (a list of return addresses, innermost first) gets a small id, so a
 * trace stores it once (PL_REC_STACK) and allocation records carry only the id. Also the per-trace sets of
 * program counters and modules already resolved, so each PC is resolved once (PL_REC_FRAME/MODULE).
 * Memory: fixed-capacity tables in lazily touched mmap'd regions (no malloc, no resizing); when full, intern
 * returns 0 and the allocation is recorded without a stack. intern is thread-safe (one mutex); the PC and
 * module sets are used by one thread (the writer's tick) and need no lock. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

typedef struct pl_stack_table pl_stack_table_t;

/* Capacities: max_stacks distinct stacks (ids 1..max_stacks), max_pcs distinct PCs. 0 = defaults
 * (1<<18 stacks, 1<<20 PCs). Returns 0 or -ENOMEM. */
int pl_stack_create(uint32_t max_stacks, uint32_t max_pcs, pl_stack_table_t **out);
void pl_stack_destroy(pl_stack_table_t *t);

/* Intern a stack of n frames (n <= PL_TRACE_MAX_FRAMES). Returns its id (>= 1), and *is_new = true the first
 * time; 0 when the table is full or n == 0. */
uint32_t pl_stack_intern(pl_stack_table_t *t, const uint64_t *pcs, uint32_t n, bool *is_new);

/* Number of stacks interned so far (ids 1..n are valid). Thread-safe. */
uint32_t pl_stack_count(pl_stack_table_t *t);

/* Frames of stack `id`: returns n and points *pcs at the stored array (valid while t lives). 0 if unknown. */
uint32_t pl_stack_get(pl_stack_table_t *t, uint32_t id, const uint64_t **pcs);

/* PC set: true if pc was not in the set (and inserts it); false if present or the set is full. */
bool pl_stack_pc_insert(pl_stack_table_t *t, uint64_t pc);

/* Module ids by base address: returns the id (>= 1) and *is_new the first time; 0 when full. */
uint32_t pl_stack_module_id(pl_stack_table_t *t, uint64_t base, bool *is_new);

/* Forget everything (fork child: the new trace must define its stacks again). Single-threaded use only. */
void pl_stack_reset(pl_stack_table_t *t);

/* fork support: hold / release the table's mutex around fork(). */
void pl_stack_lock(pl_stack_table_t *t);
void pl_stack_unlock(pl_stack_table_t *t);
