from .agent import Agent
from .run import Runner

__all__ = ["Agent", "Runner"]
