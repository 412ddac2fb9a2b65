// A full memory barrier on every thread of the process, paid by the thread
// that needs it: lets a hot path that must be ordered against a rare one
// skip its own fence. Internal to the runtime.
//
// Note [Asymmetric wake-up fence]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A launch publishes its task (a store to enqueued_seq_) and then reads
// whether the stream's worker sleeps; a worker going to sleep says so and
// then reads enqueued_seq_ once more. Each side must see the other's store
// (Dekker), which takes a store-load barrier on both. On the launch side
// that barrier (a seq_cst store: a locked instruction) waits until the
// stores before it, the task's own cache lines among them, left the
// core: on the 2-core machine it cost 5% of a 1K-element add's host time
// (benchmarks/README.md, "Figures behind the Notes"). With membarrier(2),
// the worker about to sleep makes every thread of the process pass a full
// barrier instead, a few microseconds once per sleep, and the launch needs
// none: a launch's store precedes that barrier point in its thread (so
// the worker's re-read sees it) or its load follows it (so it sees the
// sleeping worker). Where membarrier is missing, launches keep the fence.
#pragma once

namespace vnpu::detail {

// Whether process_wide_fence() works here (membarrier registered for this
// process). Registers on first call, and again in a forked child (its
// registration is its own).
bool process_wide_fence_available() noexcept;

// Makes every running thread of the process pass a full memory barrier
// before it returns. Only when process_wide_fence_available(); returns
// false if the barrier failed (the caller must not rely on it then).
bool process_wide_fence() noexcept;

}  // namespace vnpu::detail
