"""Tokenizer for a checkpoint directory: ``tokenizer.json`` (tokenizers) + the chat template.

Reads ``tokenizer.json`` with the ``tokenizers`` library and ``tokenizer_config.json`` for the
special tokens, ``add_bos_token`` / ``add_eos_token`` and the chat template (a string, a list of
named templates, or a ``chat_template.jinja`` file beside it, which transformers 5 writes).

One compatibility step mirrors transformers 5: a ``LlamaTokenizer``-class tokenizer (Llama 2,
Mistral, TinyLlama, the tinystories test model) is rebuilt by transformers with a ``Metaspace``
pre-tokenizer instead of the ``tokenizer.json`` normaliser, which changes how leading spaces and
special-token strings inside text encode, and builds the BPE model without an unknown token
(a character with no vocabulary entry and no byte-fallback token is dropped, not mapped to
``<unk>``). We apply the same pipeline so token ids match ``AutoTokenizer`` exactly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from promptcache.errors import InvalidRequestError, ModelLoadError

from .chat_template import compile_template, render_chat

__all__ = ["SPECIAL_TOKEN_NAMES", "Tokenizer"]

#: Named special tokens a chat template can read (transformers' SPECIAL_TOKENS_ATTRIBUTES).
SPECIAL_TOKEN_NAMES = (
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
)
_LLAMA_CLASSES = ("LlamaTokenizer", "LlamaTokenizerFast", "CodeLlamaTokenizer")


def _token_str(value: Any) -> str | None:
    """A special token from tokenizer_config.json: a string or an AddedToken dict."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ModelLoadError(
            f"cannot read {path}: it is not UTF-8 text ({exc.reason} at byte {exc.start}); "
            "save it as UTF-8"
        ) from exc
    except (OSError, ValueError) as exc:  # ValueError: not JSON
        raise ModelLoadError(f"cannot read {path}: {exc}") from exc
    return data if isinstance(data, dict) else {}


def _read_text(path: Path) -> str:
    """A UTF-8 text file (a chat template).

    Raises:
        ModelLoadError: the file cannot be read or is not UTF-8 (names the file).
    """
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ModelLoadError(
            f"cannot read {path}: it is not UTF-8 text ({exc.reason} at byte {exc.start}); "
            "save it as UTF-8"
        ) from exc
    except OSError as exc:
        raise ModelLoadError(f"cannot read {path}: {exc.strerror or exc}") from exc


