"""Discover the skills installed in a folder (one SKILL.md per sub-folder)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Skill:
    name: str
    description: str


def _read_skill(folder: Path) -> Skill | None:
    card = folder / "SKILL.md"
    if not card.is_file():
        return None
    first = card.read_text(encoding="utf-8").splitlines()[0] if card.stat().st_size else ""
    return Skill(folder.name, first.lstrip("# ").strip())


def load_skills(skills_dir: Path) -> list[Skill]:
    skills = []
    for item in sorted(skills_dir.iterdir()):
        if item.is_dir():
            skill = _read_skill(item)
            if skill is not None:
                skills.append(skill)
    return skills
