"""The program driver: per-file analyses iterated to a fixpoint over the modules of one run.

Round 0 analyses every file alone (in worker processes when there are many). Each analysis
reports what the file *wants* from other modules (the qualified names it calls, reads or
annotates with) and *exports* (its aliases, and the summaries asked of it or that reach a sink).
A file that is only compiled (for PC000) is compiled after the last wave, if no later analysis
parsed it (``runner.UNCHECKED``).
Then, in waves until nothing changes (at most ``MAX_WAVES``; a file is analysed at most
``1 + MAX_ROUNDS`` times):

1. each wanted name is resolved through ``ModuleIndex`` and package re-exports to the defining
   file; a symbol not yet exported there becomes a request to that file;
2. a file is analysed again when it has new requests, or when the summaries it would see
   differ from those it was last analysed with. Only summaries that can change its findings
   are passed (``exports.interesting``), or any known summary of a function it passed a value
   with facts to;
3. files that no rule could flag on their own (no trigger word) are analysed once they call a
   function whose summary reaches a sink;
4. a wave runs only the analyses whose inputs are settled: a file that takes summaries from
   another file due in the same wave waits for it. When every due file waits on another (import
   cycles), the cycles that wait on no other due file run first (``_source_cycles``). A module
   that imports many others is then analysed once they are done, not once per round as their
   summaries trickle in.

An analysis whose task differs from the file's last one only in parts of the summaries that
analysis did not read (a method of a class it never calls) is not run: its output is that
one's again (``reads.same_where_read``). Every analysis is looked up in the cache first
(``cache.LintCache``), keyed by the file's content hash and a digest of its inputs, so a warm
run re-analyses only what changed and what sees a changed summary.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promptcache.errors import LintWorkerError

from ..config import LintConfig
from ..facts import ASSUMED
from ..parse import share_rewrites
from .cache import LintCache, diagnostic_from_json, diagnostic_to_json, digest
from .callnames import CallNames
from .exports import interesting
from .modules import ModuleIndex
from .reads import InputReads, same_where_read

#: fixpoint rounds after the first (a chain of calls across N modules needs about N); past
#: this, findings that need a longer chain are missed (on real agent trees 4 rounds settle
#: most of it, and each round re-analyses the files whose inputs changed)
MAX_ROUNDS = 4
#: waves of the fixpoint: each wave analyses only the files whose inputs are settled (none of
#: the files they take summaries from is about to be analysed again), so a module that imports
#: many others is analysed once they are done rather than once per round; a file is analysed
#: at most ``1 + MAX_ROUNDS`` times in all
MAX_WAVES = 4 * MAX_ROUNDS
#: below this many analyses in a round, run them in this process
SERIAL_LIMIT = 48
#: the same, once the worker processes are running (a wave of the fixpoint often holds one
#: large module beside a few small ones: split between workers, it is done in about the
#: time of the large one alone)
POOLED_LIMIT = 2
#: summaries whose digests are kept for later waves (each keeps its summary alive): past this
#: many, the kept ones are dropped at the start of a round
DIGESTS_KEPT = 20_000
#: alias hops followed when resolving a re-exported name
_ALIAS_DEPTH = 6


@dataclass
class Task:
    """One analysis to run: the file, its module name, what it sees and what it must export."""

    path: str
    module: str
    is_package: bool
    externals: dict[str, Any]
    requests: tuple[str, ...]
    force: bool
    #: ``name(`` / ``.name(`` texts of the sink functions of other modules that this file
    #: calls (why it is forced): its functions that make such a call are analysed
    sink_calls: tuple[str, ...] = ()
    #: qualified names of the program's own message classes that this file builds with a
    #: literal system role and that no module turns into request messages (``_unsent``)
    unsent: tuple[str, ...] = ()


@dataclass
class FileState:
    """The latest analysis of one file and what the driver derived from it."""

    module: str
    is_package: bool
    content: str = ""
    output: dict[str, Any] = field(default_factory=dict)
    inputs: str = ""
    externals: dict[str, Any] = field(default_factory=dict)
    requests: frozenset[str] = frozenset()
    force: bool = False
    #: the sink functions' ``name(`` texts found in this (untriggered) file
    sink_calls: set[str] = field(default_factory=set)
    carried: set[str] = field(default_factory=set)
    #: every name this file's analyses wanted so far (``_wanted_names``), in first-wanted order
    ever_wanted: dict[str, None] = field(default_factory=dict)
    #: the latest ``wanted`` that ``_wanted_names`` was given, and its answer
    named: tuple[dict[str, bool], list[tuple[str, bool]]] | None = None
    #: ``name(`` byte strings this (untriggered) file was already searched for
    scanned: set[bytes] = field(default_factory=set)
    #: the ``name(`` texts in this file, read on its first search (``call_names``)
    calls: CallNames | None = None
    #: the file's bytes as read for ``content``, kept for ``calls`` when its output came from
    #: the cache (a warm run searches nearly every file in its first plan) until that plan ends
    raw: bytes | None = None
    #: ``Program._sink_stamp`` when this file was last compared with the sink functions
    sink_stamp: int = -1
    #: the ``version`` whose output gave ``sink_names``, and the ``name(`` texts of the
    #: exported functions whose arguments reach a sink (``Program._sink_functions``)
    sink_names: tuple[int, frozenset[bytes]] = (-1, frozenset())
    #: analyses so far (cached ones included), at most ``1 + MAX_ROUNDS``
    analyses: int = 0
    #: the files whose summaries this file's latest analysis asked for
    deps: set[str] = field(default_factory=set)
    #: the task of the analysis that gave ``output`` and what it read of its externals
    #: (``reads.InputReads``); None when ``output`` came from the cache
    ran: tuple[Task, InputReads] | None = None
    #: bumped each time an analysis (or a cached one) changes ``output``
    version: int = 0


@dataclass
class _Resolved:
    """What planning derived from one file's wanted names, and what it read to do so: the
    version of each file it consulted (itself included) and of the merged field stores.
    While none of those changed, the same names resolve to the same summaries. The field
    stores matter only when one of its names read them (``reads_fields``). ``names`` and
    ``hits``: the file's wanted names (``_wanted_names``) and how each resolved (``_Wanted``);
    when the file's names are the same and each still resolves to the same ``_Wanted``, the
    same summaries are passed, so ``seen`` is kept (the same object, which the inputs' digest
    and the comparison with the file's last task read at once)."""

    stamps: dict[str, int]
    fields: int
    seen: dict[str, Any]
    deps: set[str]
    requests: list[tuple[str, str]]
    names: list[tuple[str, bool]] = field(default_factory=list)
    hits: list[_Wanted] = field(default_factory=list)
    reads_fields: bool = True
    #: per file read, the places in ``hits`` of the names that read it (``_Read.stamps``),
    #: and the places of those that read the field stores or the hierarchy
    by_file: dict[str, list[int]] = field(default_factory=dict)
    field_positions: list[int] = field(default_factory=list)


@dataclass
class _Read:
    """What resolving a name read of the files' exports: each file's version (``stamps``) and
    each (file, name) read with what its exports held under that name (``heads``, ``_head``).
    The answer holds while the files keep their versions, and also when a file whose version
    moved holds the same under each name read: a file's new output often changes other names
    than those asked of it."""

    stamps: dict[str, int]
    heads: dict[tuple[str, str], tuple[Any, ...]]

    def still_valid(self, states: dict[str, FileState]) -> bool:
        """Whether every name read holds what it held, in the files whose version moved;
        if so, the stamps move to the files' versions (the next check is one comparison)."""
        for f, v in self.stamps.items():
            if states[f].version != v:
                break
        else:
            return True  # no file read moved (most names, checked again and again)
        moved = {f for f, v in self.stamps.items() if states[f].version != v}
        for (file, head), held in self.heads.items():
            if file in moved and _head(states[file], head) != held:
                return False
        for file in moved:
            self.stamps[file] = states[file].version
        return True

    def note(self, touched: set[tuple[str, str]], states: dict[str, FileState]) -> None:
        """Record the (file, name) pairs read (``touched``) as they are now."""
        self.stamps = {f: states[f].version for f, _ in touched}
        self.heads = {(f, h): _head(states[f], h) for f, h in touched}


@dataclass
class _Kept(_Read):
    """A name resolved by ``Program._resolve`` for ``Program._unsent``, and what it read."""

    found: tuple[str, str] | None = None


@dataclass
class _Wanted(_Read):
    """One wanted name of one file, resolved: the defining file (``dep``), a symbol to ask
    of it (``request``) or the summaries the file sees (``seen``); valid while what it read
    of the files' exports holds (``_Read``), the field stores keep their version and
    ``carries`` is the same. So it is too when the field stores or the class hierarchy
    changed but the parts read of them hold the same (``stored``: the class's merged field
    facts; ``subclasses``: (file, class) -> its entry of ``Program._hierarchy``), as for most
    names, which read neither."""

    fields: int = 0
    carries: bool = False
    dep: str | None = None
    request: tuple[str, str] | None = None
    seen: dict[str, Any] = field(default_factory=dict)
    stored: tuple[str, dict[str, list[Any]]] | None = None
    subclasses: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=dict)

    def same_fields(
        self,
        field_facts: dict[str, dict[str, list[Any]]],
        hierarchy: dict[tuple[str, str], list[tuple[str, str]]],
        version: int,
    ) -> bool:
        """Whether the field stores and the hierarchy (of ``version``) hold what was read of
        them; if so, ``fields`` moves to ``version``."""
        if self.stored is None and not self.subclasses:
            self.fields = version  # read neither (most names)
            return True
        if self.stored is not None and field_facts.get(self.stored[0], {}) != self.stored[1]:
            return False
        if any(list(hierarchy.get(node, ())) != held for node, held in self.subclasses.items()):
            return False
        self.fields = version
        return True