class Tokenizer:
    """Encode / decode text and render chat prompts for one model.

    Args:
        backend: a ``tokenizers.Tokenizer``.
        special_tokens: ``{"bos_token": "<s>", ...}`` (names from ``SPECIAL_TOKEN_NAMES``).
        chat_templates: template name -> Jinja source; "default" is used unless asked otherwise.
    """

    def __init__(
        self,
        backend: Any,
        special_tokens: Mapping[str, str] | None = None,
        chat_templates: Mapping[str, str] | None = None,
    ) -> None:
        self._backend = backend
        self.special_tokens: dict[str, str] = dict(special_tokens or {})
        self.chat_templates: dict[str, str] = dict(chat_templates or {})

    @classmethod
    def from_pretrained(cls, model_dir: str | Path) -> Tokenizer:
        """Load ``tokenizer.json`` and ``tokenizer_config.json`` from a checkpoint directory, or
        build the tokenizer a GGUF file describes (``gguf_tokenizer.tokenizer_from_gguf``).

        Raises:
            ModelLoadError: ``tokenizer.json`` is missing or unreadable, or the chat template
                does not compile.
        """
        from tokenizers import Tokenizer as Backend

        from .gguf_file import is_gguf

        if is_gguf(model_dir):
            from .gguf_tokenizer import tokenizer_from_gguf

            return tokenizer_from_gguf(model_dir)
        model_dir = Path(model_dir)
        path = model_dir / "tokenizer.json"
        if not path.is_file():
            raise ModelLoadError(
                f"{path} not found: the engine needs a fast tokenizer file (tokenizer.json); "
                "save one with transformers' `tokenizer.save_pretrained(dir)`"
            )
        try:
            backend = Backend.from_file(str(path))
        except Exception as exc:  # tokenizers raises a bare Exception
            raise ModelLoadError(f"cannot read {path}: {exc}") from exc
        config = _read_json(model_dir / "tokenizer_config.json")
        legacy_map = _read_json(model_dir / "special_tokens_map.json")
        special: dict[str, str] = {}
        for name in SPECIAL_TOKEN_NAMES:
            token = _token_str(config.get(name)) or _token_str(legacy_map.get(name))
            if token is not None:
                special[name] = token
        if config.get("tokenizer_class") in _LLAMA_CLASSES:
            _llama_pipeline(backend, legacy=bool(config.get("legacy", True)))
        _set_post_processor(backend, config, special)
        origins: dict[str, Path] = {}
        templates = _read_chat_templates(model_dir, config, origins)
        for name, source in templates.items():
            compile_template(source, str(origins[name]))  # fail at load, not on a request
        return cls(backend, special, templates)

    # Vocabulary -------------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """Tokens known to the tokenizer, added tokens included."""
        return int(self._backend.get_vocab_size(with_added_tokens=True))

    def token_to_id(self, token: str) -> int | None:
        """The id of one token string, or None."""
        result = self._backend.token_to_id(token)
        return None if result is None else int(result)

    @property
    def bos_token_id(self) -> int | None:
        """Id of ``bos_token`` or None."""
        token = self.special_tokens.get("bos_token")
        return None if token is None else self.token_to_id(token)

    @property
    def eos_token_id(self) -> int | None:
        """Id of ``eos_token`` or None (the model config may list more EOS ids)."""
        token = self.special_tokens.get("eos_token")
        return None if token is None else self.token_to_id(token)

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        """Vocabulary strings of ``ids`` (e.g. "▁Once"); "" for an id outside the vocabulary."""
        return [self._backend.id_to_token(int(i)) or "" for i in ids]

    # Text <-> ids -----------------------------------------------------------------------------

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of ``text``; ``add_special_tokens`` adds BOS/EOS as the model expects."""
        if not isinstance(text, str):
            raise InvalidRequestError(f"a prompt must be a string, got {type(text).__name__}")
        return list(self._backend.encode(text, add_special_tokens=add_special_tokens).ids)

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """Text of ``ids``; special tokens (BOS, EOS...) are left out unless asked for."""
        return str(self._backend.decode(list(ids), skip_special_tokens=skip_special_tokens))

    # Chat -------------------------------------------------------------------------------------

    def get_chat_template(self, name: str | None = None, has_tools: bool = False) -> str:
        """The template source: ``name`` if given, "tool_use" when tools are passed and one
        exists, else "default".

        Raises:
            InvalidRequestError: the model has no chat template (or none called ``name``).
        """
        if not self.chat_templates:
            raise InvalidRequestError(
                "this model has no chat template; send a plain prompt to /v1/completions instead"
            )
        if name is not None:
            if name not in self.chat_templates:
                raise InvalidRequestError(
                    f"chat template {name!r} not found; the model has "
                    f"{', '.join(sorted(self.chat_templates))}"
                )
            return self.chat_templates[name]
        if has_tools and "tool_use" in self.chat_templates:
            return self.chat_templates["tool_use"]
        if "default" in self.chat_templates:
            return self.chat_templates["default"]
        raise InvalidRequestError(
            "this model has several chat templates and no default; name one of "
            f"{', '.join(sorted(self.chat_templates))}"
        )

    def set_chat_template(
        self, source: str, name: str = "default", origin: str | None = None
    ) -> None:
        """Install (or replace) a chat template, e.g. for vLLM-style ``--chat-template``.

        ``origin`` names where ``source`` came from in the error message.

        Raises:
            ModelLoadError: the template does not compile (the message shows Jinja's error).
        """
        compile_template(source, origin)
        self.chat_templates[name] = source

    def apply_chat_template(
        self,
        messages: Sequence[Mapping[str, Any]],
        add_generation_prompt: bool = True,
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        documents: Sequence[Mapping[str, Any]] | None = None,
        chat_template: str | None = None,
        **template_kwargs: Any,
    ) -> str:
        """Render a conversation to the prompt string, as transformers' ``apply_chat_template``
        with ``tokenize=False``. Encode the result with ``add_special_tokens=False``: templates
        already write BOS where the model wants it.

        Raises:
            InvalidRequestError: no chat template, an empty conversation, or the template
                rejects the messages.
        """
        template = self.get_chat_template(chat_template, has_tools=tools is not None)
        return render_chat(
            template,
            messages,
            add_generation_prompt=add_generation_prompt,
            tools=tools,
            documents=documents,
            special_tokens=self.special_tokens,
            **template_kwargs,
        )


def _llama_pipeline(backend: Any, legacy: bool) -> None:
    """The Metaspace pipeline transformers 5 gives ``LlamaTokenizer`` (tokenization_llama.py)."""
    from tokenizers import decoders, pre_tokenizers

    backend.model.byte_fallback = True
    backend.model.fuse_unk = True
    backend.model.unk_token = None
    backend.normalizer = None
    backend.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement="▁", prepend_scheme="always" if legacy else "first", split=False
    )
    backend.decoder = decoders.Sequence(
        [
            decoders.Replace("▁", " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Strip(content=" ", left=1),
        ]
    )


def _set_post_processor(backend: Any, config: Mapping[str, Any], special: dict[str, str]) -> None:
    """Honour explicit ``add_bos_token`` / ``add_eos_token`` as transformers'
    ``update_post_processor`` does; without either flag keep tokenizer.json's post-processor.
    """
    if "add_bos_token" not in config and "add_eos_token" not in config:
        return
    from tokenizers import processors

    bos, eos = special.get("bos_token"), special.get("eos_token")
    add_bos = bool(config.get("add_bos_token")) and bos is not None
    add_eos = bool(config.get("add_eos_token")) and eos is not None
    single = (
        f"{(str(bos) + ':0 ') if add_bos else ''}$A:0{(' ' + str(eos) + ':0') if add_eos else ''}"
    )
    pair = (
        f"{single}{(' ' + str(bos) + ':1') if add_bos else ''} $B:1"
        f"{(' ' + str(eos) + ':1') if add_eos else ''}"
    )
    specials = []
    if add_bos:
        specials.append((bos, backend.token_to_id(bos)))
    if add_eos:
        specials.append((eos, backend.token_to_id(eos)))
    backend.post_processor = processors.TemplateProcessing(
        single=single, pair=pair, special_tokens=specials
    )


def _read_chat_templates(
    model_dir: Path, config: Mapping[str, Any], origins: dict[str, Path] | None = None
) -> dict[str, str]:
    """Template name -> source, from tokenizer_config.json and chat_template*.jinja files;
    ``origins`` (if given) receives template name -> the file it came from.

    Raises:
        ModelLoadError: a template file cannot be read or is not UTF-8.
    """
    templates: dict[str, str] = {}
    where: dict[str, Path] = {} if origins is None else origins
    raw = config.get("chat_template")
    if isinstance(raw, str):
        templates["default"] = raw
        where["default"] = model_dir / "tokenizer_config.json"
    elif isinstance(raw, list):
        for item in raw:
            if isinstance(item, Mapping) and isinstance(item.get("template"), str):
                templates[str(item.get("name", "default"))] = str(item["template"])
                where[str(item.get("name", "default"))] = model_dir / "tokenizer_config.json"
    jinja = model_dir / "chat_template.jinja"
    if jinja.is_file():
        templates["default"] = _read_text(jinja)
        where["default"] = jinja
    extra = model_dir / "additional_chat_templates"
    if extra.is_dir():
        for file in sorted(extra.glob("*.jinja")):
            templates[file.stem] = _read_text(file)
            where[file.stem] = file
    legacy_path = model_dir / "chat_template.json"
    legacy = _read_json(legacy_path).get("chat_template")
    if isinstance(legacy, str) and "default" not in templates:
        templates["default"] = legacy
        where["default"] = legacy_path
    return templates
