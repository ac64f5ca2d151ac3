"""Sampling: completions drawn from a policy as token ids, with the sampler's log-probs, and scoring.

* :mod:`~opct.sampling.engine`: the contract every engine keeps (``SamplingParams``, ``Rollout``,
  the ``SamplingEngine`` protocol, ``sample_seed``);
* :mod:`~opct.sampling.hf_sampler`: ``HFSampler``, on the model's own forward (never ``generate()``),
  with :mod:`~opct.sampling.kv_cache` (its in-place KV cache) and :mod:`~opct.sampling.prefix_attention`
  (each prompt's cached keys read once for its n samples); :mod:`~opct.sampling.token_choice` picks each
  token, and :mod:`~opct.sampling.static_decoder` is its fixed-shape decoder (``sampling.decoder``), whose
  step :mod:`~opct.sampling.cuda_graphs` captures on CUDA;
* :mod:`~opct.sampling.vllm_sampler`: ``VLLMSampler``, the same contract on vLLM;
* :mod:`~opct.sampling.factory`: ``make_sampler``, the engine ``sampling.engine`` names;
* :mod:`~opct.sampling.merged_lora`: a LoRA policy's merged sampling copy, and merged weights for vLLM;
* :mod:`~opct.sampling.scoring`: log-probs of given completion tokens after a prompt (teacher and student).
* :mod:`~opct.sampling.fast_paths`: the self-check each sampler and scorer fast path passes on a model
  before it is used there (else it falls back, and says so once).

It imports only :mod:`opct.models`, :mod:`opct.config` and :mod:`opct.errors` of opct.
"""
