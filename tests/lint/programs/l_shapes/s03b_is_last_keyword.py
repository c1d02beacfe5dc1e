# Shape 3, keyword form: the breakpoint is a `cache_control=` keyword whose value depends on an
# is-last guard (a class-qualified helper given `use_cache and is_last`, or `... if is_last
# else None`): one breakpoint per call. The same keyword without the guard marks every call.
import anthropic
from anthropic.types import ToolUseBlockParam

client = anthropic.Anthropic()


class Serializer:
    @staticmethod
    def cache_control(on: bool) -> dict | None:
        return {"type": "ephemeral"} if on else None

    @staticmethod
    def tool_uses(calls: list, use_cache: bool = False) -> list:
        blocks = []
        for i, call in enumerate(calls):
            is_last = i == len(calls) - 1
            blocks.append(
                ToolUseBlockParam(
                    id=call.id,
                    input=call.args,
                    name=call.name,
                    type="tool_use",
                    cache_control=Serializer.cache_control(use_cache and is_last),
                )
            )
        return blocks

    @staticmethod
    def tool_uses_inline(calls: list) -> list:
        blocks = []
        for i, call in enumerate(calls):
            blocks.append(
                ToolUseBlockParam(
                    id=call.id,
                    input=call.args,
                    name=call.name,
                    type="tool_use",
                    cache_control={"type": "ephemeral"} if i == len(calls) - 1 else None,
                )
            )
        return blocks

    @staticmethod
    def tool_uses_all(calls: list, use_cache: bool = False) -> list:
        blocks = []
        for call in calls:
            blocks.append(
                ToolUseBlockParam(
                    id=call.id,
                    input=call.args,
                    name=call.name,
                    type="tool_use",
                    cache_control=Serializer.cache_control(use_cache),  # PC007: 20
                )
            )
        return blocks


def ask(calls: list):
    content = Serializer.tool_uses(calls, True) + Serializer.tool_uses_inline(calls)
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        messages=[{"role": "assistant", "content": content + Serializer.tool_uses_all(calls)}],
    )
