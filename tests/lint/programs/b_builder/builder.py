# b) a builder class: sections added through any method, build() returns them
from datetime import datetime


class PromptBuilder:
    def __init__(self):
        self.sections = []

    def add_section(self, text):
        self.sections.append(text)

    def build(self):
        return "\n".join(self.sections)


def system_prompt():
    b = PromptBuilder()
    b.add_section("Rules...")
    b.add_section(f"Time: {datetime.now():%H:%M}")
    return b.build()


def stable_prompt():
    b = PromptBuilder()
    b.add_section("Rules...")
    b.add_section("Be brief.")
    return b.build()
