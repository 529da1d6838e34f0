// Spike recording of the cortical model (issue 43): stream compaction of the fired flags.
// NumPy twin: spikes.py NumpySpikes.record.
//
// Phase 1 leaves bit 0 of data[i] set for every neuron i that fired in the step; the update kernels are not
// touched. After a step, cortex_spike_compact looks at the neurons of the recorded band [first, first + count),
// one per thread (grid-stride loop); a neuron that fired takes the next free slot of out[] by an atomicAdd on the
// fill counter and writes its index there. Then cortex_spike_close_step (one thread) writes the fill counter to
// ends[k]: the step's spikes are out[ends[k-1] .. ends[k]) (a CSR row pointer over steps), so no step number is
// stored per spike. The order within a step depends on the atomics; the host sorts each step's indices when it
// copies a batch. The host sizes out[] for the worst case (every neuron of the band firing in every step of the
// batch), so slot < capacity always holds; the check only guards memory.

extern "C" __global__ void cortex_spike_compact(const unsigned char* __restrict__ data, const int first,
                                                const int count, int* __restrict__ out,
                                                unsigned int* __restrict__ fill, const unsigned int capacity)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
        if (data[first + i] & 1) {
            const unsigned int slot = atomicAdd(fill, 1u);
            if (slot < capacity) out[slot] = first + i;
        }
    }
}

extern "C" __global__ void cortex_spike_close_step(const unsigned int* __restrict__ fill,
                                                   unsigned int* __restrict__ ends, const int k)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) ends[k] = *fill;
}
