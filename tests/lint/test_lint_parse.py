"""Python 3.12-3.14 syntax is linted whatever Python runs the linter; a broken file is PC000."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from promptcache.lint_rules import lint_source
from promptcache.lint_rules.parse import NewerSyntaxError, parse_module

HEADER = "import datetime\nimport anthropic\nclient = anthropic.Anthropic()\n"
NOW = "datetime.datetime.now()"


def _findings(source: str) -> list[tuple[str, int, int, str]]:
    lines = source.splitlines()
    return [
        (d.code, d.location.line, d.location.col, lines[d.location.line - 1][d.location.col :])
        for d in lint_source(source, "new.py").diagnostics
    ]


def test_a_cache_breaker_inside_a_generic_class_is_found_where_it_is() -> None:
    source = HEADER + (
        "class Agent[T: (str, bytes) = str]:\n"  # PEP 695 with a PEP 696 default
        "    def ask[U](self, q: U) -> T:\n"
        f"        return client.messages.create(model='m', system=f'Now {{{NOW}}}', messages=[q])\n"
    )
    ((code, line, _, text),) = _findings(source)
    assert (code, line) == ("PC001", 6) and text.startswith(NOW)


def test_multi_line_type_parameters_keep_every_line() -> None:
    source = HEADER + (
        "def ask[\n"
        "    T,  # a comment\n"
        "    *Ts,\n"
        f"](q): return client.messages.create(model='m', system=f'{{{NOW}}}', messages=[q])\n"
    )
    ((code, line, _, text),) = _findings(source)
    assert (code, line) == ("PC001", 7) and text.startswith(NOW)


def test_type_alias_statements_are_not_pc000() -> None:
    for source in ("type Pair[T] = tuple[T, T]\ntype Id = int\n", HEADER + "type Id = int\n"):
        assert _findings(source) == []
    tree = parse_module("type Pair[T] = tuple[T, T]\n", "alias.py")
    (assign,) = tree.body
    assert isinstance(assign, ast.Assign) and assign.value.col_offset == 15


def test_except_without_parentheses_pep_758() -> None:
    source = HEADER + (
        "def ask(q):\n"
        "    try:\n"
        "        pass\n"
        "    except ValueError, TypeError: return client.messages.create(\n"
        f"        model='m', system=f'{{{NOW}}}', messages=[q])\n"
    )
    ((code, line, _, text),) = _findings(source)
    assert (code, line) == ("PC001", 8) and text.startswith(NOW)


def test_t_strings_and_pep_701_f_strings() -> None:
    source = HEADER + (
        "PROFILE = {'tone': 'brief'}\n"
        "def ask(q):\n"
        f'    system = f"{{PROFILE["tone"]}} {{{NOW}:%H}}" + t"{{{NOW}}}"\n'
        "    return client.messages.create(model='m', system=system, messages=[q])\n"
    )
    found = _findings(source)
    assert [(c, line) for c, line, _, _ in found] == [("PC001", 6), ("PC001", 6)]
    assert all(text.startswith(NOW) for _, _, _, text in found)


@pytest.mark.parametrize(
    "source",
    [
        "class Loader[T:\n    pass\n",  # looks like a type parameter list, but is broken
        "type X[T = int\n",
        "try:\n    pass\nexcept ValueError, :\n    pass\n",
        "def f(:\n    pass\n",
    ],
    ids=["generic", "alias", "except", "plain"],
)
@pytest.mark.parametrize("header", ["", HEADER], ids=["syntax-only", "analysed"])
def test_a_file_both_parsers_reject_is_still_pc000(source: str, header: str) -> None:
    (diagnostic,) = lint_source(header + source, "broken.py").diagnostics
    assert diagnostic.code == "PC000"
    assert diagnostic.message.startswith("cannot parse this file")
    with pytest.raises(SyntaxError):
        parse_module(header + source, "broken.py")


def test_newer_syntax_without_trigger_words_is_not_pc000() -> None:
    assert lint_source(b"class Loader[T]:\n    items: list[T]\n", "plain.py").diagnostics == ()


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="this Python's ast reads it")
def test_newer_syntax_that_cannot_be_rewritten_reports_nothing() -> None:
    source = HEADER + "def ask(q):\n    return f\"{'\\n'.join(q)}\"\n"
    with pytest.raises(NewerSyntaxError):
        parse_module(source, "new.py")
    assert lint_source(source, "new.py").diagnostics == ()


def test_fixes_apply_to_a_file_with_newer_syntax() -> None:
    from promptcache.lint_rules import LintConfig
    from promptcache.lint_rules.fix import fix_source

    source = HEADER + (
        "import json\n"
        "class Agent[T]:\n"
        "    def ask(self, q, fields):\n"
        "        profile = {k: fields[k] for k in set(fields)}\n"
        "        return client.messages.create(model='m', system=json.dumps(profile),"
        " messages=[q])\n"
    )
    fixed, count = fix_source(source, "new.py", LintConfig())
    assert count == 1
    assert fixed == source.replace("json.dumps(profile)", "json.dumps(profile, sort_keys=True)")


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="this Python parses PEP 695 itself")
def test_a_rewrite_is_shared_with_the_other_processes_of_a_run(tmp_path: Path) -> None:
    import subprocess

    from promptcache.lint_rules.parse import share_rewrites

    # a source no other test parses in this process (the process keeps its own rewrites)
    source = f"# {tmp_path.name}\nclass Box[T]:\n    def get(self) -> T: ...\n"
    script = (
        "import sys\n"
        "from promptcache.lint_rules.parse import parse_module, share_rewrites\n"
        "share_rewrites(sys.argv[1])\n"
        "parse_module(sys.stdin.read(), 'box.py')\n"
    )
    subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], input=source, text=True, check=True
    )
    (stored,) = tmp_path.iterdir()
    rewritten = stored.read_text(encoding="utf-8")
    assert rewritten.splitlines()[1].startswith("class Box   :")  # the type parameters blanked
    # this process takes the stored rewrite instead of rewriting (marked to tell them apart)
    stored.write_text(rewritten + "MARK = 1\n", encoding="utf-8")
    share_rewrites(tmp_path)
    try:
        tree = parse_module(source, "box.py")
    finally:
        share_rewrites(None)
    assert [ast.unparse(n) for n in tree.body[1:]] == ["MARK = 1"]


def test_a_parsed_tree_is_kept_for_the_next_analysis_up_to_a_size() -> None:
    from promptcache.lint_rules import parse

    small = f"x = 1  # {id(object())}\n"
    assert parse.parse_kept(small, "a.py") is parse.parse_kept(small, "a.py")
    # a source over the whole budget is parsed each time
    huge = "x = 1\n#" + "a" * parse.TREES_KEPT_BYTES + "\n"
    assert parse.parse_kept(huge, "b.py") is not parse.parse_kept(huge, "b.py")
    # two sources of 0.6 of the budget: the first goes when the second is kept
    first, second = ("y = 2\n#" + c * int(parse.TREES_KEPT_BYTES * 0.6) + "\n" for c in "bc")
    tree = parse.parse_kept(first, "c.py")
    assert parse.parse_kept(first, "c.py") is tree
    parse.parse_kept(second, "d.py")
    assert parse.parse_kept(first, "c.py") is not tree
    assert sum(map(len, parse._TREES)) == parse._TREES_SIZE[0] <= parse.TREES_KEPT_BYTES


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="this Python parses PEP 695 itself")
def test_a_run_leaves_no_folder_of_shared_rewrites(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    from promptcache.lint_rules import LintConfig, lint_paths

    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    code = tmp_path / "code"
    code.mkdir()
    (code / "plain.py").write_text(HEADER + "x = 1\n", encoding="utf-8")
    (code / "generic.py").write_text(
        HEADER + f"# {tmp_path.name}\nclass Box[T]:\n    system = 'system'\n", encoding="utf-8"
    )
    results = lint_paths([code], LintConfig(root=code), jobs=1)
    assert sorted(Path(r.path).name for r in results) == ["generic.py", "plain.py"]
    assert list(temp.iterdir()) == []


def _libcst_rewrite(source: str, error: SyntaxError) -> str | None:
    from promptcache.lint_rules.parse import _libcst_module, _older

    module = _libcst_module(source, error)
    return None if module is None else str(module.visit(_older(module)).code)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the running ast reads type parameters")
@pytest.mark.parametrize(
    "source",
    [
        "class Box[T: (str, bytes) = str]:\n    def get[U](self, u: U) -> T: ...\n",
        "def f[\n    T,\n    *Ts,\n    **P,\n](x): return x\n",
        "class A:\n    @staticmethod\n    async def g[T: dict[str, int]]  (x: T) -> T: return x\n",
    ],
)
def test_type_parameters_are_blanked_as_libcst_blanks_them(source: str) -> None:
    from promptcache.lint_rules.parse import _type_params_blanked

    with pytest.raises(SyntaxError) as caught:
        ast.parse(source)
    fast = _type_params_blanked(source, caught.value)
    assert fast is not None and fast == _libcst_rewrite(source, caught.value)
    assert fast.count("\n") == source.count("\n") and ast.parse(fast)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the running ast reads type parameters")
@pytest.mark.parametrize(
    "source",
    [
        # a list with a comment or a string in it, or other newer syntax: libcst rewrites it
        "def f[\n    T,  # a comment\n](x): return x\n",
        "def f[T: Literal[']']](x): return x\n",
        "def f[T](x): return x\ntype Alias = int\n",
        # the look-alike in a string beside a real list: not a definition
        "def f[T](x): return x\ndoc = 'def g[U]('\n",
        # not valid on any version: libcst rejects it, so PC000 stays
        "def f[T, /](x): return x\n",
        "def f[1](x): return x\n",
    ],
)
def test_other_newer_syntax_is_left_to_libcst(source: str) -> None:
    from promptcache.lint_rules.parse import _type_params_blanked

    with pytest.raises(SyntaxError) as caught:
        ast.parse(source)
    assert _type_params_blanked(source, caught.value) is None


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the running ast reads the lists itself")
@pytest.mark.parametrize(
    ("source", "broken_line"),
    [
        # the type parameter list is valid Python 3.12: the error is the last line's
        ("def first[T](x: T) -> T:\n    return x\ny = (1 +\n", 3),
        ("def first[T](x: T) -> T:\n    return x +\n", 2),
        # an error on a line of other newer syntax (a type statement) is not the file's:
        # the first error stays
        ("def first[T](x: T) -> T:\n    return x\ntype A = int\ny = (1 +\n", 1),
    ],
    ids=["later", "next-line", "type-statement"],
)
@pytest.mark.parametrize("header", ["", HEADER], ids=["syntax-only", "analysed"])
def test_a_generic_file_broken_elsewhere_is_pc000_where_it_is_broken(
    source: str, broken_line: int, header: str
) -> None:
    source = header + source
    line = broken_line + header.count("\n")
    (diagnostic,) = lint_source(source, "broken.py").diagnostics
    assert diagnostic.code == "PC000"
    assert diagnostic.location.line == line
    with pytest.raises(SyntaxError) as raised:
        parse_module(source, "broken.py")
    assert (raised.value.lineno, raised.value.filename) == (line, "broken.py")


# a replacement field lines below its f-string's prefix: Python 3.11 reports the error at the
# field ("f-string expression part cannot include a backslash"), where no prefix is in sight
TOOLS_PROMPT = (
    "def tools_prompt(names):\n"
    '    return f"""\n'
    "    Available tools:\n"
    "    {'\\n\\n'.join(names)}\n"
    '    """\n'
)


@pytest.mark.parametrize("header", ["", HEADER], ids=["syntax-only", "analysed"])
def test_an_f_string_field_lines_below_its_prefix_is_newer_syntax(header: str) -> None:
    assert lint_source(header + TOOLS_PROMPT, "tools.py").diagnostics == ()


@pytest.mark.parametrize("header", ["", HEADER], ids=["syntax-only", "analysed"])
def test_an_f_string_broken_lines_below_its_prefix_is_still_pc000(header: str) -> None:
    # an empty replacement field is invalid on every version: PC000 at that line
    source = header + TOOLS_PROMPT.replace("{'\\n\\n'.join(names)}", "{}")
    (diagnostic,) = lint_source(source, "broken.py").diagnostics
    assert diagnostic.code == "PC000"
    assert diagnostic.message.startswith("cannot parse this file")
    with pytest.raises(SyntaxError):
        parse_module(source, "broken.py")
