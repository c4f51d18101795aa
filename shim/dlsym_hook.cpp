// The shim's dlsym. dlsym on a library handle never sees LD_PRELOAD definitions,
// so a program (or libcudart) that dlopens libcuda and looks names up would
// bypass every wrapper: for the names the shim wraps it returns the wrapper.
//
// RTLD_NEXT and RTLD_DEFAULT are relative to the caller of dlsym, which glibc
// finds from its own return address: RTLD_NEXT searches after the caller's
// object, RTLD_DEFAULT the caller's scope (the global one plus, for a library
// opened RTLD_LOCAL, its own dependencies; a dlmopen namespace's). The entry
// point is therefore a few instructions of assembly that, for those two,
// JUMP to glibc's dlsym (the caller's return address stays on the stack)
// after asking the shim whether it answers the name itself. Library handles
// do not depend on the caller and are looked up by ordinary code below.
#include <dlfcn.h>

#include <atomic>

#include "shim/real_driver.h"
#include "shim/wrapped_symbols.h"

extern "C" {

// Read by the assembly entry (a plain load) after egpu_dlsym_prepare()
// has set it; every thread stores the same value.
__attribute__((visibility("hidden"))) std::atomic<void*> egpu_real_dlsym_ptr{nullptr};
static_assert(sizeof(std::atomic<void*>) == sizeof(void*));

__attribute__((visibility("hidden"))) void* egpu_dlsym_impl(void* handle, const char* name) {
  const egpu::shim::DlsymFn real = egpu::shim::real_dlsym();
  if (real == nullptr) return nullptr;
  void* found = real(handle, name);
  if (found == nullptr || !egpu::shim::looks_like_cuda_name(name)) return found;
  void* wrapper = egpu::shim::wrapper_for_name(name);
  if (wrapper == nullptr) return found;
  // A handle that searches the shim (its own, dlopen(NULL)'s) finds its
  // export even in a process that never loaded the driver: there, answer
  // as if the shim were not here.
  if (found == wrapper && !egpu::shim::libcuda_loaded()) return nullptr;
  return wrapper;
}

// What egpu_dlsym_prepare answers, besides a wrapper, to have the entry
// return NULL (its address is the mark; nullptr means "ask glibc").
__attribute__((visibility("hidden"))) char egpu_dlsym_answer_null = 0;

// RTLD_NEXT and RTLD_DEFAULT (`handle`): the wrapper for a wrapped name when
// the driver is loaded; for RTLD_DEFAULT without the driver, NULL (glibc
// would find the shim's own export: answer as if the shim were not here);
// else nullptr, and the entry jumps to glibc's dlsym.
__attribute__((visibility("hidden"))) void* egpu_dlsym_prepare(void* handle, const char* name) {
  egpu_real_dlsym_ptr.store(reinterpret_cast<void*>(egpu::shim::real_dlsym()),
                            std::memory_order_relaxed);
  if (!egpu::shim::looks_like_cuda_name(name)) return nullptr;
  void* wrapper = egpu::shim::wrapper_for_name(name);
  if (wrapper == nullptr) return nullptr;
  if (egpu::shim::libcuda_loaded()) return wrapper;
  return handle == RTLD_DEFAULT ? &egpu_dlsym_answer_null : nullptr;
}

}  // extern "C"

#if defined(__x86_64__)
asm(R"(
    .text
    .globl dlsym
    .type dlsym, @function
    .p2align 4
dlsym:
    .cfi_startproc
    cmpq $-1, %rdi
    je 1f
    testq %rdi, %rdi
    je 1f
    jmp egpu_dlsym_impl
1:
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    call egpu_dlsym_prepare
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    testq %rax, %rax
    jnz 2f
    movq egpu_real_dlsym_ptr(%rip), %rax
    testq %rax, %rax
    jz 3f
    jmp *%rax
2:
    leaq egpu_dlsym_answer_null(%rip), %rcx
    cmpq %rcx, %rax
    jne 3f
    xorl %eax, %eax
3:
    ret
    .cfi_endproc
    .size dlsym, .-dlsym
)");
#elif defined(__aarch64__)
asm(R"(
    .text
    .globl dlsym
    .type dlsym, %function
    .p2align 4
dlsym:
    .cfi_startproc
    cmn x0, #1
    b.eq 1f
    cbz x0, 1f
    b egpu_dlsym_impl
1:
    stp x29, x30, [sp, #-32]!
    .cfi_def_cfa_offset 32
    .cfi_offset 29, -32
    .cfi_offset 30, -24
    mov x29, sp
    stp x0, x1, [sp, #16]
    bl egpu_dlsym_prepare
    mov x2, x0
    ldp x0, x1, [sp, #16]
    ldp x29, x30, [sp], #32
    .cfi_def_cfa_offset 0
    .cfi_restore 29
    .cfi_restore 30
    cbz x2, 2f
    adrp x3, egpu_dlsym_answer_null
    add x3, x3, :lo12:egpu_dlsym_answer_null
    cmp x2, x3
    csel x0, xzr, x2, eq
    ret
2:
    adrp x16, egpu_real_dlsym_ptr
    ldr x16, [x16, :lo12:egpu_real_dlsym_ptr]
    cbz x16, 3f
    br x16
3:
    mov x0, #0
    ret
    .cfi_endproc
    .size dlsym, .-dlsym
)");
#else
#error "egpu-shim: the dlsym entry point is written for x86_64 and aarch64 only"
#endif
