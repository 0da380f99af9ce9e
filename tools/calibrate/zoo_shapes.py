"""The GEMM and attention shapes of the zoo models under tensor parallelism, for calibration.

Architectures come from models/<name>.textproto (read with a few regular expressions, no protobuf
dependency); the training sequence lengths are those the models were pre-trained with.
A transformer layer under Megatron tensor parallelism t (column-parallel QKV and MLP-up,
row-parallel attention-output and MLP-down) runs, per micro-batch of M = batch x seq tokens:
  forward   Y[M, N] = X[M, K] W[K, N]           for QKV, out-proj, MLP up, MLP down, LM head
  backward  dX[M, K] = dY[M, N] W^T[N, K]       (data gradient: m=M, n=K, k=N)
            dW[K, N] = X^T[K, M] dY[M, N]       (weight gradient: m=K, n=N, k=M)
"""
import os
import re

ZOO = ["gpt3-175b", "llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b", "llama3-70b", "llama3-405b"]

# Pre-training sequence lengths: GPT-3 2048 (Brown et al. 2020, §2.3); Llama 2 4096 (Touvron et
# al. 2023, §2.2); Llama 3 8192 (Dubey et al. 2024, §3.4.1, before long-context training).
TRAIN_SEQ = {"gpt3-175b": 2048, "llama2-7b": 4096, "llama2-13b": 4096, "llama2-70b": 4096,
             "llama3-8b": 8192, "llama3-70b": 8192, "llama3-405b": 8192}

# Tensor-parallel degrees: powers of two up to 16. TP stays inside one NVLink domain, which is 8
# GPUs on DGX/HGX nodes but 72 on an NVL72 rack, where TP 16 (e.g. Llama 3 405B's 128 heads, 8 KV
# heads replicated) is a real choice; beyond 16 a rank's GEMMs fall under the smallest shapes.
TP_DEGREES = [1, 2, 4, 8, 16]


def repo_root():
    return os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def load_model(name):
    path = os.path.join(repo_root(), "models", name + ".textproto")
    with open(path) as f:
        text = f.read()

    def field(key, default=None):
        m = re.search(r"^\s*%s:\s*\"?([\w.-]+)\"?" % key, text, re.M)
        if m is None:
            if default is None:
                raise KeyError("%s: no field %s" % (path, key))
            return default
        return m.group(1)

    heads = int(field("num_heads"))
    return {
        "name": name,
        "layers": int(field("num_layers")),
        "hidden": int(field("hidden")),
        "heads": heads,
        "kv_heads": int(field("num_kv_heads", str(heads))),
        "ffn": int(field("ffn_hidden")),
        "vocab": int(field("vocab")),
        "swiglu": field("activation", "gelu") == "swiglu",
    }


def layer_gemms(m, tp, tokens):
    """(label, M, N, K) of the forward GEMMs of one layer and the LM head on one TP rank."""
    h, d = m["hidden"], m["hidden"] // m["heads"]
    kv_rank = max(1, m["kv_heads"] // tp)  # KV heads are replicated when tp > kv_heads
    qkv = h // tp + 2 * kv_rank * d
    up = (2 if m["swiglu"] else 1) * m["ffn"] // tp
    return [
        ("qkv", tokens, qkv, h),
        ("attn_out", tokens, h, h // tp),
        ("mlp_up", tokens, up, h),
        ("mlp_down", tokens, h, m["ffn"] // tp),
        ("lm_head", tokens, -(-m["vocab"] // tp), h),
    ]


def gemm_shapes(models=None, tps=None, micro_batches=(1, 2)):
    """Unique (M, N, K) of the zoo models' forward, data-gradient and weight-gradient GEMMs,
    with the list of (model, tp, op) that use each."""
    shapes = {}
    for name in models or ZOO:
        m = load_model(name)
        for tp in tps or TP_DEGREES:
            if m["heads"] % tp or (m["kv_heads"] >= tp and m["kv_heads"] % tp):
                continue
            for mb in micro_batches:
                tokens = mb * TRAIN_SEQ[name]
                for label, M, N, K in layer_gemms(m, tp, tokens):
                    for kind, shape in (("fwd", (M, N, K)), ("dgrad", (M, K, N)), ("wgrad", (K, N, M))):
                        shapes.setdefault(shape, []).append("%s tp%d mb%d %s %s" % (name, tp, mb, label, kind))
    return shapes


def attention_shapes(models=None, tps=None, micro_batches=(1,)):
    """Unique (batch, heads, kv_heads, seq, head_dim) of the zoo models on one TP rank."""
    shapes = {}
    for name in models or ZOO:
        m = load_model(name)
        for tp in tps or TP_DEGREES:
            if m["heads"] % tp:
                continue
            kv = max(1, m["kv_heads"] // tp)  # KV heads are replicated when tp > kv_heads
            for mb in micro_batches:
                key = (mb, m["heads"] // tp, kv, TRAIN_SEQ[name], m["hidden"] // m["heads"])
                shapes.setdefault(key, []).append("%s tp%d mb%d" % (name, tp, mb))
    return shapes