def _call_names(state: FileState, path: str) -> CallNames:
    """The ``name(`` texts of ``path`` (``state``'s file), from its kept bytes if any."""
    if state.calls is None:
        raw, state.raw = state.raw, None
        state.calls = CallNames(path, raw) if raw is not None else CallNames.read(path)
    return state.calls


def _head(state: FileState, head: str) -> tuple[Any, ...]:
    """All that resolving a name reads of ``state``'s exports under its first part ``head``
    (``Program._resolve``, ``_lookup``, ``_overrides``): the alias, the function, the class
    (its methods included), the value of that name, and whether it is known to be missing."""
    exports = state.output.get("exports", {})
    return (
        exports.get("aliases", {}).get(head),
        exports.get("functions", {}).get(head),
        exports.get("classes", {}).get(head),
        exports.get("values", {}).get(head),
        head in exports.get("missing", ()),
    )


def linter_fingerprint() -> str:
    """The promptcache version plus a hash of the linter's own source, so that a cache written
    by another build of the linter is never read."""
    from promptcache import __version__

    folder = Path(__file__).resolve().parent.parent
    h = hashlib.blake2b(digest_size=8)
    for path in sorted(folder.rglob("*.py")) + sorted(folder.rglob("*.toml")):
        h.update(path.relative_to(folder).as_posix().encode())
        h.update(path.read_bytes())
    return f"{__version__}-{h.hexdigest()}"


def config_digest(config: LintConfig) -> str:
    data = {
        "select": sorted(config.select),
        "ignore": sorted(config.ignore),
        "per_file_ignores": sorted((p, sorted(c)) for p, c in config.per_file_ignores),
        "default_vendor": config.default_vendor,
        "model_minimums": list(config.model_minimums),
        "sinks": sorted(repr(s) for s in config.sinks),
        "root": str(config.root),
    }
    return digest(json.dumps(data, sort_keys=True).encode())


def _json_digest(data: Any) -> str:
    return digest(json.dumps(data, sort_keys=True, separators=(",", ":")).encode())


def _part_digest(data: Any, parts: dict[int, tuple[Any, str]]) -> str:
    """The digest of one summary (a dict) from the digests of its dict and list values,
    each serialised once (a class summary given its field facts is a new dict that shares
    the class's ``methods``)."""
    known = parts.get(id(data))
    if known is None:
        items: list[Any] = []
        for key in sorted(data):
            value = data[key]
            if isinstance(value, (dict, list)):
                inner = parts.get(id(value))
                if inner is None:
                    inner = parts[id(value)] = (value, _json_digest(value))
                items.append([key, inner[1]])
            else:
                items.append([key, value])
        known = parts[id(data)] = (data, _json_digest(items))
    return str(known[1])


def _inputs_digest(
    config_key: str,
    task: Task,
    parts: dict[int, tuple[Any, str]] | None = None,
    blobs: dict[int, tuple[Any, list[str]]] | None = None,
) -> str:
    """A digest of everything an analysis of ``task`` reads besides the file's text.

    ``parts``: the summaries in ``task.externals`` already digested, by the ``id`` of their
    ``data`` (each kept with its digest, so that its ``id`` is not reused; summaries are never
    changed in place). A class summary is shared by every file that imports it, and the same
    summaries are seen wave after wave, so each is serialised once per run. ``blobs``: the
    same for each external as a whole (by the ``id`` of the blob, kept with its digests): the
    planner hands the same blobs to a file wave after wave, and to each file that imports the
    same name."""
    externals: list[list[str]] = []
    for qual, blob in sorted(task.externals.items()):
        known = blobs.get(id(blob)) if blobs is not None and parts is not None else None
        if known is not None:
            externals.append([qual, *known[1]])
            continue
        data = blob.get("data") if isinstance(blob, dict) else None
        if data is None or parts is None:
            pieces = [_json_digest(blob)]
        else:
            rest = {k: v for k, v in blob.items() if k != "data"}
            pieces = [_json_digest(rest), _part_digest(data, parts)]
        if blobs is not None and parts is not None:
            blobs[id(blob)] = (blob, pieces)
        externals.append([qual, *pieces])
    blob = json.dumps(
        [
            config_key,
            externals,
            sorted(task.requests),
            task.force,
            list(task.sink_calls),
            task.module,
            list(task.unsent),
        ],
        sort_keys=True,
        separators=(",", ":"),
    )
    return digest(blob.encode())


