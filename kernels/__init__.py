"""Triton GPU kernels (paged decode, extend attention, KV store) with torch references."""
