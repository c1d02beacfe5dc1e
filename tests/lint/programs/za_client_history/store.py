# A vector store wrapper over a client the analysis cannot see (Chroma's shape): what its
# query returns was found for the text it is given.
import chromadb


class Store:
    def __init__(self) -> None:
        self._client = chromadb.PersistentClient(path="index")

    def query(self, text: str) -> list[str]:
        collection = self._client.get_collection("notes")
        found = collection.query(query_texts=[text], n_results=4)
        return list(found["documents"][0])
