#!/usr/bin/env python3
"""Build odmoe's tiny trained Mixtral-style test model and its golden data.

Run by hand (not in CI); everything is rebuilt from scratch, deterministically
seeded, from English text shipped by Debian packages.  See docs/tiny_model.md.

    apt-get install -y fortunes fortunes-min
    pip install torch transformers sentencepiece gguf numpy tokenizers protobuf
    HF_HUB_OFFLINE=1 python3 scripts/make_tiny_model.py            # all stages
    HF_HUB_OFFLINE=1 python3 scripts/make_tiny_model.py --stages export,golden

Stages (default: all, in this order):
  corpus     fortunes (+ /usr/share/common-licenses) -> train/held-out split;
             writes tests/data/heldout.txt (held-out fortunes, separated by
             lines containing only "%").
  tokenizer  SentencePiece BPE (Llama/Mixtral-like settings), vocab 2048;
             writes models/tokenizer.model and an HF LlamaTokenizer dir.
  train      MixtralForCausalLM, 8 experts, top-2, AdamW for a wall-clock
             budget (--minutes 33; LR schedule follows elapsed time) or for a
             fixed --steps N (bit-reproducible).  1 torch thread by default
             (--threads).  Keeps the checkpoint with the best held-out loss
             (evaluated every --eval-every steps).  Writes the loss curve to
             models/tiny-mixtral-loss.tsv.
  export     rounds every weight to float16 (the model used afterwards holds
             exactly the GGUF's values, in float32) and writes
             models/tiny-mixtral-f16.gguf plus the 2-layer fixtures
             tests/data/tiny-mixtral-2layer.gguf (3-D expert tensors) and
             tests/data/tiny-mixtral-2layer-legacy.gguf (one tensor per
             expert).
  golden     greedy/top-5/routing golden data from transformers (float32,
             eager attention) and the SentencePiece tokenizer golden.
  gpt2       tiny byte-level BPE (HF tokenizers) -> tests/data/gpt2-tokenizer.gguf
             and tests/data/golden/tokenizer_gpt2.json.
  stats      expert-load table over the held-out text, sample output.

Scratch (not in the repo): /work/scratch/tiny-mixtral-hf (HF checkpoint,
tokenizer, corpus files, training log).  Nothing is loaded from a hub.
"""

import argparse
import gzip
import hashlib
import json
import math
import os
import random
import re
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
MODELS = REPO / "models"
TESTDATA = REPO / "tests" / "data"
GOLDEN = TESTDATA / "golden"
FORTUNE_DIR = Path("/usr/share/games/fortunes")
LICENSE_DIR = Path("/usr/share/common-licenses")

SEED = 1234
VOCAB = 2048
# Model hyper-parameters.  Sizes are chosen so that the full model is ~8 MB in
# F16 and the 2-layer fixtures stay below 3 MB each (token_embd + output alone
# are 2 * 2048 * 128 * 2 bytes = 1 MiB).
CFG = dict(
    vocab_size=VOCAB,
    hidden_size=128,
    intermediate_size=128,      # per expert
    num_hidden_layers=8,
    num_attention_heads=8,      # head_dim 16
    num_key_value_heads=2,      # GQA 4:1
    head_dim=16,
    num_local_experts=8,
    num_experts_per_tok=2,
    max_position_embeddings=512,
    rms_norm_eps=1e-5,
    rope_theta=10000.0,
    sliding_window=None,
    tie_word_embeddings=False,
    router_aux_loss_coef=0.01,
    router_jitter_noise=0.0,
    output_router_logits=True,
    hidden_act="silu",
    initializer_range=0.02,
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=None,
    attention_dropout=0.0,
)

# Fortune files skipped: ASCII drawings are not prose.  Offensive fortunes
# live in a separate Debian package (fortunes-off) that is not used.
SKIP_FORTUNES = {"ascii-art"}


# --------------------------------------------------------------------------
# corpus
# --------------------------------------------------------------------------
def clean_text(t: str) -> str:
    t = re.sub(r".\x08", "", t)          # overstriking (x\bx, _\bx)
    t = t.replace("\r", "")
    t = re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", "", t)
    lines = [ln.rstrip() for ln in t.split("\n")]
    return "\n".join(lines).strip("\n")


def read_fortunes():
    docs = []
    for f in sorted(FORTUNE_DIR.iterdir()):
        if f.suffix in (".dat", ".u8") or f.name in SKIP_FORTUNES or not f.is_file():
            continue
        raw = f.read_bytes().decode("utf-8", errors="replace")
        for chunk in re.split(r"^%[ \t]*$", raw, flags=re.M):
            c = clean_text(chunk)
            if len(c.strip()) >= 8:
                docs.append(c)
    return docs


