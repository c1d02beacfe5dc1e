# An embeddings client configured from the environment: stored on the researcher, never
# part of any prompt.
import os


class Memory:
    def __init__(self, provider: str):
        self._embeddings = make_embeddings(provider, os.environ["EMBEDDINGS_BASE_URL"])


def make_embeddings(provider, base_url):
    return f"{provider}@{base_url}"
