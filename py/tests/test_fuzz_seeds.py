"""No panic reaches Python from the fuzz seeds: every public call that parses a file, applied to
the seeds of the fuzz targets for the newer drivers (fuzz/make_seeds.py: MIRAX, DICOM,
Philips/Ventana/Leica/OME XML, NDPI) laid out as files, and to deterministic byte mutations of
the part each target fuzzes, gives a result or an ``Exception`` subclass. A ``PanicException``
(a ``BaseException``, so ``except Exception`` misses it) fails the test, and so does a crash of
the interpreter: the calls run in a child interpreter whose exit status is checked.
"""

import os
import pathlib
import random
import struct
import subprocess
import sys
import textwrap

import pytest

from _parity_helpers import vendor_slides

REPO = pathlib.Path(__file__).resolve().parents[2]
DATA = pathlib.Path(os.environ.get("SLIDESTREAM_TESTDATA", REPO.parent / "shared" / "testdata"))
MUTANTS_PER_SEED = 8
# Bytes written by the mutations: digits and separators of the text formats, extremes.
INTERESTING = b"0123456789-=+.<>/\"[]\n\x00\x7f\x80\xff"


def decode_bundle(data: bytes):
    """[(name, bytes)] of a bundle (core/src/fuzzing.rs `Bundle`), None for other inputs."""
    if not data.startswith(b"SSFB\x01"):
        return None
    out, i = [], 5
    while i < len(data):
        n = data[i]
        if i + 1 + n + 4 > len(data):
            break
        name = data[i + 1 : i + 1 + n].decode("utf-8", "replace")
        (ln,) = struct.unpack_from("<I", data, i + 1 + n)
        body = data[i + 5 + n : i + 5 + n + ln]
        out.append((name, body))
        i += 5 + n + len(body)
    return out


def dicom_header_range(data: bytes):
    """As the target's: up to 8 KiB past the last PixelData tag."""
    p = data.rfind(b"\xe0\x7f\x10\x00")
    return (0, len(data) if p < 0 else min(len(data), p + 8192))


def flip(data: bytes, ranges, rng: random.Random) -> bytes:
    """1 to 4 bytes inside `ranges` replaced."""
    b = bytearray(data)
    spans = [(s, e) for s, e in ranges if e > s]
    for _ in range(rng.randint(1, 4)):
        s, e = rng.choice(spans)
        b[rng.randrange(s, e)] = rng.choice(INTERESTING) if rng.random() < 0.7 else rng.randrange(256)
    return bytes(b)


def layout(seeds: pathlib.Path, out: pathlib.Path):
    """Each seed and its mutants as files under `out`: [(case name, path to open)]."""
    rng = random.Random(28)
    cases = []

    def put(name, files, opened):
        d = out / name
        for rel, data in files:
            p = d / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        cases.append((name, d / opened))

    for target in ("mirax_ini", "mirax_index", "dicom_header", "vendor_xml", "ndpi_tags"):
        for seed in sorted((seeds / target).iterdir()):
            data = seed.read_bytes()
            members = decode_bundle(data)
            if target == "ndpi_tags":
                # The header, the IFDs (wherever they are) and the first tag values.
                ifd = struct.unpack_from("<I", data, 4)[0] if len(data) >= 8 else 0
                ranges = [(0, min(len(data), 4096)), (ifd, min(len(data), ifd + 4096))]
                base = [(seed.name, data)]
                mutate = [(0, ranges)]
                opened = seed.name
            elif target == "vendor_xml":
                # The TIFF as generated; mutations inside its XML texts.
                tiff = members[-1][1]
                ranges = []
                for _, text in members[:-1]:
                    at = tiff.find(text)
                    if at >= 0:
                        ranges.append((at, at + len(text)))
                base = [(members[-1][0], tiff)]
                mutate = [(0, ranges)] if ranges else []
                opened = members[-1][0]
            else:
                base = members
                opened = members[0][0]
                if target == "mirax_ini":
                    mutate = [(i, [(0, len(d))]) for i, (n, d) in enumerate(members) if n.endswith("/Slidedat.ini")]
                elif target == "mirax_index":
                    mutate = [(i, [(0, len(d))]) for i, (n, d) in enumerate(members) if n.endswith("/Index.dat")]
                else:
                    mutate = [(i, [dicom_header_range(d)]) for i, (n, d) in enumerate(members) if n.endswith(".dcm")]
            if target != "mirax_index":  # the same seeds as mirax_ini
                put(f"{target}/{seed.name}", base, opened)
            for k in range(MUTANTS_PER_SEED if mutate else 0):
                i, ranges = rng.choice(mutate)
                files = list(base)
                files[i] = (files[i][0], flip(files[i][1], ranges, rng))
                put(f"{target}/{seed.name}.m{k}", files, opened)
    return cases


