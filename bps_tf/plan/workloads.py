"""The models of the predictions: each gradient tensor's element count, and the compute of one step on an
H200 (batch 64 per GPU, bf16 mixed precision; docs/gpu/compute_step_h200.json, benchmarks/gpu_compute_step.py:
PyTorch eager without XLA, JAX with XLA)."""


def bert_large(vocab=30522, hidden=1024, ffn=4096, layers=24, positions=512):
    """BERT-large's 335M parameters, tensor by tensor (embeddings, 24 encoder layers, pooler, pre-training heads)."""
    h = hidden
    tensors = [vocab * h, positions * h, 2 * h, h, h]
    for _ in range(layers):
        tensors += [h * h, h] * 4 + [h, h] + [h * ffn, ffn, ffn * h, h] + [h, h]
    tensors += [h * h, h]  # pooler
    tensors += [h * h, h, h, h, vocab]  # masked-LM transform, its norm, decoder bias (weights tied)
    tensors += [2 * h, 2]  # next-sentence head
    return tensors


def resnet50(classes=1000):
    """ResNet-50's 25.6M parameters: 53 convolutions, a batch normalisation (scale, shift) after each, the classifier."""
    tensors = [7 * 7 * 3 * 64, 64, 64]
    cin = 64
    for width, blocks in ((64, 3), (128, 4), (256, 6), (512, 3)):
        for b in range(blocks):
            for k, c_in, c_out in ((1, cin, width), (3, width, width), (1, width, 4 * width)):
                tensors += [k * k * c_in * c_out, c_out, c_out]
            if b == 0:
                tensors += [cin * 4 * width, 4 * width, 4 * width]
            cin = 4 * width
    return tensors + [2048 * classes, classes]


# name: (elements per tensor, {compute: seconds per step on one H200})
WORKLOADS = {
    "bert-large": (bert_large, {"without XLA": 66.4e-3, "with XLA": 54.2e-3}),
    "resnet50": (resnet50, {"without XLA": 30.8e-3, "with XLA": 13.6e-3}),
}


def gradient_bytes(name, element_bytes=2):
    """Bytes of each gradient tensor (2: gradients sent in 16 bits, as mixed precision trains)."""
    return [e * element_bytes for e in WORKLOADS[name][0]()]


def compute_seconds(name, xla=True):
    return WORKLOADS[name][1]["with XLA" if xla else "without XLA"]
