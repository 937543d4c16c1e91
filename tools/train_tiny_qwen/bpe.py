"""A small byte-level BPE tokenizer: trainer, encoder, decoder, and a writer for Hugging Face's
tokenizer.json, in the same shape as Qwen's file, so flashport's C++ tokenizer (and transformers'
tokenizers) load it through the same code path as a real Qwen model.

Why our own: this machine has no `tokenizers` library, and the point of the tiny model is to
exercise the engine's real loader, so the file uses the same components as Qwen3's:
  normalizer     NFC
  pre_tokenizer  Sequence[Split(Qwen's regex, Isolated), ByteLevel(use_regex false)]
  model          BPE (vocab + ranked merges, no unk, no dropout)
  decoder        ByteLevel
  added_tokens   <|endoftext|>, <|im_start|>, <|im_end|> (special)

Encoding follows tokenizers' BPE exactly as the C++ side does (src/tokenizer/bpe.cpp): within one
pre-token, repeatedly merge the adjacent pair with the lowest merge rank, leftmost first.
"""
import json
import unicodedata
from collections import Counter

import regex  # Debian's python3-regex: \p{L} / \p{N} classes, like PCRE2 in UCP mode

# Qwen2/Qwen2.5/Qwen3's pre-tokenizer regex, verbatim from their tokenizer.json: contractions, a word
# with at most one leading non-letter (so " the" and ",and" stay one piece), single digits,
# punctuation runs, newlines, and whitespace that is not followed by a non-space.
QWEN_SPLIT_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_SPLIT = regex.compile(QWEN_SPLIT_REGEX)

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable character map, which tokenizer.json's vocab and merges
    are written in: printable Latin-1 bytes map to themselves, the rest to U+0100 onwards (space
    becomes 'Ġ', newline 'Ċ')."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}


def pre_tokenize(text):
    """NFC, then the regex split (Isolated: matches are pieces, and so is any text between matches,
    although Qwen's regex leaves none), each piece spelled in the byte-level alphabet."""
    text = unicodedata.normalize("NFC", text)
    out, last = [], 0
    for m in _SPLIT.finditer(text):
        if m.start() > last:
            out.append(text[last:m.start()])
        if m.end() > m.start():
            out.append(m.group())
        last = m.end()
    if last < len(text):
        out.append(text[last:])
    return ["".join(BYTE_TO_CHAR[b] for b in piece.encode("utf-8")) for piece in out]


def train(text, vocab_size, log=print):
    """Learns merges from `text` until the vocabulary holds vocab_size tokens counting the specials.
    Returns the merge list [(a, b), ...] in rank order. Ids (see Tokenizer): bytes 0-255 in byte
    order, then each merge's new token in rank order, then the special tokens.

    The classic algorithm with incremental pair counts: count each distinct pre-token once with its
    frequency; each round merges the most frequent adjacent pair (ties: the smallest pair, so the
    result is deterministic) and updates only the words that contain it."""
    n_tokens = vocab_size - len(SPECIAL_TOKENS)
    word_freq = Counter()
    # Line by line (each with its newline) to keep the regex's work small; the pieces are the same
    # as for the whole text, since a piece never spans a newline and what follows it.
    for line in text.splitlines(keepends=True):
        word_freq.update(pre_tokenize(line))
    words = [list(w) for w in word_freq]
    freqs = list(word_freq.values())

    pair_counts = Counter()
    where = {}  # pair -> indices of words containing it
    for i, w in enumerate(words):
        for p in zip(w, w[1:]):
            pair_counts[p] += freqs[i]
            where.setdefault(p, set()).add(i)

    merges = []
    tokens = set(BYTE_TO_CHAR.values())
    while len(tokens) < n_tokens and pair_counts:
        top = max(pair_counts.values())
        if top < 2:
            break  # merging a pair seen once only memorises; stop early (vocab is then smaller)
        best = min(p for p, c in pair_counts.items() if c == top)
        merges.append(best)
        a, b = best
        ab = a + b
        tokens.add(ab)  # a merge may rebuild an existing token ("ab"+"c" after "a"+"bc"): no new id
        for i in where.pop(best):
            w, f = words[i], freqs[i]
            for p in zip(w, w[1:]):  # remove the word's old pairs...
                pair_counts[p] -= f
                if pair_counts[p] == 0:
                    del pair_counts[p]
            merged, j = [], 0
            while j < len(w):
                if j + 1 < len(w) and w[j] == a and w[j + 1] == b:
                    merged.append(ab)
                    j += 2
                else:
                    merged.append(w[j])
                    j += 1
            words[i] = merged
            for p in zip(merged, merged[1:]):  # ...and add its new ones
                pair_counts[p] += f
                where.setdefault(p, set()).add(i)
        if len(merges) % 500 == 0:
            log(f"  bpe: {len(merges)} merges, last {a!r}+{b!r} (count {top})")
    return merges