# Runs in the child: every public call that parses a file, on each case; a BaseException that
# is not an Exception is reported with the case and the call.
CHILD = textwrap.dedent(
    r"""
    import sys
    import slidestream
    import slidestream.openslide as openslide
    from slidestream import Slide

    def slide_calls(s):
        yield "properties", lambda: dict(s.properties)
        yield "geometry", lambda: (s.dimensions, s.level_count, s.level_dimensions, s.level_downsamples, s.mpp)
        for lvl, (w, h) in enumerate(s.level_dimensions):
            yield f"read_region({lvl})", lambda lvl=lvl: s.read_region((0, 0), lvl, (64, 64))
            yield f"read_regions({lvl})", lambda lvl=lvl, w=w, h=h: s.read_regions([(0, 0), (w // 2, h // 2)], lvl, (32, 32))
        for name in list(s.associated_images):
            yield f"associated[{name}]", lambda name=name: s.associated_images[name]
        yield "get_thumbnail", lambda: s.get_thumbnail((64, 64))
        yield "read_patches", lambda: slidestream.read_patches([s], [(0, 0, 0, 0)], (16, 16))

    def compat_calls(o):
        yield "compat.properties", lambda: dict(o.properties)
        yield "compat.read_region", lambda: o.read_region((0, 0), 0, (32, 32))
        yield "compat.associated_images", lambda: [o.associated_images[k] for k in list(o.associated_images)]
        yield "compat.get_thumbnail", lambda: o.get_thumbnail((32, 32))

    panics = opened = 0
    def call(case, what, f):
        global panics
        try:
            return f()
        except Exception:
            return None
        except BaseException as e:
            panics += 1
            print(f"PANIC {case}: {what}: {type(e).__name__}: {e}", flush=True)
            return None

    cases = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
    for case, path in cases:
        print(f"CASE {case}", flush=True)
        call(case, "detect_vendor", lambda: slidestream.detect_vendor(path))
        call(case, "OpenSlide.detect_format", lambda: openslide.OpenSlide.detect_format(path))
        s = call(case, "Slide", lambda: Slide(path, cache_bytes=4 << 20))
        if s is not None:
            opened += 1
            for what, f in slide_calls(s):
                call(case, what, f)
            s.close()
        o = call(case, "OpenSlide", lambda: openslide.OpenSlide(path))
        if o is not None:
            for what, f in compat_calls(o):
                call(case, what, f)
            o.close()
        o = call(case, "open_slide", lambda: openslide.open_slide(path))
        if o is not None:
            o.close()
    print(f"DONE {len(cases)} cases, {panics} panics, {opened} opened", flush=True)
    sys.exit(3 if panics else 0)
    """
)


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    vendor = vendor_slides()
    if vendor is None:
        vendor = tmp_path_factory.mktemp("vendor-slides")
        subprocess.run([sys.executable, str(REPO / "scripts" / "make_vendor_slides.py"), str(vendor)], check=True, capture_output=True)
    out = tmp_path_factory.mktemp("fuzz-seeds")
    subprocess.run([sys.executable, str(REPO / "fuzz" / "make_seeds.py"), str(out), str(vendor), str(DATA)], check=True, capture_output=True)
    return out


def test_seed_layout_covers_every_target(seeds, tmp_path):
    cases = layout(seeds, tmp_path)
    kinds = {name.split("/")[0] for name, _ in cases}
    assert kinds == {"mirax_ini", "mirax_index", "dicom_header", "vendor_xml", "ndpi_tags"}
    mutants = [name for name, _ in cases if ".m" in name.rsplit("/", 1)[1]]
    assert len(mutants) >= 200, len(mutants)
    # Mutants differ from their seed in the part the target fuzzes, deterministically.
    again = layout(seeds, tmp_path / "again")
    assert [n for n, _ in again] == [n for n, _ in cases]
    assert all(p.read_bytes() == q.read_bytes() for (_, p), (_, q) in zip(cases, again))


def run_child(cases, tmp_path, env=None):
    """Run CHILD over `cases`: (exit status, stdout lines, stderr)."""
    listing = tmp_path / "cases.tsv"
    listing.write_text("".join(f"{name}\t{path}\n" for name, path in cases))
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = dict(os.environ, PYTHONFAULTHANDLER="1", **(env or {}))
    try:
        r = subprocess.run([sys.executable, str(script), str(listing)], capture_output=True, text=True, timeout=900, env=env)
    except subprocess.TimeoutExpired as e:
        last = [l for l in (e.stdout or b"").decode(errors="replace").splitlines() if l.startswith("CASE ")][-1:]
        pytest.fail(f"no result after 900 s; last case started: {last}")
    return r.returncode, r.stdout.splitlines(), r.stderr


def test_no_panic_reaches_python_from_the_fuzz_seeds(seeds, tmp_path):
    cases = layout(seeds, tmp_path / "cases")
    rc, lines, stderr = run_child(cases, tmp_path)
    panics = [l for l in lines if l.startswith("PANIC ")]
    last = [l for l in lines if l.startswith("CASE ")][-1:]
    assert rc >= 0, f"the interpreter died by signal {-rc} in {last}:\n{stderr[-3000:]}"
    assert not panics, "\n".join(panics[:40])
    assert rc == 0, f"exit status {rc} in {last}:\n{stderr[-3000:]}"
    assert lines and lines[-1].startswith(f"DONE {len(cases)} cases, 0 panics"), lines[-3:]
    # Not vacuous: the seeds and many mutants open (the rest fail with typed errors).
    opened = int(lines[-1].split(", ")[2].split()[0])
    assert opened >= 100, lines[-1]


def test_a_panic_in_a_call_is_reported(seeds, tmp_path):
    """The child's check itself: a BaseException that is not an Exception (as pyo3's
    PanicException), raised by a public call, fails the run with the case and the call."""
    cases = layout(seeds, tmp_path / "cases")[:3]
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        textwrap.dedent(
            """
            import slidestream
            class PanicException(BaseException):
                pass
            def detect_vendor(path):
                raise PanicException("injected")
            slidestream.detect_vendor = detect_vendor
            """
        )
    )
    pythonpath = os.pathsep.join([str(hook)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    rc, lines, _ = run_child(cases, tmp_path, {"PYTHONPATH": pythonpath})
    assert rc == 3
    assert [l for l in lines if l.startswith("PANIC ")][0] == f"PANIC {cases[0][0]}: detect_vendor: PanicException: injected"
