/* The exported `dlsym` of the preload: a trampoline that keeps glibc's RTLD_NEXT meaning (included once, by
 * cuda.c; also by tests/preload/dlsym_tramp_lib.c, which tests it alone, natively and cross-built for aarch64).
 *
 * glibc decides what "next" means for dlsym(RTLD_NEXT, name) from dlsym's return address: the caller's object.
 * A C wrapper that calls the real dlsym would make the preload the caller. The trampoline instead saves the two
 * argument registers, calls pl_cuda_dlsym_hot(handle, name) (nonzero: a name the preload wraps), restores the
 * arguments and the return address, and *jumps* to pl_cuda_dlsym_slow or to *pl_cuda_real_dlsym: the real dlsym
 * then sees the original caller's return address.
 * The including file defines (hidden, so the asm reaches them without the GOT or PLT):
 *     dlsym_fn pl_cuda_real_dlsym;                                   the real dlsym (dlvsym(RTLD_NEXT, ...))
 *     int pl_cuda_dlsym_hot(void *handle, const char *name);
 *     void *pl_cuda_dlsym_slow(void *handle, const char *name);
 * PL_DLSYM_TRAMPOLINE is 1 where a trampoline exists (x86-64, aarch64). Elsewhere no `dlsym` is exported:
 * lookups through dlsym are not seen (docs/cuda-interception.md, "Other architectures"). */
#pragma once

/* -DPL_NO_DLSYM_TRAMPOLINE builds the fallback of other architectures on any (to check that it compiles). */
#if defined(PL_NO_DLSYM_TRAMPOLINE)
#define PL_DLSYM_TRAMPOLINE 0
#elif defined(__x86_64__)
#define PL_DLSYM_TRAMPOLINE 1

#if defined(__CET__) && (__CET__ & 1)
#define PL_DLSYM_ENDBR "  endbr64\n"
#else
#define PL_DLSYM_ENDBR ""
#endif

/* rdi/rsi saved (and the stack kept 16-byte aligned for the call), then a tail jump. */
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        "dlsym:\n"
        "  .cfi_startproc\n"
        PL_DLSYM_ENDBR
        "  push %rdi\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  push %rsi\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  sub $8, %rsp\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  call pl_cuda_dlsym_hot\n"
        "  add $8, %rsp\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  pop %rsi\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  pop %rdi\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  test %eax, %eax\n"
        "  jnz pl_cuda_dlsym_slow\n"
        "  jmp *pl_cuda_real_dlsym(%rip)\n"
        "  .cfi_endproc\n"
        ".size dlsym, .-dlsym\n");

#elif defined(__aarch64__)
#define PL_DLSYM_TRAMPOLINE 1

#if defined(__ARM_FEATURE_BTI_DEFAULT) && __ARM_FEATURE_BTI_DEFAULT
#define PL_DLSYM_BTI "  hint #34\n" /* bti c */
#else
#define PL_DLSYM_BTI ""
#endif

/* x0/x1 and the frame record (x29, x30 = the caller's return address) saved in a 32-byte frame; after the call
 * all are restored, so the final `br` leaves x30 pointing into the caller, as glibc expects. x16 (IP0) is the
 * scratch register the ABI gives to veneers and PLT stubs. */
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, %function\n"
        ".p2align 2\n"
        "dlsym:\n"
        "  .cfi_startproc\n"
        PL_DLSYM_BTI
        "  stp x29, x30, [sp, #-32]!\n"
        "  .cfi_def_cfa_offset 32\n"
        "  .cfi_offset 29, -32\n"
        "  .cfi_offset 30, -24\n"
        "  mov x29, sp\n"
        "  stp x0, x1, [sp, #16]\n"
        "  bl pl_cuda_dlsym_hot\n"
        "  mov w16, w0\n"
        "  ldp x0, x1, [sp, #16]\n"
        "  ldp x29, x30, [sp], #32\n"
        "  .cfi_def_cfa_offset 0\n"
        "  .cfi_restore 29\n"
        "  .cfi_restore 30\n"
        "  cbnz w16, 1f\n"
        "  adrp x16, pl_cuda_real_dlsym\n"
        "  ldr x16, [x16, :lo12:pl_cuda_real_dlsym]\n"
        "  br x16\n"
        "1:\n"
        "  b pl_cuda_dlsym_slow\n"
        "  .cfi_endproc\n"
        ".size dlsym, .-dlsym\n");

#else
#define PL_DLSYM_TRAMPOLINE 0
#endif
