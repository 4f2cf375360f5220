"""Local stand-in for torchvision's ConvNeXt-T (same block structure), for rewrite development only."""
import torch
from torch import nn
from torch.nn import functional


class LN2d(nn.LayerNorm):
    def forward(self, x):
        x = x.permute(0, 2, 3, 1)
        x = functional.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)

class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.dw = nn.Conv2d(d, d, 7, padding=3, groups=d)
        self.ln = nn.LayerNorm(d, eps=1e-6)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.layer_scale = nn.Parameter(torch.rand(d, 1, 1) * 0.5 + 0.5)
    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.fc2(functional.gelu(self.fc1(self.ln(y)))).permute(0, 3, 1, 2)
        return x + self.layer_scale * y

class Net(nn.Module):
    def __init__(self, dims=(96, 192, 384, 768), depths=(3, 3, 9, 3)):
        super().__init__()
        layers = [nn.Conv2d(3, dims[0], 4, 4), LN2d(dims[0], eps=1e-6)]
        for i, (d, n) in enumerate(zip(dims, depths)):
            if i:
                layers += [LN2d(dims[i - 1], eps=1e-6), nn.Conv2d(dims[i - 1], d, 2, 2)]
            layers += [Block(d) for _ in range(n)]
        self.features = nn.Sequential(*layers)
        self.norm = LN2d(dims[-1], eps=1e-6)
        self.head = nn.Linear(dims[-1], 1000)
    def forward(self, x):
        x = self.features(x)
        x = self.norm(functional.adaptive_avg_pool2d(x, 1))
        return self.head(torch.flatten(x, 1))

def build():
    torch.manual_seed(0)
    return Net().eval(), (torch.randn(2, 3, 224, 224),)