_WORKER_CONFIG: LintConfig | None = None


#: the cyclic garbage collector's thresholds while analysing (``gc.set_threshold``): an
#: analysis allocates millions of short-lived objects (values, facts, frames), and with
#: Python's default of 700 the collector's passes over the growing heap took about a fifth
#: of the CPU time (browser-use, one process: 23.4 s, 19.4 s at 20,000, 17.6 s with the
#: collector off); peak memory grows by about 1.5x (84 -> 121 MiB; 496 MiB with it off)
GC_THRESHOLDS = (20_000, 50, 50)
#: whether this worker process starts each analysis with ``_fresh_heap`` (the driver's own
#: process decides for itself: ``Program._freeze_each``)
_WORKER_FREEZES = False


def _init_worker(
    config: LintConfig, rewrites: str | None = None, freeze_each: bool = False
) -> None:
    """Set up a process that runs analyses; ``rewrites``: the run's folder of rewritten
    newer-syntax sources, shared by its processes (``parse.share_rewrites``);
    ``freeze_each``: a worker process, whose analyses each start with ``_fresh_heap``."""
    global _WORKER_CONFIG, _WORKER_FREEZES
    _WORKER_CONFIG = config
    _WORKER_FREEZES = freeze_each
    gc.set_threshold(*GC_THRESHOLDS)
    share_rewrites(rewrites)


def _fresh_heap() -> None:
    """Collect the garbage, then move every object left out of the collector's sight
    (``gc.freeze``): what is alive when an analysis starts (parsed trees, the driver's
    states, earlier outputs) is long-lived and holds no garbage cycles, yet each of its
    objects was traversed by a generation-0 and a generation-1 collection, again and again
    as analyses came and went (about 13-16% of a serial cold run's CPU time on langroid,
    browser-use and deepagents). Frozen, an analysis's collections traverse only what it
    made itself, and each full collection here only what the analysis before it left; an
    object frozen that dies later is still freed by its reference count."""
    gc.collect()
    gc.freeze()


#: the young objects left after a parse from which ``parsing`` takes a new tree to have been
#: built (a tree kept from an earlier analysis leaves a few dozen)
NEW_TREE_OBJECTS = 1_000


@contextmanager
def parsing() -> Iterator[None]:
    """Around the parse of an analysis's module (``parse.parse_kept``): in a process whose
    analyses each start with ``_fresh_heap``, the collector is paused while a tree is built,
    then the garbage is collected and what is left frozen (``gc.freeze``), the new tree with
    it. A tree lives for several analyses; built with the collector on, each of its objects
    was traversed by a generation-0 collection during the parse, again by later ones during
    the analysis, and a last time by the next ``_fresh_heap`` (about 3% of deepagents' serial
    cold run). Elsewhere (``lint_source``) it does nothing."""
    if not _WORKER_FREEZES:
        yield
        return
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        if gc.get_count()[0] >= NEW_TREE_OBJECTS:
            gc.collect()
            gc.freeze()


def _run_task(task: Task, raw: bytes | None = None) -> tuple[dict[str, Any], InputReads]:
    """Run one analysis; returns its output and what it read of ``task.externals``."""
    from ..runner import analyse_file

    config = _WORKER_CONFIG
    assert config is not None
    if _WORKER_FREEZES:
        _fresh_heap()
    reads = InputReads()
    return analyse_file(task, config, raw, reads), reads


