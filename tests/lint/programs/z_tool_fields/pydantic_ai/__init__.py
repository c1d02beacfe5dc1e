from .agent import Agent
from .tools import Tool

__all__ = ["Agent", "Tool"]
