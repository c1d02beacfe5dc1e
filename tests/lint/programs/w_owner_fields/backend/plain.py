# A report that owns the plain researcher and calls it per request: nothing to report.
from research.plain_agent import PlainResearcher


class PlainReport:
    def __init__(self, query):
        self.researcher = PlainResearcher(query=query)

    def run(self):
        return self.researcher.write_introduction()
