# pydantic-ai look-alike tools: metadata and a timeout are not sent, a description is.
import socket
import time
from datetime import datetime

from pydantic_ai import Agent, Tool


def weather(city: str) -> str:
    return f"sunny in {city}"


def tagged_agent() -> Agent:
    tool = Tool(
        weather,
        name="weather",
        description="The weather in a city.",
        timeout=time.time() % 30,
        metadata={"host": socket.gethostname(), "built": datetime.now().isoformat()},
    )
    return Agent("openai:gpt-5", instructions="Tell the weather.", tools=[tool])


def dated_agent() -> Agent:
    tool = Tool(weather, description=f"The weather, as of {datetime.now():%H:%M}.")
    return Agent("openai:gpt-5", instructions="Tell the weather.", tools=[tool])  # PC001: 74
