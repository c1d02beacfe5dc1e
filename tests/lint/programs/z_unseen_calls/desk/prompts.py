# Helpers given the task: one hands it to a model the linter cannot see (the text that model
# writes is not the task), one returns a method of the task's own text.


def generated(task: str, model) -> str:
    return model.run(task=f"Write instructions for this task: {task}")


def headline(task: str) -> str:
    return task.strip().title()
