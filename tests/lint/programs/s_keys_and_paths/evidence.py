# Evidence numbered by position: a dict built by a comprehension keys each chunk by its id
# (`id()` when it has none); what a lookup by key finds is the position, not the key.
import openai

client = openai.OpenAI()


def _key(chunk: dict) -> str:
    return chunk.get("chunk_id") or str(id(chunk))


def evidence_ids(pool: list, chunks: list) -> list:
    index_by_key = {_key(c): i for i, c in enumerate(pool)}
    ids = []
    for chunk in chunks:
        idx = index_by_key.get(_key(chunk))
        if idx is not None:
            ids.append(idx)
    return ids


def evidence_keys(pool: list) -> list:
    # keyed by `id()` itself (through `_key`, only the fallback of a chunk id, it is unproven)
    by_key = {str(id(c)): c for c in pool}
    return list(by_key)


def review(pool: list, chunks: list):
    ids = evidence_ids(pool, chunks)
    return client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "system", "content": f"Cite: {ids}"}]
    )


def review_indexed(pool: list, chunks: list):
    by_key = {_key(c): i for i, c in enumerate(pool)}
    first = by_key[_key(chunks[0])]
    return client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "system", "content": f"Cite: {first}"}]
    )


def review_keys(pool: list):
    keys = evidence_keys(pool)
    return client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "system", "content": f"Cite: {keys}"}]  # PC002: 73
    )
