#!/usr/bin/env python3
"""Render chat-template goldens with jinja2 exactly as transformers' apply_chat_template does.

Writes, under tests/fixtures/template_corpus/:
  snippets.json       small templates (tools/reference/template_snippets.py) rendered by transformers'
                      compiled jinja2 environment: output, or the error and whether it was raised while
                      compiling ("parse") or rendering ("render");
  conversations.json  the conversation corpus (conversation_corpus.py);
  goldens.json        for every vendored template (tests/fixtures/templates/<model>/) x conversation x
                      option set: the text apply_chat_template(tokenize=False) returns, or the error.

Rendering goes through transformers' own code path (transformers.utils.chat_template_utils):
_normalize_chat_messages (drops None-valued message keys), the special-token kwargs merged under the
caller's kwargs, and render_jinja_template (ImmutableSandboxedEnvironment with trim_blocks,
lstrip_blocks, loopcontrols, transformers' tojson / raise_exception / strftime_now, reasoning aliases).
The model directories hold only a chat template and special tokens, so the tokenizer object itself is
not built; the template choice and special tokens follow tokenizer.get_chat_template /
special_tokens_map (load_model_dir below, mirrored by loom::text::ChatTemplate::from_model_dir).

strftime_now() is pinned to FIXED_NOW (UTC) by replacing the `datetime` that transformers' closure
calls; the C++ tests pass the same epoch through ChatTemplateOptions::now_epoch_seconds.

Usage:  python3 tools/reference/render_templates.py            # regenerate the fixtures
        python3 tools/reference/render_templates.py --check    # fail if the committed files differ
"""

import datetime as _dt
import json
import os
import sys

import jinja2
import transformers
import transformers.utils.chat_template_utils as ctu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conversation_corpus  # noqa: E402
import template_snippets  # noqa: E402
from reference_common import FIXTURES_DIR, TEMPLATES_DIR, dump_json, regenerate_or_check  # noqa: E402

OUT_DIR = os.path.join(FIXTURES_DIR, "template_corpus")

FIXED_NOW = 1753614000  # 2025-07-27 11:00:00 UTC


class _FixedDatetime(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return _dt.datetime.fromtimestamp(FIXED_NOW, tz=_dt.timezone.utc).replace(tzinfo=None)


ctu.datetime = _FixedDatetime  # strftime_now() -> datetime.now().strftime(format)

SPECIAL_TOKENS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]


def error_record(exc, stage):
    return {"error": f"{type(exc).__name__}: {exc}", "stage": stage}


# ---- snippets ----


def render_snippet(source, context):
    try:
        compiled = ctu._compile_jinja_template(source)
    except Exception as e:  # TemplateSyntaxError, TemplateAssertionError, SyntaxError ('break' outside loop)
        return error_record(e, "parse")
    try:
        return {"output": compiled.render(**context)}
    except Exception as e:
        return error_record(e, "render")


def build_snippets():
    out = []
    for i, (source, context) in enumerate(template_snippets.CASES):
        context = json.loads(json.dumps(context))  # what the C++ side sees (tuples become lists)
        rec = {"id": i, "template": source, "context": context}
        rec.update(render_snippet(source, context))
        out.append(rec)
    return out


# ---- corpus ----


def load_model_dir(path):
    """Templates and special tokens of a fixture model directory (transformers' precedence)."""
    templates = {}
    config = {}
    config_path = os.path.join(path, "tokenizer_config.json")
    if os.path.exists(config_path):
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
    jinja_path = os.path.join(path, "chat_template.jinja")
    json_path = os.path.join(path, "chat_template.json")
    value = None
    if os.path.exists(jinja_path):
        with open(jinja_path, encoding="utf-8") as f:
            templates["default"] = f.read()
    elif os.path.exists(json_path):
        with open(json_path, encoding="utf-8") as f:
            value = json.load(f)["chat_template"]
    else:
        value = config.get("chat_template")
    if isinstance(value, str):
        templates["default"] = value
    elif isinstance(value, list):
        templates = {t["name"]: t["template"] for t in value}
    special = {}
    for name in SPECIAL_TOKENS:
        v = config.get(name)
        if isinstance(v, dict):
            v = v.get("content")
        if v is not None:
            special[name] = str(v)
    return templates, special


def choose_template(templates, tools):
    """tokenizer.get_chat_template(None, tools)."""
    if len(templates) == 1 and "default" in templates:
        return templates["default"]
    if tools is not None and "tool_use" in templates:
        return templates["tool_use"]
    return templates["default"]


def render_chat(templates, special, conv, variant):
    tools = conv.get("tools")
    documents = conv.get("documents")
    try:
        chat_template = choose_template(templates, tools)
        messages = ctu._normalize_chat_messages(conv["messages"])
        template_kwargs = {**special, **variant.get("extra", {})}
        rendered, _ = ctu.render_jinja_template(
            conversations=[messages],
            tools=tools,
            documents=documents,
            chat_template=chat_template,
            add_generation_prompt=variant["add_generation_prompt"],
            **template_kwargs,
        )
        return {"output": rendered[0]}
    except Exception as e:
        return error_record(e, "render")


def build_corpus():
    goldens = []
    models = sorted(d for d in os.listdir(TEMPLATES_DIR) if os.path.isdir(os.path.join(TEMPLATES_DIR, d)))
    for model in models:
        templates, special = load_model_dir(os.path.join(TEMPLATES_DIR, model))
        for conv in conversation_corpus.CONVERSATIONS:
            for variant_name in conversation_corpus.variants_for(model, conv):
                variant = conversation_corpus.VARIANTS[variant_name]
                rec = {"template": model, "conversation": conv["id"], "variant": variant_name}
                rec.update(render_chat(templates, special, conv, variant))
                goldens.append(rec)
    return goldens


def main():
    return regenerate_or_check(__doc__, OUT_DIR, lambda: {
        "snippets.json": dump_json({"jinja2": jinja2.__version__, "transformers": transformers.__version__,
                                    "now_epoch_seconds": FIXED_NOW, "cases": build_snippets()}),
        "conversations.json": dump_json({"variants": conversation_corpus.VARIANTS,
                                         "conversations": conversation_corpus.CONVERSATIONS}),
        "goldens.json": dump_json({"jinja2": jinja2.__version__, "transformers": transformers.__version__,
                                   "now_epoch_seconds": FIXED_NOW, "goldens": build_corpus()}),
    })


if __name__ == "__main__":
    sys.exit(main())
