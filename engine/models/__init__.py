"""Model definitions (Llama, Qwen2 and Mistral share models/llama.py) and RoPE."""
