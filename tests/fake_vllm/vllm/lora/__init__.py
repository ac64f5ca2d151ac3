"""The fake vLLM's ``vllm.lora`` package (see ``tests/fake_vllm/vllm/__init__.py``)."""