def read_licenses():
    docs = []
    if not LICENSE_DIR.is_dir():
        return docs
    for f in sorted(LICENSE_DIR.iterdir()):
        if f.is_symlink() or not f.is_file():
            continue
        txt = clean_text(f.read_text("utf-8", errors="replace"))
        # one document per paragraph group of ~1500 chars
        cur = ""
        for para in re.split(r"\n\s*\n", txt):
            para = para.strip("\n")
            if not para.strip():
                continue
            cur = para if not cur else cur + "\n\n" + para
            if len(cur) > 1500:
                docs.append(cur)
                cur = ""
        if cur:
            docs.append(cur)
    return docs


def is_heldout(doc: str) -> bool:
    # deterministic ~2% split by content hash
    return int(hashlib.md5(doc.encode("utf-8")).hexdigest()[:8], 16) % 50 == 0


def stage_corpus(a):
    fort = read_fortunes()
    seen, train, held = set(), [], []
    for d in fort:
        if d in seen:
            continue
        seen.add(d)
        (held if is_heldout(d) else train).append(d)
    lic = read_licenses()
    train_all = train + lic
    scratch = Path(a.scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "train_docs.json").write_text(json.dumps(train_all), "utf-8")
    (scratch / "heldout_docs.json").write_text(json.dumps(held), "utf-8")
    TESTDATA.mkdir(parents=True, exist_ok=True)
    with open(TESTDATA / "heldout.txt", "w", encoding="utf-8") as fh:
        fh.write("\n%\n".join(held) + "\n")
    print(f"[corpus] fortunes {len(fort)} unique {len(seen)} -> train {len(train)} + "
          f"{len(lic)} license chunks, held-out {len(held)}; "
          f"train chars {sum(map(len, train_all))}, held-out chars {sum(map(len, held))}")


def load_docs(a):
    s = Path(a.scratch)
    return (json.loads((s / "train_docs.json").read_text("utf-8")),
            json.loads((s / "heldout_docs.json").read_text("utf-8")))


# --------------------------------------------------------------------------
# tokenizer
# --------------------------------------------------------------------------
def stage_tokenizer(a):
    import sentencepiece as spm
    train, _ = load_docs(a)
    scratch = Path(a.scratch)
    lines = []
    for d in train:
        lines.extend(ln for ln in d.split("\n") if ln.strip())
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_prefix=str(scratch / "spm"),
        model_type="bpe",
        vocab_size=VOCAB,
        byte_fallback=True,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        add_dummy_prefix=True,
        split_digits=True,
        allow_whitespace_only_pieces=True,
        character_coverage=0.99995,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        unk_piece="<unk>", bos_piece="<s>", eos_piece="</s>",
        max_sentence_length=16384,
        num_threads=1,
        input_sentence_size=0,
        shuffle_input_sentence=False,
        minloglevel=2,
    )
    MODELS.mkdir(parents=True, exist_ok=True)
    data = (scratch / "spm.model").read_bytes()
    (MODELS / "tokenizer.model").write_bytes(data)
    make_hf_tokenizer_dir(a)
    print(f"[tokenizer] vocab {VOCAB}, tokenizer.model {len(data)} bytes")


def make_hf_tokenizer_dir(a):
    hf = Path(a.scratch) / "hf-tokenizer"
    hf.mkdir(parents=True, exist_ok=True)
    (hf / "tokenizer.model").write_bytes((MODELS / "tokenizer.model").read_bytes())
    # Mixtral-like tokenizer_config (legacy=True like mistralai/Mixtral-8x7B)
    (hf / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "LlamaTokenizer",
        "add_bos_token": True, "add_eos_token": False, "legacy": True,
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
        "add_prefix_space": True, "clean_up_tokenization_spaces": False,
        "model_max_length": CFG["max_position_embeddings"],
    }, indent=1))
    for stale in ("tokenizer.json", "special_tokens_map.json"):
        if (hf / stale).exists():
            (hf / stale).unlink()


def load_hf_tokenizer(a):
    from transformers import LlamaTokenizer
    return LlamaTokenizer.from_pretrained(str(Path(a.scratch) / "hf-tokenizer"))


def load_sp():
    import sentencepiece as spm
    return spm.SentencePieceProcessor(model_file=str(MODELS / "tokenizer.model"))


# --------------------------------------------------------------------------
# model / training
# --------------------------------------------------------------------------
def make_config(n_layers=None, impl="eager"):
    from transformers import MixtralConfig
    c = dict(CFG)
    if n_layers is not None:
        c["num_hidden_layers"] = n_layers
    cfg = MixtralConfig(**c)
    cfg._attn_implementation = "eager"
    try:
        cfg._experts_implementation = impl
    except Exception:
        pass
    return cfg


