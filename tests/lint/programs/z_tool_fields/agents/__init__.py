from .agent import Agent
from .tool import FunctionTool, LocalShellTool, ShellTool

__all__ = ["Agent", "FunctionTool", "LocalShellTool", "ShellTool"]
