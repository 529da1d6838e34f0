// Runs CUDA kernels on the CPU, for tests on machines without a GPU (sim/gpu/emulate.py compiles the
// sources of sim/kernels/ with g++ and this header forced in front).
//
// Every CUDA thread of a block is a fiber (ucontext); blocks run one after the other. Fibers switch at
// __syncthreads, at warp shuffles and, chosen by a seeded generator, before atomics and L2-only loads, so
// concurrent union-find code sees many interleavings. __shared__ becomes static storage, shared by the
// fibers of the running block. Only what sim/kernels uses is provided.
#pragma once
#include <ucontext.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

struct dim3 {
    unsigned int x = 1, y = 1, z = 1;
};
struct uint4 {
    unsigned int x, y, z, w;
};
inline uint4 make_uint4(unsigned int x, unsigned int y, unsigned int z, unsigned int w) { return {x, y, z, w}; }

namespace emu {

struct Fiber {
    ucontext_t context;
    dim3 tid;
    bool done = false;
    bool at_block_barrier = false;
    bool at_warp_barrier = false;
};

struct State {
    dim3 grid, block, bid;
    std::vector<Fiber> fibers;
    std::vector<std::unique_ptr<char[]>> stacks;
    std::vector<uint64_t> shuffle;
    int current = -1;
    ucontext_t scheduler;
    std::function<void()> body;
    uint64_t random = 0x9E3779B97F4A7C15ull;
    int error = 0;
};

inline State& state()
{
    static State s;
    return s;
}

inline uint64_t next_random()
{
    uint64_t& x = state().random;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
}

inline void yield()
{
    State& s = state();
    swapcontext(&s.fibers[s.current].context, &s.scheduler);
}

inline void maybe_yield()
{
    if (next_random() & 1) yield();
}

inline int warp_of(int linear) { return linear / 32; }

inline void block_barrier()
{
    state().fibers[state().current].at_block_barrier = true;
    yield();
}

inline void warp_barrier()
{
    state().fibers[state().current].at_warp_barrier = true;
    yield();
}

// Release barriers whose every live member has arrived; true if something was released.
inline bool release_barriers()
{
    State& s = state();
    const int n = (int)s.fibers.size();
    bool released = false;
    int waiting = 0, alive = 0;
    for (auto& f : s.fibers) {
        if (f.done) continue;
        ++alive;
        waiting += f.at_block_barrier;
    }
    if (alive && waiting == alive) {
        for (auto& f : s.fibers) f.at_block_barrier = false;
        released = true;
    }
    for (int w0 = 0; w0 < n; w0 += 32) {
        int live = 0, arrived = 0;
        for (int i = w0; i < std::min(n, w0 + 32); ++i) {
            if (s.fibers[i].done) continue;
            ++live;
            arrived += s.fibers[i].at_warp_barrier;
        }
        if (live && arrived == live) {
            for (int i = w0; i < std::min(n, w0 + 32); ++i) s.fibers[i].at_warp_barrier = false;
            released = true;
        }
    }
    return released;
}

inline void fiber_main()
{
    State& s = state();
    s.body();
    s.fibers[s.current].done = true;
    swapcontext(&s.fibers[s.current].context, &s.scheduler);
}

inline void run_block()
{
    State& s = state();
    const int n = (int)(s.block.x * s.block.y * s.block.z);
    const size_t stack_size = 256 * 1024;
    s.fibers.assign(n, Fiber());
    if ((int)s.stacks.size() < n) s.stacks.resize(n);
    s.shuffle.assign(n, 0);
    for (int i = 0; i < n; ++i) {
        Fiber& f = s.fibers[i];
        f.tid = {(unsigned)(i % s.block.x), (unsigned)((i / s.block.x) % s.block.y),
                 (unsigned)(i / (s.block.x * s.block.y))};
        if (!s.stacks[i]) s.stacks[i].reset(new char[stack_size]);  // not zero-filled: pages touched as used
        getcontext(&f.context);
        f.context.uc_stack.ss_sp = s.stacks[i].get();
        f.context.uc_stack.ss_size = stack_size;
        f.context.uc_link = nullptr;
        makecontext(&f.context, fiber_main, 0);
    }
    std::vector<int> runnable;
    while (true) {
        runnable.clear();
        bool all_done = true;
        for (int i = 0; i < n; ++i) {
            const Fiber& f = s.fibers[i];
            if (f.done) continue;
            all_done = false;
            if (!f.at_block_barrier && !f.at_warp_barrier) runnable.push_back(i);
        }
        if (all_done) break;
        if (runnable.empty()) {
            if (release_barriers()) continue;
            std::fprintf(stderr, "cuda_emulator: deadlock at a barrier in block (%u, %u, %u)\n", s.bid.x, s.bid.y,
                         s.bid.z);
            s.error = 1;
            return;
        }
        s.current = runnable[next_random() % runnable.size()];
        swapcontext(&s.scheduler, &s.fibers[s.current].context);
    }
    s.current = -1;
}

template <typename... A, size_t... I>
void invoke(void (*kernel)(A...), void** args, std::index_sequence<I...>)
{
    kernel(*reinterpret_cast<std::remove_cv_t<std::remove_reference_t<A>>*>(args[I])...);
}

template <typename... A>
int launch(void (*kernel)(A...), dim3 grid, dim3 block, void** args, uint64_t seed)
{
    State& s = state();
    s.error = 0;
    s.random = seed * 0x9E3779B97F4A7C15ull + 1;
    s.grid = grid;
    s.block = block;
    s.body = [&] { invoke(kernel, args, std::index_sequence_for<A...>{}); };
    for (unsigned z = 0; z < grid.z && !s.error; ++z)
        for (unsigned y = 0; y < grid.y && !s.error; ++y)
            for (unsigned x = 0; x < grid.x && !s.error; ++x) {
                s.bid = {x, y, z};
                run_block();
            }
    return s.error;
}

inline int linear_tid()
{
    const State& s = state();
    const dim3 t = s.fibers[s.current].tid;
    return (int)(t.x + s.block.x * (t.y + s.block.y * t.z));
}

}  // namespace emu

