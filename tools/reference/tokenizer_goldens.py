#!/usr/bin/env python3
"""Writes the tokenizer goldens (tests/fixtures/tokenizer_corpus/goldens.json) with `tokenizers`.

The corpus is the hand-written documents in tests/fixtures/tokenizer_corpus/texts/*.txt (each as
a whole and line by line) plus generated stress documents (whitespace runs, NFC cases, digits,
contractions, special tokens inside text, random mixes, random code points, long inputs) made with
a fixed seed. For every document the goldens hold the ids of `tokenizers`' encode (special tokens
parsed, and with encode_special_tokens=True when that differs) and its decode (with and without
skip_special_tokens, when they differ from the text). Further sections: the whole vocabulary
(token string, raw bytes, decode of the single id), decodes of random id sequences, and variants
of the tokenizer (JSON patches of the test vocabulary or small trained vocabularies) covering
options the Qwen vocabulary does not use.

Usage:
  tools/reference/tokenizer_goldens.py                       # regenerate the committed goldens
  tools/reference/tokenizer_goldens.py --tokenizer ../shared/data/qwen3-tokenizer/tokenizer.json \
      --out /tmp/qwen3_goldens.json --no-variants            # local check against the real vocab
  tools/reference/tokenizer_goldens.py --bench-out /tmp/bench.jsonl --bench-mb 8
                                                             # the mixed benchmark corpus (JSONL)
Deterministic: the same inputs and `tokenizers` version give byte-identical output.
"""
import argparse
import copy
import json
import pathlib
import random
import sys

import tokenizers
from tokenizers import Tokenizer, pre_tokenizers

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests/fixtures"
CORPUS = FIXTURES / "tokenizer_corpus"
DEFAULT_TOKENIZER = FIXTURES / "tokenizer/tokenizer.json"
SEED = 20240611


# ----------------------------------------------------------------------------------------------
# Corpus


def hand_docs():
    docs = []
    for path in sorted((CORPUS / "texts").glob("*.txt")):
        text = path.read_text(encoding="utf-8")
        name = "texts/" + path.name
        docs.append((name, text))
        for i, line in enumerate(text.splitlines(keepends=True)):
            docs.append((f"{name}:{i + 1}", line))
    return docs


WHITESPACE = [" ", "  ", "   ", "    ", "        ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r\n\r\n",
              "\r", " \n", "\n ", " \t \n", "\t\n", " \r\n ", "\u00a0", "\u00a0\u00a0", "\u3000", "\u2028",
              "\u2029", "\u180e", "\x0b", "\x0c", "\u0085", "\u2009", "\u200b", "\ufeff", "\u202f", "\u205f",
              "\u1680", " \u00a0 ", "\x1c", "\x1f"]
PUNCT = list(".,!?;:-—–()[]{}<>|\\/@#$%^&*_~`'\"+=") + ["...", "!!", "?!", "--", "->", "=>", "::", "//", "/*",
                                                       "*/", "#!", "&&", "||", "!=", "==", "<=", ">=", "**"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'M", "'LL", "'D",
                "'ſ", "'ſt", "’s", "''", "'", "'x", "'sa", "'ll've", "n't", "N'T"]
COMBINING = ["e\u0301", "a\u0308", "A\u030a", "\u1100\u1161\u11a8", "\u1100\u1161", "\uac00\u11a8",
             "\u0041\u0323\u0302", "\u0041\u0302\u0323", "\u212b", "\uf900", "\u0958", "o\u0308\u0304",
             "\u0301", "s\u0323\u0307", "s\u0307\u0323", "\u0915\u093c", "\u00e9", "\u1e69", "\u2126",
             "\u0344", "\u0f73", "\u0bc6\u0bbe", "\u3071", "\u306f\u309a", "\u1ea0\u0306", "\u0627\u0653",
             "\u05e9\u05c1\u05b8", "\u05e9\u05b8\u05c1", "\ufb2c", "\u2000", "\u0340", "Cafe\u0301",
             "he\u0301llo", "n\u0303", "\u0430\u0306",
             # Marks newer than tokenizers' normalization tables (it leaves them alone), and the
             # jamo before the trailing consonants, which must not compose.
             "a\u0898\u0316", "x\u09fe\u0301\u0316", "\uac00\u11a7\u11a8", "\u1100\u1161\u11a7"]
