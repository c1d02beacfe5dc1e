"""A conversation record of another module, stored whole by a desk's method."""

import dataclasses


@dataclasses.dataclass
class Ticket:
    ticket_id: str = ""
    tags: list = dataclasses.field(default_factory=list)
