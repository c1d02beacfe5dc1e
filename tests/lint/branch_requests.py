"""The request a time helper's text is sent in, shared by the tests of a time's precision
per branch (test_lint_branch_params, test_lint_branch_statements): ``ask(question, text)``
puts ``text`` at the start of the system message, ahead of about 2,900 characters of rules."""

ASK = """
import openai

client = openai.OpenAI()
RULES = "Answer briefly and cite the manual. " * 80


def ask(question: str, text: str):
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[
            {"role": "system", "content": f"{text}\\n{RULES}"},
            {"role": "user", "content": question},
        ],
    )
"""
