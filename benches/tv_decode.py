"""torchvision's batched nvJPEG on the same tiles slidestream decodes (issue 4's reference rate).

Splices JPEGTables into N level-0 tiles of a slide (as TIFF readers do), then times
torchvision.io.decode_jpeg(list, device='cuda') in batches; prints tiles/s.
"""
import sys
import time
import tifffile
import torch
import torchvision
from torchvision.io import decode_jpeg

path, n, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with tifffile.TiffFile(path) as tf:
    page = tf.pages[0]
    tables = page.jpegtables
    fh = tf.filehandle
    streams = []
    for off, cnt in list(zip(page.dataoffsets, page.databytecounts))[:n]:
        fh.seek(off)
        t = fh.read(cnt)
        streams.append(torch.frombuffer(bytearray(tables[:-2] + t[2:]), dtype=torch.uint8))
print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, {len(streams)} tiles, ~{sum(len(s) for s in streams)/len(streams):.0f} B each")
for _ in range(2):
    decode_jpeg(streams[:batch], device="cuda")
torch.cuda.synchronize()
for rep in range(3):
    t0 = time.perf_counter()
    for i in range(0, len(streams), batch):
        out = decode_jpeg(streams[i:i + batch], device="cuda")
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    print(f"torchvision decode_jpeg batch {batch}: {len(streams)/dt:.0f} tiles/s ({dt:.3f} s)")
