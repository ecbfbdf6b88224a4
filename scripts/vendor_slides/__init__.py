"""Generators of small slides in each vendor's layout, with known pixels, for the tests.

No public Philips, Ventana, Leica, MIRAX or brightfield NDPI sample is small enough to bundle,
so each module here writes files in the layout its vendor's OpenSlide 4.0.1 driver reads
(tifffile, plus byte patching where tifffile cannot write the layout). OpenSlide is the
oracle: ``make_vendor_slides.py`` opens every generated file with openslide-python, refuses
to go on unless OpenSlide detects the intended vendor with the intended levels, associated
images and known pixels, and then writes OpenSlide's output as the reference, in the layout
of ``../shared/testdata/reference/`` (properties.json, regions.json, RGBA PNGs).

Every module has ``build(out_dir: pathlib.Path) -> list[common.Generated]``.
"""