# Characters assigned in Unicode 15/16 (unknown to Debian 12's PCRE2): CJK Ext H/I, Egyptian
# hieroglyphs Ext-A, Cyrillic/Latin additions, Garay and Nag Mundari digits, Kawi marks, new emoji.
UNICODE_NEW = ["\U00031350", "\U0003144B", "\U0002EBF0", "\U000141EC", "\U00013460", "\u1c89", "\ua7cb",
               "\U00010D40", "\U00010D41", "\U00011F00", "\U0001E4D0", "\U0001E4F0", "\u0cf3", "\u1b4e",
               "\U0001FA77", "\U0001F6DC", "\u0897", "\U000105C0", "\U00016D40"]
DIGIT_EXTRA = ["3.14159", "1,000,000", "-42", "1e-9", "0x1F", "٠١٢٣٤٥٦٧٨٩", "۰۱۲", "１２３", "²³", "½",
               "①②", "Ⅻ", "१२३", "๑๒๓", "𝟘𝟙𝟚", "1st", "2nd", "10:45", "2024-06-11"]


def specials_of(tok_json):
    return [t["content"] for t in tok_json.get("added_tokens", [])]


def near_misses(specials):
    out = []
    for s in specials:
        if len(s) > 2:
            out += [s[:-1], s[1:], s.upper(), s[:2] + " " + s[2:], s + s, "<" + s + ">"]
    return out


def words_from(docs):
    words = []
    for _, text in docs:
        words.extend(text.split())
    return sorted(set(words))


def random_code_point_doc(rng, n):
    ranges = [(0x00, 0x1F), (0x20, 0x7E), (0xA0, 0xFF), (0x100, 0x24F), (0x300, 0x36F), (0x370, 0x3FF),
              (0x400, 0x4FF), (0x590, 0x5FF), (0x600, 0x6FF), (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF),
              (0x2000, 0x206F), (0x2100, 0x22FF), (0x3000, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3),
              (0xE000, 0xE0FF), (0xF900, 0xFAFF), (0xFE00, 0xFE0F), (0xFF00, 0xFFEF), (0xFFF0, 0xFFFD),
              (0x1F300, 0x1F6FF), (0x1F900, 0x1F9FF), (0x1D400, 0x1D7FF), (0x20000, 0x2A6DF),
              (0xE0020, 0xE007F), (0x100000, 0x1000FF)]
    chars = []
    for _ in range(n):
        lo, hi = rng.choice(ranges)
        chars.append(chr(rng.randint(lo, hi)))
    return "".join(chars)


