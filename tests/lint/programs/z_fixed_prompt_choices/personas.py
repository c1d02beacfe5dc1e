"""Fixed texts a grader draws its system prompt from (invented)."""

SYSTEM_PROMPTS = [
    "You are a patient tutor.",
    "You are a strict examiner.",
    "You are a friendly reviewer.",
    "You answer in one sentence.",
]
TONES: tuple[str, ...] = ("formal", "casual", "terse")
OPENERS = ["Hello.", "Good day."]
TOPICS = [f"Topic number {i}." for i in range(500)]


def add_opener(text):
    OPENERS.append(text)
