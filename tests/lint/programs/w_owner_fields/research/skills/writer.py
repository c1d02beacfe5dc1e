# A helper object built with its owner (`ReportGenerator(self)`): it reads two fields of the
# owner, never the others.
from ..actions import write_introduction


class ReportGenerator:
    def __init__(self, researcher):
        self.researcher = researcher

    def write_introduction(self):
        return write_introduction(
            query=self.researcher.query,
            agent_role_prompt=self.researcher.cfg.agent_role or self.researcher.role,
            model=self.researcher.cfg.model,
        )
