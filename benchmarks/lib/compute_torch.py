"""BERT-large and ResNet-50 training steps in PyTorch, eager (no compiler): forward, loss and backward under
bf16 autocast, for benchmarks/gpu_compute_step.py. BERT-large: 24 layers, hidden 1024, 16 heads, FFN 4096,
sequence 128, masked-LM loss on 20 positions per sequence (as BERT's pre-training), no dropout."""

BERT_LARGE = dict(vocab=30522, seq=128, hidden=1024, heads=16, ffn=4096, layers=24, masked=20)


def _bert(torch, c):
    nn = torch.nn

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.words = nn.Embedding(c["vocab"], c["hidden"])
            self.positions = nn.Parameter(torch.randn(c["seq"], c["hidden"]) * 0.02)
            self.norm = nn.LayerNorm(c["hidden"])
            layer = nn.TransformerEncoderLayer(c["hidden"], c["heads"], c["ffn"], dropout=0.0, activation="gelu",
                                               batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, c["layers"], enable_nested_tensor=False)
            self.transform = nn.Linear(c["hidden"], c["hidden"])

        def forward(self, tokens, masked):
            x = self.encoder(self.norm(self.words(tokens) + self.positions))
            picked = torch.gather(x, 1, masked[..., None].expand(-1, -1, x.shape[-1]))
            return self.transform(picked) @ self.words.weight.t()  # decoder tied to the embedding

    return Bert()


def make_step(model, batch):
    import torch

    device = torch.device("cuda")
    if model == "bert_large":
        c = BERT_LARGE
        net = _bert(torch, c).to(device)
        tokens = torch.randint(0, c["vocab"], (batch, c["seq"]), device=device)
        masked = torch.randint(0, c["seq"], (batch, c["masked"]), device=device)
        labels = torch.randint(0, c["vocab"], (batch, c["masked"]), device=device)
        inputs = (tokens, masked)
        loss_of = lambda out: torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]).float(),
                                                                labels.reshape(-1))
    else:
        import torchvision

        net = torchvision.models.resnet50().to(device).to(memory_format=torch.channels_last)
        images = torch.randn(batch, 3, 224, 224, device=device).to(memory_format=torch.channels_last)
        labels = torch.randint(0, 1000, (batch,), device=device)
        inputs = (images,)
        loss_of = lambda out: torch.nn.functional.cross_entropy(out.float(), labels)
    net.train()

    def step():
        for p in net.parameters():
            p.grad = None
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_of(net(*inputs))
        loss.backward()

    return step, torch.cuda.synchronize, torch.cuda.get_device_name()
