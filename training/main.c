/* plateau-train: the built-in GPT-2 training demo and benchmark workload.
 *
 * Trains a small GPT-2 on byte-level tokens of the built-in corpus (or a synthetic stream with --vocab), every
 * tensor on the plateau caching allocator over the simulated device, and reproduces the memory patterns users
 * report: leaks (--leak graph|outputs|stats|cache) and non-leaks (optimizer-state warmup, --variable-seq,
 * --eval-every spikes, large-vocabulary logits). Prints the expected memory budget first and the allocator's
 * statistics last; calls plateau_step() after every optimizer step when the tracer is loaded.
 * --device auto|cpu|cuda picks the kernel table and backend (device.h): the CPU kernels over the sim device, or
 * the CUDA kernels module (dlopened; this program never links the CUDA runtime or driver) over the cuda backend.
 * Options: plateau-train --help. Exit status: 0 done, 1 usage/config/checkpoint error, 2 out of memory or
 * --device cuda unavailable (or a device error).
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if PL_HAVE_OPENMP
#include <omp.h>
#endif

#include <plateau/alloc.h>

#include "data.h"
#include "device.h"
#include "model.h"

typedef struct opts {
    pl_gpt2_config_t model;
    pl_adamw_config_t adamw;
    pl_leak_config_t leak;
    int batch, seq, steps, threads, eval_every, eval_batch, log_every;
    bool variable_seq;
    pl_device_kind_t device;
    uint64_t seed;
    const char *data_path, *save_path, *load_path;
} opts_t;

static void usage(FILE *f) {
    fprintf(f,
            "usage: plateau-train [options]\n"
            "model:     --layers N (4)  --heads N (4)  --channels N (128)  --vocab N (256; != 256 = synthetic tokens)\n"
            "run:       --batch N (4)  --seq N (64)  --variable-seq  --steps N (400)  --seed N (1337)\n"
            "           --threads N (OpenMP default)  --lr X (1e-3)  --eval-every K (0 = off)\n"
            "           --eval-batch N (2*batch)  --log-every N (steps/20)  --data FILE (text; default: built-in corpus)\n"
            "scenarios: --leak graph|outputs|stats|cache  --leak-start STEP (1)\n"
            "           --leak-rate N (leak on every Nth step from the start, 1)\n"
            "checkpoint: --save FILE (at the end)  --load FILE (before training)\n"
            "device:    --device auto|cpu|cuda (auto: cuda when a driver, a device and the CUDA kernels module are\n"
            "           usable, else cpu; cuda: exit 2 when unavailable)\n"
            "env:       PLATEAU_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF (allocator), PLATEAU_SIM_DEVICE (sim device),\n"
            "           PLATEAU_LIBCUDA (driver path), PLATEAU_TRAIN_CUDA_MODULE (CUDA kernels module path)\n");
}

static int parse_int(const char *name, const char *s, int lo, int hi) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi) {
        fprintf(stderr, "plateau-train: --%s expects an integer in %d..%d, got '%s'\n", name, lo, hi, s);
        exit(1);
    }
    return (int)v;
}

static void parse(int argc, char **argv, opts_t *o) {
    enum { O_LAYERS = 256, O_HEADS, O_CHANNELS, O_VOCAB, O_BATCH, O_SEQ, O_VARSEQ, O_STEPS, O_SEED, O_THREADS, O_LR,
           O_EVAL, O_EVALB, O_LOG, O_DATA, O_LEAK, O_LEAKSTART, O_LEAKRATE, O_SAVE, O_LOAD, O_DEVICE, O_HELP };
    static const struct option lo[] = {
        {"layers", 1, 0, O_LAYERS},   {"heads", 1, 0, O_HEADS},         {"channels", 1, 0, O_CHANNELS},
        {"vocab", 1, 0, O_VOCAB},     {"batch", 1, 0, O_BATCH},         {"seq", 1, 0, O_SEQ},
        {"variable-seq", 0, 0, O_VARSEQ}, {"steps", 1, 0, O_STEPS},     {"seed", 1, 0, O_SEED},
        {"threads", 1, 0, O_THREADS}, {"lr", 1, 0, O_LR},               {"eval-every", 1, 0, O_EVAL},
        {"eval-batch", 1, 0, O_EVALB}, {"log-every", 1, 0, O_LOG},      {"data", 1, 0, O_DATA},
        {"leak", 1, 0, O_LEAK},       {"leak-start", 1, 0, O_LEAKSTART}, {"leak-rate", 1, 0, O_LEAKRATE},
        {"save", 1, 0, O_SAVE},       {"load", 1, 0, O_LOAD},           {"device", 1, 0, O_DEVICE},
        {"help", 0, 0, O_HELP},
        {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    pl_gpt2_config_default(&o->model);
    pl_adamw_config_default(&o->adamw);
    o->leak = (pl_leak_config_t){.kind = PL_LEAK_NONE, .start = 1, .every = 1};
    o->batch = 4;
    o->seq = 64;
    o->steps = 400;
    o->seed = 1337;
    o->eval_batch = -1;
    o->log_every = -1;
    int c;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case O_LAYERS: o->model.n_layer = parse_int("layers", optarg, 1, 256); break;
        case O_HEADS: o->model.n_head = parse_int("heads", optarg, 1, 1024); break;
        case O_CHANNELS: o->model.n_embd = parse_int("channels", optarg, 1, 16384); break;
        case O_VOCAB: o->model.vocab = parse_int("vocab", optarg, 2, 1 << 24); break;
        case O_BATCH: o->batch = parse_int("batch", optarg, 1, 1 << 20); break;
        case O_SEQ: o->seq = parse_int("seq", optarg, 2, 65536); break;
        case O_VARSEQ: o->variable_seq = true; break;
        case O_STEPS: o->steps = parse_int("steps", optarg, 0, 1 << 30); break;
        case O_SEED: o->seed = (uint64_t)parse_int("seed", optarg, 0, 2147483647); break;
        case O_THREADS: o->threads = parse_int("threads", optarg, 1, 1024); break;
        case O_LR: {
            char *end;
            o->adamw.lr = strtof(optarg, &end);
            if (*end || !(o->adamw.lr > 0)) {
                fprintf(stderr, "plateau-train: --lr expects a positive number, got '%s'\n", optarg);
                exit(1);
            }
            break;
        }
        case O_EVAL: o->eval_every = parse_int("eval-every", optarg, 0, 1 << 30); break;
        case O_EVALB: o->eval_batch = parse_int("eval-batch", optarg, 1, 1 << 20); break;
        case O_LOG: o->log_every = parse_int("log-every", optarg, 1, 1 << 30); break;
        case O_DATA: o->data_path = optarg; break;
        case O_LEAK:
            if (!strcmp(optarg, "graph")) o->leak.kind = PL_LEAK_GRAPH;
            else if (!strcmp(optarg, "outputs")) o->leak.kind = PL_LEAK_OUTPUTS;
            else if (!strcmp(optarg, "stats")) o->leak.kind = PL_LEAK_STATS;
            else if (!strcmp(optarg, "cache")) o->leak.kind = PL_LEAK_CACHE;
            else if (!strcmp(optarg, "none")) o->leak.kind = PL_LEAK_NONE;
            else {
                fprintf(stderr, "plateau-train: --leak expects graph, outputs, stats, cache or none, got '%s'\n",
                        optarg);
                exit(1);
            }
            break;
        case O_LEAKSTART: o->leak.start = parse_int("leak-start", optarg, 1, 1 << 30); break;
        case O_LEAKRATE: o->leak.every = parse_int("leak-rate", optarg, 1, 1 << 30); break;
        case O_SAVE: o->save_path = optarg; break;
        case O_LOAD: o->load_path = optarg; break;
        case O_DEVICE:
            if (pl_train_device_parse(optarg, &o->device) != 0) {
                fprintf(stderr, "plateau-train: --device expects auto, cpu or cuda, got '%s'\n", optarg);
                exit(1);
            }
            break;
        case O_HELP: case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(1);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "plateau-train: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        exit(1);
    }
    if (o->data_path && o->model.vocab != 256) {
        fprintf(stderr, "plateau-train: --data is byte-level text (vocab 256); --vocab %d uses synthetic tokens\n",
                o->model.vocab);
        exit(1);
    }
    o->model.max_seq = o->seq;
    if (o->eval_batch < 0) o->eval_batch = 2 * o->batch;
    if (o->log_every < 0) o->log_every = o->steps >= 20 ? o->steps / 20 : 1;
}

static double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *leak_name(pl_leak_kind_t k) {
    static const char *const n[] = {"none", "graph", "outputs", "stats", "cache"};
    return n[k];
}

static void print_budget(const opts_t *o, const pl_train_device_t *dev) {
    pl_gpt2_budget_t b;
    pl_gpt2_budget(&o->model, o->batch, o->seq, &b);
    printf("plateau-train: GPT-2 %d layers, %d heads, %d channels, vocab %d; batch %d x seq %d%s; %d steps, "
           "seed %llu\n",
           o->model.n_layer, o->model.n_head, o->model.n_embd, o->model.vocab, o->batch, o->seq,
           o->variable_seq ? " (variable)" : "", o->steps, (unsigned long long)o->seed);
    printf("expected memory budget (float32, device %s):\n", dev->ops->name);
    printf("  parameters   %10.2f MiB  (%zu params)\n", mib((double)b.params_bytes), b.n_params);
    printf("  gradients    %10.2f MiB  (allocated in backward, freed by zero_grad)\n", mib((double)b.grads_bytes));
    printf("  optimizer    %10.2f MiB  (AdamW m and v, created at step 1)\n", mib((double)b.optimizer_bytes));
    printf("  activations  %10.2f MiB  (saved for backward at full seq, logits excluded)\n",
           mib((double)b.activations_bytes));
    printf("  logits       %10.2f MiB  (batch x seq x vocab x 4 = %d x %d x %d x 4)\n", mib((double)b.logits_bytes),
           o->batch, o->seq, o->model.vocab);
    printf("  peak ~       %10.2f MiB  (params + grads + optimizer + activations + logits, before cache rounding)\n",
           mib((double)(b.params_bytes + b.grads_bytes + b.optimizer_bytes + b.activations_bytes + b.logits_bytes)));
    if (o->leak.kind != PL_LEAK_NONE)
        printf("scenario: leak %s from step %d, every %d step(s)\n", leak_name(o->leak.kind), o->leak.start,
               o->leak.every);
    if (o->eval_every) printf("scenario: evaluation (batch %d) every %d steps\n", o->eval_batch, o->eval_every);
    fflush(stdout);
}

static void print_stats(pl_alloc_t *a, const pl_gpt2_t *m, const pl_train_device_t *dev) {
    pl_alloc_stats_t s;
    pl_alloc_get_stats(a, &s);
    printf("allocator stats (%s):\n", dev->kind == PL_DEVICE_CUDA ? "cuda device 0" : "sim device");
    printf("  allocated    current %10.2f MiB  peak %10.2f MiB\n", mib((double)s.allocated_bytes[0].current),
           mib((double)s.allocated_bytes[0].peak));
    printf("  reserved     current %10.2f MiB  peak %10.2f MiB\n", mib((double)s.reserved_bytes[0].current),
           mib((double)s.reserved_bytes[0].peak));
    printf("  live blocks  current %10lld      peak %10lld   (allocs %lld, frees %lld)\n",
           (long long)s.allocation[0].current, (long long)s.allocation[0].peak, (long long)s.allocation[0].allocated,
           (long long)s.allocation[0].freed);
    printf("  segments     current %10lld      device allocs %lld, frees %lld, retries %lld, OOMs %lld\n",
           (long long)s.segment[0].current, (long long)s.num_device_alloc, (long long)s.num_device_free,
           (long long)s.num_alloc_retries, (long long)s.num_ooms);
    printf("  fragmentation %.3f, largest free block %.2f MiB\n", s.fragmentation, mib((double)s.largest_free_bytes));
    printf("  held by leak scenario: %zu tensors, %.2f MiB\n", pl_gpt2_n_leaked(m),
           mib((double)pl_gpt2_leaked_bytes(m)));
}

/* What a run holds; everything but the options is released by close_run. */
typedef struct run {
    pl_train_device_t dev;
    pl_alloc_t *alloc;
    pl_gpt2_t *model;
    pl_data_t data;
    int *inputs, *targets;
    void (*step_fn)(void); /* plateau_step / plateau_mark when the preload is there, else NULL */
    void (*mark_fn)(const char *);
} run_t;

