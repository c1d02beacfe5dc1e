"""Builds one agent's configuration, system prompt included."""

from datetime import datetime

from .context_utils import build_context_components, render_system_prompt


def create_agent_config(duty: str, app_name: str, user_id: str) -> dict:
    time_str = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    components = build_context_components(
        duty=duty, app_name=app_name, time_str=time_str, user_id=user_id
    )
    return {"system_prompt": render_system_prompt(components), "model": "gpt-5-mini"}  # PC001: 29
