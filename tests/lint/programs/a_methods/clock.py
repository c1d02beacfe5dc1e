# a) a method on a local instance, on a parameter, and through a table of bound methods
from datetime import datetime

from langchain_core.messages import SystemMessage


class Clock:
    def now_text(self):
        return datetime.now().strftime("%Y-%m-%d %H:%M:%S")

    def version(self):
        return "v1"

    def via_table(self) -> str:
        factories = {"now": self.now_text}
        return "Now: " + factories["now"]()

    def stable_table(self) -> str:
        factories = {"version": self.version}
        return "Version: " + factories["version"]()


def via_local_instance(template: str) -> SystemMessage:
    clock = Clock()
    return SystemMessage(content=template.format(now=clock.now_text()))  # PC001: 33


def via_parameter(clock: Clock) -> SystemMessage:
    return SystemMessage(content=f"Time: {clock.now_text()}")  # PC001: 42


def via_bound_table(clock: Clock) -> SystemMessage:
    return SystemMessage(content=clock.via_table())  # PC001: 33


def stable_local_instance(template: str) -> SystemMessage:
    clock = Clock()
    return SystemMessage(content=template.format(version=clock.version()))


def stable_table(clock: Clock) -> SystemMessage:
    return SystemMessage(content=clock.stable_table())
