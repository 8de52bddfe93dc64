"""The models that tools/bench/real_models.py trains: BERT, GPT-2 and Llama
from small `transformers` configs (random weights, nothing downloaded), a
ResNet-18 and a small ViT written here in torchvision's layout (torchvision
itself stays out of the environment: the registry's wheel is a CUDA build).
Not a model library: each builder makes one fixed size, for benchmarking.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, SEQUENCE, VOCAB = 4, 32, 1000


def token_batch(labels: torch.Tensor | None = None) -> dict:
    ids = torch.randint(0, VOCAB, (BATCH, SEQUENCE))
    return {"input_ids": ids, "labels": ids if labels is None else labels}


def bert():
    from transformers import BertConfig, BertForSequenceClassification
    config = BertConfig(vocab_size=VOCAB, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=512, max_position_embeddings=64, num_labels=2)
    return BertForSequenceClassification(config), token_batch(torch.randint(0, 2, (BATCH,)))


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    config = GPT2Config(vocab_size=VOCAB, n_embd=128, n_layer=2, n_head=2, n_positions=64)
    return GPT2LMHeadModel(config), token_batch()


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(config), token_batch()


class BasicBlock(nn.Module):
    """ResNet's two 3x3 convolutions with a shortcut (a 1x1 one when the shape changes)."""

    def __init__(self, inputs: int, outputs: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.shortcut = nn.Identity()
        if stride != 1 or inputs != outputs:
            self.shortcut = nn.Sequential(nn.Conv2d(inputs, outputs, 1, stride, bias=False), nn.BatchNorm2d(outputs))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


class ResNet18(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        blocks, width = [], 64
        for outputs, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [BasicBlock(width, outputs, stride), BasicBlock(outputs, outputs, 1)]
            width = outputs
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(512, classes)

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        features = F.adaptive_avg_pool2d(self.blocks(self.stem(images)), 1).flatten(1)
        return F.cross_entropy(self.head(features), labels)


class TinyViT(nn.Module):
    """A vision transformer in torchvision's layout (class token, learned
    positions, pre-norm encoder blocks), about 81k parameters."""

    def __init__(self, image: int = 32, patch: int = 8, dim: int = 64, depth: int = 2, heads: int = 4,
                 mlp: int = 128, classes: int = 10) -> None:
        super().__init__()
        self.patches = nn.Conv2d(3, dim, patch, patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.positions = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, mlp, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        x = self.patches(images).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.positions
        x = self.norm(self.encoder(x))
        return F.cross_entropy(self.head(x[:, 0]), labels)


def resnet18():
    return ResNet18(), {"images": torch.randn(BATCH, 3, 64, 64), "labels": torch.randint(0, 10, (BATCH,))}


def tiny_vit():
    return TinyViT(), {"images": torch.randn(BATCH, 3, 32, 32), "labels": torch.randint(0, 10, (BATCH,))}


# name -> builder returning (model, batch); model(**batch) returns the loss,
# or an output whose .loss is it (the transformers models).
MODELS = {"BERT": bert, "GPT-2": gpt2, "Llama": llama, "ResNet-18": resnet18, "ViT (tiny)": tiny_vit}


def loss_of(output) -> torch.Tensor:
    return output if isinstance(output, torch.Tensor) else output.loss
