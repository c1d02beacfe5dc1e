# Chat services that read their model's name from the environment when they are built: the
# model name is sent as the request's model, never in its system prompt.
import os


class ChatService:
    def __init__(self, model=None):
        self.model = model or os.getenv("SHOP_MODEL", "claude-sonnet-4-5")

    def send(self, request):
        return request


class DraftService:
    def __init__(self, model=None):
        self.model = model or os.getenv("SHOP_DRAFT_MODEL", "claude-haiku-4-5")

    def send(self, request):
        return request
