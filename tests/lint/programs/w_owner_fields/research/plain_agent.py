# The look-alike owner: a config of constants; its memory holds an environment value, which
# its writer never reads.
from .config import PlainConfig
from .memory import Memory
from .skills.writer import ReportGenerator


class PlainResearcher:
    def __init__(self, query, role=None):
        self.query = query
        self.cfg = PlainConfig()
        self.role = role
        self.memory = Memory("openai")
        self.report_generator = ReportGenerator(self)

    def write_introduction(self):
        return self.report_generator.write_introduction()
