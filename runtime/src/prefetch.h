// Prefetching a cache line for writing (internal to the runtime): the line
// comes into this core's cache owned, ready for stores, so a later store
// does not wait for it.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace vnpu::detail {

#if defined(__x86_64__) || defined(__i386__)
// PREFETCHW (CPUID 0x80000001 ECX bit 8): every AMD64 processor and Intel's
// since Broadwell. Elsewhere a read prefetch still brings the line closer.
inline bool has_prefetchw() {
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(0x80000001u, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 8)) != 0;
  }();
  return has;
}
#endif

inline void prefetch_for_write(const void* address) {
#if defined(__x86_64__) || defined(__i386__)
  if (has_prefetchw()) {
    asm volatile("prefetchw %0" ::"m"(*static_cast<const char*>(address)));
    return;
  }
#endif
  __builtin_prefetch(address, /*rw=*/1, /*locality=*/3);
}

}  // namespace vnpu::detail
