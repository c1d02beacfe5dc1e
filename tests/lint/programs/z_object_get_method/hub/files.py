# Where downloaded files go: a folder under the user's home unless the environment names one.
import os
from pathlib import Path

CACHE_DIR = Path(os.environ.get("HUB_CACHE_DIR", Path.home() / ".hub"))


class Downloads:
    def __init__(self, folder: str | None = None):
        self.folder = Path(folder or CACHE_DIR)

    def save(self, name: str, data: bytes) -> Path:
        target = self.folder / name
        target.write_bytes(data)
        return target
