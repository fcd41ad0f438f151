// Target: every allocator entry a C++ program uses, in a non-PIE executable that takes the address of malloc and
// free (so both get canonical PLT entries: dlsym(RTLD_DEFAULT, "malloc") returns the executable's stub).
// Step 1 after a warm-up (one of each, and a bad_alloc thrown through operator new and caught); step 2 after
// allocating N_BLOCKS blocks: 8 each through a pointer to malloc, malloc, calloc, new, new[], nothrow new,
// aligned new and aligned new[]; step 3 after freeing them all (free through a pointer to free, free, sized and
// unsized delete, aligned delete). Under the tracer, the live count must go up by exactly N_BLOCKS and come back,
// on glibc and on a host allocator that defines its own operators (jemalloc). Usage: heapcxx.
#include <cstddef>
#include <cstdint>
#include <new>

#include "target.h"

enum { PER_KIND = 8, N_KINDS = 8, N_BLOCKS = PER_KIND * N_KINDS };

struct alignas(64) Line {
    char c[64];
};

void *(*volatile malloc_ptr)(size_t);
void (*volatile free_ptr)(void *);
void *volatile blocks[N_BLOCKS];

static void allocate(int i, int kind) {
    switch (kind) {
    case 0: blocks[i] = malloc_ptr(100 + (size_t)i); break;
    case 1: blocks[i] = malloc(200 + (size_t)i); break;
    case 2: blocks[i] = calloc(3, 100 + (size_t)i); break;
    case 3: blocks[i] = new int(i); break;
    case 4: blocks[i] = new int[100 + i]; break;
    case 5: blocks[i] = new (std::nothrow) char[500 + i]; break;
    case 6: blocks[i] = new Line; break;
    default: blocks[i] = new Line[3]; break;
    }
    PL_CHECK(blocks[i]);
}

static void release(int i, int kind) {
    void *p = blocks[i];
    switch (kind) {
    case 0: free_ptr(p); break;
    case 1:
    case 2: free(p); break;
    case 3: delete static_cast<int *>(p); break; /* sized delete (C++14) */
    case 4: delete[] static_cast<int *>(p); break;
    case 5: delete[] static_cast<char *>(p); break;
    case 6: delete static_cast<Line *>(p); break; /* aligned, sized delete */
    default: delete[] static_cast<Line *>(p); break;
    }
    blocks[i] = nullptr;
}

int main() {
    malloc_ptr = malloc; /* taken in code: the canonical PLT entries */
    free_ptr = free;
    for (int k = 0; k < N_KINDS; k++) {
        allocate(0, k);
        release(0, k);
    }
    bool threw = false;
    try {
        volatile size_t huge = SIZE_MAX / 4;
        char *p = new char[huge];
        blocks[0] = p;
    } catch (const std::bad_alloc &) {
        threw = true;
    }
    PL_CHECK(threw);
    step();
    for (int i = 0; i < N_BLOCKS; i++) allocate(i, i % N_KINDS);
    step();
    for (int i = 0; i < N_BLOCKS; i++) release(i, i % N_KINDS);
    step();
    return 0;
}