#define threadIdx (emu::state().fibers[emu::state().current].tid)
#define blockIdx (emu::state().bid)
#define blockDim (emu::state().block)
#define gridDim (emu::state().grid)
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)

using std::max;
using std::min;

inline void __syncthreads() { emu::block_barrier(); }
inline void __syncwarp(unsigned int = 0xffffffffu) { emu::warp_barrier(); }

template <typename T>
T __shfl_down_sync(unsigned int, T value, unsigned int delta)
{
    static_assert(sizeof(T) <= 8, "shuffle of at most 8 bytes");
    emu::State& s = emu::state();
    const int me = emu::linear_tid();
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    s.shuffle[me] = bits;
    emu::warp_barrier();
    const int lane = me % 32, source = me + (int)delta;
    T result = value;
    if (lane + (int)delta < 32 && source < (int)s.fibers.size() && !s.fibers[source].done)
        std::memcpy(&result, &s.shuffle[source], sizeof(T));
    emu::warp_barrier();
    return result;
}

// Every live lane of the warp posts `bits`; `read(source lane, posted bits)` then runs for each live lane.
template <typename F>
void warp_exchange(uint64_t bits, F read)
{
    emu::State& s = emu::state();
    const int me = emu::linear_tid();
    s.shuffle[me] = bits;
    emu::warp_barrier();
    const int w0 = me - me % 32, end = std::min((int)s.fibers.size(), w0 + 32);
    for (int i = w0; i < end; ++i)
        if (!s.fibers[i].done) read(i - w0, s.shuffle[i]);
    emu::warp_barrier();
}

template <typename T>
T __shfl_sync(unsigned int, T value, int source_lane, int width = 32)
{
    static_assert(sizeof(T) <= 8, "shuffle of at most 8 bytes");
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    const int lane = emu::linear_tid() % 32, source = lane - lane % width + source_lane % width;
    T result = value;
    warp_exchange(bits, [&](int l, uint64_t b) {
        if (l == source) std::memcpy(&result, &b, sizeof(T));
    });
    return result;
}

template <typename T>
T __shfl_up_sync(unsigned int, T value, unsigned int delta)
{
    static_assert(sizeof(T) <= 8, "shuffle of at most 8 bytes");
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    const int lane = emu::linear_tid() % 32;
    T result = value;
    warp_exchange(bits, [&](int l, uint64_t b) {
        if (l == lane - (int)delta) std::memcpy(&result, &b, sizeof(T));
    });
    return result;
}

inline unsigned int __ballot_sync(unsigned int mask, int predicate)
{
    unsigned int votes = 0;
    warp_exchange(predicate != 0, [&](int l, uint64_t b) {
        if (b) votes |= 1u << l;
    });
    return votes & mask;
}

inline int __clz(unsigned int x) { return x ? __builtin_clz(x) : 32; }
inline int __clz(int x) { return __clz((unsigned int)x); }

inline unsigned int __umulhi(unsigned int a, unsigned int b) { return (unsigned int)(((uint64_t)a * b) >> 32); }
inline int __popc(unsigned int x) { return __builtin_popcount(x); }
inline unsigned int __funnelshift_l(unsigned int lo, unsigned int hi, unsigned int shift)
{
    shift &= 31;
    return shift ? (hi << shift) | (lo >> (32 - shift)) : hi;
}
inline unsigned int __funnelshift_r(unsigned int lo, unsigned int hi, unsigned int shift)
{
    shift &= 31;
    return shift ? (lo >> shift) | (hi << (32 - shift)) : lo;
}
template <typename T>
T __ldcg(const T* p)
{
    emu::maybe_yield();
    return *p;
}
template <typename T>
T __ldg(const T* p) { return *p; }

inline int atomicMin(int* p, int v)
{
    emu::maybe_yield();
    const int old = *p;
    *p = std::min(old, v);
    return old;
}
inline int atomicCAS(int* p, int compare, int value)
{
    emu::maybe_yield();
    const int old = *p;
    if (old == compare) *p = value;
    return old;
}
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffs(unsigned int x) { return __builtin_ffs((int)x); }
#define SCHEDULE_POINT() emu::maybe_yield()

template <typename T>
T atomicAdd(T* p, T v)
{
    emu::maybe_yield();
    const T old = *p;
    *p = old + v;
    return old;
}
