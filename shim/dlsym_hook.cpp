// The shim's dlsym. dlsym on a library handle never sees LD_PRELOAD definitions,
// so a program (or libcudart) that dlopens libcuda and looks names up would
// bypass every wrapper: for the names the shim wraps it returns the wrapper.
//
// RTLD_NEXT is relative to the caller of dlsym, which glibc finds from its own
// return address. The entry point is therefore a few instructions of assembly
// that, for RTLD_NEXT, JUMP to glibc's dlsym (the caller's return address stays
// on the stack) after asking the shim whether the name is one it wraps. Every
// other handle is looked up by ordinary code below: they do not depend on the
// caller (RTLD_DEFAULT searches the global scope, which the shim shares).
#include <dlfcn.h>

#include <atomic>

#include "shim/real_driver.h"
#include "shim/wrapped_symbols.h"

extern "C" {

// Read by the assembly entry (a plain load) after egpu_dlsym_next_prepare()
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
  // RTLD_DEFAULT finds the shim's own export even in a process that never
  // loaded the driver: there, answer as if the shim were not here.
  if (found == wrapper && !egpu::shim::libcuda_loaded()) return nullptr;
  return wrapper;
}

// RTLD_NEXT: the wrapper for a wrapped name (when the driver is loaded), else
// null, in which case the entry jumps to glibc's dlsym.
__attribute__((visibility("hidden"))) void* egpu_dlsym_next_prepare(const char* name) {
  egpu_real_dlsym_ptr.store(reinterpret_cast<void*>(egpu::shim::real_dlsym()),
                            std::memory_order_relaxed);
  if (!egpu::shim::looks_like_cuda_name(name)) return nullptr;
  void* wrapper = egpu::shim::wrapper_for_name(name);
  if (wrapper == nullptr || !egpu::shim::libcuda_loaded()) return nullptr;
  return wrapper;
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
    jmp egpu_dlsym_impl
1:
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    movq %rsi, %rdi
    call egpu_dlsym_next_prepare
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
    jz 2f
    jmp *%rax
2:
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
    b egpu_dlsym_impl
1:
    stp x29, x30, [sp, #-32]!
    .cfi_def_cfa_offset 32
    .cfi_offset 29, -32
    .cfi_offset 30, -24
    mov x29, sp
    stp x0, x1, [sp, #16]
    mov x0, x1
    bl egpu_dlsym_next_prepare
    mov x2, x0
    ldp x0, x1, [sp, #16]
    ldp x29, x30, [sp], #32
    .cfi_def_cfa_offset 0
    .cfi_restore 29
    .cfi_restore 30
    cbz x2, 2f
    mov x0, x2
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
