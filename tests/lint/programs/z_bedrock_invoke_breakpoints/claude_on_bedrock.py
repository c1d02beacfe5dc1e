# Claude on Bedrock through invoke_model, its Anthropic-style JSON body marking the system
# prompt with cache_control: only what precedes the last breakpoint is cached, so the time in
# an unmarked system block after the marked one changes nothing cached, while the time inside
# the marked system text does (the cached prefix differs every request). The same request
# before a history that may carry a later breakpoint keeps the time inside a cached prefix.
import json
from datetime import datetime
from pathlib import Path

import boto3

bedrock = boto3.client("bedrock-runtime")
GUIDE = Path(__file__).with_name("guide.md").read_text()


def ask(question: str) -> str:
    body = json.dumps(
        {
            "anthropic_version": "bedrock-2023-05-31",
            "max_tokens": 512,
            "system": [
                {"type": "text", "text": GUIDE, "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": f"It is {datetime.now().isoformat()}."},
            ],
            "messages": [{"role": "user", "content": question}],
        }
    )
    response = bedrock.invoke_model(modelId="anthropic.claude-sonnet-4-5", body=body)
    return json.loads(response["body"].read())["content"][0]["text"]


def ask_dated(question: str) -> str:
    stamp = datetime.now().isoformat()
    body = json.dumps(
        {
            "anthropic_version": "bedrock-2023-05-31",
            "max_tokens": 512,
            "system": [
                {
                    "type": "text",
                    "text": f"{GUIDE} Today is {stamp}.",  # PC001: 48
                    "cache_control": {"type": "ephemeral"},
                }
            ],
            "messages": [{"role": "user", "content": question}],
        }
    )
    response = bedrock.invoke_model(modelId="anthropic.claude-sonnet-4-5", body=body)
    return json.loads(response["body"].read())["content"][0]["text"]


def ask_with_history(history: list) -> str:
    body = json.dumps(
        {
            "anthropic_version": "bedrock-2023-05-31",
            "max_tokens": 512,
            "system": [
                {"type": "text", "text": GUIDE, "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": f"It is {datetime.now().isoformat()}."},  # PC001: 50
            ],
            "messages": history,
        }
    )
    response = bedrock.invoke_model(modelId="anthropic.claude-sonnet-4-5", body=body)
    return json.loads(response["body"].read())["content"][0]["text"]
