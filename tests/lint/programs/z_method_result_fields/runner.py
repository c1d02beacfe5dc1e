# A runner's method returns a result object built in its own module: the reply, the notes it
# gathered, and how long the run took (timed with the clock). An importer reads the result's
# fields one by one, so the duration stays in its own field.
import time
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RunResult:
    reply: str
    notes: dict = field(default_factory=dict)
    took_ms: int = 0


class Runner:
    def __init__(self, name: str) -> None:
        self.name = name

    def run(self, task: str) -> RunResult:
        begin = time.perf_counter()
        reply = f"{self.name} handled {task}"
        took = int((time.perf_counter() - begin) * 1000)
        return RunResult(reply=reply, notes={"task": task}, took_ms=took)

    def run_stamped(self, task: str) -> RunResult:
        begin = time.perf_counter()
        reply = f"{self.name} handled {task} at {time.time()}"
        took = int((time.perf_counter() - begin) * 1000)
        return RunResult(reply=reply, notes={}, took_ms=took)
