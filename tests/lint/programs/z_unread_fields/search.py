import asyncio
import time
from dataclasses import dataclass

import openai

client = openai.AsyncOpenAI()


@dataclass
class SearchResult:
    response: str
    completion_time: float
    llm_calls: int


class MapReduceSearch:
    async def _map(self, batch: str) -> SearchResult:
        start = time.time()
        reply = await client.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "system", "content": "Summarise the notes."}, {"role": "user", "content": batch}],
        )
        parsed = reply.choices[0].message.content or ""
        return SearchResult(response=parsed, completion_time=time.time() - start, llm_calls=1)

    async def _reduce(self, results: list, query: str):
        notes = "\n".join(r.response for r in results)
        return await client.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "system", "content": f"Combine these notes:\n{notes}"}, {"role": "user", "content": query}],
        )

    async def _reduce_timed(self, results: list, query: str):
        notes = "\n".join(f"{r.completion_time:.1f}s {r.response}" for r in results)
        return await client.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "system", "content": f"Combine these notes:\n{notes}"}, {"role": "user", "content": query}],
        )

    async def search(self, query: str, batches: list):
        results = await asyncio.gather(*[self._map(batch) for batch in batches])
        return await self._reduce(results, query)

    async def search_timed(self, query: str, batches: list):
        results = await asyncio.gather(*[self._map(batch) for batch in batches])
        return await self._reduce_timed(results, query)  # PC001: 40

    async def _reduce_numbered(self, results: list, query: str):
        points = []
        for index, r in enumerate(results):
            points.append(f"{index}. {r.response}")
        return await client.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "system", "content": "\n".join(points)}, {"role": "user", "content": query}],
        )

    async def search_numbered(self, query: str, batches: list):
        results = await asyncio.gather(*[self._map(batch) for batch in batches])
        return await self._reduce_numbered(results, query)

    async def _reduce_ranked(self, results: list, query: str):
        points = []
        for r in results:
            points.append({"answer": r.response, "score": r.llm_calls})
        ranked = sorted(points, key=lambda p: p["score"])
        return await client.chat.completions.create(
            model="gpt-4o",
            messages=[
                {"role": "system", "content": "\n".join(p["answer"] for p in ranked)},
                {"role": "user", "content": query},
            ],
        )

    async def search_ranked(self, query: str, batches: list):
        results = await asyncio.gather(*[self._map(batch) for batch in batches])
        return await self._reduce_ranked(results, query)
