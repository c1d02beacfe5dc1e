# Shape 9 (other module): the planner's output becomes tool names.


def plan_tools(names: list[str], run_id: str = "", label: str = "") -> list[dict]:
    return [
        {"name": f"{name}_{run_id}", "description": f"Tool {name}.", "input_schema": {}}
        for name in names
    ]


class Planner:
    def __init__(self, run_id: str = ""):
        self.run_id = run_id

    def tools(self, names: list[str]) -> list[dict]:
        return [{"name": f"{n}_{self.run_id}", "input_schema": {}} for n in names]
