"""Models: an MLP for any flat features, a small CNN for square images (digits is 8x8)."""

from torch import nn


class MLP(nn.Module):
    """Linear + ReLU stack."""

    def __init__(self, in_features, hidden, num_classes):
        super().__init__()
        layers = []
        width = in_features
        for size in hidden:
            layers += [nn.Linear(width, size), nn.ReLU()]
            width = size
        layers.append(nn.Linear(width, num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x):  # pylint: disable=missing-function-docstring
        return self.net(x)


class SmallCNN(nn.Module):
    """Two 3x3 convolutions, a pooled 4x4 map, then one hidden dense layer."""

    def __init__(self, side, hidden, num_classes):
        super().__init__()
        self.side = side
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, kernel_size=3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, kernel_size=3, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d((4, 4)),
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(32 * 4 * 4, hidden[0]), nn.ReLU(), nn.Linear(hidden[0], num_classes))

    def forward(self, x):  # pylint: disable=missing-function-docstring
        return self.head(self.features(x.view(-1, 1, self.side, self.side)))


def model_spec(name, in_features, num_classes, hidden, image_side=None):
    """What build_model needs; stored with the weights in model.pt so the model can be rebuilt."""
    return {"name": name, "in_features": int(in_features), "num_classes": int(num_classes),
            "hidden": [int(h) for h in hidden], "image_side": image_side}


def build_model(spec):
    """An nn.Module from a model_spec dict."""
    if spec["name"] == "mlp":
        return MLP(spec["in_features"], spec["hidden"], spec["num_classes"])
    if spec["name"] == "cnn":
        if not spec.get("image_side"):
            raise ValueError(f"cnn needs square images, the data has {spec['in_features']} features")
        return SmallCNN(spec["image_side"], spec["hidden"], spec["num_classes"])
    raise ValueError(f"unknown model {spec['name']!r}")
