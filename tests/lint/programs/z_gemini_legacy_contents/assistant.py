# Chat objects on the google.generativeai SDK: each request builds a fresh
# GenerativeModel(...) and sends the conversation as generate_content(contents=...). One
# sends a window of the newest stored rounds (the oldest kept round changes once the history
# is longer than the window, so the cache misses from it on); one sends the whole history,
# only ever appended to; and a one-off call sends a constant prompt.
import google.generativeai as genai


class WindowedGemini:
    def __init__(self, system: str, keep: int = 2) -> None:
        self.client = genai
        self.system = system
        self.keep = keep
        self.chat_history: list[list[dict]] = []

    def chat(self, text: str) -> str:
        request = self._fetch_from_memory()
        new_message = {"role": "user", "parts": [text]}
        request.append(new_message)
        reply = self._call_api(request)
        self._record(new_message, reply)
        return reply

    def _record(self, new_message: dict, reply: str) -> None:
        self.chat_history.append([new_message, {"role": "model", "parts": [reply]}])

    def _call_api(self, request_messages: list) -> str:
        response = self.client.GenerativeModel(
            "gemini-2.5-flash", system_instruction=self.system
        ).generate_content(contents=request_messages)
        return response.text

    def _fetch_from_memory(self) -> list:
        request: list = []
        if self.keep > 0:
            fetch = min(self.keep, len(self.chat_history))
            for turn in self.chat_history[-fetch:]:  # PC016: 24
                request = request + turn
        return request


class WholeHistoryGemini:
    def __init__(self, system: str) -> None:
        self.model = genai.GenerativeModel("gemini-2.5-flash", system_instruction=system)
        self.history: list[dict] = []

    def chat(self, text: str) -> str:
        self.history.append({"role": "user", "parts": [text]})
        response = self.model.generate_content(contents=self.history)
        self.history.append({"role": "model", "parts": [response.text]})
        return response.text


def haiku() -> str:
    model = genai.GenerativeModel("gemini-2.5-flash")
    return model.generate_content(contents="Write a haiku about the sea.").text
