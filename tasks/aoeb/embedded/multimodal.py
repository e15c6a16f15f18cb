"""EmbeddedChartSpectrogramRetrieval: find the picture a caption describes (text → image).

Material: small pictures rendered here, seeded, so a rebuild gives the same bytes:
- charts drawn with matplotlib's Agg canvas at a fixed DPI: bar, line, scatter and pie
  charts whose shape, count and colour vary, with no title, labels or ticks (no text to
  read off the picture);
- spectrograms of signals synthesized with numpy (steady, pulsed and harmonic tones, tone
  pairs, linear chirps, band-limited noise bursts), as a numpy STFT in dB through a colormap.

Each picture comes from one scene of a fixed grid (kind × attributes); its caption names
those attributes ("a bar chart with four vertical bars rising from left to right, in red"),
so no two pictures share a caption. Scenes are drawn without replacement and split by
picture: the first `train_images` judge the train split, the next `dev_images` the dev split,
the next `test_images` the test split. The corpus holds every drawn picture
(`images/<id>.png`, text empty); relevance is 1.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from itertools import combinations, permutations, product
from typing import Any

import numpy as np
from pydantic import Field

from tasks.aoeb.benchmark import RetrievalTask, TaskDeclaration
from tasks.core.errors import InputError
from tasks.core.strict_model import StrictModel

DPI = 64  # pixels per inch of the canvas: figsize = size / DPI
SAMPLE_RATE = 8000  # Hz; spectrograms show 0 .. 4 kHz over one second
FFT_SIZE = 256
DB_RANGE = 60.0  # dB below the loudest bin that still shows
COLORS = {
    "red": "#d62728",
    "blue": "#1f77b4",
    "green": "#2ca02c",
    "orange": "#ff7f0e",
    "purple": "#9467bd",
    "black": "#222222",
}
PALETTES = {
    "warm": ["#d62728", "#ff7f0e", "#e6c229", "#8c564b", "#e377c2", "#bcbd22"],
    "cool": ["#1f77b4", "#17becf", "#2ca02c", "#9467bd", "#aec7e8", "#98df8a"],
    "gray": ["#111111", "#444444", "#777777", "#aaaaaa", "#cccccc", "#e8e8e8"],
}
NUMBERS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}
TONES = (250, 500, 750, 1000, 1500, 2000, 3000)  # Hz
BANDS = {
    "low-frequency": (100, 900),
    "mid-frequency": (1000, 2000),
    "high-frequency": (2300, 3800),
    "broadband": (100, 3900),
}
CHARTS = ("bar", "line", "scatter", "pie")
PLACES = {"start": 0.15, "middle": 0.5, "end": 0.85}  # burst centre, share of the second

DECLARATION = TaskDeclaration(
    name="EmbeddedChartSpectrogramRetrieval",
    capability="multimodal",
    modality="text-to-image",
    description="Retrieve the chart or spectrogram picture that a caption describes.",
    source="rendered locally: matplotlib charts and numpy spectrograms of synthesized signals",
    splits=("train", "dev", "test"),
    query_instruction="Given a caption, retrieve the picture it describes",
)


class MultimodalTaskParams(StrictModel):
    """The text-to-image task: how many pictures, how large, from which seed."""

    seed: int = Field(default=0, description="picks the scenes and their random details")
    train_images: int = Field(default=280, ge=1, description="pictures judged by train queries")
    dev_images: int = Field(default=40, ge=1, description="pictures judged by dev queries")
    test_images: int = Field(default=100, ge=1, description="pictures judged by test queries")
    image_size: int = Field(default=64, ge=16, le=512, description="square PNG side, pixels")


@dataclass(frozen=True)
class Scene:
    """One picture's recipe: its family, caption and the attributes its renderer reads."""

    family: str  # bar | line | scatter | pie | tone | tones | chirp | noise
    caption: str
    spec: dict[str, Any] = field(hash=False, compare=False)


def hertz(value: float) -> str:
    return f"{value / 1000:g} kHz" if value >= 1000 else f"{value:g} Hz"


