from .catalog import Catalog


class Hub:
    def __init__(self, provider):
        self.catalog = Catalog(provider)
