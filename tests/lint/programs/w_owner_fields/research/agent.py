# The owner: its memory holds an environment value; the writer it builds with itself reads
# only its config's role and its role. Configured from the environment, that role is a
# machine-specific value in the prompt (PC017, info); the plain owner's role is not. (No
# trigger word here: this module is analysed for its callers.)
from .config import Config
from .memory import Memory
from .skills.writer import ReportGenerator


class Researcher:
    def __init__(self, query, role=None):
        self.query = query
        self.cfg = Config()
        self.role = role
        self.memory = Memory("openai")
        self.report_generator = ReportGenerator(self)

    def write_introduction(self):
        return self.report_generator.write_introduction()  # PC017: 15
