"""Training: the one loop every method shares, FSDP, and the export of what it trained.

* :mod:`~opct.training.loop`: ``train(cfg)``, on accelerate (one process, DDP or FSDP2);
* :mod:`~opct.training.fsdp`: which launches are accepted and how FSDP2 shards, gathers and loads;
* :mod:`~opct.training.export`: a trained checkpoint as one model folder (``opct export``), loaded through
  :mod:`opct.models`.

The methods themselves and their divergences (:mod:`opct.methods.losses`) are in :mod:`opct.methods`; the run
directory in :mod:`opct.runs`.
"""