class Tokenizer:
    def __init__(self, merges):
        self.merges = [tuple(m) for m in merges]
        self.vocab = {BYTE_TO_CHAR[b]: b for b in range(256)}
        for a, b in self.merges:
            self.vocab.setdefault(a + b, len(self.vocab))
        self.specials = {t: len(self.vocab) + k for k, t in enumerate(SPECIAL_TOKENS)}
        self.rank = {m: r for r, m in enumerate(self.merges)}
        self.id_to_token = {i: t for t, i in self.vocab.items()}
        self.id_to_token.update({i: t for t, i in self.specials.items()})
        self._cache = {}

    @property
    def vocab_size(self):
        return len(self.vocab) + len(self.specials)

    def _bpe(self, word):
        if word in self._cache:
            return self._cache[word]
        syms = list(word)
        while len(syms) > 1:
            # The lowest-ranked adjacent pair, leftmost on ties (tokenizers' priority queue order).
            best, best_rank = None, None
            for j in range(len(syms) - 1):
                r = self.rank.get((syms[j], syms[j + 1]))
                if r is not None and (best_rank is None or r < best_rank):
                    best, best_rank = j, r
            if best is None:
                break
            syms[best:best + 2] = [syms[best] + syms[best + 1]]
        ids = [self.vocab[s] for s in syms]
        self._cache[word] = ids
        return ids

    def encode(self, text):
        """Ids of `text`; special-token text becomes the special token (tokenizers' default)."""
        ids = []
        pattern = "(" + "|".join(regex.escape(t) for t in SPECIAL_TOKENS) + ")"
        for k, part in enumerate(regex.split(pattern, text)):
            if k % 2 == 1:
                ids.append(self.specials[part])
            elif part:
                for w in pre_tokenize(part):
                    ids.extend(self._bpe(w))
        return ids

    def decode(self, ids):
        out = bytearray()
        for i in ids:
            t = self.id_to_token[i]
            out += t.encode("utf-8") if t in self.specials else bytes(CHAR_TO_BYTE[c] for c in t)
        return out.decode("utf-8", errors="replace")

    def tokenizer_json(self):
        """Hugging Face tokenizer.json, laid out as Qwen's (same component settings)."""
        byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
        return {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": [
                {"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                 "normalized": False, "special": True}
                for t, i in self.specials.items()
            ],
            "normalizer": {"type": "NFC"},
            "pre_tokenizer": {
                "type": "Sequence",
                "pretokenizers": [
                    {"type": "Split", "pattern": {"Regex": QWEN_SPLIT_REGEX}, "behavior": "Isolated", "invert": False},
                    byte_level,
                ],
            },
            "post_processor": byte_level,
            "decoder": byte_level,
            "model": {
                "type": "BPE",
                "dropout": None,
                "unk_token": None,
                "continuing_subword_prefix": "",
                "end_of_word_suffix": "",
                "fuse_unk": False,
                "byte_fallback": False,
                "ignore_merges": False,
                "vocab": self.vocab,
                "merges": [[a, b] for a, b in self.merges],
            },
        }

    def tokenizer_config_json(self, model_max_length):
        """tokenizer_config.json as Qwen's (no chat template: this is not a chat model)."""
        return {
            "add_bos_token": False,
            "add_prefix_space": False,
            "added_tokens_decoder": {
                str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                         "single_word": False, "special": True}
                for t, i in self.specials.items()
            },
            "bos_token": None,
            "clean_up_tokenization_spaces": False,
            "eos_token": "<|endoftext|>",
            "errors": "replace",
            "model_max_length": model_max_length,
            "pad_token": "<|endoftext|>",
            "split_special_tokens": False,
            "tokenizer_class": "Qwen2Tokenizer",
            "unk_token": None,
        }

    @staticmethod
    def load(path):
        with open(path, encoding="utf-8") as f:
            j = json.load(f)
        return Tokenizer([tuple(m) for m in j["model"]["merges"]])