def generated_docs(base_docs, specials):
    rng = random.Random(SEED)
    docs = []
    words = words_from(base_docs)
    emoji = [w for w in words if any(ord(c) >= 0x1F000 for c in w)] or ["😀"]
    misses = near_misses(specials)

    # Whitespace: every pool entry alone, between words, and random runs.
    for i, ws in enumerate(WHITESPACE):
        docs.append((f"gen/ws/{i}", ws))
        docs.append((f"gen/ws_between/{i}", "a" + ws + "b" + ws + "1" + ws + "!" + ws))
        docs.append((f"gen/ws_edges/{i}", ws + "word" + ws))
    for i in range(40):
        docs.append((f"gen/ws_run/{i}", "".join(rng.choice(WHITESPACE) for _ in range(rng.randint(1, 12))) +
                     rng.choice(["x", "", "\n", "1", "!", "é"])))
    docs.append(("gen/ws_only_lines", "\n".join(rng.choice(WHITESPACE) * rng.randint(1, 5) for _ in range(60))))

    # NFC: combining sequences alone and inside words.
    for i, c in enumerate(COMBINING):
        docs.append((f"gen/nfc/{i}", c))
        docs.append((f"gen/nfc_ctx/{i}", "x" + c + "y " + c + c + " " + c.upper() + "."))
    docs.append(("gen/nfc_mix", " ".join(rng.choice(COMBINING) + rng.choice(["", "a", " ", "1"]) for _ in range(300))))

    # Digits and contractions.
    for i in range(30):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 60)))
        docs.append((f"gen/digits/{i}", digits + rng.choice(["", " ", "px", ".5", "\n"]) + rng.choice(DIGIT_EXTRA)))
    for i, c in enumerate(CONTRACTIONS):
        docs.append((f"gen/contraction/{i}", "it" + c + " IT" + c + " " + c + " x" + c + "y " + c + c))

    # Special tokens and near misses inside text.
    for i, s in enumerate(specials):
        docs.append((f"gen/special/{i}", f"a{s}b {s} {s}{s}\n{s} x"))
    for i in range(40):
        parts = [rng.choice(specials + misses + words + WHITESPACE) for _ in range(rng.randint(2, 15))]
        docs.append((f"gen/special_mix/{i}", "".join(parts)))

    # Random mixes of everything.
    pools = [(words, 10), (WHITESPACE, 3), (PUNCT, 3), (CONTRACTIONS, 1), (COMBINING, 1), (DIGIT_EXTRA, 1),
             (emoji, 1), (specials + misses, 1)]
    for i in range(90):
        out = []
        for _ in range(rng.randint(5, 120)):
            pool = rng.choices([p for p, _ in pools], weights=[w for _, w in pools])[0]
            out.append(rng.choice(pool))
            if rng.random() < 0.6:
                out.append(" ")
        docs.append((f"gen/mix/{i}", "".join(out)))

    # Random code points from many blocks (controls, combining marks, PUA, noncharacters, tags...).
    for i in range(40):
        docs.append((f"gen/codepoints/{i}", random_code_point_doc(rng, rng.randint(1, 200))))

    # Unicode 15/16 characters between letters, digits, spaces and punctuation.
    for i in range(30):
        ctx = ["a", "Z", "1", " ", "'", ".", "中", "é", "\n", ""]
        docs.append((f"gen/unicode_new/{i}", "".join(rng.choice(UNICODE_NEW) + rng.choice(ctx) + rng.choice(ctx)
                                                     for _ in range(rng.randint(1, 8)))))

    # Long inputs.
    docs.append(("gen/long/letters", "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(20000))))
    docs.append(("gen/long/spaces", " " * 8000 + "x" + "\t" * 3000 + "\n" * 2000))
    docs.append(("gen/long/digits", "".join(rng.choice("0123456789") for _ in range(5000))))
    docs.append(("gen/long/cjk", "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(3000))))
    docs.append(("gen/long/emoji", "".join(rng.choice(emoji) for _ in range(500))))
    docs.append(("gen/long/repeat", "ab" * 4000))
    docs.append(("gen/empty", ""))
    return docs


# ----------------------------------------------------------------------------------------------
# Goldens


def encode_ids(tok, text, special):
    tok.encode_special_tokens = not special
    try:
        return tok.encode(text, add_special_tokens=False).ids
    finally:
        tok.encode_special_tokens = False


def doc_case(tok, name, text, post=False, doc_index=None):
    case = {"name": name, "text": text} if doc_index is None else {"doc": doc_index}
    ids = encode_ids(tok, text, True)
    case["ids"] = ids
    ids_plain = encode_ids(tok, text, False)
    if ids_plain != ids:
        case["ids_no_special"] = ids_plain
    decoded = tok.decode(ids, skip_special_tokens=False)
    if decoded != text:
        case["decoded"] = decoded
    skipped = tok.decode(ids, skip_special_tokens=True)
    if skipped != decoded:
        case["decoded_skip_special"] = skipped
    if post:
        case["ids_post"] = tok.encode(text, add_special_tokens=True).ids
    return case


def bytes_to_unicode():
    """GPT-2's byte -> character table (the ByteLevel alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def vocab_table(tok, tok_json):
    """[id, token, raw bytes (hex), special] for every id; checks the byte mapping against decode."""
    char_to_byte = {c: b for b, c in bytes_to_unicode().items()}
    byte_level = (tok_json.get("decoder") or {}).get("type") == "ByteLevel"
    specials = {t["content"] for t in tok_json.get("added_tokens", []) if t.get("special")}
    rows = []
    for i in range(tok.get_vocab_size(with_added_tokens=True)):
        t = tok.id_to_token(i)
        if t is None:
            continue
        if byte_level and all(c in char_to_byte for c in t):
            raw = bytes(char_to_byte[c] for c in t)
        else:
            raw = t.encode("utf-8")
        if byte_level:
            assert tok.decode([i], skip_special_tokens=False) == raw.decode("utf-8", errors="replace"), (i, t)
        rows.append([i, t, raw.hex(), t in specials])
    return rows


def decode_cases(tok, rng, n):
    size = tok.get_vocab_size(with_added_tokens=True)
    out = []
    for _ in range(n):
        ids = [rng.randrange(size + 50) for _ in range(rng.randint(1, 40))]
        out.append({"ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False),
                    "decoded_skip_special": tok.decode(ids, skip_special_tokens=True)})
    return out


# ----------------------------------------------------------------------------------------------
# Variants


def added(content, **flags):
    t = {"id": 0, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": False}
    t.update(flags)
    return t


def byte_level_pre(add_prefix_space=False, use_regex=False):
    return {"type": "ByteLevel", "add_prefix_space": add_prefix_space, "trim_offsets": False, "use_regex": use_regex}


VARIANT_LINES = [
    "日本語 テスト zzz qqq ©® the tokenizer merges pairs",
    "Hello <mask> world", "x<mask>y <mask>. A<mask> <mask>ony <mask>", "  <mask>  \t<mask>\u2000end",
    "he\u0301llo héllo HÉLLO hello", "Café Cafe\u0301 cafe\u0301", "say wörld  wörld x",
    "<|im <|im_start|> <|im_end|> <|imx", "a  lstrip_only  b lstrip_onlylstrip_only", "rstrip_only   z\n\nrstrip_only",
    "word words sword word_ word. (word)", "singing ring ing ING", "<|endoftext|>in the beginning<|endoftext|>",
    "The 2 quick foxes, 123456 jumped!!  Over\tthe\n\nlazy dogs'  tails 3.14",
    "  leading spaces and trailing   ", "ＡＢＣ １２３ ﬁ ﬂ ℌ ² ½ ｶﾀｶﾅ ㍿ é e\u0301",
]


def patched(base, ops):
    """Applies a small subset of RFC 6902 JSON Patch (add/replace/remove) - the C++ test uses
    nlohmann::json::patch with the same ops."""
    doc = copy.deepcopy(base)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent = doc
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent[p]
        last = parts[-1]
        if op["op"] == "remove":
            del parent[int(last) if isinstance(parent, list) else last]
        elif isinstance(parent, list):
            if last == "-":
                parent.append(copy.deepcopy(op["value"]))
            elif op["op"] == "add":
                parent.insert(int(last), copy.deepcopy(op["value"]))
            else:
                parent[int(last)] = copy.deepcopy(op["value"])
        else:
            parent[last] = copy.deepcopy(op["value"])
    return doc


def pick_docs(docs, names):
    return [(n, t) for n, t in docs if n in names]


def tiny_trained_tokenizer(texts, prefix, suffix, num_merges=120):
    """A small non-byte-level BPE with continuing_subword_prefix / end_of_word_suffix / unk, trained
    here (tokenizers' BpeTrainer breaks ties nondeterministically): most frequent pair first, ties
    broken by the pair itself."""
    import collections
    import re
    counts = collections.Counter(w for t in texts for w in re.findall(r"\w+|[^\w\s]+", t))
    words = []
    for w, n in sorted(counts.items()):
        syms = [c if i == 0 else prefix + c for i, c in enumerate(w)]
        syms[-1] += suffix
        words.append((syms, n))
    vocab = {"[UNK]": 0}
    for sym in sorted({s for syms, _ in words for s in syms}):
        vocab[sym] = len(vocab)
    merges = []
    for _ in range(num_merges):
        pairs = collections.Counter()
        for syms, n in words:
            for pair in zip(syms, syms[1:]):
                pairs[pair] += n
        if not pairs:
            break
        (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        merged = a + b[len(prefix):]
        merges.append([a, b])
        vocab.setdefault(merged, len(vocab))
        for k, (syms, n) in enumerate(words):
            out, i = [], 0
            while i < len(syms):
                if i + 1 < len(syms) and syms[i] == a and syms[i + 1] == b:
                    out.append(merged)
                    i += 2
                else:
                    out.append(syms[i])
                    i += 1
            words[k] = (out, n)
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added("[UNK]", special=True)],
        "normalizer": None,
        # tokenizers' Whitespace pre-tokenizer, spelled as the equivalent Split.
        "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\w+|[^\\w\\s]+"}, "behavior": "Removed",
                          "invert": True},
        "post_processor": None, "decoder": None,
        "model": {"type": "BPE", "dropout": None, "unk_token": "[UNK]", "continuing_subword_prefix": prefix or None,
                  "end_of_word_suffix": suffix or None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": vocab, "merges": merges},
    }


def variant_docs(docs):
    """The (small) document set every variant encodes: stored once in the goldens."""
    names = {"texts/prose_en.txt", "texts/chat.txt", "texts/code_cpp.txt:11", "texts/code_cpp.txt:12",
             "texts/code_cpp.txt:33", "texts/code_python.txt:33", "texts/multilingual.txt:1",
             "texts/multilingual.txt:4", "texts/multilingual.txt:25", "texts/multilingual.txt:32",
             "texts/emoji.txt:4", "texts/emoji.txt:6", "gen/ws_run/0", "gen/ws_run/1", "gen/ws_run/2",
             "gen/nfc_ctx/0", "gen/nfc_ctx/6", "gen/nfc_ctx/9", "gen/nfc_ctx/35", "gen/nfc_ctx/36", "gen/nfc_ctx/37",
             "gen/nfc_ctx/38", "gen/codepoints/0", "gen/digits/0", "gen/empty",
             "gen/unicode_new/0", "gen/unicode_new/1", "gen/unicode_new/2", "gen/unicode_new/3"}
    return pick_docs(docs, names) + [(f"line/{i}", s) for i, s in enumerate(VARIANT_LINES)]


def variants(base_json, docs):
    small = list(range(len(docs)))  # indices into variant_docs(); every variant encodes all of them
    out = []

    out.append(("ignore_merges", [{"op": "replace", "path": "/model/ignore_merges", "value": True}], small))

    flags = [
        added("<mask>", single_word=True, lstrip=True, rstrip=True, special=True),
        added("héllo", normalized=True), added("Cafe\u0301", normalized=True), added(" wörld "),
        added("<|im"), added("lstrip_only", lstrip=True, special=True), added("rstrip_only", rstrip=True),
        added("word", single_word=True, normalized=True), added("ing", special=True),
    ]
    out.append(("added_token_flags", [{"op": "add", "path": "/added_tokens/-", "value": t} for t in flags], small))

    out.append(("gpt2_byte_level", [
        {"op": "replace", "path": "/normalizer", "value": None},
        {"op": "replace", "path": "/pre_tokenizer", "value": byte_level_pre(add_prefix_space=True, use_regex=True)},
    ], small))
    out.append(("byte_level_prefix_space_after_split", [
        {"op": "replace", "path": "/pre_tokenizer/pretokenizers/1", "value": byte_level_pre(add_prefix_space=True)},
    ], small))

    for norm in ["NFKC", "NFD", "NFKD"]:
        out.append((f"normalizer_{norm}", [{"op": "replace", "path": "/normalizer",
                                            "value": {"type": "Sequence", "normalizers": [{"type": norm}]}}], small))

    for behavior in ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]:
        for invert in [False, True]:
            split = {"type": "Split", "pattern": {"Regex": "\\p{N}+|\\s+|[.,!]"}, "behavior": behavior, "invert": invert}
            out.append((f"split_{behavior}_{'invert' if invert else 'plain'}", [
                {"op": "replace", "path": "/pre_tokenizer",
                 "value": {"type": "Sequence", "pretokenizers": [split, byte_level_pre()]}}], small))
    # Removing what a class matches makes any disagreement about the class visible in the ids
    # (covers \\p{..} / \\d / \\w / \\s on characters PCRE2's Unicode tables do not know yet).
    for name, regex in [("classes", "\\p{L}+|\\p{Nd}|\\p{M}|\\p{S}|\\s"), ("word", "\\w+|\\d"),
                        ("bracket_classes", "[\\p{L}\\p{N}]+|[^\\s\\p{L}\\p{N}\\p{P}]")]:
        split = {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Removed", "invert": False}
        out.append((f"split_removed_{name}", [
            {"op": "replace", "path": "/pre_tokenizer",
             "value": {"type": "Sequence", "pretokenizers": [split, byte_level_pre()]}}], small))
    out.append(("split_string_pattern", [
        {"op": "replace", "path": "/pre_tokenizer", "value": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithNext", "invert": False},
            {"type": "Split", "pattern": {"String": "e."}, "behavior": "Isolated", "invert": False},
            byte_level_pre()]}}], small))
    for individual in [True, False]:
        out.append((f"digits_{'individual' if individual else 'grouped'}", [
            {"op": "replace", "path": "/pre_tokenizer", "value": {"type": "Sequence", "pretokenizers": [
                {"type": "Digits", "individual_digits": individual}, byte_level_pre()]}}], small))

    bos = {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [base_json["added_tokens"][0]["id"]],
                             "tokens": ["<|endoftext|>"]}}
    template = {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": bos}
    out.append(("template_post_processor", [
        {"op": "replace", "path": "/post_processor",
         "value": {"type": "Sequence", "processors": [
             {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}, template]}}],
        small))

    # Small trained, non-byte-level vocabularies (decoder null: tokens joined with spaces).
    # Trained on mostly-ASCII documents so the alphabet stays small and other scripts hit [UNK].
    texts = [t for n, t in hand_docs() if n in ("texts/prose_en.txt", "texts/code_python.txt", "texts/code_cpp.txt")]
    tiny_docs = small
    for prefix, suffix in [("##", "</w>"), ("", "</w>"), ("##", "")]:
        tiny = tiny_trained_tokenizer(texts, prefix, suffix)
        out.append((f"tiny_bpe_prefix{len(prefix)}_suffix{len(suffix)}", {"inline": tiny}, tiny_docs))
    fused = patched(tiny, [{"op": "replace", "path": "/model/fuse_unk", "value": True}])
    out.append(("tiny_bpe_prefix2_suffix0_fuse_unk", {"inline": fused}, tiny_docs))
    tiny = tiny_trained_tokenizer(texts, "", "")
    fb = copy.deepcopy(tiny)
    next_id = max(fb["model"]["vocab"].values()) + 1
    for b in range(256):
        fb["model"]["vocab"][f"<0x{b:02X}>"] = next_id + b
    fb["model"]["byte_fallback"] = True
    out.append(("tiny_bpe_byte_fallback", {"inline": fb}, tiny_docs))
    return out


def build_variant(base_json, spec):
    if isinstance(spec, dict) and "inline" in spec:
        return spec["inline"], {"tokenizer": spec["inline"]}
    return patched(base_json, spec), {"patch": spec}


# ----------------------------------------------------------------------------------------------


def bench_corpus(docs, path, megabytes):
    """Benchmark documents of 1-8 KB (prompt-sized), each a random run of corpus documents, until
    the total reaches `megabytes`. JSONL, one {"text": ...} per line."""
    rng = random.Random(SEED + 1)
    usable = [t for n, t in docs if t and not n.startswith("gen/long/")]
    total, lines = 0, []
    while total < megabytes * 1e6:
        target = rng.randint(1000, 8000)
        parts, size = [], 0
        while size < target:
            t = rng.choice(usable)
            parts.append(t)
            size += len(t.encode("utf-8"))
        text = "".join(parts)
        lines.append(json.dumps({"text": text}, ensure_ascii=False))
        total += len(text.encode("utf-8"))
    pathlib.Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"bench corpus: {len(lines)} docs, {total / 1e6:.2f} MB -> {path}")


GENERAL_CATEGORIES = ["Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe",
                      "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cf"]


def ranges_of(code_points):
    ranges = []
    for c in sorted(code_points):
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    return ranges


def normalization_known():
    """Code points `tokenizers`' normalizers have data for (its Unicode tables are older than
    utf8proc's): a compatibility or canonical decomposition, a non-zero combining class, or a place
    in some canonical decomposition (every composition participant has one)."""
    from tokenizers import normalizers
    nfkd, nfd = normalizers.NFKD(), normalizers.NFD()
    sep = "\ue000"  # a starter that appears in no decomposition
    cps = [c for c in range(0x80, 0x110000) if not (0xD800 <= c <= 0xDFFF) and c != 0xE000]
    known = set()
    for i in range(0, len(cps), 20000):
        chunk = cps[i:i + 20000]
        plain = nfkd.normalize_str(sep.join(chr(c) for c in chunk)).split(sep)
        canonical = nfd.normalize_str(sep.join(chr(c) for c in chunk)).split(sep)
        # U+0345 (ccc 240) c U+0334 (ccc 1) stays in this order only when c is a starter.
        barrier = nfd.normalize_str(sep.join("\u0345" + chr(c) + "\u0334" for c in chunk)).split(sep)
        assert len(plain) == len(canonical) == len(barrier) == len(chunk)
        for c, p, d, o in zip(chunk, plain, canonical, barrier):
            if p != chr(c) or o != "\u0345" + chr(c) + "\u0334":
                known.add(c)
            if d != chr(c):
                known.update(ord(x) for x in d if ord(x) >= 0x80)
    return known


def unicode_tables(path):
    """Writes src/text/tokenizer_unicode_tables.h, measured by running `tokenizers`:
    - kUnicodeAdditions: the general category of every code point unassigned in Unicode 14.0 (what
      Debian 12's PCRE2 10.42 knows; Python 3.11's unicodedata is the same version) but assigned in
      the Unicode version of tokenizers' Oniguruma. The regex translation adds them to \\p{..}.
    - kNormalizationKnown: the code points tokenizers' NFC/NFD/NFKC/NFKD have data for; the C++
      normalizer treats all others as inert, whatever utf8proc knows about them."""
    import unicodedata
    from tokenizers import Regex
    assert unicodedata.unidata_version == "14.0.0", unicodedata.unidata_version
    candidates = [c for c in range(0x110000)
                  if unicodedata.category(chr(c)) == "Cn" and not (0xD800 <= c <= 0xDFFF)]
    text = "".join(chr(c) for c in candidates)
    category = {}
    for gc in GENERAL_CATEGORIES:
        split = pre_tokenizers.Split(Regex("\\p{" + gc + "}"), behavior="isolated")
        chunk = 20000
        for i in range(0, len(text), chunk):
            for piece, _ in split.pre_tokenize_str(text[i:i + chunk]):
                if len(piece) == 1 and re_matches(piece, gc):
                    assert ord(piece) not in category, (hex(ord(piece)), gc)
                    category[ord(piece)] = gc
    additions = []
    for c in sorted(category):
        if additions and additions[-1][1] == c - 1 and additions[-1][2] == category[c]:
            additions[-1][1] = c
        else:
            additions.append([c, c, category[c]])
    known = ranges_of(normalization_known())
    lines = [
        "// Generated by tools/reference/tokenizer_goldens.py --unicode-tables-out; do not edit.",
        f"// Measured with tokenizers {tokenizers.__version__} (see that script for how).",
        "#pragma once",
        "",
        "#include <cstdint>",
        "",
        "namespace loom::text::detail {",
        "",
        "struct UnicodeAddition {",
        "  char32_t first, last;",
        "  char category[3];  // two-letter general category",
        "};",
        "",
        f"// General categories of the {len(category)} code points unassigned in Unicode 14.0 (Debian 12's",
        "// PCRE2 10.42) but assigned in the Unicode version of tokenizers' Oniguruma regexes.",
        "// clang-format off",
        "inline constexpr UnicodeAddition kUnicodeAdditions[] = {",
    ]
    for lo, hi, gc in additions:
        lines.append(f"    {{0x{lo:05X}, 0x{hi:05X}, \"{gc}\"}},")
    lines += [
        "};",
        "// clang-format on",
        "",
        "struct CodePointRange {",
        "  char32_t first, last;",
        "};",
        "",
        "// Code points (>= U+0080) that tokenizers' Unicode normalizers have data for: a decomposition,",
        "// a non-zero combining class, or a place in a canonical decomposition. Its tables predate",
        "// utf8proc's; code points outside these ranges are left alone, like tokenizers does.",
        "// clang-format off",
        "inline constexpr CodePointRange kNormalizationKnown[] = {",
    ]
    for k in range(0, len(known), 4):
        lines.append("    " + " ".join(f"{{0x{lo:05X}, 0x{hi:05X}}}," for lo, hi in known[k:k + 4]))
    lines += ["};", "// clang-format on", "", "}  // namespace loom::text::detail", ""]
    pathlib.Path(path).write_text("\n".join(lines), encoding="utf-8")
    print(f"{len(category)} added code points in {len(additions)} ranges, {len(known)} normalization ranges -> {path}")


def re_matches(piece, gc):
    """Whether a single-character split piece is a match of \\p{gc} (isolated splits also return
    the gaps): checked by splitting the character alone with behavior 'removed'."""
    from tokenizers import Regex
    split = pre_tokenizers.Split(Regex("\\p{" + gc + "}"), behavior="removed")
    return split.pre_tokenize_str(piece) == []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", default=str(DEFAULT_TOKENIZER))
    ap.add_argument("--out", default=str(CORPUS / "goldens.json"))
    ap.add_argument("--no-variants", action="store_true")
    ap.add_argument("--bench-out", help="write the benchmark corpus (JSONL) here instead of goldens")
    ap.add_argument("--bench-mb", type=float, default=8.0)
    ap.add_argument("--unicode-tables-out", help="write the measured Unicode tables (C++ header) here")
    args = ap.parse_args()
    if args.unicode_tables_out:
        unicode_tables(args.unicode_tables_out)
        return

    tok_path = pathlib.Path(args.tokenizer).resolve()
    base_json = json.loads(tok_path.read_text(encoding="utf-8"))
    tok = Tokenizer.from_file(str(tok_path))
    docs = hand_docs()
    docs += generated_docs(docs, specials_of(base_json))

    if args.bench_out:
        bench_corpus(docs, args.bench_out, args.bench_mb)
        return

    try:
        tok_ref = str(tok_path.relative_to(FIXTURES))
    except ValueError:
        tok_ref = str(tok_path)
    rng = random.Random(SEED + 2)
    out = {
        "generator": "tools/reference/tokenizer_goldens.py",
        "tokenizers_version": tokenizers.__version__,
        "tokenizer": tok_ref,
        "vocab_size": tok.get_vocab_size(with_added_tokens=True),
        "cases": [doc_case(tok, n, t) for n, t in docs],
        "vocab": vocab_table(tok, base_json),
        "decode_cases": decode_cases(tok, rng, 100),
        "variant_docs": [],
        "variants": [],
    }
    if not args.no_variants:
        vdocs = variant_docs(docs)
        out["variant_docs"] = [{"name": n, "text": t} for n, t in vdocs]
        for name, spec, indices in variants(base_json, vdocs):
            vjson, how = build_variant(base_json, spec)
            vtok = Tokenizer.from_str(json.dumps(vjson))
            has_post = vjson.get("post_processor") is not None
            entry = {"name": name, **how,
                     "cases": [doc_case(vtok, vdocs[i][0], vdocs[i][1], post=has_post, doc_index=i) for i in indices],
                     "decode_cases": decode_cases(vtok, rng, 6)}
            out["variants"].append(entry)
    text = json.dumps(out, ensure_ascii=False, separators=(",", ":"))
    pathlib.Path(args.out).write_text(text + "\n", encoding="utf-8")
    n_ids = sum(len(c["ids"]) for c in out["cases"])
    print(f"{len(out['cases'])} cases, {n_ids} ids, {len(out['variants'])} variants, "
          f"{len(text.encode('utf-8')) / 1e6:.2f} MB -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
