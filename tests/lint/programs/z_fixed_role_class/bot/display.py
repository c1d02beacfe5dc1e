# A console notice of a fixed system role, only printed: no module turns it into a request.


class Notice:
    role = "system"

    def __init__(self, content: str) -> None:
        self.content = content

    def show(self) -> None:
        print(f"[{self.role}] {self.content}")
