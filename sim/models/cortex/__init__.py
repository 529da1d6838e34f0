"""The cortical spiking network of thesis 003, chapter 8: L x L Izhikevich neurons on a periodic grid, each
pulling k inputs from sources drawn around it, with synaptic delays, exponential washout of the
post-synaptic potentials and drug factors; a pseudo-EEG (the mean excitatory membrane potential) at 1 kHz.

params.py (the schema), numbers.py (Philox conventions and the exact normal deviates), network.py (the
neurons' types, dynamics parameters, delays and the connections), engines.py (the two phases of a step in
NumPy, and the same phases as CUDA kernels in kernels/), model.py (CortexModel), schedule.py (batch
schedules of parameter changes), batch.py (a scheduled run writing the EEG and the qEEG metrics).
"""
