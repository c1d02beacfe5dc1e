"""The bundled inference engine: paged KV cache, automatic prefix caching, continuous batching."""
