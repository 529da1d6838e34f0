"""One simulation split over several devices: slabs along the slowest axis, halos exchanged between them.

- devices.py: the run option ``devices`` ("0,1", "all", a list of ids), checked against the model's capability
  (``Model.splits_across_devices``) and the backend;
- slabs.py: how a lattice's slowest axis is cut into slabs, one per device, each with halos;
- exchange.py: the ``Exchanger`` that moves halos and gathered values between the parts (in one process:
  NumPy copies or CUDA peer copies; NCCL);
- mpi.py: one part per process of an MPI job (``--distributed``): ``join_job`` and ``MpiExchanger``.

Models that split (the Ising model's Metropolis sweeps) build their per-device engines on these; generic code
never names a model.
"""