/* Device, allocator, data, model (loaded if asked) and the batch buffers. Returns 0, or the exit status after
 * saying why on stderr. */
static int open_run(const opts_t *o, run_t *r) {
    char err[512];
    pl_sim_options_t sim;
    pl_sim_options_default(&sim);
    const char *simenv = getenv("PLATEAU_SIM_DEVICE");
    if (simenv && pl_sim_options_parse(simenv, &sim, err, sizeof err) != 0) {
        fprintf(stderr, "plateau-train: PLATEAU_SIM_DEVICE: %s\n", err);
        return 1;
    }
    int rc = pl_train_device_open(o->device, &sim, &r->dev, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "plateau-train: %s\n", err);
        return rc == -ENODEV ? 2 : 1;
    }
    printf("device: %s\n", r->dev.reason);
    fflush(stdout);
    if (pl_alloc_create(r->dev.backend, NULL, &r->alloc, err, sizeof err) != 0) {
        fprintf(stderr, "plateau-train: %s\n", err);
        return 1;
    }
    if (o->model.vocab == 256)
        rc = pl_data_open_text(&r->data, o->data_path, o->seed);
    else
        rc = pl_data_open_synthetic(&r->data, o->model.vocab, (size_t)1 << 20, o->seed);
    if (rc != 0) {
        fprintf(stderr, "plateau-train: cannot load data %s: %s\n", o->data_path ? o->data_path : "(built-in)",
                strerror(-rc));
        return 1;
    }
    print_budget(o, &r->dev);
    if (o->model.vocab != 256)
        printf("data: synthetic stream, %zu tokens over vocab %d\n", r->data.n_tokens, r->data.vocab);
    else
        printf("data: %s, %zu byte tokens\n", o->data_path ? o->data_path : "built-in corpus", r->data.n_tokens);

    r->model = pl_gpt2_create_on(r->alloc, r->dev.ops, &o->model, o->seed);
    if (!r->model) {
        fprintf(stderr, "plateau-train: cannot create the model: %s\n", pl_alloc_last_error());
        return 2;
    }
    pl_gpt2_set_leak(r->model, &o->leak);
    if (o->load_path) {
        if (pl_gpt2_load(r->model, o->load_path, err, sizeof err) != 0) {
            fprintf(stderr, "plateau-train: %s\n", err);
            return 1;
        }
        printf("loaded %s at step %d\n", o->load_path, pl_gpt2_step(r->model));
    }
    int maxB = o->batch > o->eval_batch ? o->batch : o->eval_batch;
    r->inputs = malloc(sizeof(int) * (size_t)maxB * (size_t)o->seq);
    r->targets = malloc(sizeof(int) * (size_t)maxB * (size_t)o->seq);
    if (!r->inputs || !r->targets) {
        fprintf(stderr, "plateau-train: out of host memory\n");
        return 2;
    }
    return 0;
}

