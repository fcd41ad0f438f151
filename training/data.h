/* Token streams for the engine: byte-level tokens (vocab 256) of a text corpus (the one built into the binary,
 * training/data/corpus.txt, or a file), or a synthetic stream over any vocabulary for large-logits runs.
 * Host memory only (the data set lives on the host, as a DataLoader's does); batches are copied to device tensors
 * by the model. Not thread-safe per pl_data_t.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pl_data {
    int32_t *tokens;   /* [n_tokens] */
    size_t n_tokens;
    size_t n_train;    /* tokens [0, n_train) train, [n_train, n_tokens) validation */
    int vocab;
    uint64_t rng;      /* batch sampler state */
} pl_data_t;

/* The corpus compiled into the binary (bytes, not NUL-terminated). */
const unsigned char *pl_data_builtin_corpus(size_t *len);

/* Byte-level tokens of `path`, or of the built-in corpus when path is NULL. 90 % train / 10 % validation.
 * Returns 0, -errno on I/O failure, -EINVAL when the text is shorter than 1 KiB. */
int pl_data_open_text(pl_data_t *d, const char *path, uint64_t seed);

/* A synthetic stream of n_tokens over `vocab` ids: each token is the previous one times a fixed multiplier plus a
 * small random offset (mod vocab), so a model can learn it (the loss falls from ln V). Returns 0 or -ENOMEM. */
int pl_data_open_synthetic(pl_data_t *d, int vocab, size_t n_tokens, uint64_t seed);

/* Sample B windows of T+1 tokens at random offsets of the train (or validation) split:
 * inputs (B,T) and targets (B,T) = inputs shifted by one. */
void pl_data_batch(pl_data_t *d, bool validation, int B, int T, int *inputs, int *targets);

/* Uniform integer in [0, n) from the data's sampler (used for variable sequence lengths too). */
uint64_t pl_data_rand(pl_data_t *d, uint64_t n);

void pl_data_close(pl_data_t *d);
