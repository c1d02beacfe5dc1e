# tools whose argument schema is built in the constructor: one lists the modules a snippet may
# import in set order, one sorts them, one keeps the set-ordered list under a key the schema
# builder never reads
MODULES = ["json", "math", "re", "statistics", "time"]


class Tool:
    name = "tool"
    summary = "A tool."


class SnippetRunner(Tool):
    name = "run_snippet"
    summary = "Runs a short snippet."

    def __init__(self):
        self.modules = list(set(MODULES))
        self.parameters = {
            "type": "object",
            "properties": {
                "snippet": {
                    "type": "string",
                    "description": f"A snippet that may import only: {self.modules}.",
                },
            },
        }


class SortedSnippetRunner(Tool):
    name = "run_sorted_snippet"
    summary = "Runs a short snippet."

    def __init__(self):
        self.modules = sorted(set(MODULES))
        self.parameters = {
            "type": "object",
            "properties": {
                "snippet": {
                    "type": "string",
                    "description": f"A snippet that may import only: {self.modules}.",
                },
            },
        }


class NotedSnippetRunner(Tool):
    name = "run_noted_snippet"
    summary = "Runs a short snippet."

    def __init__(self):
        self.modules = list(set(MODULES))
        self.parameters = {
            "type": "object",
            "properties": {"snippet": {"type": "string", "description": "A snippet."}},
            "notes": f"Imports checked against: {self.modules}.",
        }
