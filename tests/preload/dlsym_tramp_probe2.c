/* A library after dlsym_tramp_lib.c in the search order that defines probe() too (see test_dlsym_trampoline.c). */
__attribute__((visibility("default"))) int probe(void) { return 2; }
/* Referenced by the test program so that the linker keeps this library (--as-needed). */
__attribute__((visibility("default"))) int probe2_loaded(void) { return 1; }