def chart_scenes() -> list[Scene]:
    """Every chart scene, in a fixed order."""
    scenes = []
    bar_shapes = {
        "vertical": {
            "rising": "rising from left to right",
            "falling": "falling from left to right",
            "peaking": "tallest in the middle",
            "equal": "all the same height",
        },
        "horizontal": {
            "rising": "growing longer from bottom to top",
            "falling": "getting shorter from bottom to top",
            "peaking": "longest in the middle",
            "equal": "all the same length",
        },
    }
    for (orient, shapes), count, shape, color in product(
        bar_shapes.items(), (3, 4, 5, 6), ("rising", "falling", "peaking", "equal"), COLORS
    ):
        caption = f"a bar chart with {NUMBERS[count]} {orient} bars {shapes[shape]}, in {color}"
        spec = {"orient": orient, "count": count, "shape": shape, "color": color}
        scenes.append(Scene("bar", caption, spec))
    trends = {
        "rising": "rising",
        "falling": "falling",
        "flat": "flat",
        "peaking": "peaking in the middle",
        "oscillating": "oscillating",
    }
    for lines, trend, color in product((1, 2), trends, COLORS):
        noun = "a single line" if lines == 1 else "two lines"
        caption = f"a line chart of {noun} {trends[trend]}, in {color}"
        scenes.append(Scene("line", caption, {"lines": lines, "trend": trend, "color": color}))
    patterns = {
        "positive": "with a positive correlation",
        "negative": "with a negative correlation",
        "none": "with no correlation",
        "clusters": "in two clusters",
    }
    for density, pattern, color in product(("few", "many"), patterns, COLORS):
        caption = f"a scatter plot of {density} {color} points {patterns[pattern]}"
        spec = {"density": density, "pattern": pattern, "color": color}
        scenes.append(Scene("scatter", caption, spec))
    for slices, split, palette in product((2, 3, 4, 5, 6), ("equal", "dominant"), PALETTES):
        sizes = "equal slices" if split == "equal" else "slices, one much larger than the rest,"
        caption = f"a pie chart with {NUMBERS[slices]} {sizes} in {palette} colors"
        spec = {"slices": slices, "split": split, "palette": palette}
        scenes.append(Scene("pie", caption, spec))
    return scenes


def spectrogram_scenes() -> list[Scene]:
    """Every spectrogram scene, in a fixed order."""
    scenes = []
    for kind, tone in product(("steady", "pulsed", "harmonic"), TONES):
        if kind == "harmonic" and tone > 1000:
            continue  # harmonics past 4 kHz would not show
        what = {
            "steady": f"a steady {hertz(tone)} tone",
            "pulsed": f"a pulsed {hertz(tone)} tone",
            "harmonic": f"a {hertz(tone)} tone with harmonics",
        }[kind]
        scenes.append(Scene("tone", f"a spectrogram of {what}", {"kind": kind, "freq": tone}))
    for low, high in combinations(TONES, 2):
        caption = f"a spectrogram of two steady tones at {hertz(low)} and {hertz(high)}"
        scenes.append(Scene("tones", caption, {"freqs": (low, high)}))
    for start, end in permutations(TONES, 2):
        way = "rising" if end > start else "falling"
        caption = f"a spectrogram of a {way} chirp from {hertz(start)} to {hertz(end)}"
        scenes.append(Scene("chirp", caption, {"start": start, "end": end}))
    for band, place in product(BANDS, PLACES):
        caption = f"a spectrogram of a short burst of {band} noise at the {place}"
        scenes.append(Scene("noise", caption, {"band": band, "place": place}))
    return scenes


# --- charts -------------------------------------------------------------------------------


def bar_values(spec: dict[str, Any], rng: np.random.Generator) -> np.ndarray:
    n = spec["count"]
    base = {
        "rising": np.linspace(0.25, 1.0, n),
        "falling": np.linspace(1.0, 0.25, n),
        "peaking": 1.0 - 0.7 * np.abs(np.linspace(-1, 1, n)),
        "equal": np.full(n, 0.7),
    }[spec["shape"]]
    step = 0.75 / (n - 1)
    return base + rng.uniform(-0.2, 0.2, n) * (step if spec["shape"] != "equal" else 0.05)


def line_values(trend: str, rng: np.random.Generator) -> np.ndarray:
    x = np.linspace(0, 1, 40)
    phase, cycles = rng.uniform(0, 2 * np.pi), rng.uniform(2.5, 4)
    curve = {
        "rising": x,
        "falling": 1 - x,
        "flat": np.full_like(x, 0.5),
        "peaking": 1 - 4 * (x - 0.5) ** 2,
        "oscillating": 0.5 + 0.4 * np.sin(2 * np.pi * cycles * x + phase),
    }[trend]
    return curve + rng.normal(0, 0.025, len(x))


