"""The labelled corpus of real agent repositories (``tests/lint/corpus/``) and the script that
joins the linter's findings to its labels (``benchmarks/lint_corpus_eval.py``).

The recipes must be well formed (fixed commits, each batch's recorded split reproduced from its
seed, labels with a known rule and verdict on a repository of their half and batch), and the
script's numbers
must agree with an independent count: a small tree with planted findings is linted through the
real CLI, labelled, and the printed tp / fp / unlabelled counts and precision are checked.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import random
import re
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

from promptcache.lint_rules.registry import KNOWN_CODES

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "lint_corpus_eval.py"
CORPUS = Path(__file__).parent / "corpus"
_SHA = re.compile(r"[0-9a-f]{40}")


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lint_corpus_eval", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def ev() -> ModuleType:
    return _load()


def test_repos_are_pinned_and_each_batch_split_is_its_seeds(ev: ModuleType) -> None:
    seeds, repos = ev.load_repos(CORPUS / "repos.toml")
    assert seeds == {
        1: 20261203,
        2: 20261204,
        3: 20261205,
        4: 20261206,
        5: 20261207,
        6: 20261208,
        7: 20261209,
        8: 20261210,
        9: 20261211,
        10: 20261212,
        11: 20261213,
        12: 20261214,
        13: 20261215,
        14: 20261216,
        15: 20261217,
        16: 20261218,
        17: 20261219,
        18: 20261220,
        19: 20261221,
        20: 20261222,
        21: 20261223,
        22: 20261224,
        23: 20261225,
        24: 20261226,
        25: 20261227,
        26: 20261228,
        27: 20261229,
        28: 20261230,
        29: 20261231,
        30: 20270101,
        31: 20270102,
        32: 20270103,
        33: 20270104,
        34: 20270105,
        35: 20270106,
        36: 20270107,
        37: 20270108,
        38: 20270109,
        39: 20270110,
        40: 20270111,
        41: 20270112,
        42: 20270113,
        43: 20270114,
        44: 20270115,
        45: 20270116,
        46: 20270117,
        47: 20270118,
        48: 20270119,
        49: 20270120,
        50: 20270121,
        51: 20270122,
        52: 20270123,
        53: 20270124,
        54: 20270125,
        55: 20270126,
        56: 20270127,
        57: 20270128,
        58: 20270129,
        59: 20270130,
        60: 20270131,
        61: 20270132,
        62: 20270133,
        63: 20270134,
        64: 20270135,
        65: 20270136,
        66: 20270137,
        67: 20270138,
        68: 20270139,
        69: 20270140,
        70: 20270141,
        71: 20270142,
        72: 20270143,
        73: 20270144,
        74: 20270145,
        75: 20270146,
        76: 20270147,
        77: 20270148,
        78: 20270149,
        79: 20270150,
        80: 20270151,
    }
    names = [r.repo for r in repos]
    assert len(set(names)) == len(names)  # a repository is in one batch only
    assert len({r.tree for r in repos}) == len(repos)
    for r in repos:
        assert _SHA.fullmatch(r.commit), r.repo
        assert r.half in ev.HALVES, r.repo
    sizes = {}
    for batch, seed in seeds.items():
        members = [r for r in repos if r.batch == batch]
        sizes[batch] = len(members)
        assert {r.repo: r.half for r in members} == ev.split([r.repo for r in members], seed)
        halves = [r.half for r in members]
        assert abs(halves.count("tuning") - halves.count("evaluation")) <= 1
    assert sizes == {
        1: 17,
        2: 8,
        3: 8,
        4: 8,
        5: 8,
        6: 8,
        7: 8,
        8: 8,
        9: 7,
        10: 5,
        11: 6,
        12: 8,
        13: 4,
        14: 5,
        15: 8,
        16: 8,
        17: 8,
        18: 8,
        19: 8,
        20: 2,
        21: 7,
        22: 5,
        23: 5,
        24: 5,
        25: 5,
        26: 5,
        27: 3,
        28: 5,
        29: 5,
        30: 5,
        31: 5,
        32: 4,
        33: 6,
        34: 6,
        35: 6,
        36: 5,
        37: 6,
        38: 6,
        39: 6,
        40: 6,
        41: 6,
        42: 6,
        43: 6,
        44: 6,
        45: 6,
        46: 6,
        47: 6,
        48: 6,
        49: 6,
        50: 6,
        51: 6,
        52: 6,
        53: 6,
        54: 6,
        55: 6,
        56: 6,
        57: 6,
        58: 6,
        59: 6,
        60: 6,
        61: 6,
        62: 6,
        63: 6,
        64: 6,
        65: 6,
        66: 6,
        67: 6,
        68: 6,
        69: 5,
        70: 6,
        71: 6,
        72: 5,
        73: 1,
        74: 6,
        75: 5,
        76: 5,
        77: 6,
        78: 6,
        79: 6,
        80: 6,
    }
    # the tuning halves as recorded: sorted names shuffled by each batch's seed, the first
    # half (rounded down) tuning
    recorded = {
        2: [
            "TransformerOptimus/SuperAGI",
            "crewAIInc/crewAI",
            "geekan/MetaGPT",
            "getzep/graphiti",
        ],
        3: [
            "Pythagora-io/gpt-pilot",
            "griptape-ai/griptape",
            "qodo-ai/pr-agent",
            "stanford-oval/storm",
        ],
        4: [
            "AbanteAI/mentat",
            "OpenBMB/XAgent",
            "QuivrHQ/quivr",
            "sweepai/sweep",
        ],
        5: [
            "OpenInterpreter/open-interpreter",
            "TauricResearch/TradingAgents",
            "ai-christianson/RA.Aid",
            "pydantic/pydantic-ai",
        ],
        6: [
            "Josh-XT/AGiXT",
            "frdel/agent-zero",
            "stitionai/devika",
            "strands-agents/sdk-python",
        ],
        7: [
            "BrainBlend-AI/atomic-agents",
            "SakanaAI/AI-Scientist",
            "chatchat-space/Langchain-Chatchat",
            "modelscope/ms-agent",
        ],
        9: [
            "lastmile-ai/mcp-agent",
            "microsoft/UFO",
            "simular-ai/Agent-S",
        ],
        10: [
            "HKUDS/AI-Researcher",
            "OpenBMB/AgentVerse",
        ],
        11: [
            "Intelligent-Internet/ii-agent",
            "MiroMindAI/MiroFlow",
            "TencentCloudADP/youtu-agent",
        ],
        12: [
            "OpenPipe/ART",
            "agiresearch/AIOS",
            "posit-dev/chatlas",
            "sierra-research/tau-bench",
        ],
        13: [
            "awslabs/agent-squad",
            "stanford-oval/WikiChat",
        ],
        14: [
            "ScrapeGraphAI/Scrapegraph-ai",
            "google/langextract",
        ],
        15: [
            "Canner/WrenAI",
            "explodinggradients/ragas",
            "langchain-ai/langgraph",
            "truera/trulens",
        ],
        16: [
            "PromtEngineer/localGPT",
            "Shubhamsaboo/awesome-llm-apps",
            "guardrails-ai/guardrails",
            "sinaptik-ai/pandas-ai",
        ],
        17: [
            "AI4Finance-Foundation/FinRobot",
            "Farama-Foundation/chatarena",
            "OpenBMB/ToolBench",
            "Shaunwei/RealChar",
        ],
        18: [
            "pinecone-io/canopy",
            "vocodedev/vocode-python",
            "xtekky/gpt4free",
            "zou-group/textgrad",
        ],
        19: [
            "ServiceNow/BrowserGym",
            "VRSEN/agency-swarm",
            "explosion/spacy-llm",
            "zhayujie/chatgpt-on-wechat",
        ],
        20: [
            "AgentOps-AI/agentops",
        ],
        21: [
            "PySpur-Dev/pyspur",
            "X-PLUG/MobileAgent",
            "anthropics/claude-agent-sdk-python",
        ],
        22: [
            "WooooDyy/AgentGym",
            "modelscope/modelscope-agent",
        ],
        23: [
            "mcp-use/mcp-use",
            "virattt/ai-hedge-fund",
        ],
        24: [
            "huggingface/lighteval",
            "neo4j/neo4j-graphrag-python",
        ],
        25: [
            "NVIDIA/garak",
            "camel-ai/crab",
        ],
        26: [
            "aliasrobotics/cai",
            "apache/burr",
        ],
        27: [
            "protectai/llm-guard",
        ],
        28: [
            "Arize-ai/openinference",
            "microsoft/markitdown",
        ],
        29: [
            "MaiM-with-u/MaiBot",
            "PacktPublishing/LLM-Engineers-Handbook",
        ],
        30: [
            "Marker-Inc-Korea/AutoRAG",
            "google/adk-samples",
        ],
        31: [
            "castorini/ragnarok",
            "microsoft/promptbench",
        ],
        32: [
            "kreneskyp/ix",
            "zilliztech/akcio",
        ],
        33: [
            "LiveBench/LiveBench",
            "NousResearch/atropos",
            "aws-samples/aws-genai-llm-chatbot",
        ],
        34: [
            "Arindam200/awesome-ai-apps",
            "UiPath/uipath-langchain-python",
            "rag-web-ui/rag-web-ui",
        ],
        35: [
            "InternLM/HuixiangDou",
            "THUDM/AutoWebGLM",
            "langchain-ai/skills-benchmarks",
        ],
        36: [
            "ComposioHQ/composio",
            "hud-evals/hud-python",
        ],
        37: [
            "lancedb/vectordb-recipes",
            "mit-submit/A2rchi",
            "trypromptly/LLMStack",
        ],
        38: [
            "The-Pocket/PocketFlow",
            "abi/screenshot-to-code",
            "snap-stanford/MLAgentBench",
        ],
        39: [
            "AI-Citizen/SolidGPT",
            "aws-samples/bedrock-chat",
            "google/langfun",
        ],
        40: [
            "langchain-ai/openevals",
            "microsoft/RecAI",
            "microsoft/genaiops-promptflow-template",
        ],
        41: [
            "RayVentura/ShortGPT",
            "allenai/asta-paper-finder",
            "microsoft/AIOpsLab",
        ],
        42: [
            "OSU-NLP-Group/LLM-Planner",
            "mozilla-ai/any-agent",
            "ur-whitelab/md-agent",
        ],
        43: [
            "IBM/prompt-declaration-language",
            "aws-samples/genai-quickstart-pocs",
            "awslabs/amazon-bedrock-agent-samples",
        ],
        44: [
            "StonyBrookNLP/ircot",
            "ucbepic/docetl",
            "xlang-ai/text2reward",
        ],
        45: [
            "Azure-Samples/holiday-peak-hub",
            "Berkeley-NLP/Agent-Eval-Refine",
            "langchain-ai/langchain-cohere",
        ],
        46: [
            "NVIDIA-AI-Blueprints/Multi-Agent-Intelligent-Warehouse",
            "agiresearch/Cerebrum",
            "ggozad/oterm",
        ],
        47: [
            "AIGC-Audio/AudioGPT",
            "huangjunsen0406/py-xiaozhi",
            "video-db/Director",
        ],
        48: [
            "HuanfuLi/OpenAgenticVTuber",
            "ilyasni/telegram-assistant",
            "worm128/AI-YinMei",
        ],
        49: [
            "loxjbve/cyberwaifu_bot",
            "vertyco/vrt-cogs",
            "xd2333/GalTransl",
        ],
        50: [
            "WEIFENG2333/VideoCaptioner",
            "art-from-the-machine/Mantella",
            "liruiw/GenSim",
        ],
        51: [
            "AlHering/modular-voice-assistant",
            "NakamuraIA/HanaNakamura-VTuber-OSS",
            "Trosfy/discord-ollama-agent",
        ],
        52: [
            "hydropix/TranslateBooksWithLLMs",
            "luojisama/nonebot-plugin-personification",
            "misaka-coder/AkaneCompanionLab",
        ],
        53: [
            "Zelefin/sixPI-bro-bot",
            "evelaa123/telegram-bot-pro",
            "qzbxw/velox",
        ],
        54: [
            "Brettanda/friday-bot",
            "KILKA1001/bebrobot",
            "SgtSlummy/LOKI-THE-SUN-GOD",
        ],
        55: [
            "Twixes/somsiad",
            "WuKazuhira/knd-bot",
            "spankybot/spanky.py",
        ],
        56: [
            "Jerboard/sales_mind",
            "Longarden/cnu-llm-bot",
            "p1rscher/ataraxia",
        ],
        57: [
            "AstroAir/feishu-webhook-bot",
            "OtokoNoIzumi/Project_Feishu_Bot",
            "aasish-bodapati/ai-companion-v2",
        ],
        58: [
            "Hollings/hollingsbot3",
            "cra9had/fairy-tails-bot",
            "kimyt990501/personal-agent",
        ],
        59: [
            "Flagro/TelegramRPBot",
            "awsl-01/dingtalk-custom-agent",
            "tkhongsap/line-bot-connect",
        ],
        60: [
            "bryfur/ovi-voice-assistant",
            "cheneeheng/gradio-chat-agent",
            "dahshury/python-whatsapp-bot",
        ],
        61: [
            "Ethereal-Lemons/LimeBot-OS",
            "mattmezza/mpa",
            "weareformgroup/TuringClaw",
        ],
        62: [
            "Aris-Setyawan/pawang",
            "TyGu888/PersonalAssistant",
            "vkkatariya/aureon-agent",
        ],
        63: [
            "1L7V5101V/NexusCompanion",
            "Calvin-Ca/Agent",
            "allinxjd/xjd-agent",
        ],
        64: [
            "Treytucker05/DrCodePT-Swarm",
            "denyeahgl/Jarvis",
            "prithvi-01x/NeuralClaw",
        ],
        65: [
            "Nithesh1109/Senku-ai-assistant",
            "ZeroMadLife/sage-agent",
            "tars16775/tars",
        ],
        66: [
            "MojoGlover/Genesis",
            "Vironnimo/vbot",
            "ljlabs/Route.llm",
        ],
        67: [
            "AAAYQ03/Video_Agent_v2",
            "Agares9/Medical-Assistant",
            "JACK-AI7/J.A.C.K.A.I.AGENT",
        ],
        68: [
            "AS26-Lab/myralis-backend",
            "Nithishkumars05/Athena-AI",
            "Obulesu003/Jarvis-assistant",
        ],
        69: [
            "A5CENSION-SRT/Anti-Sandbox-Fingerprinting-Realistic-Windows-11-VM-Personalization"
            "-for-Dynamic-Analysis",
            "AFilipe-IT/CASPAR",
        ],
        70: [
            "0juano/stingv2",
            "0xwaya/ceo-agent-system",
            "2022CS11103/podcast-to-campaign",
        ],
        71: [
            "0xnotdev/AI-agency",
            "360ghar/social-ai-reply",
            "AHGGG/nce-english-practices",
        ],
        72: [
            "AchoWu/claude-buddy",
            "Coding-Maengsu/gapago",
        ],
        73: [],
        74: [
            "0xdiNGo/kabAI",
            "111948822a-rgb/ai-shop-analyzer",
            "123455-ha/RAG-Job-Knowledge",
        ],
        75: [
            "17-doha/Spark2Scale-AI-1",
            "33prime/aios-req-engine",
        ],
        76: [
            "Aa-Rho-Hi/CTEM",
            "Agyeman-Enterprises/jeeves",
        ],
        77: [
            "123Anujyadav/MedBridge-backend",
            "223MapAction/Model_deploy",
            "2400030252-Akash/AI-Services",
        ],
        78: [
            "QingShengmMa/SparkLaw",
            "bugxzhu/NovelAi",
            "eligos-lab/graphrag-recruiting-intelligence",
        ],
        79: [
            "Jiachen-Carson-ZHANG/Agentic-ML",
            "JumbikTank/text2sql",
            "beautifulboy9527/news_analyzer-main",
        ],
        80: [
            "ParminderSinghGithub/SpectralReader",
            "cptntrps/contract_analyzer",
            "sky629/ai_saga",
        ],
    }
    for batch, tuning in recorded.items():
        members = sorted(r.repo for r in repos if r.batch == batch and r.half == "tuning")
        assert members == tuning, batch
    assert ev.main(["split"]) == 0


def test_split_command_checks_every_batch(
    ev: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    names = {1: ["a/one", "b/two", "c/three"], 2: ["d/four", "e/five", "f/six", "g/seven"]}
    seeds = {1: 7, 2: 11}
    halves = {b: ev.split(n, seeds[b]) for b, n in names.items()}
    # independent count: the split is sorted names shuffled by random.Random(seed)
    for batch, members in names.items():
        order = sorted(members)
        random.Random(seeds[batch]).shuffle(order)
        cut = len(order) // 2
        assert [n for n in order if halves[batch][n] == "tuning"] == order[:cut]

    def write(flip: str | None = None) -> Path:
        text = "seed = 7\n[[batch]]\nbatch = 2\nseed = 11\n"
        for batch, members in names.items():
            for name in members:
                half = halves[batch][name]
                if name == flip:
                    half = "tuning" if half == "evaluation" else "evaluation"
                text += f'[[repo]]\nrepo = "{name}"\ncommit = "{"1" * 40}"\n'
                text += f'tree = "{name.split("/")[1]}"\nhalf = "{half}"\n'
                text += f"batch = {batch}\n" if batch != 1 else ""
        path = tmp_path / "repos.toml"
        path.write_text(text, encoding="utf-8")
        return path

    assert ev.main(["--repos", str(write()), "split"]) == 0
    out = capsys.readouterr().out
    assert "batch 1 (seed 7, 3 repositories)" in out
    assert "batch 2 (seed 11, 4 repositories)" in out
    assert ev.main(["--repos", str(write(flip="e/five")), "split"]) == 1
    out = capsys.readouterr().out
    flipped = "tuning" if halves[2]["e/five"] == "evaluation" else "evaluation"
    assert f"e/five: repos.toml says {flipped}, the seed gives {halves[2]['e/five']}" in out
    assert out.count("repos.toml says") == 1
    assert ev.main(["--repos", str(write(flip="a/one")), "split"]) == 1
    assert capsys.readouterr().out.count("repos.toml says") == 1
    # a repository of a batch without a seed is a one-line error, exit 2
    path = tmp_path / "repos.toml"
    text = path.read_text(encoding="utf-8").replace("batch = 2\n", "batch = 3\n")
    path.write_text(text.replace("[[batch]]\nbatch = 3", "[[batch]]\nbatch = 2"))
    assert ev.main(["--repos", str(path), "split"]) == 2
    assert "which has no seed" in capsys.readouterr().err


def _label_files() -> list[tuple[int, str]]:
    # every batch repos.toml records, so a new batch's label files are checked as they come
    _, repos = _load().load_repos(CORPUS / "repos.toml")
    batches = sorted({repo.batch for repo in repos})
    return [(batch, half) for batch in batches for half in ("tuning", "evaluation")]


@pytest.mark.parametrize(("batch", "half"), _label_files())
def test_labels_are_well_formed(ev: ModuleType, batch: int, half: str) -> None:
    path = ev.labels_path(half, batch)
    if not path.exists():
        pytest.skip(f"{path.name} is written once that half is labelled")
    _, repos = ev.load_repos(CORPUS / "repos.toml")
    commit_of = {r.repo: r.commit for r in repos if r.half == half and r.batch == batch}
    labels = ev.load_labels(path)
    # a half where the linter reported nothing has a file with no [[label]]; any other table
    # (a misspelt [[lable]]) would hide labels from the join
    assert set(ev.tomllib.loads(path.read_text(encoding="utf-8"))) <= {"label"}
    keys = [(lab.repo, lab.file, lab.line, lab.rule) for lab in labels]
    assert len(set(keys)) == len(keys), "one label per (repo, file, line, rule)"
    for lab in labels:
        where = f"{lab.repo} {lab.file}:{lab.line}"
        assert lab.repo in commit_of, f"{where}: not a repository of batch {batch}'s {half} half"
        assert lab.commit == commit_of[lab.repo], f"{where}: commit differs from repos.toml"
        assert lab.rule in KNOWN_CODES, where
        assert lab.verdict in ev.VERDICTS, where
        assert re.fullmatch(r"[0-9a-f]{12}", lab.line_sha), where
        assert lab.why.strip() and "\n" not in lab.why, where
        assert lab.line >= 1 and not lab.file.startswith("/"), where


def test_bad_labels_are_one_line_errors(ev: ModuleType, tmp_path: Path) -> None:
    bad = tmp_path / "labels.toml"
    bad.write_text('[[label]]\nrepo = "a/b"\n', encoding="utf-8")
    with pytest.raises(ev.CorpusError, match="has no commit, file, line"):
        ev.load_labels(bad)
    bad.write_text(
        '[[label]]\nrepo="a/b"\ncommit="c"\nfile="f.py"\nline=1\nline_sha="0"\nrule="PC001"\n'
        'verdict="maybe"\nwhy="x"\n',
        encoding="utf-8",
    )
    with pytest.raises(ev.CorpusError, match="verdict 'maybe'"):
        ev.load_labels(bad)
    assert ev.main(["--repos", str(bad), "split"]) == 2  # no seed: a clear error, exit 2


def test_join_prefers_the_line_then_its_text_then_the_nearest(ev: ModuleType) -> None:
    def label(line: int, sha: str, verdict: str) -> object:
        return ev.Label("o/r", "c" * 40, "a.py", line, sha, "PC001", verdict, "why")

    exact, moved, near = (
        label(10, "aaaaaaaaaaaa", "tp"),
        label(50, "bbbbbbbbbbbb", "fp"),
        label(30, "cccccccccccc", "debatable"),
    )
    labels = [exact, moved, near]

    def finding(line: int, sha: str, rule: str = "PC001") -> object:
        return ev.Finding("o/r", "a.py", line, rule, "error", "m", sha)

    joined = ev.join(
        [
            finding(10, "zzzzzzzzzzzz"),  # same line
            finding(70, "bbbbbbbbbbbb"),  # the labelled line moved: its text still matches
            finding(32, "yyyyyyyyyyyy"),  # 2 lines from a label
            finding(40, "xxxxxxxxxxxx"),  # 10 lines from any label: unlabelled
            finding(10, "aaaaaaaaaaaa", "PC002"),  # another rule
        ],
        labels,
        tolerance=3,
    )
    assert [lab for _, lab in joined] == [exact, moved, near, None, None]


def test_lint_command_counts_match_the_labels(
    ev: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = tmp_path / "trees" / "demo"
    tree.mkdir(parents=True)
    (tree / "bot.py").write_text(
        textwrap.dedent(
            """\
            from datetime import datetime

            import anthropic

            client = anthropic.Anthropic()


            def ask(question: str) -> str:
                system = f"Now: {datetime.now().isoformat()}"
                reply = client.messages.create(
                    model="claude-sonnet-4-5",
                    max_tokens=256,
                    system=system,
                    messages=[{"role": "user", "content": question}],
                )
                return reply.content[0].text


            def ask_again(question: str) -> str:
                reply = client.messages.create(
                    model="claude-sonnet-4-5",
                    max_tokens=256,
                    system=f"Today: {datetime.now():%H:%M}",
                    messages=[{"role": "user", "content": question}],
                )
                return reply.content[0].text
            """
        ),
        encoding="utf-8",
    )
    commit = "1" * 40
    (tmp_path / "repos.toml").write_text(
        f'seed = 1\n[[repo]]\nrepo = "demo/demo"\ncommit = "{commit}"\ntree = "demo"\n'
        'half = "tuning"\n',
        encoding="utf-8",
    )
    findings, _ = ev.lint_tree(tree, "demo/demo")
    lines = (tree / "bot.py").read_text(encoding="utf-8").splitlines()
    pc001 = sorted(f.line for f in findings if f.rule == "PC001")
    assert len(pc001) == 2, findings  # the two planted time values
    first = pc001[0]
    sha = hashlib.sha256(lines[first - 1].strip().encode()).hexdigest()[:12]
    assert next(f.line_sha for f in findings if f.line == first) == sha
    # each finding keeps its chain; its origin step names a line that calls datetime.now
    for f in findings:
        if f.rule == "PC001":
            where = f.chain[0].split(": ", 1)[0]
            assert where.startswith("bot.py:"), f.chain
            assert "datetime.now" in lines[int(where.rsplit(":", 1)[1]) - 1], f.chain
    # label only the first: one tp, the other finding is listed as unlabelled
    (tmp_path / "labels.toml").write_text(
        f'[[label]]\nrepo = "demo/demo"\ncommit = "{commit}"\nfile = "bot.py"\nline = {first}\n'
        f'line_sha = "{sha}"\nrule = "PC001"\nverdict = "tp"\nwhy = "planted"\n',
        encoding="utf-8",
    )
    argv = ["--repos", str(tmp_path / "repos.toml"), "--trees", str(tmp_path / "trees"), "lint"]
    argv += ["--half", "tuning", "--labels", str(tmp_path / "labels.toml")]
    argv += ["--save", str(tmp_path / "saved.json")]
    assert ev.main(argv) == 0
    out = capsys.readouterr().out
    total = len(findings)
    row = next(line for line in out.splitlines() if line.startswith("| demo/demo |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:8] == ["1", str(total), "1", "0", "0", str(total - 1)]
    assert cells[8] == "100.0%"
    assert f"provisional: {total - 1} findings have no label" in out
    assert out.count("  unlabelled: demo/demo bot.py:") == total - 1
    # a tree that takes longer than --timeout is a one-line error, exit 2
    assert ev.main([*argv[:-2], "--timeout", "0.001"]) == 2
    assert "ran past the 0.001 s timeout" in capsys.readouterr().err
    # the saved findings give the same table without linting again
    assert ev.main([*argv[:-2], "--load", str(tmp_path / "saved.json")]) == 0
    assert row in capsys.readouterr().out


def test_lint_command_selects_a_batch(
    ev: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--batch`` picks that batch's repositories of the half; batch 1 stays the default."""
    commit = "2" * 40
    rows = [("o/first", "tuning", 1), ("o/second", "tuning", 2), ("o/third", "evaluation", 2)]
    text = "seed = 1\n[[batch]]\nbatch = 2\nseed = 2\n"
    for name, half, batch in rows:
        text += f'[[repo]]\nrepo = "{name}"\ncommit = "{commit}"\ntree = "{name[2:]}"\n'
        text += f'half = "{half}"\nbatch = {batch}\n'
    (tmp_path / "repos.toml").write_text(text, encoding="utf-8")
    sha = "a" * 12
    saved = {
        "findings": {
            name: [
                {"repo": name, "file": "x.py", "line": 10 * n, "rule": "PC001", "severity": "error",
                 "message": "m", "line_sha": f"{n:012x}" if n > 1 else sha}
                for n in range(1, i + 2)
            ]
            for i, (name, _, _) in enumerate(rows)
        },
        "files": {name: 10 for name, _, _ in rows},
    }  # fmt: skip
    (tmp_path / "saved.json").write_text(json.dumps(saved), encoding="utf-8")
    (tmp_path / "labels.toml").write_text(
        f'[[label]]\nrepo = "o/second"\ncommit = "{commit}"\nfile = "x.py"\nline = 10\n'
        f'line_sha = "{sha}"\nrule = "PC001"\nverdict = "fp"\nwhy = "planted"\n',
        encoding="utf-8",
    )
    base = ["--repos", str(tmp_path / "repos.toml"), "lint", "--half", "tuning"]
    base += ["--load", str(tmp_path / "saved.json"), "--labels", str(tmp_path / "labels.toml")]
    assert ev.main([*base, "--batch", "2"]) == 0
    out = capsys.readouterr().out
    assert "tuning half of batch 2: 1 repositories" in out
    rows_out = [line for line in out.splitlines() if line.startswith("| o/")]
    assert [r.split("|")[1].strip() for r in rows_out] == ["o/second"]
    cells = [c.strip() for c in rows_out[0].strip("|").split("|")]
    # o/second: findings at lines 10 and 20; the label is line 10's, line 20 is unlabelled
    assert cells[3:8] == ["2", "0", "1", "0", "1"]
    assert "strict precision tp/(tp+fp): 0.0% (0 tp, 1 fp)" in out
    assert ev.main(base) == 0  # default: batch 1, whose tuning half is o/first only
    out = capsys.readouterr().out
    assert "tuning half: 1 repositories" in out
    assert [line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| o/")] == [
        "o/first"
    ]
    assert ev.main([*base, "--batch", "3"]) == 2
    assert "no batch 3" in capsys.readouterr().err
    # the recorded corpus: --batch 3 takes the 4 repositories of batch 3's tuning half
    (tmp_path / "none.json").write_text('{"findings": {}, "files": {}}', encoding="utf-8")
    argv = ["lint", "--half", "tuning", "--batch", "3", "--load", str(tmp_path / "none.json")]
    assert ev.main(argv) == 0
    out = capsys.readouterr().out
    assert "tuning half of batch 3: 4 repositories" in out
    assert sorted(line.split("|")[1].strip() for line in out.splitlines()[3:7]) == [
        "Pythagora-io/gpt-pilot",
        "griptape-ai/griptape",
        "qodo-ai/pr-agent",
        "stanford-oval/storm",
    ]
    assert ev.labels_path("evaluation", 2).name == "labels_batch2_evaluation.toml"
    assert ev.labels_path("evaluation", 1).name == "labels_evaluation.toml"
