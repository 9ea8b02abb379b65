"""The models of compute_torch.py in JAX, each step (forward, loss, gradients) compiled by XLA as one program:
fp32 parameters, bf16 compute. For benchmarks/gpu_compute_step.py."""

from benchmarks.lib.compute_torch import BERT_LARGE


def _layer_norm(jnp, x, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / jnp.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps)


def _bert(jax, jnp, c, batch):
    h, f, heads, length = c["hidden"], c["ffn"], c["heads"], c["seq"]
    keys = iter(jax.random.split(jax.random.PRNGKey(0), 16))
    normal = lambda *shape: jax.random.normal(next(keys), shape, jnp.float32) * 0.02
    layers = c["layers"]
    params = {"words": normal(c["vocab"], h), "positions": normal(length, h), "transform": normal(h, h),
              "qkv": normal(layers, h, 3 * h), "out": normal(layers, h, h), "ff1": normal(layers, h, f),
              "ff2": normal(layers, f, h)}

    def block(x, w):
        qkv = (x @ w["qkv"]).reshape(batch, length, 3, heads, h // heads)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(h // heads).astype(x.dtype)
        attention = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores, -1), v).reshape(batch, length, h)
        x = _layer_norm(jnp, x + attention @ w["out"])
        return _layer_norm(jnp, x + jax.nn.gelu(x @ w["ff1"]) @ w["ff2"]), None

    def loss(params, tokens, masked, labels):
        p = jax.tree_util.tree_map(lambda a: a.astype(jnp.bfloat16), params)
        x = _layer_norm(jnp, p["words"][tokens] + p["positions"])
        stacked = {k: p[k] for k in ("qkv", "out", "ff1", "ff2")}
        x, _ = jax.lax.scan(block, x, stacked)
        picked = jnp.take_along_axis(x, masked[..., None], axis=1)
        logits = ((picked @ p["transform"]) @ p["words"].T).astype(jnp.float32)
        return -jnp.take_along_axis(jax.nn.log_softmax(logits), labels[..., None], -1).mean()

    tokens = jax.random.randint(next(keys), (batch, length), 0, c["vocab"])
    masked = jax.random.randint(next(keys), (batch, c["masked"]), 0, length)
    labels = jax.random.randint(next(keys), (batch, c["masked"]), 0, c["vocab"])
    return loss, params, (tokens, masked, labels)


# ResNet-50: (bottleneck width, blocks, first stride) per stage.
STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))


def _resnet50(jax, jnp, batch):
    keys = iter(jax.random.split(jax.random.PRNGKey(0), 256))
    conv_w = lambda k, cin, cout: jax.random.normal(next(keys), (k, k, cin, cout), jnp.float32) * (2 / (k * k * cin)) ** 0.5
    params = {"stem": conv_w(7, 3, 64), "blocks": [], "fc": jax.random.normal(next(keys), (2048, 1000)) * 0.01}
    cin = 64
    for width, blocks, _ in STAGES:
        for b in range(blocks):
            block = {"a": conv_w(1, cin, width), "b": conv_w(3, width, width), "c": conv_w(1, width, 4 * width)}
            if b == 0:
                block["project"] = conv_w(1, cin, 4 * width)
            params["blocks"].append(block)
            cin = 4 * width

    def conv(x, w, stride=1):
        return jax.lax.conv_general_dilated(x, w, (stride, stride), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def norm(x):  # batch normalisation with this batch's statistics (scale and shift left out)
        mean = x.mean((0, 1, 2), keepdims=True)
        return (x - mean) * jax.lax.rsqrt(((x - mean) ** 2).mean((0, 1, 2), keepdims=True) + 1e-5)

    def loss(params, images, labels):
        p = jax.tree_util.tree_map(lambda a: a.astype(jnp.bfloat16), params)
        x = jax.nn.relu(norm(conv(images.astype(jnp.bfloat16), p["stem"], 2)))
        x = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
        blocks = iter(p["blocks"])
        for _, count, stride in STAGES:
            for b in range(count):
                w = next(blocks)
                s = stride if b == 0 else 1
                y = jax.nn.relu(norm(conv(x, w["a"])))
                y = jax.nn.relu(norm(conv(y, w["b"], s)))
                y = norm(conv(y, w["c"]))
                x = jax.nn.relu(y + (norm(conv(x, w["project"], s)) if "project" in w else x))
        logits = (x.mean((1, 2)) @ p["fc"]).astype(jnp.float32)
        return -jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], -1).mean()

    images = jax.random.normal(next(keys), (batch, 224, 224, 3), jnp.float32)
    labels = jax.random.randint(next(keys), (batch,), 0, 1000)
    return loss, params, (images, labels)


def make_step(model, batch):
    import jax
    import jax.numpy as jnp

    loss, params, data = _bert(jax, jnp, BERT_LARGE, batch) if model == "bert_large" else _resnet50(jax, jnp, batch)
    gradients = jax.jit(jax.grad(loss))
    state = {}

    def step():
        state["out"] = gradients(params, *data)

    def sync():
        if "out" in state:
            jax.block_until_ready(state["out"])

    return step, sync, str(jax.devices()[0].device_kind)