static void close_run(run_t *r) {
    free(r->targets);
    free(r->inputs);
    pl_gpt2_destroy(r->model);
    pl_data_close(&r->data);
    if (r->alloc) pl_alloc_destroy(r->alloc);
    pl_train_device_close(&r->dev);
}

/* The evaluation batch at step s, between eval-begin and eval-end marks. */
static void eval_step(const opts_t *o, run_t *r, int s) {
    if (r->mark_fn) r->mark_fn("eval-begin");
    pl_data_batch(&r->data, true, o->eval_batch, o->seq, r->inputs, r->targets);
    float vloss = pl_gpt2_forward(r->model, r->inputs, r->targets, o->eval_batch, o->seq, false);
    if (r->mark_fn) r->mark_fn("eval-end");
    printf("step %5d  val loss %.4f  (eval batch %d)\n", s, vloss, o->eval_batch);
}

/* o->steps training steps, each logged every log_every steps (and the first and the last), then the summary. */
static void train(const opts_t *o, run_t *r) {
    double t_start = now_s(), tokens = 0;
    float first_loss = 0, last_loss = 0;
    for (int s = 1; s <= o->steps; s++) {
        int T = o->seq;
        if (o->variable_seq) { /* 8 lengths, multiples of seq/8: the allocator's cache warms up to a plateau */
            int unit = o->seq / 8 > 0 ? o->seq / 8 : 1;
            T = unit * (1 + (int)pl_data_rand(&r->data, 8));
            if (T > o->seq) T = o->seq;
        }
        double t0 = now_s();
        pl_data_batch(&r->data, false, o->batch, T, r->inputs, r->targets);
        float loss = pl_gpt2_forward(r->model, r->inputs, r->targets, o->batch, T, true);
        pl_gpt2_backward(r->model);
        float norm = pl_gpt2_update(r->model, &o->adamw);
        pl_gpt2_zero_grad(r->model);
        if (r->step_fn) r->step_fn();
        double dt = now_s() - t0;
        tokens += (double)o->batch * T;
        if (s == 1) first_loss = loss;
        last_loss = loss;
        if (s % o->log_every == 0 || s == 1 || s == o->steps) {
            pl_alloc_stats_t st;
            pl_alloc_get_stats(r->alloc, &st);
            printf("step %5d  loss %.4f  norm %6.3f  T %4d  %7.1f ms  allocated %8.2f MiB  reserved %8.2f MiB  "
                   "blocks %lld\n",
                   s, loss, norm, T, dt * 1e3, mib((double)st.allocated_bytes[0].current),
                   mib((double)st.reserved_bytes[0].current), (long long)st.allocation[0].current);
            fflush(stdout);
        }
        if (o->eval_every && s % o->eval_every == 0) eval_step(o, r, s);
    }
    double elapsed = now_s() - t_start;
    if (o->steps > 0)
        printf("done: %d steps on %s in %.1f s, %.0f tokens/s, loss %.4f -> %.4f\n", o->steps, r->dev.ops->name,
               elapsed, tokens / elapsed, first_loss, last_loss);
}

int main(int argc, char **argv) {
    opts_t o;
    parse(argc, argv, &o);
    char err[512];
    if (pl_gpt2_config_check(&o.model, err, sizeof err) != 0) {
        fprintf(stderr, "plateau-train: %s\n", err);
        return 1;
    }
#if PL_HAVE_OPENMP
    if (o.threads) omp_set_num_threads(o.threads);
#endif
    run_t r = {0};
    *(void **)&r.step_fn = dlsym(RTLD_DEFAULT, "plateau_step");
    *(void **)&r.mark_fn = dlsym(RTLD_DEFAULT, "plateau_mark");
    int status = open_run(&o, &r);
    if (status == 0) {
        train(&o, &r);
        status = 1;
        if (o.save_path && pl_gpt2_save(r.model, o.save_path, err, sizeof err) != 0) {
            fprintf(stderr, "plateau-train: %s\n", err);
        } else {
            if (o.save_path) printf("saved %s\n", o.save_path);
            print_stats(r.alloc, r.model, &r.dev);
            status = 0;
        }
    }
    close_run(&r);
    return status;
}
