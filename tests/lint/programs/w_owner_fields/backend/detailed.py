# A report that owns researchers and calls them per request: what a researcher's memory
# holds does not reach the writer's system message through it, nor does the time that
# seeds the report's id.
import hashlib
import time

from research.agent import Researcher


class DetailedReport:
    def __init__(self, query):
        self.query = query
        self.researcher = Researcher(query=query)
        self.report_id = ""

    def _generate_report_id(self) -> str:
        stamp = str(int(time.time()))
        return f"detailed_{stamp}_{hashlib.md5(self.query.encode()).hexdigest()[:8]}"

    def run(self):
        self.report_id = self._generate_report_id()
        return self.researcher.write_introduction()
