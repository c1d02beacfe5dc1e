"""A long, fixed instruction text (about 2,000 tokens): above every model's minimum cacheable
prefix, as real system prompts are."""

INSTRUCTIONS = "\n".join(
    f"Rule {i}: answer the customer politely, cite handbook section {i}, and never guess prices."
    for i in range(120)
)
