# Jobs are pydantic models with an __init__ of their own that hands the fields on to
# pydantic's. A field the caller leaves out is filled by its default factory for each job
# built: a random key there names the job's tools (`finish_job_<key>`), so every job sends
# other tool definitions.
import uuid
from dataclasses import dataclass, field

from langchain_openai import ChatOpenAI
from llm import Runner
from pydantic import BaseModel, Field


def new_key() -> str:
    return uuid.uuid4().hex[:6]


class Job(BaseModel):
    key: str = Field(default_factory=lambda: uuid.uuid4().hex[:5])
    objective: str
    notes: list[str] = Field(default_factory=list)
    done: bool = False

    def __init__(self, objective: str, **kwargs):
        super().__init__(objective=objective, **kwargs)

    def finish_tool(self) -> dict:
        return {
            "name": f"finish_job_{self.key}",
            "description": f"Mark job {self.key} as finished.",
        }

    def give_up_tool(self) -> dict:
        return {"name": f"give_up_job_{self.key}", "description": "Give the job up."}

    def tools(self) -> list[dict]:
        out = []
        out.append(self.finish_tool())
        out.append(self.give_up_tool())
        return out


class NamedJob(BaseModel):
    # the factory is a function of the module: what it returns is made for each job
    key: str = Field(default_factory=new_key)
    objective: str

    def __init__(self, objective: str, **kwargs):
        super().__init__(objective=objective, **kwargs)

    def finish_tool(self) -> dict:
        return {"name": f"finish_{self.key}", "description": "Finish."}


class FixedJob(BaseModel):
    # the factory makes the same key for every job
    key: str = Field(default_factory=lambda: "main")
    objective: str

    def __init__(self, objective: str, **kwargs):
        super().__init__(objective=objective, **kwargs)

    def finish_tool(self) -> dict:
        return {"name": f"finish_job_{self.key}", "description": "Finish."}


class KeptJob(BaseModel):
    # the job's own __init__ sets the key: the factory's value is replaced
    key: str = Field(default_factory=lambda: uuid.uuid4().hex[:5])
    objective: str

    def __init__(self, objective: str, **kwargs):
        super().__init__(objective=objective, **kwargs)
        self.key = "kept"

    def finish_tool(self) -> dict:
        return {"name": f"finish_job_{self.key}", "description": "Finish."}


class CheckedJob(BaseModel):
    # the random key is only compared, never put into a tool
    key: str = Field(default_factory=lambda: uuid.uuid4().hex[:5])
    objective: str

    def __init__(self, objective: str, **kwargs):
        super().__init__(objective=objective, **kwargs)

    def finish_tool(self, wanted: str) -> dict:
        if self.key == wanted:
            return {"name": "finish_wanted", "description": "Finish."}
        return {"name": "finish_other", "description": "Finish."}


@dataclass
class PlainJob:
    # a dataclass with an __init__ of its own: the field's factory never runs
    objective: str
    key: str = field(default_factory=lambda: uuid.uuid4().hex[:5])

    def __init__(self, objective: str):
        self.objective = objective
        self.key = "plain"

    def finish_tool(self) -> dict:
        return {"name": f"finish_job_{self.key}", "description": "Finish."}


runner = Runner(ChatOpenAI(model="m"))
#: built once at import: its key names this one job for the life of the process
NIGHTLY = Job("Write the nightly report.")


def run_job(objective: str, messages: list):
    job = Job(objective)
    tools = []
    tools.extend(job.tools())
    return runner.call(messages, tools)  # PC002: 33


def run_named(objective: str, messages: list):
    job = NamedJob(objective)
    return runner.call(messages, [job.finish_tool()])  # PC002: 33


def run_given_key(objective: str, messages: list):
    # the caller gives the key: the factory does not run
    job = Job(objective, key="nightly")
    return runner.call(messages, job.tools())


def run_fixed(objective: str, messages: list):
    return runner.call(messages, [FixedJob(objective).finish_tool()])


def run_kept(objective: str, messages: list):
    return runner.call(messages, [KeptJob(objective).finish_tool()])


def run_checked(objective: str, messages: list):
    return runner.call(messages, [CheckedJob(objective).finish_tool("a")])


def run_plain(objective: str, messages: list):
    return runner.call(messages, [PlainJob(objective).finish_tool()])


def run_nightly(messages: list):
    return runner.call(messages, NIGHTLY.tools())