@dataclass
class Program:
    """One run over ``files``: drives the analyses, returns each file's ``FileResult``."""

    files: list[str]
    config: LintConfig
    jobs: int
    cache: LintCache | None = None
    rounds: int = 0
    #: analyses run, and analyses whose output was taken again from the file's last one
    #: because nothing it read changed (``_reused``)
    analysed: int = 0
    reused: int = 0
    _pool: Executor | None = None
    #: per file, its wanted names resolved at the last plan (reused while nothing they read
    #: changed: a wave re-plans only the files whose inputs may have moved)
    _resolved: dict[str, _Resolved] = field(default_factory=dict)
    #: (file, wanted name) -> how it resolved, for files whose other names' targets changed
    _wanted: dict[tuple[str, str], _Wanted] = field(default_factory=dict)
    #: (name, importer) -> how ``_unsent`` resolved it (``_resolve_kept``)
    _kept: dict[tuple[str, str], _Kept] = field(default_factory=dict)
    #: the merged field stores at the last change of ``_fields_version``, and as last merged
    _field_facts: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    _fields_version: int = 0
    _merged: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    #: summaries digested for the inputs' digests (``_inputs_digest``'s ``parts``)
    _digests: dict[int, tuple[Any, str]] = field(default_factory=dict)
    #: the same for whole externals (``_inputs_digest``'s ``blobs``)
    _blob_digests: dict[int, tuple[Any, list[str]]] = field(default_factory=dict)
    #: the sink functions' ``name(`` texts at the last plan, and a count bumped when they
    #: change (a file compared with them since has nothing new to search for)
    _sink_names: set[bytes] = field(default_factory=set)
    _sink_stamp: int = 0
    #: the ``_sink_stamp`` every file was last compared at (each plan's second pass goes over
    #: every file only when the stamp moved since)
    _swept: int = -1
    #: each file's place in the run's order: a plan that looks again at some of the files
    #: takes them in that order, as a pass over every file would
    _order: dict[str, int] = field(default_factory=dict)
    #: the folder this run's processes share rewritten newer-syntax sources through
    _rewrites: str | None = None
    #: (file, class) -> its subclasses' (file, class) among the exported classes
    #: (``_build_hierarchy``), and per file the version whose exports gave its part
    _hierarchy: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=dict)
    _bases: dict[str, tuple[int, tuple[Any, ...]]] = field(default_factory=dict)
    #: what a plan needs to look at again (``_plan``): the files given an output (analysed,
    #: cached or reused) since the last plan; per file, the files whose ``_resolved`` read it
    #: (its version is in their stamps); the files whose ``_resolved`` read the field stores
    #: or the hierarchy, and the ``_fields_version`` of the last plan; per file, the symbols
    #: the files' ``_resolved`` ask of it (how many ask each); the files of the last plan's
    #: tasks; ``_unsent``'s last answer
    _fresh: set[str] = field(default_factory=set)
    _readers: dict[str, set[str]] = field(default_factory=dict)
    _field_readers: set[str] = field(default_factory=set)
    _planned_fields: int = 0
    _asked: dict[str, dict[str, int]] = field(default_factory=dict)
    _due: set[str] = field(default_factory=set)
    _last_unsent: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: per file, its exports' field stores as the merged ones last took them (``_field_facts``)
    #: and its ``converts`` and ``message_classes`` when it has any (``_unsent``)
    _stores: dict[str, Any] = field(default_factory=dict)
    _messages: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    #: whether this run moves the outputs it reads from the cache out of the collector's
    #: sight (``gc.freeze``), and unfreezes them at its end: only when nothing else in the
    #: process is frozen
    _freeze: bool = False
    #: whether each analysis run in this process starts with ``_fresh_heap`` (its frozen
    #: objects are unfrozen at the run's end): only when nothing else in the process is
    #: frozen and the collector is on
    _freeze_each: bool = False

    def run(self) -> list[Any]:
        from ..runner import FileResult

        index = ModuleIndex.build(self.files, self.config.root)
        config_key = config_digest(self.config)
        states = {f: FileState(*index.names[f]) for f in self.files}
        thresholds = gc.get_threshold()
        gc.set_threshold(*GC_THRESHOLDS)  # for the analyses run in this process
        own = gc.get_freeze_count() == 0
        self._freeze = self.cache is not None and own
        self._freeze_each = own and gc.isenabled()
        # created by the first process that rewrites a file (``parse.share_rewrites``)
        self._rewrites = os.path.join(
            tempfile.gettempdir(), f"promptcache-lint-{os.getpid()}-{secrets.token_hex(8)}"
        )
        try:
            self._round(
                states, [(f, self._task(f, states[f], {}, ())) for f in self.files], config_key
            )
            for wave in range(MAX_WAVES):
                # the last wave runs every due analysis, so none is left on stale inputs
                last = wave == MAX_WAVES - 1
                todo = self._settled(self._plan(states, index), states, wait=not last)
                if not todo:
                    break
                self.rounds += 1
                self._round(states, todo, config_key)
            self._check_syntax(states)
        finally:
            gc.set_threshold(*thresholds)
            if self._freeze or self._freeze_each:
                gc.unfreeze()
            if self._pool is not None:
                self._pool.shutdown()
            share_rewrites(None)
            shutil.rmtree(self._rewrites, ignore_errors=True)
            if self.cache is not None:
                self.cache.flush()
        results = []
        for f in self.files:
            out = states[f].output["result"]
            results.append(
                FileResult(
                    f,
                    tuple(diagnostic_from_json(d) for d in out["diagnostics"]),
                    tuple(out["errors"]),
                    {int(k): v for k, v in out["lines"].items()},
                    out.get("skipped", ""),
                    tuple(diagnostic_from_json(d) for d in out.get("notes", ())),
                )
            )
        return results

    def _task(
        self,
        path: str,
        state: FileState,
        externals: dict[str, Any],
        requests: Iterable[str],
        unsent: tuple[str, ...] = (),
    ) -> Task:
        return Task(
            path,
            state.module,
            state.is_package,
            externals,
            tuple(sorted(requests)),
            state.force,
            tuple(sorted(state.sink_calls)),
            unsent,
        )

    # ------------------------------------------------------------------ rounds

    def _round(
        self, states: dict[str, FileState], todo: list[tuple[str, Task]], config_key: str
    ) -> None:
        if len(self._digests) + len(self._blob_digests) > DIGESTS_KEPT:
            self._digests.clear()
            self._blob_digests.clear()
        enabled = gc.isenabled()
        try:
            pending = self._look_up(states, todo, config_key)
        finally:
            if enabled:
                gc.enable()
        if self._freeze and len(pending) < len(todo):
            gc.freeze()
        run = []
        for path, task, inputs, content in pending:
            output = self._reused(states[path], task)
            if output is None:
                run.append((path, task, inputs, content))
                continue
            self.reused += 1
            self._accept(states[path], task, inputs, output)
            if self.cache is not None and content != "unreadable":
                self.cache.put(path, content, inputs, output)
        outputs = self._execute([task for _, task, _, _ in run])
        for (path, task, inputs, content), (output, reads) in zip(run, outputs, strict=True):
            self.analysed += 1
            if output.get("content"):
                content = states[path].content = output["content"]
            self._accept(states[path], task, inputs, output)
            states[path].ran = (task, reads)
            if self.cache is not None and content != "unreadable":
                self.cache.put(path, content, inputs, output)

    def _check_syntax(self, states: dict[str, FileState]) -> None:
        """Do the syntax check that each file's last analysis left for later (``runner.
        checked``: a file no analysis parsed is compiled, for PC000), and cache the output."""
        from ..runner import UNCHECKED, checked

        for path, state in states.items():
            if state.output.get(UNCHECKED):
                state.output = checked(state.output, path, self.config)
                if self.cache is not None and state.content != "unreadable":
                    self.cache.put(path, state.content, state.inputs, state.output)

    def _reused(self, state: FileState, task: Task) -> dict[str, Any] | None:
        """The output of the file's last analysis run, when ``task`` differs from that
        analysis's task only in parts of its externals that the analysis did not read
        (``reads.same_where_read``): running it would give that output again. Else None."""
        if state.ran is None:
            return None
        last, reads = state.ran
        if (
            task.requests != last.requests
            or task.force != last.force
            or task.sink_calls != last.sink_calls
            or task.unsent != last.unsent
            or task.module != last.module
            or task.is_package != last.is_package
            or not same_where_read(
                last.externals, task.externals, state.output.get("wanted", {}), reads
            )
        ):
            return None
        return state.output

    def _look_up(
        self, states: dict[str, FileState], todo: list[tuple[str, Task]], config_key: str
    ) -> list[tuple[str, Task, str, str]]:
        """Take the cached outputs of ``todo``'s analyses; the others are returned, each
        with its inputs' digest and the file's content hash. With ``_freeze``, the first
        hit collects the garbage made so far and pauses the collector (``_round`` restarts
        it, and freezes what was read)."""
        pending: list[tuple[str, Task, str, str]] = []
        hit = False
        for path, task in todo:
            state = states[path]
            inputs = _inputs_digest(config_key, task, self._digests, self._blob_digests)
            raw = None
            if not state.content:
                try:
                    with open(path, "rb") as handle:
                        raw = handle.read()
                    state.content = digest(raw)
                except OSError:
                    state.content = "unreadable"
            cached = None
            if self.cache is not None and state.content != "unreadable":
                cached = self.cache.get(path, state.content, inputs)
            if cached is not None:
                state.raw = raw
                if self._freeze and not hit:
                    # the outputs read from the cache stay alive for the rest of the run and
                    # hold no cycles: a warm run's are millions of lists and dicts, and the
                    # collections that traversed them again and again took about a fifth of
                    # its CPU time. So they are read with the collector paused, then frozen
                    # (``gc.freeze``), out of its sight until the run ends; garbage is
                    # collected first, so that none is frozen
                    gc.collect(1)
                    gc.disable()
                hit = True
                self._accept(state, task, inputs, cached)
                state.ran = None
            else:
                pending.append((path, task, inputs, state.content))
        return pending

    def _accept(self, state: FileState, task: Task, inputs: str, output: dict[str, Any]) -> None:
        self._fresh.add(task.path)
        state.analyses += 1
        if output != state.output:  # a cached or repeated analysis often gives the same
            state.version += 1
        state.output = output
        state.inputs = inputs
        state.externals = task.externals
        state.requests = frozenset(task.requests)

    def _execute(self, tasks: list[Task]) -> list[tuple[dict[str, Any], InputReads]]:
        if not tasks:
            return []
        workers = self.jobs or os.cpu_count() or 1
        # once the workers are started (by a large round), later waves use them too
        limit = POOLED_LIMIT if self._pool is not None else SERIAL_LIMIT
        if workers <= 1 or len(tasks) < limit:
            _init_worker(self.config, self._rewrites, self._freeze_each)
            try:
                return [_run_task(t) for t in tasks]
            finally:
                _init_worker(self.config, self._rewrites)
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=workers,
                initializer=_init_worker,
                initargs=(self.config, self._rewrites, True),
            )
        chunk = max(1, min(64, len(tasks) // (workers * 8)))
        try:
            return list(self._pool.map(_run_task, tasks, chunksize=chunk))
        except BrokenProcessPool as exc:
            raise LintWorkerError(
                f"a worker process of the analysis was killed while it analysed {len(tasks)} "
                "files (often the system's out-of-memory killer): nothing is reported for this "
                "run; rerun with --jobs 1 to analyse in one process"
            ) from exc

    # ------------------------------------------------------------------ planning

    def _plan(self, states: dict[str, FileState], index: ModuleIndex) -> list[tuple[str, Task]]:
        """The tasks of the files whose task differs from their last one's. Only what may
        have moved since the last plan is looked at again: the files given an output since
        (``_fresh``), the files whose resolved names read one of them (``_readers``), or read
        the field stores or the hierarchy when those changed, the files they now ask other
        symbols of, the files whose ``_unsent`` entry changed and the last plan's tasks (one
        left for a later wave is due again); every file when the sink functions changed. Any
        other file's task is what it was at the last plan, where it was not due (a warm run
        replays about 16 waves, most of which give a few files an output)."""
        fresh, self._fresh = self._fresh, set()
        field_facts = self._merged_fields(states, fresh)
        self._build_hierarchy(states, index, fresh)
        dirty: set[str] = set()
        for path in fresh:
            dirty |= self._readers.get(path, set())
        if self._planned_fields != self._fields_version:
            dirty |= self._field_readers
            self._planned_fields = self._fields_version
        check = fresh | self._due | dirty
        # every file in the first plan (none resolved yet), else the dirty ones
        first = list(states) if len(self._resolved) < len(states) else self._in_order(dirty, states)
        for path in first:
            state = states[path]
            memo = self._resolved.get(path)
            if memo is not None and (
                path not in dirty
                or (
                    (memo.fields == self._fields_version or not memo.reads_fields)
                    and all(states[f].version == v for f, v in memo.stamps.items())
                )
            ):
                continue
            names = _wanted_names(state)
            if memo is not None and memo.names is names:
                # the same names, each resolved as ``memo.hits`` holds (the same carries):
                # only those that read a file whose version moved, or the field stores or the
                # hierarchy when they moved, can resolve otherwise; the others are not looked
                # at (their check would find every file they read at the version they read)
                positions: set[int] = set()
                for file, version in memo.stamps.items():
                    if states[file].version != version:
                        positions.update(memo.by_file.get(file, ()))
                if memo.fields != self._fields_version:
                    positions.update(memo.field_positions)
                hits = memo.hits
                for at in sorted(positions):
                    qual, carries = names[at]
                    if self._still(hits[at], carries, states, field_facts):
                        continue
                    if hits is memo.hits:
                        hits = list(hits)
                    hits[at] = self._resolve_wanted(qual, carries, path, states, index, field_facts)
                    self._wanted[(path, qual)] = hits[at]
            else:
                hits = []
                for qual, carries in names:
                    hit = self._wanted.get((path, qual))
                    if hit is None or not self._still(hit, carries, states, field_facts):
                        hit = self._resolve_wanted(qual, carries, path, states, index, field_facts)
                        self._wanted[(path, qual)] = hit
                    hits.append(hit)
            if (
                memo is None
                or memo.names is not names
                or any(h is not m for h, m in zip(hits, memo.hits, strict=True))
            ):
                seen: dict[str, Any] = {}
                deps: set[str] = set()
                touched: set[str] = {path}
                added: list[tuple[str, str]] = []
                for hit in hits:
                    touched.update(hit.stamps)
                    if hit.dep is not None:
                        deps.add(hit.dep)
                    if hit.request is not None:
                        added.append(hit.request)
                    seen.update(hit.seen)
                by_file: dict[str, list[int]] = {}
                for at, hit in enumerate(hits):
                    for file in hit.stamps:
                        by_file.setdefault(file, []).append(at)
                field_positions = [
                    at for at, h in enumerate(hits) if h.stored is not None or h.subclasses
                ]
                new = _Resolved(
                    dict.fromkeys(touched, 0),
                    self._fields_version,
                    seen,
                    deps,
                    added,
                    names,
                    hits,
                    bool(field_positions),
                    by_file,
                    field_positions,
                )
                self._remember(path, memo, new, check)
                memo = new
            # the same files read (each name's stamps moved to their versions when checked)
            memo.stamps = {f: states[f].version for f in memo.stamps}
            memo.fields = self._fields_version
            state.deps = memo.deps
        sink_names = self._sink_functions(states, fresh)
        if sink_names != self._sink_names:
            self._sink_names = sink_names
            self._sink_stamp += 1
        unsent = self._unsent(states, index, fresh)
        for path in unsent.keys() | self._last_unsent.keys():
            if unsent.get(path) != self._last_unsent.get(path):
                check.add(path)
        self._last_unsent = unsent
        todo = []
        if self._swept != self._sink_stamp:
            second = list(states)  # the sink functions changed: every file is compared
            self._swept = self._sink_stamp
        else:
            # every file's ``sink_stamp`` is the current one: only those of ``check`` are due
            second = self._in_order(check, states)
        for path in second:
            state = states[path]
            if path not in check and state.sink_stamp == self._sink_stamp:
                continue
            unseen = sink_names - state.scanned if state.sink_stamp != self._sink_stamp else set()
            state.sink_stamp = self._sink_stamp
            if unseen:
                # search the file again only for names it was not yet searched for
                state.scanned |= unseen
                calls = _call_names(state, path)
                found = {name.decode() for name in unseen if calls.contains(name)}
                if found:
                    # a triggered file is analysed anyway: only its functions that make
                    # such a call are added to those analysed
                    if not state.output.get("triggered"):
                        state.force = True
                    state.sink_calls |= found
            state.raw = None  # searched, or not to be searched for now
            # the task is made only for a file whose task differs from its last one (most
            # files' do not, wave after wave)
            own = unsent.get(path, ())
            externals = self._resolved[path].seen
            requests = state.requests.union(self._asked.get(path, ()))
            changed = (
                not _same_but_chains(externals, state.externals)
                or requests != state.requests
                or state.force != bool(state.output.get("forced"))
                or sorted(state.sink_calls) != state.output.get("sink_calls", [])
                or list(own) != state.output.get("unsent", [])
            )
            if changed:
                todo.append((path, self._task(path, state, externals, requests, own)))
        self._due = {path for path, _ in todo}
        return todo

    def _still(
        self,
        hit: _Wanted,
        carries: bool,
        states: dict[str, FileState],
        field_facts: dict[str, dict[str, list[Any]]],
    ) -> bool:
        """Whether ``hit`` still answers a wanted name that ``carries`` (or not) as it did."""
        return (
            hit.carries == carries
            and (
                hit.fields == self._fields_version
                or hit.same_fields(field_facts, self._hierarchy, self._fields_version)
            )
            and hit.still_valid(states)
        )

    def _in_order(self, paths: set[str], states: dict[str, FileState]) -> list[str]:
        """The files of ``paths`` in the run's order (that of ``states``)."""
        if not self._order:
            self._order = {path: number for number, path in enumerate(states)}
        order = self._order
        return sorted((p for p in paths if p in order), key=order.__getitem__)

    def _remember(self, path: str, old: _Resolved | None, new: _Resolved, check: set[str]) -> None:
        """Index ``new``, the resolved names of ``path`` that replace ``old``: the files it
        reads (``_readers``), whether it reads the field stores, the symbols it asks (the
        files asked, before and now, go into ``check``)."""
        if old is not None:
            for file in old.stamps:
                self._readers[file].discard(path)
            for file, symbol in old.requests:
                asked = self._asked[file]
                asked[symbol] -= 1
                if not asked[symbol]:
                    del asked[symbol]
                check.add(file)
        for file in new.stamps:
            self._readers.setdefault(file, set()).add(path)
        for file, symbol in new.requests:
            asked = self._asked.setdefault(file, {})
            asked[symbol] = asked.get(symbol, 0) + 1
            check.add(file)
        if new.reads_fields:
            self._field_readers.add(path)
        else:
            self._field_readers.discard(path)
        self._resolved[path] = new

    def _merged_fields(
        self, states: dict[str, FileState], fresh: set[str]
    ) -> dict[str, dict[str, list[Any]]]:
        """The merged field stores (``_field_facts``), merged again only when a file given an
        output since the last plan (``fresh``) stores other facts; a change bumps
        ``_fields_version``."""
        changed = not self._stores
        for path in fresh:
            stores = states[path].output.get("exports", {}).get("field_stores", {})
            if self._stores.get(path, {}) != stores:
                changed = True
            self._stores[path] = stores
        if changed:
            self._merged = _field_facts(states)
        if self._merged is not self._field_facts and self._merged != self._field_facts:
            self._field_facts = self._merged
            self._fields_version += 1
        return self._merged

    def _unsent(
        self, states: dict[str, FileState], index: ModuleIndex, fresh: set[str]
    ) -> dict[str, tuple[str, ...]]:
        """Per file, the program's own message classes (or callables) it builds with a
        literal system role (its export's ``message_classes``) that no module turns into
        request messages (no module's ``converts`` names them, through imports and
        re-exports): a message object of such a class is not taken as system text. A name
        that is no file's of the program (a library's class) is never in it. Only the files
        that export either are read (``_messages``, updated for the files of ``fresh``, given
        an output since the last plan)."""
        for path in fresh:
            exports = states[path].output.get("exports", {})
            both = (exports.get("converts", ()), exports.get("message_classes", ()))
            if any(both):
                self._messages[path] = both
            else:
                self._messages.pop(path, None)
        converted: set[tuple[str, str]] = set()
        for path, (converts, _) in self._messages.items():
            for qual in converts:
                found = self._resolve_kept(qual, path, states, index)
                if found is not None:
                    converted.add(found)
        out: dict[str, tuple[str, ...]] = {}
        for path, (_, built) in self._messages.items():
            names = []
            for qual in built:
                found = self._resolve_kept(qual, path, states, index)
                if found is not None and found not in converted:
                    names.append(qual)
            if names:
                out[path] = tuple(sorted(names))
        return out

    def _resolve_kept(
        self, qual: str, importer: str, states: dict[str, FileState], index: ModuleIndex
    ) -> tuple[str, str] | None:
        """``_resolve`` (with nothing to note), kept per (``qual``, ``importer``) while what
        it read holds (``_Read``): ``_unsent`` resolves the same names in every wave."""
        kept = self._kept.get((qual, importer))
        if kept is None or not kept.still_valid(states):
            touched: set[tuple[str, str]] = set()
            kept = _Kept({}, {}, self._resolve(qual, importer, states, index, touched))
            kept.note(touched, states)
            self._kept[(qual, importer)] = kept
        return kept.found

    def _resolve_wanted(
        self,
        qual: str,
        carries: bool,
        path: str,
        states: dict[str, FileState],
        index: ModuleIndex,
        field_facts: dict[str, dict[str, list[Any]]],
    ) -> _Wanted:
        """Resolve one name ``path`` wants (see ``_plan``)."""
        touched: set[tuple[str, str]] = set()
        out = _Wanted({}, {}, self._fields_version, carries)
        found = self._resolve(qual, path, states, index, touched)
        if found is not None:
            file, symbol = found
            out.dep = file
            touched.add((file, symbol.partition(".")[0]))
            blob = self._lookup(states[file], symbol)
            stored = _stored_fields(blob, field_facts)
            if blob is not None and blob["kind"] == "class":
                out.stored = (f"{blob['module']}.{blob['name']}", stored)
            overrides = self._overrides(file, symbol, blob, states, touched, path, out.subclasses)
            if blob is not None and overrides:
                # an abstract method overridden, with a sink, in the program's subclasses
                blob = {**blob, "data": {**blob["data"], "overrides": overrides}}
            if blob is None:
                out.request = (file, symbol.split(".")[0])
            elif stored:
                # fields that code elsewhere fills in an unstable order
                out.seen[qual] = {**blob, "data": {**blob["data"], "field_facts": stored}}
            elif carries or interesting(blob["data"]):
                out.seen[qual] = blob
                called = self._called(path, states)
                todo = _class_refs(blob, called)
                while todo:
                    # a class the value is an instance of, and those its methods called here
                    # return, and so on (``Settings.from_env().make_runner().ask(...)``)
                    cls = todo.pop()
                    ref = self._resolve(cls, path, states, index, touched)
                    if ref is not None and cls not in out.seen:
                        touched.add((ref[0], ref[1].partition(".")[0]))
                        more = self._lookup(states[ref[0]], ref[1])
                        if more is not None:
                            out.seen[cls] = more
                            todo.extend(_class_refs(more, called))
        out.note(touched, states)
        return out

    def _called(self, importer: str, states: dict[str, FileState]) -> Callable[[str], bool]:
        """Whether ``importer``'s text calls a method of this name (``.name(``)."""

        def called(name: str) -> bool:
            state = states[importer]
            return _call_names(state, importer).contains(f".{name}(".encode())

        return called

    def _overrides(
        self,
        file: str,
        symbol: str,
        blob: dict[str, Any] | None,
        states: dict[str, FileState],
        touched: set[tuple[str, str]],
        importer: str,
        subclasses_read: dict[tuple[str, str], list[tuple[str, str]]] | None = None,
    ) -> dict[str, list[Any]]:
        """For the abstract methods of a class (its export's ``abstract``) that ``importer``'s
        text calls (``.name(``), the methods of its subclasses anywhere in the program,
        directly or through others, that override one and pass an argument to a sink: method
        name -> [{"class": qualified name, "summary": what of the override's summary a caller
        uses (``_sink_part``)}], in the order of the subclasses' qualified names. Each (file,
        class name) read is added to ``touched``, and each entry of ``_hierarchy`` read to
        ``subclasses_read``. A file that never calls the method is not given them, so it is
        not analysed again when they change."""
        if blob is None or blob["kind"] != "class":
            return {}
        abstract = blob["data"].get("abstract")
        if not abstract:
            return {}
        state = states[importer]
        calls = _call_names(state, importer)
        abstract = [m for m in abstract if calls.contains(f".{m}(".encode())]
        if not abstract:
            return {}
        found: dict[str, list[Any]] = {}
        seen = {(file, symbol)}
        todo = [(file, symbol)]
        subclasses: list[tuple[str, str]] = []
        while todo:
            node = todo.pop()
            direct = self._hierarchy.get(node, ())
            if subclasses_read is not None:
                subclasses_read[node] = list(direct)
            for sub in direct:
                if sub not in seen:
                    seen.add(sub)
                    todo.append(sub)
                    subclasses.append(sub)
        for sub_file, name in sorted(subclasses, key=lambda s: (states[s[0]].module, s[1])):
            touched.add((sub_file, name))
            data = states[sub_file].output.get("exports", {}).get("classes", {}).get(name)
            if data is None:
                continue
            for method in abstract:
                summary = data["methods"].get(method)
                if summary is not None and _reaches_sink(summary):
                    found.setdefault(method, []).append(
                        {
                            "class": f"{states[sub_file].module}.{name}",
                            "summary": _sink_part(summary),
                        }
                    )
        return found

    def _build_hierarchy(
        self, states: dict[str, FileState], index: ModuleIndex, fresh: set[str]
    ) -> None:
        """``_hierarchy``: (file, class) -> the (file, class) of each exported class that names
        it as a base, through imports and re-exports; each file's part is found again only
        when its output changed (only a file of ``fresh``, given an output since the last
        plan, can have), and the parts merged again only when one changed. A change bumps
        ``_fields_version`` (resolved names that read the hierarchy are resolved again)."""
        changed = False
        for path in fresh:
            state = states[path]
            version, own = self._bases.get(path, (-1, ()))
            if version != state.version:
                found = []
                for name, data in state.output.get("exports", {}).get("classes", {}).items():
                    for base in data.get("bases", ()):
                        qual = f"{state.module}.{base[1:]}" if base.startswith("@") else base
                        target = self._resolve(qual, path, states, index, set())
                        if target is not None:
                            found.append((target, (path, name)))
                changed = changed or tuple(found) != own
                self._bases[path] = (state.version, tuple(found))
        if not changed:
            return
        merged: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for path in states:
            for target, sub in self._bases.get(path, (-1, ()))[1]:
                merged.setdefault(target, []).append(sub)
        if merged != self._hierarchy:
            self._hierarchy = merged
            self._fields_version += 1

    def _settled(
        self, todo: list[tuple[str, Task]], states: dict[str, FileState], wait: bool = True
    ) -> list[tuple[str, Task]]:
        """The analyses of ``todo`` to run in this wave: not those of files already analysed
        ``1 + MAX_ROUNDS`` times, and not yet those of files that take summaries from another
        file of ``todo`` (they run once those are done; if every file waits on another, as in
        an import cycle, all run). ``wait=False``: all of them run."""
        todo = [(p, t) for p, t in todo if states[p].analyses <= MAX_ROUNDS]
        if not wait:
            return todo
        pending = {p for p, _ in todo}
        ready = [(p, t) for p, t in todo if not (states[p].deps - {p}) & pending]
        if ready:
            return ready
        # every due file waits on another: run the import cycles that wait on no other due
        # file (``_source_cycles``); the files that take summaries from them wait for them
        first = _source_cycles({p: (states[p].deps - {p}) & pending for p in pending})
        return [(p, t) for p, t in todo if p in first]

    def _sink_functions(self, states: dict[str, FileState], fresh: set[str]) -> set[bytes]:
        """``name(`` for each exported function whose arguments reach a sink (``.name(``
        for a method); each file's are found again only when its output changed (only a file
        of ``fresh`` can have), and gathered again only when one's changed."""
        changed = False
        for path in fresh:
            state = states[path]
            version, own = state.sink_names
            if version != state.version:
                new = _sink_names(state.output.get("exports", {}))
                changed = changed or new != own
                state.sink_names = (state.version, new)
        if not changed:
            return self._sink_names
        names: set[bytes] = set()
        for state in states.values():
            names |= state.sink_names[1]
        return names

    def _resolve(
        self,
        qual: str,
        importer: str,
        states: dict[str, FileState],
        index: ModuleIndex,
        touched: set[tuple[str, str]],
    ) -> tuple[str, str] | None:
        """The (file, symbol) defining ``qual`` as ``importer`` names it, through re-exports;
        adds each (file, name) whose exports it read to ``touched`` (``_head``)."""
        for _ in range(_ALIAS_DEPTH):
            found = index.split(qual, importer)
            if found is None:
                return None
            file, symbol = found
            head, _, rest = symbol.partition(".")
            touched.add((file, head))
            aliases = states[file].output.get("exports", {}).get("aliases", {})
            target = aliases.get(head)
            if target is None or target == qual:
                return found
            qual = f"{target}.{rest}" if rest else target
            importer = file
        return None

    def _lookup(self, state: FileState, symbol: str) -> dict[str, Any] | None:
        exports = state.output.get("exports", {})
        head, _, rest = symbol.partition(".")
        if head in exports.get("functions", {}) and not rest:
            return {"kind": "function", "data": exports["functions"][head], "module": state.module}
        if head in exports.get("classes", {}):
            cls = exports["classes"][head]
            if rest:
                method = cls["methods"].get(rest)
                if method is None:
                    return None
                return {"kind": "function", "data": method, "module": state.module}
            return {"kind": "class", "data": cls, "module": state.module, "name": head}
        if head in exports.get("values", {}) and not rest:
            return {"kind": "value", "data": exports["values"][head], "module": state.module}
        if head in exports.get("missing", ()):
            return {"kind": "none", "data": {}, "module": state.module}
        return None


def _source_cycles(edges: dict[str, set[str]]) -> set[str]:
    """The members of the strongly connected components of the graph ``edges`` (node -> the
    nodes it waits on, each a key of ``edges``) that wait on no node outside their own
    component: the import cycles whose inputs no other due analysis will change. Never
    empty for a non-empty graph (a finite graph's components form a DAG, which has a sink)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    component: dict[str, int] = {}
    components: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(sorted(edges[root])))]
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                members = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component[member] = len(components)
                    members.append(member)
                    if member == node:
                        break
                components.append(members)
    out: set[str] = set()
    for number, members in enumerate(components):
        if all(component[d] == number for m in members for d in edges[m]):
            out.update(members)
    return out


def _wanted_names(state: FileState) -> list[tuple[str, bool]]:
    """The names ``state``'s file is given summaries of, each with whether a value with facts
    was passed to it: those its latest analysis wants (in its order), then those an earlier
    analysis wanted that it no longer does. Records the latest ones in ``state.ever_wanted``
    and ``state.carried``.

    Both only grow. A summary seen can change what the analysis asks for (a name resolved
    through it is no longer wanted; without the summary it is wanted again), so taking only
    the latest analysis's names can flip a file between two analyses every wave until its
    cap, and the last of them decides its findings. Kept names make the names, and so the
    summaries passed, grow only, which ends such a cycle. It is safe: an analysis that stopped
    wanting a name did so with that name's summary in sight, and keeping the name keeps the
    summary passed, so the analysis it stopped in stays the one that holds; a summary of a
    name the analysis does not look up at all is not read."""
    latest: dict[str, bool] = state.output.get("wanted", {})
    if state.named is not None:
        # the same names in the same order (an output read again, or one whose summaries
        # changed) add nothing to the kept ones: the same answer
        last, names_then = state.named
        if last is latest or (last == latest and list(last) == list(latest)):
            return names_then
    for qual, carries in latest.items():
        state.ever_wanted.setdefault(qual)
        if carries:
            state.carried.add(qual)
    names = list(latest)
    names += [qual for qual in state.ever_wanted if qual not in latest]
    out = [(qual, qual in state.carried) for qual in names]
    state.named = (latest, out)
    return out


def _sink_names(exports: dict[str, Any]) -> frozenset[bytes]:
    """``name(`` for each exported function of one file whose arguments reach a sink, and
    ``.name(`` for each such method."""
    names: set[bytes] = set()
    for name, data in exports.get("functions", {}).items():
        if data["param_sinks"] or data.get("attr_sinks") or data.get("turn_histories"):
            names.add(f"{name}(".encode())
        if data.get("turn_histories"):
            # imported under another name (``from .chat_service import chat as ask``): the
            # file's calls of that name are calls of it (``Analyzer._close_relevance``)
            names.add(f"{name} as ".encode())
    for cls in exports.get("classes", {}).values():
        for name, data in cls["methods"].items():
            if data["param_sinks"] or data.get("attr_sinks") or data.get("turn_histories"):
                names.add(f".{name}(".encode())
    return frozenset(names)


def _reaches_sink(summary: dict[str, Any]) -> bool:
    """Whether an exported method's summary passes an argument (or an entry or field of one)
    to a sink: what a caller that holds only the base class can prove of it."""
    return bool(summary["param_sinks"]) or any(
        a[:1].isdigit() for a in summary.get("attr_sinks", {})
    )


def _sink_part(summary: dict[str, Any]) -> dict[str, Any]:
    """What a caller holding only the base class uses of an override's exported summary:
    where its arguments (or their entries) reach a sink, and the calls that send them; its
    return value and stores are left empty, so a change in them is not a new input."""
    return {
        "name": summary["name"],
        "params": summary["params"],
        "ret": {"facts": [], "shape": "unknown"},
        "param_sinks": summary["param_sinks"],
        "stores": {},
        "attr_sinks": {a: t for a, t in summary.get("attr_sinks", {}).items() if a[:1].isdigit()},
        "builder": False,
        "sink_lines": summary.get("sink_lines", {}),
    }


def _is_fact(data: list[Any]) -> bool:
    """Whether a JSON list is a fact (``exports.fact_to_json``: 10 fields, 11 with the keys
    it was stored under, the chain's steps at index 8)."""
    return len(data) in (10, 11) and isinstance(data[0], str) and isinstance(data[8], list)


def _assumed(steps: list[Any]) -> bool:
    return any(str(s[0]).startswith(ASSUMED) for s in steps)


def _same_but_chains(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` (exported JSON) are equal once every fact's chain steps are
    reduced to whether one was assumed (a call the analysis could not see): a module is
    analysed again when the facts it sees change or become proven, not when only the steps
    that passed one on do (the steps it keeps are still true, and rounds end sooner). Equal
    parts are compared as they are; only the parts that differ are walked."""
    if a is b or a == b:
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_but_chains(v, b[k]) for k, v in a.items())
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        if _is_fact(a) and _is_fact(b):
            return a[:8] == b[:8] and a[9:] == b[9:] and _assumed(a[8]) == _assumed(b[8])
        return all(_same_but_chains(x, y) for x, y in zip(a, b, strict=True))
    return False


def _field_facts(states: dict[str, FileState]) -> dict[str, dict[str, list[Any]]]:
    """Class qualified name -> attribute -> the facts (JSON) any module stores into that
    field of an instance (each module's ``field_stores`` export), merged."""
    merged: dict[str, dict[str, list[Any]]] = {}
    for state in states.values():
        stores = state.output.get("exports", {}).get("field_stores", {})
        for cls, fields in stores.items():
            for attr, facts in fields.items():
                known = merged.setdefault(cls, {}).setdefault(attr, [])
                known.extend(f for f in facts if f not in known)
    for fields in merged.values():
        for facts in fields.values():
            facts.sort(key=repr)
    return merged


def _stored_fields(
    blob: dict[str, Any] | None, field_facts: dict[str, dict[str, list[Any]]]
) -> dict[str, list[Any]]:
    """The stored field facts of a class blob (empty for anything else)."""
    if blob is None or blob["kind"] != "class":
        return {}
    return field_facts.get(f"{blob['module']}.{blob['name']}", {})


def _class_refs(blob: dict[str, Any], called: Callable[[str], bool]) -> list[str]:
    """Qualified names of the classes an exported value or return value refers to (its
    tuple elements, fields and list elements included), and for a class, those its methods
    return that the importer calls (``called``: ``settings.make_runner()`` returning
    ``Runner(...)``, so the importer's ``runner.ask(...)`` is that class's method)."""
    module = blob["module"]
    out = []

    def visit(value: dict[str, Any]) -> None:
        name = value.get("class")
        if isinstance(name, str):
            out.append(f"{module}.{name[1:]}" if name.startswith("@") else name)
        for e in value.get("elts") or ():
            visit(e)
        for _, v in value.get("items") or ():
            visit(v)
        if "elem" in value:
            visit(value["elem"])

    data = blob["data"]
    if blob["kind"] == "function":
        visit(data["ret"])
    elif blob["kind"] == "value":
        visit(data)
    elif blob["kind"] == "class":
        for name, method in data["methods"].items():
            if called(name):
                visit(method["ret"])
    return out


def lint_program(
    files: list[str], config: LintConfig, jobs: int | None, cache_dir: Path | None
) -> tuple[list[Any], Program]:
    """Lint ``files`` as one program; returns (results in file order, the driver's stats)."""
    cache = LintCache.open(cache_dir, linter_fingerprint()) if cache_dir is not None else None
    program = Program(files, config, jobs or 0, cache)
    return program.run(), program


__all__ = ["MAX_ROUNDS", "Program", "Task", "diagnostic_to_json", "lint_program"]
