"""A grader that sends each sample with a system prompt drawn at random (invented)."""

import random
import secrets
import uuid

from openai import OpenAI

from .personas import OPENERS, SYSTEM_PROMPTS, TONES, TOPICS

client = OpenAI()
RUBRICS = ["Grade strictly.", "Grade kindly."]
NOTES = ["Be brief.", "Be thorough."]
SUFFIXES = ["A.", "B."]


def _send(system, sample):
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": system}, {"role": "user", "content": sample}],
    )


def grade(samples, seed):
    random.seed(seed)
    return [ask_fixed(s) for s in samples]


def ask_fixed(sample):
    # one of four fixed texts: four prefixes, each cached after its first request
    return _send(random.choice(SYSTEM_PROMPTS), sample)


def ask_fixed_here(sample):
    rng = random.Random()
    system = f"{random.choice(RUBRICS)} Tone: {rng.choice(TONES)}. {secrets.choice(RUBRICS)}"
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": system}, {"role": "user", "content": sample}],
    )


def ask_appended(sample):
    # another function of its module appends to OPENERS: still one whole element of the list,
    # drawn once, a value that repeats
    system = random.choice(OPENERS)
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": system}, {"role": "user", "content": sample}],
    )


def ask_many(sample):
    # one of 500 fixed texts: each a prefix cached when it repeats
    system = random.choice(TOPICS)
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": system}, {"role": "user", "content": sample}],
    )


def ask_rebound(sample):
    global NOTES
    NOTES = NOTES + [sample]
    system = random.choice(NOTES)
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": system}, {"role": "user", "content": sample}],
    )


def ask_number(sample):
    system = f"Seed {random.random()}, level {random.randint(1, 9)}, run {uuid.uuid4()}"
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": system}, {"role": "user", "content": sample}],  # PC002: 48
    )


def ask_sampled(sample):
    system = " ".join(random.sample(SYSTEM_PROMPTS, 3))
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": system}, {"role": "user", "content": sample}],  # PC002: 48
    )


def ask_shuffled(sample):
    random.shuffle(SUFFIXES)
    system = " ".join(SUFFIXES)
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": system}, {"role": "user", "content": sample}],  # PC004: 48
    )