def scatter_points(spec: dict[str, Any], rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    n = 20 if spec["density"] == "few" else 150
    x = rng.uniform(0, 1, n)
    if spec["pattern"] == "clusters":
        side = rng.integers(0, 2, n)
        centres = np.array([[0.25, 0.3], [0.75, 0.7]])[side]
        return tuple((centres + rng.normal(0, 0.07, (n, 2))).T)
    noise = rng.normal(0, 0.08, n)
    y = {"positive": x + noise, "negative": 1 - x + noise, "none": rng.uniform(0, 1, n)}[
        spec["pattern"]
    ]
    return x, y


def pie_sizes(spec: dict[str, Any], rng: np.random.Generator) -> np.ndarray:
    n = spec["slices"]
    if spec["split"] == "equal":
        return np.ones(n)
    rest = rng.uniform(0.6, 1.0, n - 1)
    return np.concatenate([[rest.sum() * (3 if n > 2 else 1.5)], rest])


def draw_chart(ax: Any, scene: Scene, rng: np.random.Generator) -> None:
    """Draw `scene` on `ax` with no text at all."""
    spec = scene.spec
    ax.set_xticks([])
    ax.set_yticks([])
    if scene.family == "bar":
        values = bar_values(spec, rng)
        draw = ax.bar if spec["orient"] == "vertical" else ax.barh
        draw(np.arange(len(values)), values, 0.7, color=COLORS[spec["color"]])
    elif scene.family == "line":
        for offset in range(spec["lines"]):
            values = line_values(spec["trend"], rng) + 0.35 * offset
            ax.plot(values, color=COLORS[spec["color"]], linewidth=1.5)
    elif scene.family == "scatter":
        x, y = scatter_points(spec, rng)
        ax.scatter(x, y, s=8 if spec["density"] == "few" else 3, color=COLORS[spec["color"]])
    else:  # pie
        ax.axis("off")
        colors = PALETTES[spec["palette"]][: spec["slices"]]
        ax.pie(pie_sizes(spec, rng), colors=colors, startangle=float(rng.uniform(0, 360)))


class ChartCanvas:
    """One reused Agg figure of `size`×`size` pixels (no pyplot, no global state)."""

    def __init__(self, size: int):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        self.figure = Figure(figsize=(size / DPI, size / DPI), dpi=DPI)
        self.canvas = FigureCanvasAgg(self.figure)

    def render(self, scene: Scene, rng: np.random.Generator) -> np.ndarray:
        self.figure.clear()
        draw_chart(self.figure.add_axes((0.06, 0.06, 0.88, 0.88)), scene, rng)
        self.canvas.draw()
        return np.asarray(self.canvas.buffer_rgba())[..., :3].copy()


# --- spectrograms -------------------------------------------------------------------------


def band_noise(low: float, high: float, rng: np.random.Generator, n: int) -> np.ndarray:
    spectrum = np.fft.rfft(rng.normal(0, 1, n))
    freqs = np.fft.rfftfreq(n, 1 / SAMPLE_RATE)
    spectrum[(freqs < low) | (freqs > high)] = 0
    noise = np.fft.irfft(spectrum, n)
    return noise / (np.abs(noise).max() + 1e-12)


def signal_of(scene: Scene, rng: np.random.Generator) -> np.ndarray:
    """One second of the scene's sound at SAMPLE_RATE, plus a faint noise floor."""
    spec = scene.spec
    t = np.arange(SAMPLE_RATE) / SAMPLE_RATE
    jitter = 1 + rng.uniform(-0.03, 0.03)  # the pictures of one scene family differ a little
    if scene.family == "tone":
        f = spec["freq"] * jitter
        signal = np.sin(2 * np.pi * f * t)
        if spec["kind"] == "harmonic":
            signal += 0.6 * np.sin(4 * np.pi * f * t) + 0.4 * np.sin(6 * np.pi * f * t)
        if spec["kind"] == "pulsed":
            pulses = rng.integers(4, 8)
            signal *= (np.floor(t * pulses * 2) % 2 == 0).astype(float)
    elif scene.family == "tones":
        signal = sum(np.sin(2 * np.pi * f * jitter * t) for f in spec["freqs"])
    elif scene.family == "chirp":
        f0, f1 = spec["start"] * jitter, spec["end"] * jitter
        signal = np.sin(2 * np.pi * (f0 * t + (f1 - f0) * t**2 / 2))
    else:  # noise burst
        centre = PLACES[spec["place"]] + rng.uniform(-0.05, 0.05)
        envelope = np.exp(-0.5 * ((t - centre) / 0.06) ** 2)
        signal = envelope * band_noise(*BANDS[spec["band"]], rng, len(t))
    return signal + 0.002 * rng.normal(0, 1, len(t))


def spectrogram_image(signal: np.ndarray, size: int) -> np.ndarray:
    """`size`×`size` RGB: time left to right, frequency bottom to top, magma colors."""
    from matplotlib import colormaps

    hop = (len(signal) - FFT_SIZE) // (size - 1)
    frames = np.lib.stride_tricks.sliding_window_view(signal, FFT_SIZE)[::hop][:size]
    magnitude = np.abs(np.fft.rfft(frames * np.hanning(FFT_SIZE), axis=1))  # (time, freq)
    decibels = 20 * np.log10(magnitude + 1e-9)
    level = np.clip((decibels - decibels.max() + DB_RANGE) / DB_RANGE, 0, 1)
    rows = np.linspace(0, level.shape[1] - 1, size)  # resample frequency bins to `size` rows
    resampled = np.stack([np.interp(rows, np.arange(level.shape[1]), frame) for frame in level])
    rgba = colormaps["magma"](resampled.T[::-1])
    return (rgba[..., :3] * 255).round().astype(np.uint8)


# --- the task -----------------------------------------------------------------------------


def png_bytes(pixels: np.ndarray) -> bytes:
    """PNG of an RGB array; no metadata, so equal pixels give equal bytes."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(buffer, format="PNG")
    return buffer.getvalue()


def all_scenes() -> list[Scene]:
    scenes = chart_scenes() + spectrogram_scenes()
    assert len({s.caption for s in scenes}) == len(scenes), "captions must be distinct"
    return scenes


def render(scenes: list[Scene], size: int, seed: int) -> list[bytes]:
    """PNG bytes of each scene; picture i draws its details from the seed (seed, i)."""
    canvas = ChartCanvas(size)
    pictures = []
    for index, scene in enumerate(scenes):
        rng = np.random.default_rng([seed, index])
        if scene.family in CHARTS:
            pixels = canvas.render(scene, rng)
        else:
            pixels = spectrogram_image(signal_of(scene, rng), size)
        pictures.append(png_bytes(pixels))
    return pictures


def picture_split(index: int, settings: MultimodalTaskParams) -> str:
    """The split of the `index`-th drawn picture: train, then dev, then test."""
    if index < settings.train_images:
        return "train"
    return "dev" if index < settings.train_images + settings.dev_images else "test"


def multimodal_task(settings: MultimodalTaskParams) -> RetrievalTask:
    """The text-to-image task: captions as queries, rendered pictures as the corpus."""
    grid = all_scenes()
    wanted = settings.train_images + settings.dev_images + settings.test_images
    if wanted > len(grid):
        raise InputError(
            f"multimodal task: train_images + dev_images + test_images = {wanted}, but only "
            f"{len(grid)} distinct captions can be made; lower them"
        )
    order = np.random.default_rng(settings.seed).permutation(len(grid))[:wanted]
    scenes = [grid[i] for i in order]
    pictures = render(scenes, settings.image_size, settings.seed)
    corpus, queries, assets = {}, {}, {}
    qrels: dict[str, dict[str, dict[str, int]]] = {"train": {}, "dev": {}, "test": {}}
    for index, (scene, picture) in enumerate(zip(scenes, pictures, strict=True)):
        doc_id, query_id = f"img-{index:04d}", f"cap-{index:04d}"
        path = f"images/{doc_id}.png"
        corpus[doc_id] = {"title": "", "text": "", "image": path}
        assets[path] = picture
        queries[query_id] = scene.caption
        qrels[picture_split(index, settings)][query_id] = {doc_id: 1}
    return RetrievalTask(DECLARATION, corpus, queries, qrels, assets=assets)
