"""Chapter 1's desk scene: five objects, four intentions, and where the gaze lands."""
import torch

from .attention import attention_pool, constant_score, dot_score, gaussian_score

FEATURES = ["colourful", "printed", "long read", "hot drink", "for writing"]
OBJECTS = ["newspaper", "research paper", "coffee cup", "notebook", "book"]
# One key per object: how much it has of each feature (rows: OBJECTS, columns: FEATURES).
KEYS = torch.tensor([[0.2, 1.0, 0.3, 0.0, 0.0],
                     [0.0, 1.0, 0.6, 0.0, 0.2],
                     [1.0, 0.0, 0.0, 1.0, 0.0],
                     [0.0, 0.2, 0.0, 0.0, 1.0],
                     [0.1, 1.0, 1.0, 0.0, 0.0]])
# One value per object: where it lies on the desk (x, y); pooled, a gaze point.
VALUES = torch.tensor([[1.0, 3.0], [2.5, 3.5], [4.0, 1.0], [1.0, 1.0], [3.0, 2.0]])
# One query per intention. "no intention" reacts to colour only: the non-volitional cue.
QUERIES = {"no intention": torch.tensor([1.0, 0.0, 0.0, 0.0, 0.0]),
           "read": torch.tensor([0.0, 1.0, 1.0, 0.0, 0.0]),
           "drink": torch.tensor([0.0, 0.0, 0.0, 1.0, 0.0]),
           "write": torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0])}
SCORES = {"dot product": dot_score, "gaussian": gaussian_score,
          "constant (average)": constant_score}


def gaze(intention, rule="dot product", sharpness=3.0):
    """Pool the desk for one intention: returns (gaze point (2,), weights (5,)).

    `sharpness` multiplies every score (an inverse temperature): larger is more focused.
    """
    if intention not in QUERIES:
        raise KeyError(f"unknown intention {intention!r}; choose one of {list(QUERIES)}")
    if rule not in SCORES:
        raise KeyError(f"unknown scoring rule {rule!r}; choose one of {list(SCORES)}")
    query = QUERIES[intention].reshape(1, -1)  # (1, 5): one query
    score = lambda q, k: sharpness * SCORES[rule](q, k)  # noqa: E731
    point, weights = attention_pool(query, KEYS, VALUES, score)  # (1, 2), (1, 5)
    return point[0], weights[0]


def draw_desk(ax_desk, ax_bars, point, weights, title=""):
    """The desk (marker area = weight, star = gaze point) and the weights as bars."""
    colours = ["C3" if name == "coffee cup" else "C0" for name in OBJECTS]
    ax_desk.scatter(VALUES[:, 0], VALUES[:, 1], s=40 + 1500 * weights, c=colours, alpha=0.7)
    for (x, y), name in zip(VALUES.tolist(), OBJECTS):
        ax_desk.annotate(name, (x, y), textcoords="offset points", xytext=(0, -18),
                         ha="center", fontsize=8, zorder=3,
                         bbox=dict(boxstyle="round,pad=0.1", fc="white", alpha=0.7, lw=0))
    ax_desk.plot(*point.tolist(), marker="*", markersize=16, color="k", linestyle="none")
    ax_desk.set(xlim=(0, 5), ylim=(0, 4.3), xticks=[], yticks=[],
                title=title or "gaze point (star)")
    ax_bars.barh(OBJECTS, weights, color="C3")
    ax_bars.set(xlim=(0, 1), xlabel="attention weight")
    ax_bars.invert_yaxis()
