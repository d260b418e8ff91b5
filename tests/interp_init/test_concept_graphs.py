"""Concept-graph images: each tuple renders what it says (colour by its exact pixels, size by
the recovered coverage against the stated area, shape by a geometric check of its own), the
renders are seeded, and read_concepts reads every tuple of the cube back."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from interp_init.concept_graphs import (
    ALL_CODES,
    COLOURS,
    MAX_AREA_FACTOR,
    MAX_ASPECT,
    MIN_AREA_SHARE,
    TRAIN_CODES,
    UNSEEN_CODES,
    ConceptGraphConfig,
    Concepts,
    concept_graph_images,
    object_problem,
    read_concepts,
    render_concepts,
)


def test_the_coding_is_the_journals() -> None:
    assert sorted(ALL_CODES) == [f"{i:03b}" for i in range(8)]
    assert set(TRAIN_CODES) | set(UNSEEN_CODES) < set(ALL_CODES) and not set(TRAIN_CODES) & set(UNSEEN_CODES)
    # the journal: "010 (representing a small red circle)"; the training set's only small object is a triangle
    assert Concepts.from_code("010").describe() == "small red circle"
    assert Concepts.from_code("011").describe() == "small blue circle"
    assert [Concepts.from_code(c).describe() for c in TRAIN_CODES if Concepts.from_code(c).size] == [
        "small blue triangle"
    ]
    assert Concepts(1, 0, 1).code == "101"
    for bad in ("01", "012", "abc", 10):
        with pytest.raises(ValueError, match="three binary digits"):
            Concepts.from_code(bad)  # type: ignore[arg-type]


def _coverage(image: np.ndarray, colour: int) -> np.ndarray:
    """The object's coverage of each pixel from the channel its colour keeps lowest (green for
    both colours: 1 - 0.9 coverage)."""
    assert COLOURS[colour][1] == pytest.approx(0.1)
    return (1.0 - image[1].astype(np.float64)) / 0.9


@pytest.mark.parametrize("image_size", [28, 32])
@pytest.mark.parametrize("code", ALL_CODES)
def test_each_tuple_renders_what_it_says(code: str, image_size: int) -> None:
    config = ConceptGraphConfig(image_size=image_size)
    concepts = Concepts.from_code(code)
    data = concept_graph_images([code], per_code=20, seed=3, config=config)
    assert data.images.shape == (20, 3, image_size, image_size) and data.images.dtype == torch.float32
    assert data.codes == [code] * 20
    for image in data.images.numpy():
        assert image.min() >= 0 and image.max() <= 1
        # colour: fully covered pixels are exactly the colour, and no pixel leans to the other one
        rgb = image.reshape(3, -1).T
        full = np.all(np.isclose(rgb, COLOURS[concepts.colour], atol=1e-6), axis=1)
        assert full.sum() > 10
        red, blue = rgb[:, 0], rgb[:, 2]
        assert np.all(red >= blue - 1e-6) if concepts.colour == 0 else np.all(blue >= red - 1e-6)
        # size: the covered area is the nominal circle's area times the jitter's square, to the sub-pixel grid
        cover = _coverage(image, concepts.colour)
        radius = (config.large if concepts.size == 0 else config.small) * image_size
        low, high = (math.pi * (radius * (1 + s * config.size_jitter)) ** 2 for s in (-1, 1))
        grid = 4 * radius * math.pi / config.supersample  # the boundary's length times a sub-pixel's width
        assert low - grid <= cover.sum() <= high + grid
        # shape, against the disc of the object's area (radius r) about its centroid: a circle is
        # that disc (every touched pixel centre within half a pixel's diagonal of it, every pixel
        # a pixel inside it fully covered); an equilateral triangle reaches to its circumradius,
        # sqrt(pi / (3 sqrt(3) / 4)) r (about 1.56 r), more than 1.5 pixels past the disc here
        touched = cover > 1e-6
        ys, xs = np.nonzero(touched)
        cy, cx = np.average(ys, weights=cover[touched]), np.average(xs, weights=cover[touched])
        r = math.sqrt(cover.sum() / math.pi)
        dist = np.hypot(*np.mgrid[:image_size, :image_size] - np.array([cy, cx])[:, None, None])
        beyond = dist[touched].max() - r
        if concepts.shape == 0:
            assert beyond <= math.sqrt(2) / 2 and cover[dist <= r - 1].min() == pytest.approx(1.0), beyond
        else:
            assert beyond > 1.5, beyond
        # an upright triangle: its top row is narrower than its bottom row
        if concepts.shape == 1:
            rows = (cover > 0.5).sum(axis=1)
            filled = np.flatnonzero(rows)
            assert rows[filled[0]] < rows[filled[-1]]
        # inside the frame, margin kept
        margin = config.margin
        assert cover[:margin].max() < 1e-6 and cover[-margin:].max() < 1e-6
        assert cover[:, :margin].max() < 1e-6 and cover[:, -margin:].max() < 1e-6


def test_renders_are_seeded_and_jittered() -> None:
    a = concept_graph_images(["000", "111"], per_code=5, seed=7)
    b = concept_graph_images(["000", "111"], per_code=5, seed=7)
    assert torch.equal(a.images, b.images) and torch.equal(a.concepts, b.concepts)
    assert not torch.equal(a.images, concept_graph_images(["000", "111"], per_code=5, seed=8).images)
    # image i of a tuple does not depend on which other tuples or how many images are asked for
    more = concept_graph_images(["111", "010", "000"], per_code=9, seed=7)
    assert torch.equal(more.images[18:23], a.images[:5]) and torch.equal(more.images[:5], a.images[5:])
    assert torch.equal(a.images[0], torch.from_numpy(render_concepts("000", np.random.default_rng([7, 0, 0]))))
    # jitter: no two images of a tuple alike, in position and in area
    images = a.images[:5].numpy()
    covers = [_coverage(image, 0) for image in images]
    centres = {(round(float(np.average(np.nonzero(c)[0], weights=c[c > 0])), 3)) for c in covers}
    areas = {round(float(c.sum()), 3) for c in covers}
    assert len(centres) == 5 and len(areas) == 5


def test_a_torch_dataset() -> None:
    data = concept_graph_images(TRAIN_CODES, per_code=3, seed=0, config=ConceptGraphConfig(image_size=28))
    assert len(data) == 12 and data.concepts.tolist()[3] == [1, 0, 0]
    images, concepts = next(iter(torch.utils.data.DataLoader(data, batch_size=12)))
    assert images.shape == (12, 3, 28, 28) and concepts.tolist() == data.concepts.tolist()


@pytest.mark.parametrize("image_size", [28, 32])
def test_the_judge_reads_every_tuple_of_the_cube(image_size: int) -> None:
    config = ConceptGraphConfig(image_size=image_size)
    data = concept_graph_images(ALL_CODES, per_code=100, seed=11, config=config)
    read = [read_concepts(image, config) for image in data.images.numpy()]
    wrong = [(code, got) for code, got in zip(data.codes, read) if got is None or got.code != code]
    assert not wrong, f"{len(wrong)} of {len(read)} misread: {wrong[:5]}"
    assert read_concepts(np.ones((3, image_size, image_size), dtype=np.float32)) is None  # a blank image has no object


def _field(value: float | tuple[float, float, float], side: int = 32) -> np.ndarray:
    return np.broadcast_to(np.asarray(value, dtype=np.float32).reshape(-1, 1, 1), (3, side, side)).copy()


def _no_object_images() -> dict[str, np.ndarray]:
    """Hand-made images without an object, each with the test it must fail."""
    rng = np.random.default_rng(5)
    faint = render_concepts("000", np.random.default_rng(0))  # a large red circle, washed out to 45% coverage
    faint = 1.0 - 0.45 * (1.0 - faint)
    smear = np.ones((3, 32, 32), dtype=np.float32)  # a blurred smear, a few pixels past one half
    yy, xx = np.mgrid[:32, :32]
    bump = 0.55 * np.exp(-((yy - 12) ** 2 + (xx - 20) ** 2) / 6.0)
    smear -= bump * (1 - np.asarray((0.9, 0.1, 0.1), dtype=np.float32))[:, None, None] / 0.9
    speck = np.ones((3, 32, 32), dtype=np.float32)
    speck[:, 10:12, 10:12] = np.asarray((0.9, 0.1, 0.1), dtype=np.float32)[:, None, None]
    streak = np.ones((3, 32, 32), dtype=np.float32)
    streak[:, 14:17, 2:30] = np.asarray((0.1, 0.1, 0.9), dtype=np.float32)[:, None, None]
    return {
        "blank": np.ones((3, 32, 32), dtype=np.float32),
        "faint circle": faint.astype(np.float32),
        "faint smear": smear,
        "speck": speck,
        "grey field": _field(0.5),
        "black field": _field(0.0),
        "red field": _field((0.9, 0.1, 0.1)),
        "noise": np.clip(rng.normal(0.5, 0.5, (3, 32, 32)), 0, 1).astype(np.float32),
        "streak": streak,
    }


@pytest.mark.parametrize("name", list(_no_object_images()))
def test_an_image_without_an_object_reads_as_no_object(name: str) -> None:
    image = _no_object_images()[name]
    mask = (1.0 - image.min(axis=0)) / 0.9 > 0.5  # the pixels past half covered, computed here
    assert read_concepts(image) is None
    problem = object_problem(image)
    assert problem is not None and "\n" not in problem
    if mask.sum() == 0 or name in {"speck", "faint smear"}:
        assert "fewer than" in problem and problem.startswith(f"{int(mask.sum())} pixel")
    elif name == "streak":
        assert "box" in problem
    else:  # a field or noise filling the frame: before the cap, these read as a large red circle
        assert "more than" in problem and mask.mean() > 0.5
    if name == "faint smear":
        assert 0 < mask.sum() < 35  # it does reach past one half, in a few pixels


@pytest.mark.parametrize("image_size", [16, 28, 32, 64])
def test_the_no_object_thresholds_leave_every_render_a_margin(image_size: int) -> None:
    # the thresholds are fixed from the renders (the module docstring): every render's object,
    # measured here independently, keeps a margin of 1.3 from each and reads as an object (each
    # tuple read right: test_the_judge_reads_every_tuple_of_the_cube, at the sizes runs use)
    config = ConceptGraphConfig(image_size=image_size)
    data = concept_graph_images(ALL_CODES, per_code=25, seed=21, config=config)
    smallest = math.pi * (config.small * (1 - config.size_jitter) * image_size) ** 2
    largest = math.pi * (config.large * (1 + config.size_jitter) * image_size) ** 2
    for image, code in zip(data.images.numpy(), data.codes):
        mask = (1.0 - image.min(axis=0)) / 0.9 > 0.5
        ys, xs = np.nonzero(mask)
        height, width = np.ptp(ys) + 1, np.ptp(xs) + 1
        # the docs' statement: pixel counts within 0.74 and 1.04 times the nominal extremes, sides within 1.5
        assert 0.74 * smallest <= mask.sum() <= 1.04 * largest and max(height, width) <= 1.5 * min(height, width)
        assert mask.sum() >= 1.3 * MIN_AREA_SHARE * smallest and mask.sum() <= MAX_AREA_FACTOR * largest / 1.3
        assert max(height, width) <= MAX_ASPECT * min(height, width) / 1.3
        assert object_problem(image, config) is None and read_concepts(image, config) is not None, code


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"image_size": 8}, r"image_size must be an integer in \[16, 256\]"),
        ({"image_size": 32.0}, "image_size must be an integer"),
        ({"supersample": 0}, "supersample must be an integer"),
        ({"small": 0.3}, "small must be a positive radius below large"),
        ({"size_jitter": 0.5}, r"size_jitter must be in \[0, 0.3\]"),
        ({"large": float("nan")}, "large must be a finite number"),
        ({"large": 0.45}, "does not fit a 32-pixel image"),
    ],
)
def test_bad_config_is_refused_in_one_line(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match) as info:
        ConceptGraphConfig(**kwargs)
    assert "\n" not in str(info.value)


def test_bad_requests_are_refused() -> None:
    with pytest.raises(ValueError, match="a list of codes"):
        concept_graph_images("000")
    with pytest.raises(ValueError, match="distinct"):
        concept_graph_images(["000", "000"])
    with pytest.raises(ValueError, match="per_code must be an integer >= 1"):
        concept_graph_images(["000"], per_code=0)
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        concept_graph_images(["000"], seed=-1)
    with pytest.raises(ValueError, match=r"an image is \[3, H, W\]"):
        read_concepts(np.ones((32, 32)))


def test_the_docs_example_and_the_docstring_example_run() -> None:
    import doctest
    import re
    import subprocess
    import sys
    from pathlib import Path

    import interp_init.concept_graphs as module

    root = Path(__file__).resolve().parents[2]
    page = (root / "docs" / "science.md").read_text()
    code = re.search(r"<!-- example:concept_graphs -->\n```python\n(.*?)```", page, re.DOTALL)
    assert code, "docs/science.md lost its concept-graph example"
    done = subprocess.run([sys.executable, "-c", code.group(1)], capture_output=True, text=True, cwd=root, check=False)
    assert done.returncode == 0, done.stderr
    assert "200 torch.Size([200, 3, 28, 28])" in done.stdout and "20 of 20 read back" in done.stdout
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
