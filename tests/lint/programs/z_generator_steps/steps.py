# A research step: the notes its tools found, the files its code wrote, and the id of the
# turn that made it.
from dataclasses import dataclass, field


@dataclass
class Step:
    query: str
    context: list = field(default_factory=list)
    files: dict = field(default_factory=dict)
    turn_id: str = ""