def encode_docs(sp, docs):
    out = []
    for ids in sp.encode(docs):
        out.append([1] + ids + [2])
    return out


def stage_train(a):
    import torch
    from transformers import MixtralForCausalLM
    torch.set_num_threads(a.threads)
    torch.manual_seed(SEED)
    random.seed(SEED)
    sp = load_sp()
    train_docs, held_docs = load_docs(a)
    rng = random.Random(SEED)
    order = list(range(len(train_docs)))
    rng.shuffle(order)
    tr = encode_docs(sp, [train_docs[i] for i in order])
    stream = torch.tensor([t for d in tr for t in d], dtype=torch.long)
    held = torch.tensor([t for d in encode_docs(sp, held_docs) for t in d], dtype=torch.long)
    T, B = a.seq_len, a.batch
    print(f"[train] train tokens {stream.numel()}, held-out tokens {held.numel()}, "
          f"seq {T}, batch {B}, steps {a.steps or '-'}, minutes {a.minutes}")

    cfg = make_config(impl=a.experts_impl)
    model = MixtralForCausalLM(cfg)
    model.train()
    nparam = sum(p.numel() for p in model.parameters())
    print(f"[train] parameters {nparam}")
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (no_decay if p.ndim < 2 else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    warm = 100

    budget = a.minutes * 60.0 if a.minutes > 0 else float("inf")
    max_steps = a.steps if a.steps > 0 else 10 ** 9

    def progress(s, elapsed):
        # fraction of the run done: by steps (--steps) or by wall time (--minutes)
        return min(1.0, max((s - warm) / max(1, max_steps - warm), elapsed / budget))

    def lr_at(s, elapsed=0.0):
        if s < warm:
            return a.lr * (s + 1) / warm
        p = progress(s, elapsed)
        return a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))

    def heldout_loss(m):
        m.eval()
        tot, n = 0.0, 0
        with torch.no_grad():
            hs = held[: (held.numel() - 1) // T * T + 1]
            xs = hs[:-1].view(-1, T)
            ys = hs[1:].view(-1, T)
            for i in range(0, xs.shape[0], 16):
                out = m(input_ids=xs[i:i + 16], output_router_logits=False)
                lp = torch.nn.functional.cross_entropy(
                    out.logits.reshape(-1, out.logits.shape[-1]), ys[i:i + 16].reshape(-1), reduction="sum")
                tot += lp.item()
                n += ys[i:i + 16].numel()
        m.train()
        return tot / n

    gen = torch.Generator().manual_seed(SEED)
    curve = []
    best = (float("inf"), -1, None)
    t0 = time.time()
    ema = None
    step = 0
    while True:
        elapsed = time.time() - t0
        last = step + 1 >= max_steps or elapsed >= budget
        lr = lr_at(step, elapsed)
        for g in opt.param_groups:
            g["lr"] = lr
        starts = torch.randint(0, stream.numel() - T - 1, (B,), generator=gen)
        x = torch.stack([stream[s:s + T] for s in starts.tolist()])
        y = torch.stack([stream[s + 1:s + T + 1] for s in starts.tolist()])
        out = model(input_ids=x, labels=y, output_router_logits=True)
        # HF shifts labels inside loss_function; we pass pre-shifted targets,
        # so compute the CE directly instead.
        ce = torch.nn.functional.cross_entropy(out.logits.reshape(-1, VOCAB), y.reshape(-1))
        loss = ce + cfg.router_aux_loss_coef * out.aux_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        ema = ce.item() if ema is None else 0.98 * ema + 0.02 * ce.item()
        rec = {"step": step + 1, "time_s": round(time.time() - t0, 1), "train_ce": round(ce.item(), 4),
               "train_ce_ema": round(ema, 4), "aux": round(out.aux_loss.item(), 4), "lr": lr}
        if (step + 1) % a.eval_every == 0 or last:
            hl = heldout_loss(model)
            rec["heldout_ce"] = round(hl, 4)
            if hl < best[0]:
                best = (hl, step + 1, {k: v.detach().clone() for k, v in model.state_dict().items()})
            print(f"[train] step {step+1} t={rec['time_s']}s ce={ce.item():.3f} ema={ema:.3f} "
                  f"aux={out.aux_loss.item():.3f} heldout={hl:.3f} lr={lr:.2e}", flush=True)
        curve.append(rec)
        step += 1
        if last:
            break
    dt = time.time() - t0
    print(f"[train] done: {step} steps in {dt:.0f}s; best held-out {best[0]:.4f} at step {best[1]}")
    model.load_state_dict(best[2])
    out_dir = Path(a.scratch) / "hf-float32"
    model.save_pretrained(str(out_dir))
    (Path(a.scratch) / "loss_curve.json").write_text(json.dumps(
        {"train_seconds": dt, "steps": step, "best_step": best[1], "best_heldout_ce": best[0], "curve": curve}))
    write_curve_tsv(curve)


def write_curve_tsv(curve):
    MODELS.mkdir(parents=True, exist_ok=True)
    with open(MODELS / "tiny-mixtral-loss.tsv", "w") as fh:
        fh.write("step\ttime_s\ttrain_ce_ema\theldout_ce\n")
        for r in curve:
            if "heldout_ce" in r:
                fh.write(f"{r['step']}\t{r['time_s']}\t{r['train_ce_ema']}\t{r['heldout_ce']}\n")


# --------------------------------------------------------------------------
# float16 rounding + GGUF export
# --------------------------------------------------------------------------
def load_rounded_model(a, n_layers=None):
    """float32 model holding exactly the float16-rounded weights."""
    import torch
    from transformers import MixtralForCausalLM
    src = Path(a.scratch) / "hf-float32"
    m = MixtralForCausalLM.from_pretrained(str(src), dtype=torch.float32)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(p.half().float())
    if n_layers is not None:
        m.model.layers = m.model.layers[:n_layers]
        m.config.num_hidden_layers = n_layers
    m.config._attn_implementation = "eager"
    try:
        m.config._experts_implementation = "eager"
        for l in m.model.layers:
            l.mlp.experts.config = m.config  # not all versions keep a ref
    except Exception:
        pass
    m.eval()
    return m


def hf_permute(w, n_head):
    """llama.cpp's converter permutation for HF Q/K weights: within each head,
    rows ordered [first half | second half] (rotate-half RoPE) become interleaved
    pairs (x0, x_{d/2}), (x1, x_{d/2+1}), ... for GGML's "normal" RoPE."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2)
            .reshape(w.shape))


def gguf_tensors(model, layout="3d"):
    """(name, numpy array) in GGUF naming; numpy shapes are the reverse of ggml ne."""
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    cfg = model.config
    nh, nkv, ff = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.intermediate_size
    f16 = lambda x: np.ascontiguousarray(x.astype(np.float16))  # noqa: E731
    f32 = lambda x: np.ascontiguousarray(x.astype(np.float32))  # noqa: E731
    out = [("token_embd.weight", f16(sd["model.embed_tokens.weight"]))]
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        b = f"blk.{i}."
        out.append((b + "attn_norm.weight", f32(sd[p + "input_layernorm.weight"])))
        out.append((b + "attn_q.weight", f16(hf_permute(sd[p + "self_attn.q_proj.weight"], nh))))
        out.append((b + "attn_k.weight", f16(hf_permute(sd[p + "self_attn.k_proj.weight"], nkv))))
        out.append((b + "attn_v.weight", f16(sd[p + "self_attn.v_proj.weight"])))
        out.append((b + "attn_output.weight", f16(sd[p + "self_attn.o_proj.weight"])))
        out.append((b + "ffn_norm.weight", f32(sd[p + "post_attention_layernorm.weight"])))
        out.append((b + "ffn_gate_inp.weight", f32(sd[p + "mlp.gate.weight"])))  # router: F32 like the converter
        gu = sd[p + "mlp.experts.gate_up_proj"]          # [E, 2*ff, hidden]: gate rows then up rows
        gate, up = gu[:, :ff, :], gu[:, ff:, :]          # HF w1, w3: [E, ff, hidden]
        down = sd[p + "mlp.experts.down_proj"]            # HF w2: [E, hidden, ff]
        if layout == "3d":
            out.append((b + "ffn_gate_exps.weight", f16(gate)))
            out.append((b + "ffn_down_exps.weight", f16(down)))
            out.append((b + "ffn_up_exps.weight", f16(up)))
        else:
            for e in range(gate.shape[0]):
                out.append((b + f"ffn_gate.{e}.weight", f16(gate[e])))
                out.append((b + f"ffn_down.{e}.weight", f16(down[e])))
                out.append((b + f"ffn_up.{e}.weight", f16(up[e])))
    out.append(("output_norm.weight", f32(sd["model.norm.weight"])))
    out.append(("output.weight", f16(sd["lm_head.weight"])))
    return out


def spm_vocab():
    """tokens, scores, types exactly like llama.cpp's _set_vocab_sentencepiece."""
    sp = load_sp()
    toks, scores, types = [], [], []
    for i in range(sp.vocab_size()):
        toks.append(sp.id_to_piece(i).encode("utf-8"))
        scores.append(float(sp.get_score(i)))
        t = 1
        if sp.is_unknown(i):
            t = 2
        elif sp.is_control(i):
            t = 3
        elif sp.is_unused(i):
            t = 5
        elif sp.is_byte(i):
            t = 6
        types.append(t)
    return toks, scores, types


def write_model_gguf(model, path, name, layout="3d"):
    import gguf
    cfg = model.config
    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_name(name)
    w.add_file_type(1)  # LlamaFileType.MOSTLY_F16
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_rope_dimension_count(cfg.head_dim)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_rope_freq_base(float(get_rope_theta(cfg)))
    w.add_expert_count(cfg.num_local_experts)
    w.add_expert_used_count(cfg.num_experts_per_tok)
    w.add_vocab_size(cfg.vocab_size)
    toks, scores, types = spm_vocab()
    assert len(toks) == cfg.vocab_size
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    for n, arr in gguf_tensors(model, layout):
        w.add_tensor(n, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"[export] {path} {path.stat().st_size} bytes")


def get_rope_theta(cfg):
    rp = getattr(cfg, "rope_parameters", None)
    if isinstance(rp, dict) and "rope_theta" in rp:
        return rp["rope_theta"]
    return cfg.rope_theta


def stage_export(a):
    import torch
    torch.set_num_threads(a.threads)
    m = load_rounded_model(a)
    out = Path(a.hf_out)
    m.save_pretrained(str(out))           # rounded weights (float32 container)
    tok = load_hf_tokenizer(a)
    tok.save_pretrained(str(out))
    (out / "tokenizer.model").write_bytes((MODELS / "tokenizer.model").read_bytes())
    write_model_gguf(m, MODELS / "tiny-mixtral-f16.gguf", "odmoe tiny-mixtral 8x")
    m2 = load_rounded_model(a, n_layers=2)
    write_model_gguf(m2, TESTDATA / "tiny-mixtral-2layer.gguf", "odmoe tiny-mixtral 2-layer", "3d")
    write_model_gguf(m2, TESTDATA / "tiny-mixtral-2layer-legacy.gguf", "odmoe tiny-mixtral 2-layer legacy", "legacy")
    verify_gguf(m)


def verify_gguf(model):
    """Read the GGUF back and check every tensor against the rounded model."""
    import gguf
    r = gguf.GGUFReader(str(MODELS / "tiny-mixtral-f16.gguf"))
    ref = dict(gguf_tensors(model))
    for t in r.tensors:
        arr = np.asarray(t.data).reshape(ref[t.name].shape)
        assert arr.dtype == ref[t.name].dtype, t.name
        assert np.array_equal(arr, ref[t.name]), t.name
    # un-permuting Q must give back HF's q_proj exactly
    q = np.asarray([t for t in r.tensors if t.name == "blk.0.attn_q.weight"][0].data)
    hq = model.model.layers[0].self_attn.q_proj.weight.detach().numpy().astype(np.float16)
    nh = model.config.num_attention_heads
    unperm = q.reshape(nh, hq.shape[0] // nh // 2, 2, -1).swapaxes(1, 2).reshape(hq.shape)
    assert np.array_equal(unperm, hq)
    print(f"[export] verified {len(r.tensors)} tensors")


# --------------------------------------------------------------------------
# golden data
# --------------------------------------------------------------------------
GOLDEN_PROMPTS = [
    "The",
    "Once upon a time",
    "A computer is",
    "The meaning of life is",
    "If you want to be happy,",
    "Q: What is the difference between a duck?\nA:",
    "It is a truth universally acknowledged that",
    "Never trust a man who",
    "You will be",
    "In the beginning was the Word, and the Word was with God, and",
]


def route(router_logits, k):
    import torch
    probs = torch.softmax(router_logits.float(), dim=-1)
    w, idx = torch.topk(probs, k, dim=-1)   # sorted descending
    w = w / w.sum(dim=-1, keepdim=True)
    return idx, w


def greedy_case(m, tok, prompt_ids, n_gen):
    import torch
    ids = list(prompt_ids)
    gen, top5, first_logits = [], [], None
    with torch.no_grad():
        for step in range(n_gen):
            out = m(input_ids=torch.tensor([ids]), output_router_logits=False, use_cache=False)
            lg = out.logits[0, -1].float()
            if step == 0:
                first_logits = [float(x) for x in lg]
            v, ix = torch.topk(lg, 5)
            top5.append([[int(i), float(x)] for i, x in zip(ix, v)])
            nxt = int(torch.argmax(lg))
            gen.append(nxt)
            ids.append(nxt)
        full = list(prompt_ids) + gen[:-1]
        out = m(input_ids=torch.tensor([full]), output_router_logits=True, use_cache=False)
        k = m.config.num_experts_per_tok
        per_layer = [route(rl.reshape(len(full), -1), k) for rl in out.router_logits]
        experts = [[[int(e) for e in per_layer[l][0][p]] for l in range(len(per_layer))] for p in range(len(full))]
        weights = [[[float(x) for x in per_layer[l][1][p]] for l in range(len(per_layer))] for p in range(len(full))]
        # consistency: last-position logits of this forward == last greedy step
        assert int(torch.argmax(out.logits[0, -1])) == gen[-1]
    return gen, top5, experts, weights, first_logits


def stage_golden(a):
    import torch
    torch.set_num_threads(a.threads)
    m = load_rounded_model(a)
    tok = load_hf_tokenizer(a)
    sp = load_sp()
    _, held = load_docs(a)
    prompts = list(GOLDEN_PROMPTS)
    # three prompts from held-out text: ~20, ~40 and ~60 tokens
    hp = [d for d in held if "\t" not in d]
    for want in (20, 40, 60):
        for d in hp:
            ids = sp.encode(d)
            if len(ids) >= want + 5:
                prompts.append(sp.decode(ids[:want]))
                hp.remove(d)
                break
    cases = []
    for p in prompts:
        pid = tok(p, add_special_tokens=True)["input_ids"]
        assert pid == [1] + sp.encode(p), p
        gen, top5, experts, weights, first = greedy_case(m, tok, pid, 64)
        cases.append({"prompt": p, "prompt_ids": pid, "greedy_ids": gen,
                      "greedy_text": sp.decode(gen), "eos_in_greedy": 2 in gen,
                      "top5": top5, "experts": experts, "routing_weights": weights,
                      "first_logits": first})
        print(f"[golden] {len(pid):3d} tok  {p[:40]!r} -> {sp.decode(gen)[:80]!r}")
    GOLDEN.mkdir(parents=True, exist_ok=True)
    doc = {"model_file": "models/tiny-mixtral-f16.gguf",
           "n_layer": m.config.num_hidden_layers, "n_expert": m.config.num_local_experts,
           "top_k": m.config.num_experts_per_tok, "n_vocab": m.config.vocab_size,
           "n_gen": 64, "eos_stopping": False, "cases": cases}
    with open(GOLDEN / "tiny_mixtral_golden.json", "w") as fh:
        json.dump(doc, fh, separators=(",", ":"))
    # 2-layer fixture golden: first-step logits + routing of the truncated model
    m2 = load_rounded_model(a, n_layers=2)
    cases2 = []
    for p in prompts[:4]:
        pid = [1] + sp.encode(p)
        gen, top5, experts, weights, first = greedy_case(m2, tok, pid, 8)
        cases2.append({"prompt": p, "prompt_ids": pid, "greedy_ids": gen, "top5": top5,
                       "experts": experts, "routing_weights": weights, "first_logits": first})
    with open(GOLDEN / "tiny_mixtral_2layer_golden.json", "w") as fh:
        json.dump({"model_files": ["tests/data/tiny-mixtral-2layer.gguf",
                                   "tests/data/tiny-mixtral-2layer-legacy.gguf"],
                   "n_layer": 2, "n_expert": m2.config.num_local_experts,
                   "top_k": m2.config.num_experts_per_tok, "n_vocab": m2.config.vocab_size,
                   "n_gen": 8, "eos_stopping": False, "cases": cases2}, fh, separators=(",", ":"))
    stage_tok_golden(a)


TOKENIZER_STRINGS = [
    "", " ", "  ", "\n", "\t", "Hello world", "Hello, world!", "hello world", " Hello world",
    "  leading two spaces", "trailing space ", "trailing spaces   ", "multiple   inner    spaces",
    "line one\nline two", "para\n\nbreak", "tab\tseparated\tvalues", "\n\nleading newlines",
    "12345", "3.14159 and 2,718", "Call 555-0199 in 2024!", "x=1+2*3/4-5",
    "What's up? It's 'quoted' and \"double\".", "Punctuation... !?;:()[]{}<>@#$%^&*_~`|\\/",
    "café naïve résumé über", "Ελληνικά и русский", "日本語のテキスト", "中文字符", "한국어",
    "emoji 😀 and 🚀!", "👍🏽", "mixed ASCII and ünïcödé", "<s>", "</s>", "<unk>",
    "text with <s> inside", "a</s>b", "Hello <s>world</s>", "I'm", "don't stop believin'",
    "A long sentence: The quick brown fox jumps over the lazy dog while the five boxing wizards jump quickly.",
    "    indented code: if (x) { return y; }", "▁already▁has▁metaspace",
]


def stage_tok_golden(a):
    import sentencepiece as spm  # noqa: F401
    sp = load_sp()
    fast = load_hf_tokenizer(a)
    slow = None
    try:
        from transformers.tokenization_utils_sentencepiece import SentencePieceBackend  # noqa: F401
        from transformers import LlamaTokenizer  # noqa: F401
        slow = load_slow_tokenizer(a)
    except Exception as e:  # pragma: no cover
        print("[tok] no slow tokenizer:", e)
    entries, n_fast_dis, n_slow_dis = [], 0, 0
    for s in TOKENIZER_STRINGS:
        ref = [1] + sp.encode(s)
        f = fast(s, add_special_tokens=True)["input_ids"]
        e = {"text": s, "ids": ref, "pieces": [sp.id_to_piece(i) for i in ref]}
        if f != ref:
            e["hf_fast_ids"] = f
            n_fast_dis += 1
        if slow is not None:
            # this transformers version's generic sentencepiece backend does not
            # add BOS by itself; prepend it for the comparison
            sl = [1] + slow(s, add_special_tokens=False)["input_ids"]
            if sl != ref:
                e["hf_slow_ids"] = sl
                n_slow_dis += 1
        e["decoded"] = sp.decode(ref[1:])
        entries.append(e)
    GOLDEN.mkdir(parents=True, exist_ok=True)
    with open(GOLDEN / "tokenizer_spm.json", "w") as fh:
        json.dump(entries, fh, ensure_ascii=False, indent=1)
    print(f"[tok] {len(entries)} strings; HF fast disagrees on {n_fast_dis}, "
          f"slow on {n_slow_dis if slow is not None else 'n/a'}")
    for e in entries:
        if "hf_fast_ids" in e or "hf_slow_ids" in e:
            print("   ", repr(e["text"]), "sp", e["ids"], "fast", e.get("hf_fast_ids"), "slow", e.get("hf_slow_ids"))


def load_slow_tokenizer(a):
    """The sentencepiece-backed ("slow") tokenizer of this transformers version."""
    from transformers.tokenization_utils_sentencepiece import SentencePieceBackend
    return SentencePieceBackend(vocab_file=str(MODELS / "tokenizer.model"), legacy=True,
                                add_bos_token=True, add_eos_token=False,
                                bos_token="<s>", eos_token="</s>", unk_token="<unk>")


# --------------------------------------------------------------------------
# GPT-2 style byte-level BPE fixture
# --------------------------------------------------------------------------
GPT2_STRINGS = [
    "", " ", "  ", "Hello world", "Hello, world!", " Hello world", "hello   world", "  two leading",
    "trailing ", "line one\nline two", "\n\n", "tab\there", "I'm fine, you're not, we'll see, they've, she'd",
    "DON'T SHOUT", "12345 67890", "3.14159", "x=1+2*3", "Punctuation... !?;:()[]{}",
    "café naïve résumé", "日本語", "emoji 😀🚀", "👍🏽", "Ελληνικά", "$100 & 50%",
    "<|endoftext|>", "Hello<|endoftext|>world", "a <|endoftext|> b", "The quick brown fox jumps over the lazy dog.",
    "A computer is a machine", "Once upon a time, there was a programmer.", "   indented", "end.\n",
    "mixedCASE camelCase snake_case", "e-mail: user@example.com", "http://localhost:8080/path?q=1",
    "don't", "'s 't 're 've 'm 'll 'd", "ÀÉÎÕÜ", "\u00a0non-breaking space", "a\r\nb",
]


def stage_gpt2(a):
    import gguf
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers
    train, _ = load_docs(a)
    rng = random.Random(SEED)
    sample = rng.sample(train, 3000)
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tk.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=1000, min_frequency=2, show_progress=False,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    tk.train_from_iterator(sample, trainer=tr)
    plain = Tokenizer.from_str(tk.to_str())     # no special token: "<|endoftext|>" as text
    tk.add_special_tokens(["<|endoftext|>"])    # appended last, like GPT-2's id 50256
    eot = tk.token_to_id("<|endoftext|>")
    vocab = tk.get_vocab(with_added_tokens=True)
    n = len(vocab)
    inv = {i: t for t, i in vocab.items()}
    assert sorted(inv) == list(range(n))
    toks = [inv[i] for i in range(n)]
    types = [3 if t == "<|endoftext|>" else 1 for t in toks]
    model_json = json.loads(tk.to_str())["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model_json["merges"]]
    path = TESTDATA / "gpt2-tokenizer.gguf"
    w = gguf.GGUFWriter(str(path), arch="gpt2")
    w.add_name("odmoe tiny gpt2 byte-level BPE tokenizer")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(toks)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(eot)
    w.add_eos_token_id(eot)
    w.add_add_bos_token(False)
    w.add_add_eos_token(False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    (Path(a.scratch) / "gpt2-tokenizer.json").write_text(tk.to_str())
    entries = []
    for s in GPT2_STRINGS:
        e = {"text": s, "ids": tk.encode(s).ids}
        if "<|endoftext|>" in s:
            e["ids_special_as_text"] = plain.encode(s).ids
        e["decoded"] = tk.decode(e["ids"], skip_special_tokens=False)
        entries.append(e)
    with open(GOLDEN / "tokenizer_gpt2.json", "w") as fh:
        json.dump(entries, fh, ensure_ascii=False, indent=1)
    print(f"[gpt2] vocab {n} (eot id {eot}), merges {len(merges)}, {path} {path.stat().st_size} bytes")


# --------------------------------------------------------------------------
# stats for the docs
# --------------------------------------------------------------------------
def stage_stats(a):
    import torch
    torch.set_num_threads(a.threads)
    m = load_rounded_model(a)
    sp = load_sp()
    _, held = load_docs(a)
    L, E, k = m.config.num_hidden_layers, m.config.num_local_experts, m.config.num_experts_per_tok
    counts = np.zeros((L, E), dtype=np.int64)
    tot, n, ntok = 0.0, 0, 0
    with torch.no_grad():
        for d in held:
            ids = ([1] + sp.encode(d) + [2])[: m.config.max_position_embeddings]
            out = m(input_ids=torch.tensor([ids]), output_router_logits=True, use_cache=False)
            tot += torch.nn.functional.cross_entropy(out.logits[0, :-1], torch.tensor(ids[1:]), reduction="sum").item()
            n += len(ids) - 1
            ntok += len(ids)
            for l, rl in enumerate(out.router_logits):
                idx, _ = route(rl.reshape(len(ids), -1), k)
                counts[l] += np.bincount(idx.reshape(-1).numpy(), minlength=E)
    frac = counts / counts.sum(axis=1, keepdims=True)
    st = {"heldout_tokens": ntok, "heldout_ce_per_doc": tot / n, "expert_fraction": frac.round(4).tolist()}
    # sample greedy output
    samples = {}
    for p in ["The meaning of life is", "A computer is", "Once upon a time"]:
        ids = [1] + sp.encode(p)
        with torch.no_grad():
            for _ in range(40):
                lg = m(input_ids=torch.tensor([ids]), use_cache=False).logits[0, -1]
                ids.append(int(torch.argmax(lg)))
        samples[p] = sp.decode(ids[1:])
    st["samples"] = samples
    lc = Path(a.scratch) / "loss_curve.json"
    if lc.exists():
        c = json.loads(lc.read_text())
        st["train_seconds"] = c["train_seconds"]
        st["best_step"] = c["best_step"]
        st["best_heldout_ce"] = c["best_heldout_ce"]
        bs = c["best_step"]
        st["train_ce_ema_at_best"] = [r for r in c["curve"] if r["step"] == bs][0]["train_ce_ema"]
    st["n_params"] = sum(p.numel() for p in m.parameters())
    (Path(a.scratch) / "stats.json").write_text(json.dumps(st, indent=1, ensure_ascii=False))
    print(json.dumps(st, indent=1, ensure_ascii=False))
    print("| layer | " + " | ".join(f"e{e}" for e in range(E)) + " |")
    print("|---" * (E + 1) + "|")
    for l in range(L):
        print(f"| {l} | " + " | ".join(f"{x:.3f}" for x in frac[l]) + " |")


# --------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stages", default="corpus,tokenizer,train,export,golden,gpt2,stats")
    ap.add_argument("--scratch", default="/work/scratch/tiny-mixtral-hf-work")
    ap.add_argument("--hf-out", default="/work/scratch/tiny-mixtral-hf",
                    help="where the rounded HF checkpoint + tokenizer are saved")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (1 by default: on a shared 2-core box 2 OpenMP threads thrash)")
    ap.add_argument("--steps", type=int, default=0,
                    help="fixed number of steps (bit-reproducible run); 0 = use --minutes")
    ap.add_argument("--minutes", type=float, default=33.0,
                    help="wall-clock training budget; the LR schedule follows elapsed time")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--lr", type=float, default=2.5e-3)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--experts-impl", default="eager",
                    help="transformers experts implementation used for training only")
    a = ap.parse_args()
    stages = {
        "corpus": stage_corpus, "tokenizer": stage_tokenizer, "train": stage_train,
        "export": stage_export, "golden": stage_golden, "tokgolden": stage_tok_golden,
        "gpt2": stage_gpt2, "stats": stage_stats,
    }
    for s in a.stages.split(","):
        t = time.time()
        stages[s](a)
        print(f"== stage {s}: {time.time() - t:.1f}s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
